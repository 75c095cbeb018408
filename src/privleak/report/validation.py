"""What a ``results.json`` must satisfy beyond its types: the rules ``report``, ``compare`` and ``budget`` check.

The typed models (:mod:`privleak.results`) hold what one field can be by itself — a probability in [0, 1], a
positive perplexity, a count that is never negative (:mod:`privleak.core.typed`). A hand-edited file can still
be wrong across fields: a label that is not its level's, a recommendation naming an arm that does not exist,
ε per person below ε per record. Such a file is refused before anything is rendered, in one line that names
the field (issue 49: 22 forged files were rendered as if true).

The rules, in order:

* :func:`finite` — on the parsed JSON, before the types: a NaN or ±∞ anywhere (privleak writes undefined
  figures as null, never NaN);
* :data:`RULES` — on the typed results, each a function returning the first ``(field, problem)`` it finds:
  every model judged; verdict labels tied to their levels; each arm's standing against the stated requirement
  consistent with its own figures (a formal "meets" needs its ε on the unit within the required one and no DP
  alarm); a recommendation wherever there are arms to choose from, naming an arm that exists, may be
  recommended and is eligible (:func:`eligible`), its eligible / contender / tied arms consistent; ε per person
  at least ε per record where a person's records hold the record.

A new rule is one function appended to :data:`RULES` (the recommendation's rules: :func:`recommendation_rules`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..results import ArmResult, AuditResults

#: Where a rule finds a problem: (the field's path in the file, what is wrong with it).
Problem = tuple[str, str]
Rule = Callable[["AuditResults"], "Problem | None"]

#: Every verdict level and the labels the code writes for it (audit/verdicts.py, arms/guard.py,
#: arms/unlearning.py). "DP GUARANTEE VIOLATED" replaces any level's label of an arm the audit's DP alarm names.
VERDICT_LABELS: dict[str, frozenset[str]] = {
    "control": frozenset({"CONTROL"}),
    "guard": frozenset({"GUARDED"}),
    "chance": frozenset({"NEAR CHANCE"}),
    "some": frozenset({"SOME LEAKAGE"}),
    "leaks": frozenset({"LEAKS"}),
    "inconclusive": frozenset({"INCONCLUSIVE"}),
    "none": frozenset({"NO ATTACKS", "NOT TESTED"}),
    "forgotten": frozenset({"FORGOTTEN"}),
    "not_forgotten": frozenset({"NOT FORGOTTEN"}),
    "over_forgotten": frozenset({"OVER-FORGOTTEN"}),
}
VIOLATED = "DP GUARANTEE VIOLATED"

#: How far below ε per record a record-level arm's ε per person may lie: the accountants behind the two figures
#: differ (ε by PRV, up to 0.01 above; ε per person by PLD) — a person with one record gets the same ε.
PERSON_SLACK = (1e-2, 1e-2)  # (relative, absolute)


def finite(data: Any, path: str = "") -> Problem | None:
    """The first NaN or ±∞ in parsed JSON (privleak writes undefined figures as null: JSON has no NaN)."""
    if isinstance(data, float):
        return None if math.isfinite(data) else (path or "(top level)", f"{data!r} is not a number privleak writes "
                                                 "(an undefined figure is null)")
    if isinstance(data, dict):
        items: Iterator[tuple[str, Any]] = ((f"{path}.{k}" if path else str(k), v) for k, v in data.items())
    elif isinstance(data, list):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(data))
    else:
        return None
    for where, v in items:
        found = finite(v, where)
        if found is not None:
            return found
    return None


def _models(results: AuditResults) -> Iterator[tuple[str, str, ArmResult]]:
    """(name, path in the file, result) of the control and every arm."""
    if results.base_model is not None:
        yield "base model", "base_model", results.base_model
    for name, arm in results.arms.items():
        yield name, f"arms.{name}", arm


def recommendable(arm: ArmResult) -> bool:
    """Whether an arm's kind may be recommended for release (an unknown kind, a plug-in's: yes, as the verdicts
    read it); the control and the baseline — the memorisation stress test — may not."""
    from ..arms import judging

    return arm.kind != "control" and judging(arm.kind).recommendable


def judged(results: AuditResults) -> Problem | None:
    """Every model the audit judged carries its verdict (the verdicts layer writes one for each)."""
    for _, where, arm in _models(results):
        if arm.verdict is None:
            return f"{where}.verdict", "required field is missing (every model of an audit is judged)"
    return None


def labels(results: AuditResults) -> Problem | None:
    """A verdict's label is one its level is written with — NEAR CHANCE only on the chance level — or the DP
    alarm's, on an arm the alarm names."""
    violated = set(results.alarms.violated) if results.alarms is not None else set()
    for name, where, arm in _models(results):
        v = arm.verdict
        if v is None:
            continue
        allowed = VERDICT_LABELS.get(v.level, frozenset())
        if v.label in allowed:
            continue
        if v.label == VIOLATED:
            if name in violated:
                continue
            return f"{where}.verdict.label", (f"{VIOLATED!r} on an arm the audit's DP alarm does not name "
                                              f"(alarms.violated: {', '.join(sorted(violated)) or 'none'})")
        return f"{where}.verdict.label", (f"{v.label!r} is not a label of level {v.level!r} (that level reads "
                                          f"{' or '.join(sorted(allowed))})")
    return None


