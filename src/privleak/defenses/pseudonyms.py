"""Pseudonyms: consistent, fluent fake values for one corpus (the ``pseudonym`` mode of :mod:`.scrub`).

Within one :class:`Pseudonymizer` (one corpus) the same real value always gets the same fake, different
real values get different fakes, and a fake never equals its original. Fakes are drawn from a generator
seeded by (seed, type, value), so they do not depend on record order. Names are mapped token by token
("John Smith" and a later "Mr. Smith" share the fake surname); e-mails use reserved ``example.*``
domains; SSNs, phones, MRNs keep their format with new digits; addresses, dates, blood pressure, height
and weight are fresh plausible values in the original's format.

A fake never equals a real value of the corpus either (another person's name, SSN or date):
:meth:`Pseudonymizer.reserve` keeps every value the analyser found — and every labelled span, where the
corpus has them — out of the draws, under the leak-counting rule (``normalise_value``), so the trained
model never carries a real value only because it was a fake, and the attacks count no false leak.

The fakes are keyed by the seed: whoever knows it can test a guess (is this the fake that SSN would
get?). Keep it secret when pseudonymised text leaves your hands; the audit's attacks do not use it. A key a
user types is 128 bits (:func:`parse_key`): a 32-bit one is searched exhaustively in minutes, given one fake
and the real value it replaced (2^32 guesses of one SHA-256 and one draw each).
"""

from __future__ import annotations

import datetime as _dt
import random
import re
import string
from typing import Callable, Sequence

from privleak.core.errors import UserError
from privleak.core.normalise import ALNUM, DATE, DIGITS, TEXT, TextView, is_digit_label, normalise_value, rule
from privleak.data.canaries import derive_seed

#: A user's pseudonym key: 128 bits, written as this many hexadecimal digits.
KEY_HEX_DIGITS = 32
_KEY = re.compile(r"[0-9a-fA-F]{%d}" % KEY_HEX_DIGITS)


def parse_key(text: str, option: str = "--seed") -> int:
    """A pseudonym key given as 32 hexadecimal digits (any case; 128 bits) as an int; anything shorter, longer
    or not hexadecimal is refused: a short key can be searched exhaustively, and a longer one would be cut."""
    s = str(text).strip()
    if not _KEY.fullmatch(s):
        raise UserError(f"{option} {text}: a pseudonym key is 32 hexadecimal digits (128 bits) — a shorter one can "
                        "be searched exhaustively from one fake and its original; make one with `python -c "
                        "'import secrets; print(secrets.token_hex(16))'` and keep it secret")
    return int(s, 16)

_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")

_EXAMPLE_DOMAINS = ("example.com", "example.org", "example.net")
_TITLES = {"mr", "mrs", "ms", "miss", "mx", "dr", "prof", "sir"}
# --------------------------------------------------------------------------
# pseudonyms


