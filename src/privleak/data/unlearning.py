"""The forget set of an erasure request, and the person-shards of SISA.

The unit of an erasure request is the person (:func:`person_of`): the
synthetic ``meta.person_id``, a ``--group-field`` group, a planted canary
(all its copies are one person: each canary is its own made-up individual),
or else a distinct text. :func:`draw_forget_set` draws a seeded random
sample of the members' persons — among those whose privacy is at stake
(PII-carrying records when PII is known, as the membership evaluation sets
do) — plus a share of the planted canaries, so the forgotten canaries'
exposure can be read beside the retained ones'. The retain set is every
member record of a person not drawn.

:func:`shard_by_person` splits records into SISA shards (Bourtoule et al.
2021) whole persons at a time; the assignment depends only on the set of
persons, never on what is forgotten later, so a shard that holds no
forgotten person is the same shard before and after the request.
"""

from __future__ import annotations

import json
import math
import os
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

from ..core.errors import UserError
from ..core.io import atomic_open
from .canaries import derive_seed
from .records import Record
from .splits import unit_of


def person_of(record: Record) -> str:
    """The erasure unit of ``record`` as a string key, :func:`~privleak.data.splits.unit_of`'s: ``canary:<id>``
    for a planted canary copy, ``person:<id>`` / ``group:<id>``, else ``text:<hash>`` of the raw normalised
    text (a hash, so the key itself carries no PII) — the unit stamped before any defence, so a scrubbed copy
    of a record is the same person as the record."""
    kind, value = unit_of(record)
    return f"{kind}:{value}"


@dataclass(frozen=True)
class ForgetSet:
    """Who is forgotten: ``persons`` (keys of :func:`person_of`, canaries included), the forgotten canaries
    by id, and how they were drawn (the settings, and the counts they were drawn from)."""

    persons: tuple[str, ...]
    canary_ids: tuple[str, ...]
    n_member_persons: int  # eligible (non-canary) member persons the sample was drawn from
    n_canaries: int
    n_forget_records: int  # member records of the forgotten persons, canary copies included
    n_retain_records: int
    settings: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_keys", frozenset(self.persons))

    def holds(self, record: Record) -> bool:
        """Whether ``record`` belongs to a forgotten person."""
        return person_of(record) in self._keys  # type: ignore[attr-defined]

    def split(self, records: Sequence[Record]) -> tuple[list[Record], list[Record]]:
        """(forget, retain): ``records`` of forgotten persons and the rest, each in input order."""
        forget, retain = [], []
        for r in records:
            (forget if self.holds(r) else retain).append(r)
        return forget, retain

    def retain(self, records: Sequence[Record]) -> list[Record]:
        return self.split(records)[1]

    @property
    def n_persons(self) -> int:
        """Forgotten people other than the planted canaries."""
        return len(self.persons) - len(self.canary_ids)

    def to_json(self) -> dict:
        d = asdict(self)
        d["persons"], d["canary_ids"] = list(self.persons), list(self.canary_ids)
        return d

    @classmethod
    def from_json(cls, d: dict) -> ForgetSet:
        return cls(persons=tuple(d["persons"]), canary_ids=tuple(d["canary_ids"]),
                   n_member_persons=int(d["n_member_persons"]), n_canaries=int(d["n_canaries"]),
                   n_forget_records=int(d["n_forget_records"]), n_retain_records=int(d["n_retain_records"]),
                   settings=dict(d.get("settings") or {}))


def _eligible_persons(members: Sequence[Record]) -> list[str]:
    """Member persons whose privacy is at stake, in first-seen order: those with a PII-carrying record when PII
    is known, every person otherwise (planted canaries apart)."""
    known = any(r.pii is not None for r in members if r.kind != "canary")
    out: dict[str, None] = {}
    for r in members:
        if r.kind == "canary":
            continue
        if r.has_pii or not known:
            out.setdefault(person_of(r), None)
    return list(out)


