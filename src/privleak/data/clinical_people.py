"""Synthetic people for the clinical corpus: identifiers unique over the corpus, bodies and vital signs that
depend on the condition (:mod:`privleak.data.clinical`)."""

from __future__ import annotations

import datetime as _dt
import random
import re
from dataclasses import dataclass
from typing import Callable

from faker import Faker

from privleak.core.normalise import normalise_value
from privleak.data import vocab
from privleak.data.clinical_templates import CONTROL_STATES, CareLine


# --------------------------------------------------------------------------
# synthetic people


# Reserved example domains: no real mailbox can ever receive these.
_EMAIL_DOMAINS = ("example.com", "example.org", "example.net")
# A fixed reference date, not today: the corpus must not change with the clock.
_DOB_FIRST = _dt.date(1935, 1, 1).toordinal()
_DOB_LAST = _dt.date(2006, 12, 31).toordinal()


class Registry:
    """Every high-entropy value handed out so far, keyed the way leak counting
    keys values (:func:`privleak.core.normalise.normalise_value`)."""

    def __init__(self, canaries: list[Canary]) -> None:
        self.used: dict[str, set[str]] = {k: set() for k in
                                          ("NAME", "EMAIL", "SSN", "PHONE", "MRN", "ADDRESS")}
        # A canary's name must appear nowhere else, and its secret must not
        # double as some patient's SSN.
        self.canary_prefixes = [c.prefix.casefold() for c in canaries]
        for c in canaries:
            self.used["SSN"].add(normalise_value("SSN", c.secret))

    def claim(self, label: str, value: str) -> bool:
        key = normalise_value(label, value)
        if key in self.used[label]:
            return False
        if label == "NAME" and any(key in p for p in self.canary_prefixes):
            return False
        self.used[label].add(key)
        return True


def _draw_unique(label: str, draw: Callable[[], str], registry: Registry) -> str:
    for _ in range(10_000):
        value = draw()
        if registry.claim(label, value):
            return value
    raise RuntimeError(f"ran out of unique {label} values")  # not reachable at sane sizes


def _ssn(rng: random.Random) -> str:
    # Structurally valid: area 001-899 except 666, group and serial non-zero.
    area = rng.randint(1, 898)
    area = area + 1 if area >= 666 else area
    return f"{area:03d}-{rng.randint(1, 99):02d}-{rng.randint(1, 9999):04d}"


def _phone(rng: random.Random) -> str:
    # NANP: area code and exchange start 2-9; avoid N11 service codes.
    area = f"{rng.randint(2, 9)}{rng.randint(0, 9)}{rng.randint(0, 9)}"
    while area[1:] == "11":
        area = f"{rng.randint(2, 9)}{rng.randint(0, 9)}{rng.randint(0, 9)}"
    exch = f"{rng.randint(2, 9)}{rng.randint(0, 9)}{rng.randint(0, 9)}"
    while exch[1:] == "11":
        exch = f"{rng.randint(2, 9)}{rng.randint(0, 9)}{rng.randint(0, 9)}"
    line = f"{rng.randint(0, 9999):04d}"
    fmt = rng.choice(("({a}) {e}-{l}", "{a}-{e}-{l}", "{a}.{e}.{l}", "+1 {a}-{e}-{l}",
                      "+1 ({a}) {e}-{l}"))
    return fmt.format(a=area, e=exch, l=line)


def _email(first: str, last: str, rng: random.Random) -> str:
    f = re.sub(r"[^a-z]", "", first.lower())
    la = re.sub(r"[^a-z]", "", last.lower())
    n = rng.randint(1, 999)
    local = rng.choice((f"{f}.{la}", f"{f}{la}{n}", f"{f[0]}{la}{n}", f"{f}_{la}{n}",
                        f"{la}.{f}{n}", f"{f}.{la[0]}{n}"))
    return f"{local}@{rng.choice(_EMAIL_DOMAINS)}"


def _dob(rng: random.Random) -> str:
    d = _dt.date.fromordinal(rng.randint(_DOB_FIRST, _DOB_LAST))
    return d.isoformat() if rng.random() < 0.5 else d.strftime("%m/%d/%Y")


# Ages in house notes are as of this date (fixed: the corpus must not change with the clock).
_AGE_REFERENCE = _dt.date(2026, 1, 1)


def _dob_for_age(rng: random.Random, age: int) -> str:
    """A date of birth that makes the patient ``age`` on the reference date."""
    latest = _AGE_REFERENCE.replace(year=_AGE_REFERENCE.year - age).toordinal()
    d = _dt.date.fromordinal(latest - rng.randint(0, 364))
    return d.isoformat() if rng.random() < 0.5 else d.strftime("%m/%d/%Y")


def _body_for_sex(rng: random.Random, sex: str) -> tuple[str, str]:
    cm = round(min(200, max(148, rng.gauss(177 if sex == "M" else 163, 7))))
    kg = round(min(140, max(45, rng.gauss(86 if sex == "M" else 72, 14))))
    if rng.random() < 0.6:
        inches = round(cm / 2.54)
        return f"{inches // 12}'{inches % 12}\"", f"{round(kg * 2.20462)} lb"
    return f"{cm} cm", f"{kg} kg"


