"""Split a user corpus into members / non-members / population.

Exact duplicates (after whitespace normalisation) always land in the same
split: a text that is both a member and a non-member would be scored as a
"non-member" the model has in fact memorised, and every membership metric
would be biased low. With ``--group-field`` (``meta["group"]``: a person,
an author) all records of a group land in one split too, so a person is a
member or not as a whole. Splitting is therefore over *units* — records
connected by a shared text or a shared group — assigned at random, and the
fractions apply to units, not records.
"""

from __future__ import annotations

import hashlib
import math
import random
from typing import Sequence

from privleak.core.errors import UserError
from privleak.data.records import Record

SPLIT_NAMES: tuple[str, ...] = ("members", "non_members", "population")


def normalize_text(text: str) -> str:
    """The duplicate key: surrounding whitespace stripped, runs collapsed."""
    return " ".join(text.split())


def _check_fractions(fractions: Sequence[float]) -> tuple[float, ...]:
    try:
        fr = tuple(float(f) for f in fractions)
    except (TypeError, ValueError):
        raise UserError(f"split fractions must be numbers, got {fractions!r}") from None
    if len(fr) != len(SPLIT_NAMES):
        raise UserError(
            f"split fractions must be {len(SPLIT_NAMES)} numbers "
            f"({', '.join(SPLIT_NAMES)}), got {len(fr)}"
        )
    if any(not math.isfinite(f) or f <= 0 for f in fr):
        raise UserError(f"split fractions must all be positive, got {list(fractions)}")
    if abs(sum(fr) - 1.0) > 1e-6:
        raise UserError(f"split fractions must sum to 1, got {list(fractions)} (sum {sum(fr):g})")
    return fr


def _allocate(n_groups: int, fractions: tuple[float, ...]) -> list[int]:
    """Group counts per split by largest remainder, so they sum to n_groups."""
    raw = [f * n_groups for f in fractions]
    counts = [math.floor(r + 1e-9) for r in raw]
    rest = n_groups - sum(counts)
    order = sorted(range(len(raw)), key=lambda i: (-(raw[i] - counts[i]), i))
    for i in order[:rest]:
        counts[i] += 1
    return counts


def _groups_needed(n_groups: int, fractions: tuple[float, ...], min_per_split: int) -> int:
    """The smallest group count whose allocation gives every split enough."""
    need = max(n_groups + 1, 1)
    while min(_allocate(need, fractions)) < min_per_split:
        need += 1
    return need


#: The record kinds that are planted by PrivLeak (exposure canaries, one-run audit canaries): each canary is its
#: own made-up individual, never a real person.
CANARY_KINDS = frozenset({"canary", "audit_canary"})

#: ``meta`` key of a record's privacy unit, stamped from the raw data before any defence (:func:`stamp_units`).
UNIT_KEY = "unit"


def text_digest(text: str) -> str:
    """The key of a distinct (normalised) text: a hash, so a unit id carries no PII of the text itself."""
    return hashlib.sha256(normalize_text(text).encode()).hexdigest()[:20]


def raw_unit(record: Record) -> tuple[str, str]:
    """The privacy unit the raw record belongs to, read from its own fields: a planted canary's id
    (``canary``; every copy of one canary is one made-up individual), the synthetic ``meta.person_id``
    (``person``), the ``--group-field`` value (``group``), else a digest of its distinct normalised text
    (``text``)."""
    meta = record.meta
    if record.kind in CANARY_KINDS and meta.get("canary_id") is not None:
        return "canary", str(meta["canary_id"])
    if meta.get("person_id") is not None:
        return "person", str(meta["person_id"])
    if meta.get("group") is not None:
        return "group", str(meta["group"])
    return "text", text_digest(record.text)