def _canaries_to_forget(members: Sequence[Record], fraction: float, rng: random.Random) -> list[str]:
    """⌈fraction · n⌉ canary ids by systematic sampling over the canaries ordered by repetition count (most
    repeated first, ties in seeded random order): every repetition level keeps forgotten and retained canaries
    alike, and the most repeated canary — the one a memorising model knows best — is always forgotten."""
    repeats: dict[str, int] = {}
    for r in members:
        if r.kind == "canary" and r.meta.get("canary_id") is not None:
            cid = str(r.meta["canary_id"])
            repeats[cid] = repeats.get(cid, 0) + 1
    ids = sorted(repeats)
    rng.shuffle(ids)
    ids.sort(key=lambda c: -repeats[c])  # stable: ties stay in the shuffled order
    k = math.ceil(fraction * len(ids)) if fraction > 0 else 0
    return sorted(ids[(i * len(ids)) // k] for i in range(k)) if k else []


def draw_forget_set(members: Sequence[Record], *, fraction: float | None = None, count: int | None = None,
                    canary_fraction: float = 0.5, seed: int = 0) -> ForgetSet:
    """A seeded random sample of the members' persons to forget (``count`` persons, or ``round(fraction · n)``
    of the n eligible ones, at least 1) and ``canary_fraction`` of the planted canaries."""
    if (fraction is None) == (count is None):
        raise UserError("give the forget set as a fraction of the member persons or as a count of persons, not both")
    persons = _eligible_persons(members)
    if len(persons) < 2:
        raise UserError(f"the members hold {len(persons)} person(s) with PII; forgetting needs at least 2 "
                        "(one to forget, one to keep); add data")
    k = count if count is not None else max(1, int(round(fraction * len(persons))))  # type: ignore[operator]
    if k >= len(persons):
        raise UserError(f"unlearning: forgetting {k} of the members' {len(persons)} persons leaves none to retain; "
                        "lower unlearning.forget_count or forget_fraction")
    rng = random.Random(derive_seed(seed, "forget-set"))
    drawn = sorted(rng.sample(persons, k))
    canaries = _canaries_to_forget(members, canary_fraction, rng)
    keys = frozenset(drawn) | {f"canary:{c}" for c in canaries}
    n_forget = sum(person_of(r) in keys for r in members)
    n_canaries = len({r.meta.get("canary_id") for r in members if r.kind == "canary"})
    return ForgetSet(persons=tuple(drawn) + tuple(f"canary:{c}" for c in canaries), canary_ids=tuple(canaries),
                     n_member_persons=len(persons), n_canaries=n_canaries, n_forget_records=n_forget,
                     n_retain_records=len(members) - n_forget,
                     settings={"fraction": fraction, "count": count, "canary_fraction": canary_fraction, "seed": seed})


def save_forget_set(path: str | os.PathLike[str], forget: ForgetSet) -> None:
    with atomic_open(path) as fh:
        json.dump({"version": 1, **forget.to_json()}, fh, ensure_ascii=False, indent=1)
        fh.write("\n")


def load_forget_set(path: str | os.PathLike[str]) -> ForgetSet:
    p = Path(path)
    try:
        return ForgetSet.from_json(json.loads(p.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(f"{p}: not a forget set written by this version ({exc}); rerun the audit") from None


def shard_by_person(records: Sequence[Record], n_shards: int, seed: int) -> list[list[int]]:
    """Record indices per SISA shard: the distinct persons of ``records`` in a seeded random order, dealt
    round-robin to ``n_shards`` shards (sizes within one person of each other), every record with its
    person. Depends only on the set of persons, so forgetting some changes no assignment."""
    if isinstance(n_shards, bool) or not isinstance(n_shards, int) or n_shards < 1:
        raise UserError(f"SISA needs a whole number of shards ≥ 1, got {n_shards!r}")
    persons = sorted({person_of(r) for r in records})
    if len(persons) < n_shards:
        raise UserError(f"SISA: {n_shards} shards for {len(persons)} persons leaves a shard empty; "
                        "lower unlearning.sisa.shards")
    random.Random(derive_seed(seed, "sisa-shards")).shuffle(persons)
    shard_of = {p: i % n_shards for i, p in enumerate(persons)}
    shards: list[list[int]] = [[] for _ in range(n_shards)]
    for i, r in enumerate(records):
        shards[shard_of[person_of(r)]].append(i)
    return shards