class Pseudonymizer:
    """Consistent fake values for one corpus (see the module docstring)."""

    def __init__(self, seed: int = 0, terms: dict[str, Sequence[str]] | None = None) -> None:
        from faker.providers.person.en_US import Provider as _Person

        self.seed = int(seed)
        self._first = sorted(set(_Person.first_names))
        self._last = sorted(set(_Person.last_names))
        self._values: dict[tuple[str, str], str] = {}
        self._used: dict[str, set[str]] = {}
        self._tokens: dict[str, str] = {}
        self._used_tokens: set[str] = set()
        self._reserved: dict[str, set[str]] = {}
        self._terms = {k: sorted(set(v)) for k, v in (terms or {}).items()}
        self._faker = None

    def _rng(self, *parts: object) -> random.Random:
        return random.Random(derive_seed(self.seed, "pseudonym:" + "\x1f".join(map(str, parts))))

    def _fake(self):
        if self._faker is None:
            from faker import Faker

            self._faker = Faker("en_US")
        return self._faker

    def reserve(self, label: str, value: str) -> None:
        """Keep the real ``value`` (of type ``label``) out of every fake.

        Out under the rule leaks are counted by (:func:`~privleak.core.normalise.find_values`): no fake of
        any type may show it — not as its own value, and not inside one (a fake city "New Keith" shows the
        one-word name "Keith", an e-mail "glenda.morris@…" the surname "Morris"). Terms drawn from a list
        (conditions, medications) are not reserved: they are not identifiers, and a short list would run out.
        """
        if label in self._terms:
            return
        key = normalise_value(label, value)
        if not key:
            return
        r = rule(label)
        if r == DATE and not _ISO_DATE.fullmatch(key):
            r = TEXT  # an unparsed date is compared as text
        self._reserved.setdefault(r, set()).add(key)

    def _clashes(self, fake: str) -> bool:
        """Whether ``fake`` shows a reserved real value under the leak rule: one of its digit chains or
        dates, or a piece of its text bounded by non-alphanumerics."""
        res = self._reserved
        if not res:
            return False
        view = TextView(fake)
        if view.numbers & res.get(DIGITS, set()) or view.dates & res.get(DATE, set()):
            return True
        text_keys = res.get(TEXT, set())
        if text_keys:
            runs = [(m.start(), m.end()) for m in re.finditer(r"[^\W_]+", view.norm)]
            for i, (a, _) in enumerate(runs):
                for _, b in runs[i:i + 8]:
                    if view.norm[a:b] in text_keys:
                        return True
        alnum = res.get(ALNUM)
        if alnum:
            joined = "".join(ch for ch in view.norm if ch.isalnum())
            return any(k in joined for k in alnum)
        return False

    def __call__(self, label: str, value: str) -> str:
        if label == "NAME":
            return self._name(value)
        key = normalise_value(label, value)
        if is_digit_label(label) and any(ch.isdigit() for ch in value):
            # The digits are the identity; the format (and an "MRN-" prefix)
            # follows each occurrence.
            fake_digits = self._unique(label, key, lambda rng: self._digit_string(label, key, rng))
            return _render_digits(value, fake_digits, skip_country_code=label == "PHONE")
        if label == "DOB" and _ISO_DATE.fullmatch(key):
            # One fake date per real date (its formats are one value, as leak counting says),
            # written the way each occurrence writes it.
            iso = self._unique(label, key, lambda rng: _random_date(rng).isoformat())
            return _date_like(value, _dt.date.fromisoformat(iso))
        cached = self._values.get((label, key))
        if cached is not None:
            return cached
        fake = self._unique(label, key, lambda rng: self._draw(label, value, rng))
        self._values[(label, key)] = fake
        return fake

    def _unique(self, label: str, key: str, draw: Callable[[random.Random], str]) -> str:
        cached = self._values.get((label, key))
        if cached is not None:
            return cached
        used = self._used.setdefault(label, set())
        terms = label in self._terms
        rng = self._rng(label, key)
        fake, fkey = "", key
        for attempt in range(2000):
            fake = draw(rng)
            fkey = fake if is_digit_label(label) else normalise_value(label, fake)
            # A short term list can run out of unused fakes: then only "not itself".
            if fkey != key and (terms or not self._clashes(fake)) and (attempt >= 1000 or fkey not in used):
                break
        used.add(fkey)  # (a one-value term list ends the loop on its own value: the only fake it has)
        self._values[(label, key)] = fake
        return fake

    # -- per type ----------------------------------------------------------

    def _name(self, value: str) -> str:
        fake = self._name_by_tokens(value)
        if not self._clashes(fake):
            return fake
        # Token by token, the fake spells another real person's whole name (small name pools make this
        # happen in large corpora): this value alone gets a fresh surname.
        key = normalise_value("NAME", value)
        cached = self._values.get(("NAME", key))
        if cached is None:
            m = re.search(r"([^\W\d_]+)([^\w]*)$", fake)
            rng = self._rng("NAME-whole", key)
            cached = fake
            for _ in range(1000 if m else 0):
                cand = fake[:m.start(1)] + _match_case(m.group(1), rng.choice(self._last)) + m.group(2)
                if normalise_value("NAME", cand) != key and not self._clashes(cand):
                    cached = cand
                    break
            self._values[("NAME", key)] = cached
        return cached

    def _name_by_tokens(self, value: str) -> str:
        parts = re.split(r"(\s+)", value)
        out = []
        first_done = False
        for part in parts:
            if not part or part.isspace():
                out.append(part)
                continue
            bare = part.rstrip(".,")
            if bare.casefold() in _TITLES or not any(ch.isalpha() for ch in part):
                out.append(part)
                continue
            if len(bare) == 1:  # an initial
                out.append(self._token(bare, pool="initial") + part[len(bare):])
                continue
            pieces = bare.split("-")
            fakes = [self._token(p, pool="last" if (first_done or i > 0) else "first")
                     for i, p in enumerate(pieces)]
            out.append("-".join(fakes) + part[len(bare):])
            first_done = True
        return "".join(out)

    def _token(self, token: str, pool: str) -> str:
        key = token.casefold()
        fake = self._tokens.get(key)
        if fake is None:
            rng = self._rng("NAME", key)
            choices = {"first": self._first, "last": self._last,
                       "initial": list(string.ascii_uppercase)}[pool]
            for _ in range(1000):
                cand = rng.choice(choices)
                if cand.casefold() != key and cand.casefold() not in self._used_tokens and not self._clashes(cand):
                    break
            else:  # pragma: no cover - more distinct names (and reserved ones) than the pool holds
                cand = token + rng.choice(string.ascii_lowercase)
            fake = cand
            self._tokens[key] = fake
            self._used_tokens.add(fake.casefold())
        return _match_case(token, fake)

    def _digit_string(self, label: str, key: str, rng: random.Random) -> str:
        out = []
        for i in range(len(key)):
            # NANP area code and exchange start 2-9; SSN area never 000/666/9xx.
            lo = 2 if label == "PHONE" and len(key) == 10 and i in (0, 3) else 0
            hi = 8 if label == "SSN" and len(key) == 9 and i == 0 else 9
            out.append(str(rng.randint(lo, hi)))
        s = "".join(out)
        if label == "SSN" and len(key) == 9 and (s[:3] in ("000", "666") or s[3:5] == "00" or s[5:] == "0000"):
            s = "1" + s[1:3] + "1" + s[4:8] + "1"
        return s

    def _draw(self, label: str, value: str, rng: random.Random) -> str:
        if label == "EMAIL":
            first, last = rng.choice(self._first).lower(), rng.choice(self._last).lower()
            local = rng.choice((f"{first}.{last}", f"{first}{last}{rng.randint(1, 999)}",
                                f"{first[0]}{last}{rng.randint(1, 999)}", f"{first}_{last}{rng.randint(1, 999)}"))
            return re.sub(r"[^a-z0-9._]", "", local) + "@" + rng.choice(_EXAMPLE_DOMAINS)
        if label == "ADDRESS":
            return self._address(value, rng)
        if label == "DOB":
            return _fake_date(value, rng)
        if label == "BLOOD_PRESSURE":
            sys_ = rng.randint(98, 172)
            return f"{sys_}/{rng.randint(58, min(104, sys_ - 25))}"
        if label == "HEIGHT":
            return _fake_height(value, rng)
        if label == "WEIGHT":
            return _fake_weight(value, rng)
        if label in self._terms and len(self._terms[label]) > 1:
            return rng.choice(self._terms[label])
        return _scramble(value, rng)

    def _address(self, value: str, rng: random.Random) -> str:
        fake = self._fake()
        fake.seed_instance(rng.getrandbits(64))
        state = fake.state_abbr(include_territories=False, include_freely_associated_states=False)
        tail = f"{fake.city()}, {state} {fake.zipcode_in_state(state)}"
        has_tail = bool(re.search(r",?\s*[A-Z]{2}\.?\s+\d{5}(?:-\d{4})?\s*$", value))
        if re.match(r"^\s*\d", value):
            street = fake.street_address()
            return f"{street}, {tail}" if has_tail else street
        return tail if has_tail else fake.city()