def unit_of(record: Record) -> tuple[str, str]:
    """The privacy (membership) unit of a record, as ``(kind, id)``: the unit stamped on it from the raw data
    (``meta["unit"]``, :func:`stamp_units`), else :func:`raw_unit` of the record as it is.

    The stamp is what keeps the unit fixed before any defence: scrubbing rewrites texts (15 canaries' 93 copies
    all read "Verification record for <NAME>: social security number <SSN>." after masking) and would merge
    units keyed on text; a stamped record keeps the unit its raw text, person, group or canary gave it."""
    stamped = record.meta.get(UNIT_KEY)
    if isinstance(stamped, str) and ":" in stamped:
        kind, _, value = stamped.partition(":")
        return kind, value
    return raw_unit(record)


def is_canary_unit(unit: tuple[str, str]) -> bool:
    """Whether a unit is a planted canary (reported apart from real people)."""
    return unit[0] == "canary"


def stamp_units(records: Sequence[Record]) -> list[Record]:
    """``records`` with ``meta["unit"] = "<kind>:<id>"`` from :func:`raw_unit` — the privacy unit fixed from the
    raw data, before scrubbing or deduplication run (records already stamped keep their stamp). New record
    objects; the input is not changed."""
    out = []
    for r in records:
        if isinstance(r.meta.get(UNIT_KEY), str):
            out.append(r)
            continue
        kind, value = raw_unit(r)
        out.append(Record(text=r.text, pii=r.pii, meta={**r.meta, UNIT_KEY: f"{kind}:{value}"}))
    return out


def _units(records: Sequence[Record]) -> dict[str, list[int]]:
    """Records joined by an identical (normalised) text or the same ``meta["group"]``: unit key → indices.

    Union–find over both relations; dict insertion order keeps the result
    independent of hash seeds.
    """
    parent = list(range(len(records)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[tuple[str, str], int] = {}
    for i, rec in enumerate(records):
        keys = [("t", normalize_text(rec.text))]
        if rec.meta.get("group") is not None:
            keys.append(("g", str(rec.meta["group"])))
        for k in keys:
            j = first.setdefault(k, i)
            a, b = find(i), find(j)
            if a != b:
                parent[max(a, b)] = min(a, b)
    units: dict[str, list[int]] = {}
    for i, rec in enumerate(records):
        units.setdefault(normalize_text(records[find(i)].text), []).append(i)
    return units


def split_corpus(
    records: Sequence[Record],
    fractions: Sequence[float] = (0.5, 0.25, 0.25),
    seed: int = 0,
    min_per_split: int = 1,
) -> dict[str, list[Record]]:
    """Seeded split into ``members``, ``non_members`` and ``population``.

    Each split gets ``fractions[i]`` of the distinct texts (at least
    ``min_per_split``); within a split records keep their input order.
    """
    fr = _check_fractions(fractions)
    if isinstance(min_per_split, bool) or not isinstance(min_per_split, int) or min_per_split < 1:
        raise UserError(f"min_per_split must be a positive integer, got {min_per_split!r}")

    groups = _units(records)
    keys = list(groups)

    counts = _allocate(len(keys), fr)
    if min(counts) < min_per_split:
        need = _groups_needed(len(keys), fr, min_per_split)
        texts = len({normalize_text(r.text) for r in records})
        groups = len({str(r.meta["group"]) for r in records if r.meta.get("group") is not None})
        # What keeps the records together: their people (a group holds every record of one person), or repeats.
        why = (f"{groups:,} {'person or group' if groups == 1 else 'people or groups'} holding them"
               if groups else f"{texts:,} distinct {'text' if texts == 1 else 'texts'}")
        raise UserError(
            f"the corpus has {len(records):,} records in {len(keys):,} independent "
            f"{'unit' if len(keys) == 1 else 'units'} ({why}; a person's records, and identical texts, stay in one "
            f"split); splitting {'/'.join(f'{f:g}' for f in fr)} with at least {min_per_split} per split needs at "
            f"least {need} units; add records of more people or change the fractions"
        )

    random.Random(seed).shuffle(keys)
    out: dict[str, list[Record]] = {}
    start = 0
    for name, count in zip(SPLIT_NAMES, counts):
        idx = sorted(i for key in keys[start : start + count] for i in groups[key])
        out[name] = [records[i] for i in idx]
        start += count
    return out
