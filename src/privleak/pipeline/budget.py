"""Composing the ledger: what releasing some DP trainings of the same people costs, per record and per person.

The trainings :mod:`.ledger` records (each line checked against its own σ, q,
steps and accountant when read) are grouped by the people they share, and
each group's releases — every training alone, the arms a user releases
together, everything trained — are composed at the ledger's two common units
(:mod:`privleak.accountants.analysis.units`):

* **ε per record**: every training's record-level event (add/remove for
  DP-SGD, replace-one for user-level DP-SGD and DP-FedAvg) composed over the
  trainings that hold the record's person — the worst such person;
* **ε per person**: every training's event for the whole person
  (record-level DP-SGD: the mixture of Gaussians of their k records, at most
  an ELS arm's cap; user-level: add/remove of the person; DP-FedAvg:
  replace-one of their client) composed — the worst real person.

Identical mechanisms are composed as one, so the work does not grow with the
number of lines. :func:`privacy_budget` is the same composition over one
audit's own trainings (its arms and their extra training seeds), for
``results.json``; :func:`budget_tables` is ``privleak budget``'s output.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import UserError
from ..core.present import Cell, Table
from ..core.typed import Typed
from .ledger import LedgerEntry, LedgerReader, People

if TYPE_CHECKING:
    from ..accountants import Composed, UnitEvent
    from ..results import Privacy, PrivacyBudget

#: More distinct people-overlap patterns than this and the per-person composition takes one fictitious person
#: with the most records of anyone in every training (a sound upper bound, said so) instead of each pattern.
MAX_PATTERNS = 32


class BudgetLine(Typed):
    """Some trainings released together and the ε it costs, per record and per person (the ledger's common
    units: every training's event for that unit, composed)."""

    what: str
    arms: list[str]
    epsilon: float  # ε per record
    delta: float
    epsilon_person: float | None = None  # ε per real person (None: a training that did not record its people)
    person_records: int | None = None  # the most records that worst person had in one of the trainings
    method: str = "pld"


class BudgetGroup(Typed):
    """The trainings that share people (directly or through others), and what releasing them costs."""

    members: str  # the members hash of the first training (one of ``member_sets``)
    member_sets: int = 1
    people: int | None = None  # distinct real people trained on (None: unknown for old lines)
    unit: str = "record and person"
    trainings: list[LedgerEntry]
    lines: list[BudgetLine]
    notes: list[str] = []


@dataclass
class _Component:
    entries: list[LedgerEntry]
    persons: list[dict[str, int] | None]  # per entry: person key → records (None: unknown)
    clients: list[dict[str, int] | None]
    cache: dict[Any, Composed] = field(default_factory=dict)

    def compose(self, events: list[UnitEvent], delta: float) -> Composed:
        key = (tuple(sorted((e.mechanism, e.steps) for e in events)), delta)
        if key not in self.cache:
            from ..accountants import compose_events  # see ledger.py's imports

            self.cache[key] = compose_events(events=events, delta=delta)
        return self.cache[key]


def _record_level(c: _Component, idx: list[int], delta: float) -> Composed:
    """The worst record: the composition of the record-level events of every training holding its person,
    maximised over the patterns of trainings people are in (only maximal patterns can be worst)."""
    old = {i for i in idx if c.persons[i] is None}  # lines from before people were kept: every member
    seen: dict[str, set[int]] = {}
    for i in idx:
        for p in c.persons[i] or {}:
            seen.setdefault(p, set(old)).add(i)
    patterns = {frozenset(s) for s in seen.values()} or {frozenset(idx)}
    maximal = [s for s in patterns if not any(s < t for t in patterns)]
    results = [c.compose([c.entries[i].record_event for i in sorted(s)], delta) for s in maximal]
    return max(results, key=lambda r: r.epsilon)


def _person_level(c: _Component, idx: list[int], delta: float) -> tuple[Composed | None, int | None, str | None]:
    """The worst real person: the composition of every training's event for them; (None, None, why) when a
    training did not record its people."""
    if any(c.persons[i] is None for i in idx):
        return None, None, "a training recorded before the ledger kept people (re-run it to count it per person)"
    sigs: dict[tuple[tuple[int, int, int], ...], None] = {}
    keys = {p for i in idx for p in c.persons[i]}  # type: ignore[union-attr]
    for p in keys:
        sig = tuple((i, c.persons[i][p], (c.clients[i] or {}).get(p, 1))  # type: ignore[index]
                    for i in idx if p in c.persons[i])  # type: ignore[operator]
        sigs[sig] = None

    def dominates(a: tuple, b: tuple) -> bool:
        da = {i: (k, cl) for i, k, cl in a}
        return all(i in da and da[i][0] >= k and da[i][1] >= cl for i, k, cl in b)

    distinct = list(sigs)
    maximal = distinct if len(distinct) > 8 * MAX_PATTERNS else \
        [s for s in distinct if not any(t != s and dominates(t, s) for t in distinct)]
    note = None
    if len(maximal) > MAX_PATTERNS:  # one fictitious person with everyone's most records in every training
        worst: dict[int, tuple[int, int]] = {}
        for s in maximal:
            for i, k, cl in s:
                a, b = worst.get(i, (0, 0))
                worst[i] = (max(a, k), max(b, cl))
        maximal = [tuple((i, k, cl) for i, (k, cl) in sorted(worst.items()))]
        note = (f"people overlap the trainings in {len(distinct)} patterns; ε per person is for one person with the "
                "most records of anyone in every training (an upper bound)")
    best: tuple[Composed | None, int | None] = (None, None)
    for s in maximal:
        events = [c.entries[i].person_event(k, cl) for i, k, cl in s]
        if any(ev is None for ev in events):
            return None, None, "a person's records lie in several clients of a DP-FedAvg training"
        r = c.compose(events, delta)  # type: ignore[arg-type]
        if best[0] is None or r.epsilon > best[0].epsilon:
            best = (r, max(k for _, k, _ in s))
    return best[0], best[1], note


def _components(entries: Sequence[LedgerEntry], reader: LedgerReader | None) -> list[_Component]:
    """Trainings joined by a shared person (old lines without people: by their members hash)."""
    persons = [None if e.people is None or reader is None else reader.people_of(e.people) for e in entries]
    parent = list(range(len(entries)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[str, int] = {}
    for i, e in enumerate(entries):
        keys = [f"members:{e.members}"] + list((persons[i].records if persons[i] else {}))
        for k in keys:
            j = first.setdefault(k, i)
            a, b = find(i), find(j)
            if a != b:
                parent[max(a, b)] = min(a, b)
    groups: dict[int, list[int]] = {}
    for i in range(len(entries)):
        groups.setdefault(find(i), []).append(i)
    return [_Component(entries=[entries[i] for i in ix],
                       persons=[persons[i].records if persons[i] else None for i in ix],
                       clients=[persons[i].clients if persons[i] else None for i in ix]) for ix in groups.values()]


def _line(c: _Component, what: str, idx: list[int], delta: float) -> tuple[BudgetLine, str | None]:
    rec = _record_level(c, idx, delta)
    person, k, note = _person_level(c, idx, delta)
    method = "pld" if rec.method == "pld" and (person is None or person.method == "pld") else \
        "basic composition (the PLD grid would not fit)"
    return BudgetLine(what=what, arms=[c.entries[i].arm for i in idx], epsilon=rec.epsilon, delta=delta,
                      epsilon_person=person.epsilon if person else None, person_records=k, method=method), note


def budget(entries: Sequence[LedgerEntry], release: Sequence[str] | None = None,
           reader: LedgerReader | None = None) -> list[BudgetGroup]:
    """Per group of trainings sharing people: each training alone, ``release`` (arm names) composed, and every
    training composed — per record and per person, at the largest δ among them (the δ every arm was held to).

    ``reader`` reads the people files the entries name (the one :func:`ledger_entries` used); without one,
    entries are grouped by their members hash and ε per person is not stated."""
    if release:
        missing = sorted(set(release) - {e.arm for e in entries})
        if missing:
            raise UserError(f"--release {','.join(missing)}: no DP training of that name in these ledgers; "
                            f"name one of {', '.join(sorted({e.arm for e in entries}))}")
    out = []
    for c in _components(entries, reader):
        es = c.entries
        delta = max(e.delta for e in es)
        lines, notes = [], []
        for i, e in enumerate(es):
            line, note = _line(c, f"{e.arm} alone" + (f" ({Path(e.run).name})" if e.run else ""), [i], e.delta)
            # Alone, a training's own accountant figure is the bound for the unit it was accounted at (checked
            # against σ, q and steps when read): the same number the arm's privacy block prints.
            if e.unit in ("record", "person"):
                line = line.model_copy(update={"epsilon": e.epsilon} if e.unit == "record" else
                                       {"epsilon_person": e.epsilon if line.epsilon_person is not None else None})
            lines.append(line)
            notes.append(note)
        if release:
            chosen = [i for i, e in enumerate(es) if e.arm in set(release)]
            if chosen:
                line, note = _line(c, "released together", chosen, delta)
                lines.append(line)
                notes.append(note)
        if len(es) > 1:
            line, note = _line(c, "everything trained", list(range(len(es))), delta)
            lines.append(line)
            notes.append(note)
        people = None if any(p is None for p in c.persons) else len({k for p in c.persons for k in p or {}})
        out.append(BudgetGroup(members=es[0].members, member_sets=len({e.members for e in es}), people=people,
                               trainings=es, lines=lines, notes=sorted({n for n in notes if n})))
    return out


#: How the budget's composed ε is computed (the results say it).
ACCOUNTANT = ("PLD (dp_accounting; every training's event for one record or one person — add/remove, replace-one or "
              "the mixture of Gaussians of a person's records — composed on one grid)")


@dataclass(frozen=True)
class Trained:
    """One DP training of this audit, as ``results.json``'s budget composes it: its privacy block, the people it
    trained on and — a user-level ELS arm — the records per person it kept at most."""

    privacy: Privacy
    people: People
    person_cap: int | None = None


def privacy_budget(members: str, trainings: dict[str, Trained]) -> list[PrivacyBudget]:
    """This audit's DP trainings as the ledger composes them, per record and per person: each arm alone, and all
    together when there are several — every training of these people, the extra training seeds
    (``recommendation.seeds``, named ``<arm>/seeds/<k>``) included: they spent budget on the same people like
    the arm's own. Only the run's own trainings (a served arm is its source's model, not a training of its own;
    the caller leaves it out): ``results.json`` stays a function of the config and seed."""
    from ..results import BudgetRelease, PrivacyBudget

    reader = LedgerReader()
    entries = []
    for name, t in trainings.items():
        p = t.privacy
        if not p.sigma > 0 or not p.steps > 0:
            continue
        reader.people[t.people.digest] = t.people
        entries.append(LedgerEntry(members=members, key=name, arm=name, run="", unit=p.unit,
                                   sample_rate=p.sample_rate, sigma=p.sigma, steps=p.steps, delta=p.delta,
                                   epsilon=p.epsilon, accountant=p.accountant, people=t.people.digest,
                                   person_cap=t.person_cap))
    out = []
    for g in budget(entries, reader=reader):
        # An extra seed alone is its arm's recipe alone (the same figure): listed only inside "all together".
        releases = [BudgetRelease(what="alone" if len(x.arms) == 1 else "all together", arms=x.arms,
                                  epsilon=x.epsilon, delta=x.delta, epsilon_person=x.epsilon_person,
                                  person_records=x.person_records) for x in g.lines
                    if len(x.arms) > 1 or not is_seed(x.arms[0])]
        out.append(PrivacyBudget(members=members, unit="record", accountant=ACCOUNTANT, releases=releases))
    return out


def is_seed(name: str) -> bool:
    """Whether a training's name is an arm's extra training seed (``<arm>/seeds/<k>``)."""
    return "/seeds/" in name


def _num(x: float | None, spec: str = ".3f") -> str:
    if x is None:
        return "—"
    return "∞" if math.isinf(x) else format(x, spec)


def budget_tables(groups: Sequence[BudgetGroup]) -> list[Table]:
    """``privleak budget``'s tables: per group of trainings sharing people, the trainings and what each release
    costs per record and per person."""
    out = []
    for g in groups:
        rows: list[list[Cell | str]] = [[e.arm, Path(e.run).name or "—", e.unit, f"{e.sample_rate:.4g}",
                                         f"{e.sigma:.4g}", str(e.steps), f"{e.delta:.1e}", f"{e.epsilon:.3f}"]
                                        for e in g.trainings]
        who = f"{g.people:,} people" if g.people is not None else f"members {g.members[:12]}…"
        sets = f", {g.member_sets} member sets" if g.member_sets > 1 else ""
        out.append(Table(["arm", "run", "unit", "q", "σ", "steps", "δ", "ε alone (its unit)"], rows,
                         console_title=f"DP trainings of the same people ({who}{sets})"))
        out.append(Table(["release", "arms", "ε per record", "ε per person", "δ"],
                         [[x.what, ", ".join(x.arms), _num(x.epsilon),
                           _num(x.epsilon_person) + (f" ({x.person_records} records)" if x.person_records else ""),
                           f"{x.delta:.1e}"] for x in g.lines],
                         console_title="The ε a release carries, guaranteed at most (" + ACCOUNTANT + ")"))
    return out