def standing(results: AuditResults) -> Problem | None:
    """Each arm's standing against the stated requirement holds together with its own figures: it names an arm
    of the audit that may be recommended, and one that "meets" a formal requirement has an accountant ε on the
    requirement's unit no larger than the required one, a δ within the required one and no DP alarm."""
    rec = results.recommendation
    if rec is None:
        return None
    req = rec.requirement
    violated = set(results.alarms.violated) if results.alarms is not None else set()
    for i, s in enumerate(rec.standings):
        where = f"recommendation.standings[{i}]"
        if s.arm not in results.arms:
            return f"{where}.arm", f"{s.arm!r} is no arm of this audit"
        if not recommendable(results.arms[s.arm]):
            return f"{where}.arm", f"{s.arm!r} is a {results.arms[s.arm].kind} arm, which is never recommended"
        if not (s.meets and req.formal):
            continue
        if s.epsilon is None or s.epsilon > req.epsilon * (1 + 1e-9):
            return f"{where}.meets", (f"{s.arm} meets ε ≤ {req.epsilon:g} per {req.unit} with ε = "
                                      f"{'none' if s.epsilon is None else format(s.epsilon, 'g')} on that unit")
        if s.unit != req.unit:
            return f"{where}.unit", f"per {s.unit}, but the requirement is per {req.unit}"
        if req.delta is not None and (s.delta is None or s.delta > req.delta * (1 + 1e-9)):
            return f"{where}.meets", f"{s.arm} meets δ ≤ {req.delta:g} at δ = {s.delta}"
        if s.arm in violated:
            return f"{where}.meets", f"{s.arm} meets the requirement, yet the audit's DP alarm names it"
    return None


def eligible(results: AuditResults, name: str) -> str | None:
    """Why arm ``name`` cannot be the recommended one (None: it can): it must be among the arms that meet the
    stated requirement (``recommendation.eligible``), by its standing where the file gives one."""
    rec = results.recommendation
    if rec is None:
        return None
    if name not in rec.eligible:
        return f"it is not among the arms that meet the requirement ({', '.join(rec.eligible) or 'none'})"
    own = next((s for s in rec.standings if s.arm == name), None)
    if own is not None and not own.meets:
        return f"its standing says it does not meet the requirement ({own.lacks or own.lacking or 'no reason'})"
    return None