def _match_case(original: str, fake: str) -> str:
    if original.isupper() and len(original) > 1:
        return fake.upper()
    if original.islower():
        return fake.lower()
    return fake


def _render_digits(template: str, digits: str, skip_country_code: bool) -> str:
    """``template`` with its digits replaced, in order, by ``digits``."""
    n_template = sum(ch.isdigit() for ch in template)
    skip = n_template - len(digits) if skip_country_code and n_template == len(digits) + 1 else 0
    it = iter(digits)
    out = []
    for ch in template:
        if ch.isdigit():
            if skip:
                skip -= 1
                out.append(ch)
            else:
                out.append(next(it, ch))
        else:
            out.append(ch)
    return "".join(out)


def _scramble(value: str, rng: random.Random) -> str:
    """Format-preserving replacement: digits → digits, letters → letters of the same case."""
    out = []
    for ch in value:
        if ch.isdigit():
            out.append(rng.choice(string.digits))
        elif ch.isalpha() and ch.isascii():
            pool = string.ascii_uppercase if ch.isupper() else string.ascii_lowercase
            out.append(rng.choice(pool))
        else:
            out.append(ch)
    return "".join(out)


_MONTH_NAMES = ["January", "February", "March", "April", "May", "June", "July", "August",
                "September", "October", "November", "December"]