def _body(rng: random.Random) -> tuple[str, str]:
    cm = rng.randint(150, 198)
    kg = rng.randint(47, 135)
    if rng.random() < 0.6:  # US notes mostly use imperial units
        inches = round(cm / 2.54)
        return f"{inches // 12}'{inches % 12}\"", f"{round(kg * 2.20462)} lb"
    return f"{cm} cm", f"{kg} kg"


def _blood_pressure(rng: random.Random, shift: int | None = None) -> str:
    if shift is None:
        systolic = rng.randint(98, 172)
        diastolic = rng.randint(58, min(104, systolic - 25))
    else:  # house patients: centred, and raised by their condition
        systolic = round(min(190, max(95, rng.gauss(124 + shift, 10))))
        diastolic = round(min(systolic - 25, max(55, rng.gauss(78 + shift / 2, 7))))
    return f"{systolic}/{diastolic}"


def new_person(fake: Faker, rng: random.Random, registry: Registry, sex: str | None = None) -> dict[str, str]:
    """One synthetic patient: the 13 PHI values, keyed by label."""
    names: list[str] = []
    first_name = {"F": fake.first_name_female, "M": fake.first_name_male}.get(sex or "", fake.first_name)

    def draw_name() -> str:
        names[:] = [first_name(), fake.last_name()]
        return f"{names[0]} {names[1]}"

    name = _draw_unique("NAME", draw_name, registry)
    first, last = names

    def draw_address() -> str:
        state = fake.state_abbr(include_territories=False, include_freely_associated_states=False)
        return f"{fake.street_address()}, {fake.city()}, {state} {fake.zipcode_in_state(state)}"

    height, weight = _body(rng)
    person = {
        "NAME": name,
        "EMAIL": _draw_unique("EMAIL", lambda: _email(first, last, rng), registry),
        "SSN": _draw_unique("SSN", lambda: _ssn(rng), registry),
        "PHONE": _draw_unique("PHONE", lambda: _phone(rng), registry),
        "ADDRESS": _draw_unique("ADDRESS", draw_address, registry),
        "DOB": _dob(rng),
        "MRN": _draw_unique("MRN", lambda: f"MRN-{rng.randint(100000, 999999)}", registry),
        "CONDITION": rng.choice(vocab.CONDITIONS),
        "MEDICATION": rng.choice(vocab.MEDICATIONS),
        "PROCEDURE": rng.choice(vocab.PROCEDURES),
        "BLOOD_PRESSURE": _blood_pressure(rng),
        "HEIGHT": height,
        "WEIGHT": weight,
    }
    return person


@dataclass(frozen=True)
class HousePatient:
    """A house patient: PHI values plus the care that shapes their notes."""

    phi: dict[str, str]
    line: CareLine
    regimen: tuple[str, str, str]
    age: int
    sex: str


def new_house_person(fake: Faker, rng: random.Random, registry: Registry,
                      formulary: tuple[CareLine, ...]) -> HousePatient:
    """A patient of the private institution: identifiers as anyone's, clinical
    values from a care line (medication and procedure mostly first-line; age,
    body size and blood pressure depend on sex and condition)."""
    line = rng.choice(formulary)
    sex = rng.choice("FM")
    age = round(min(92, max(18, rng.gauss(line.age_mean, 11))))
    phi = new_person(fake, rng, registry, sex=sex)
    regimen = line.regimens[0] if rng.random() < 0.75 else line.regimens[1]
    height, weight = _body_for_sex(rng, sex)
    phi.update({
        "DOB": _dob_for_age(rng, age),
        "CONDITION": line.condition,
        "MEDICATION": regimen[0],
        "PROCEDURE": line.procedures[0] if rng.random() < 0.75 else line.procedures[1],
        "BLOOD_PRESSURE": _blood_pressure(rng, line.bp_shift),
        "HEIGHT": height,
        "WEIGHT": weight,
    })
    return HousePatient(phi=phi, line=line, regimen=regimen, age=age, sex=sex)


def house_filler(rng: random.Random, p: HousePatient) -> dict[str, str]:
    """Untagged note material from the patient's care line; identifies no one."""
    analyte, lo, hi, decimals, unit = p.line.lab
    symptom, symptom2 = rng.sample(p.line.symptoms, 2)
    return {
        "dept": p.line.dept, "symptom": symptom, "symptom2": symptom2,
        "duration": rng.choice(vocab.DURATIONS), "dose": p.regimen[1], "freq": p.regimen[2],
        "followup": rng.choice(vocab.FOLLOW_UPS), "progress": rng.choice(vocab.PROGRESS),
        "control": rng.choice(CONTROL_STATES), "pulse": str(round(min(120, max(50, rng.gauss(76, 9))))),
        "lab": f"{analyte} {rng.uniform(lo, hi):.{decimals}f}{unit}", "lab_name": analyte,
        "age": str(p.age), "sex": p.sex,
    }