def recommendation(results: AuditResults) -> Problem | None:
    """An audit with arms to choose from carries a recommendation (``privleak attack``'s one model has none);
    the arm it names exists, may be recommended and is eligible; the arms it names beside it exist and are
    consistent: the eligible arms are those whose standing meets the requirement, the contenders are eligible,
    the tied and those awaiting seeds are contenders."""
    choices = [n for n, a in results.arms.items() if recommendable(a)]
    rec = results.recommendation
    if rec is None:
        if choices:
            return "recommendation", (f"required field is missing (the audit has arms to choose from: "
                                      f"{', '.join(choices[:4])}{' …' if len(choices) > 4 else ''})")
        return None
    if rec.arm is not None:
        if rec.arm not in results.arms:
            return "recommendation.arm", (f"{rec.arm!r} is no arm of this audit (its arms: "
                                          f"{', '.join(results.arms)})")
        if not recommendable(results.arms[rec.arm]):
            return "recommendation.arm", (f"{rec.arm!r} is a {results.arms[rec.arm].kind} arm, which is never "
                                          "recommended for release")
        why = eligible(results, rec.arm)
        if why:
            return "recommendation.arm", f"{rec.arm!r} cannot be recommended: {why}"
    meets = {s.arm for s in rec.standings if s.meets}
    for field, names, within, what in (("eligible", rec.eligible, meets if rec.standings else None,
                                        "an arm whose standing meets the requirement"),
                                       ("contenders", rec.contenders, set(rec.eligible), "an eligible arm"),
                                       ("tied", rec.tied, set(rec.eligible), "an eligible arm"),
                                       ("needs_seeds", rec.needs_seeds, set(rec.contenders), "a contender")):
        for n in names:
            if n not in results.arms:
                return f"recommendation.{field}", f"{n!r} is no arm of this audit"
            if within is not None and n not in within:
                return f"recommendation.{field}", f"{n!r} is not {what}"
    if rec.standings and meets - set(rec.eligible):
        return "recommendation.eligible", (f"{sorted(meets - set(rec.eligible))[0]!r} meets the requirement by its "
                                           "standing but is not listed as eligible")
    return None


def recommendation_rules() -> list[Rule]:
    """The recommendation's cross-field rules (issue 44's requirement: :func:`standing`, :func:`eligible`)."""
    return [standing, recommendation]


def _below(person: float, record: float) -> bool:
    rel, absolute = PERSON_SLACK
    return person < record * (1 - rel) - absolute


def person_epsilon(results: AuditResults) -> Problem | None:
    """ε per person ≥ ε per record where the person's records hold the record under the same relation: a
    record-level arm (its ε per person is the group of the person's k ≥ 1 records), and a budget release of
    record-level arms only (a person- or client-level training's record event is replace-one, which its person
    event — add/remove — does not bound)."""
    units: dict[str, str] = {}
    for name, where, arm in _models(results):
        p = arm.privacy
        if p is None:
            continue
        units[name] = p.unit
        if p.unit == "record" and p.epsilon_person is not None and _below(p.epsilon_person, p.epsilon):
            return f"{where}.privacy.epsilon_person", (f"ε per person {p.epsilon_person:g} is below ε per record "
                                                       f"{p.epsilon:g}: a person's records include the record")
    for i, b in enumerate(results.budget):
        for j, r in enumerate(b.releases):
            base = [a.split("/seeds/", 1)[0] for a in r.arms]
            missing = [a for a, s in zip(r.arms, base) if s not in results.arms]
            if missing:
                return f"budget[{i}].releases[{j}].arms", f"{missing[0]!r} is no arm of this audit"
            record_level = all(units.get(s) == "record" for s in base)
            if record_level and r.epsilon_person is not None and _below(r.epsilon_person, r.epsilon):
                return f"budget[{i}].releases[{j}].epsilon_person", (
                    f"ε per person {r.epsilon_person:g} is below ε per record {r.epsilon:g} for record-level arms")
    return None


RULES: list[Rule] = [judged, labels, *recommendation_rules(), person_epsilon]


def check(results: AuditResults) -> Problem | None:
    """The first problem any rule finds (None: the file holds together)."""
    for rule in RULES:
        found = rule(results)
        if found is not None:
            return found
    return None