def _random_date(rng: random.Random) -> _dt.date:
    return _dt.date.fromordinal(rng.randint(_dt.date(1935, 1, 1).toordinal(), _dt.date(2006, 12, 31).toordinal()))


def _fake_date(value: str, rng: random.Random) -> str:
    return _date_like(value, _random_date(rng))


def _date_like(value: str, d: _dt.date) -> str:
    """``d`` written the way ``value`` writes its date."""
    v = value.strip()
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", v):
        return d.isoformat()
    m = re.fullmatch(r"(\d{1,2})([/.-])(\d{1,2})\2(\d{2}|\d{4})", v)
    if m:
        sep, year = m.group(2), (f"{d.year}" if len(m.group(4)) == 4 else f"{d.year % 100:02d}")
        mm = f"{d.month:02d}" if len(m.group(1)) == 2 else str(d.month)
        dd = f"{d.day:02d}" if len(m.group(3)) == 2 else str(d.day)
        return f"{mm}{sep}{dd}{sep}{year}"
    if re.match(r"^\d", v):
        return f"{d.day} {_MONTH_NAMES[d.month - 1]} {d.year}"
    if re.match(r"^[A-Za-z]", v):
        return f"{_MONTH_NAMES[d.month - 1]} {d.day}, {d.year}"
    return d.isoformat()


def _fake_height(value: str, rng: random.Random) -> str:
    if "cm" in value:
        return f"{rng.randint(150, 198)} cm"
    if re.search(r"\d\s?m\b", value):
        return f"{rng.randint(150, 198) / 100:.2f} m"
    inches = rng.randint(58, 78)
    if "'" in value:
        closing = '"' if ('"' in value or "''" in value) else ""
        return f"{inches // 12}'{inches % 12}{closing}"
    return f"{inches // 12} ft {inches % 12} in"


def _fake_weight(value: str, rng: random.Random) -> str:
    m = re.search(r"[A-Za-z]+\s*$", value)
    unit = m.group(0).strip() if m else "kg"
    space = " " if re.search(r"\d\s+[A-Za-z]", value) else ""
    n = rng.randint(47, 135) if unit.lower().startswith("k") else rng.randint(100, 300)
    return f"{n}{space}{unit}"


__all__ = ["KEY_HEX_DIGITS", "Pseudonymizer", "parse_key"]
