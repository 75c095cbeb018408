"""Ground-truth PII for the Lukas et al. (2023) attacks: values, duplicates, slots.

Shared by :mod:`.pii_extraction`, :mod:`.pii_reconstruction` and
:mod:`.pii_inference`. Value normalisation and exact-value matching are
:mod:`.phi_extraction`'s (:func:`normalise_value`, :func:`find_leaks`), so
every PII attack counts a leak the same way: the full value, normalised
(case and whitespace; digits only for SSN/PHONE/MRN; dates as dates), never a
single name token or a substring.

* :func:`build_inventory`: the distinct (label, value) pairs of one side
  (members, non-members, population) with the number of records that carry
  each one — its duplicate count in training (Lukas et al. §VI-B, "duplicated
  PII leaks more"; in the synthetic corpus only planted canaries repeat).
* :func:`pii_slots`: masked-slot targets for reconstruction and inference —
  one per (record, label), round-robin over labels after a seeded shuffle.
* :func:`slot_window`: the local window scored around a slot, with every
  occurrence of the true value in it replaced by the candidate.
* :func:`match_format`: a distractor rewritten in the true value's format, so
  the candidate set cannot be solved from formatting alone.
"""

from __future__ import annotations

import datetime as _dt
import random
import re
from dataclasses import dataclass
from typing import Sequence

from ..core.normalise import dates_in as _dates
from ..core.normalise import normalise_value
from ..data.records import Record
from .phi_extraction import IDENTIFYING, PhiValue, phi_values

__all__ = [
    "IDENTIFYING",
    "InventoryEntry",
    "PiiInventory",
    "PiiSlot",
    "build_inventory",
    "duplicate_bucket",
    "fill_slot",
    "match_format",
    "normalise_value",
    "pii_slots",
    "scrub_others",
    "slot_window",
]


@dataclass
class InventoryEntry:
    label: str
    key: str  # normalise_value(label, value)
    value: str  # first surface form seen
    count: int  # records of this side that carry the value (duplicates in training for members)


@dataclass
class PiiInventory:
    """Distinct PII values of one side, keyed by (label, normalised key)."""

    side: str
    entries: dict[tuple[str, str], InventoryEntry]

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, item: tuple[str, str]) -> bool:
        return item in self.entries

    def labels(self) -> list[str]:
        return [lab for lab in IDENTIFYING if any(k[0] == lab for k in self.entries)] + sorted(
            {k[0] for k in self.entries} - set(IDENTIFYING))

    def values(self, label: str | None = None) -> list[PhiValue]:
        """As :class:`PhiValue` (owner = position in this inventory) for :func:`find_leaks`."""
        return [PhiValue(e.label, e.value, e.key, i, self.side) for i, e in enumerate(self.entries.values())
                if label is None or e.label == label]

    def count(self, label: str, key: str) -> int:
        e = self.entries.get((label, key))
        return 0 if e is None else e.count


def build_inventory(records: Sequence[Record], side: str, labels: Sequence[str] = IDENTIFYING) -> PiiInventory:
    """Distinct values over ``records``' ground-truth spans; ``count`` = records carrying the value.

    Every record counts, canary copies included: a secret planted 16 times
    has count 16, which is what the extraction-vs-duplicates curve needs.
    """
    entries: dict[tuple[str, str], InventoryEntry] = {}
    for v in phi_values(records, side, labels):  # distinct per record already
        e = entries.get((v.label, v.key))
        if e is None:
            entries[(v.label, v.key)] = InventoryEntry(v.label, v.key, v.value, 1)
        else:
            e.count += 1
    return PiiInventory(side, entries)


_BUCKETS = ((1, 1, "1"), (2, 2, "2"), (3, 4, "3-4"), (5, 8, "5-8"), (9, 16, "9-16"), (17, 10**12, ">16"))


def duplicate_bucket(count: int) -> str:
    """Power-of-two buckets of a duplicate count: 1, 2, 3-4, 5-8, 9-16, >16."""
    for lo, hi, name in _BUCKETS:
        if lo <= count <= hi:
            return name
    return "0"


def bucket_order(name: str) -> int:
    return [b[2] for b in _BUCKETS].index(name) if name in [b[2] for b in _BUCKETS] else -1


# ----------------------------------------------------------------------------
# masked slots


@dataclass(frozen=True)
class PiiSlot:
    record: int  # index into the side's record list
    label: str
    start: int
    end: int
    value: str
    key: str


def pii_slots(records: Sequence[Record], n: int | None, seed: int, labels: Sequence[str] = IDENTIFYING) -> list[PiiSlot]:
    """Up to ``n`` slots (all if None): one per (record, label), balanced over labels.

    Canaries are left out (the canary attacks cover them); a record's first
    span of a label is its slot. Slots are shuffled with ``seed`` and then
    taken round-robin over labels, so a small ``n`` still covers every type.
    """
    per_label: dict[str, list[PiiSlot]] = {}
    for i, r in enumerate(records):
        if r.kind == "canary" or not r.pii:
            continue
        seen: set[str] = set()
        for s in sorted(r.pii, key=lambda s: s.start):
            if s.label not in labels or s.label in seen:
                continue
            value = s.value(r.text)
            key = normalise_value(s.label, value)
            if not key:
                continue
            seen.add(s.label)
            per_label.setdefault(s.label, []).append(PiiSlot(i, s.label, s.start, s.end, value, key))
    rng = random.Random(seed)
    queues = []
    for lab in labels:
        q = per_label.get(lab, [])
        rng.shuffle(q)
        queues.append(q)
    out: list[PiiSlot] = []
    depth = 0
    limit = sum(len(q) for q in queues) if n is None else min(n, sum(len(q) for q in queues))
    while len(out) < limit:
        for q in queues:
            if depth < len(q) and len(out) < limit:
                out.append(q[depth])
        depth += 1
    return out


_SENTENCE_END = re.compile(r"[.;!?](?=\s|$)")


def slot_window(text: str, start: int, end: int, context_chars: int, suffix_chars: int) -> tuple[str, str]:
    """(left, right) context of ``text[start:end]`` to score candidates in.

    left: up to ``context_chars`` characters before the slot, cut at a word
    boundary; right: the rest of the sentence after the slot, at most
    ``suffix_chars`` characters (cut at a word boundary). Scoring this local
    window, not the whole record, keeps the cost per candidate small; the
    left context holds what usually identifies the person (the name before
    an MRN or a date of birth).
    """
    lo = max(0, start - max(0, context_chars))
    if lo > 0:
        sp = text.find(" ", lo, start)
        lo = sp + 1 if sp >= 0 else lo
    m = _SENTENCE_END.search(text, end)
    hi = m.end() if m else len(text)
    if hi - end > suffix_chars:
        cut = text.rfind(" ", end, end + max(0, suffix_chars) + 1)
        hi = cut if cut > end else end + max(0, suffix_chars)
    return text[lo:start], text[end:hi]


def scrub_others(record: Record, slot: PiiSlot, labels: Sequence[str] = IDENTIFYING) -> tuple[str, int, int]:
    """The record with every *other* PII span of ``labels`` replaced by ``[LABEL]``, and the slot's new offsets.

    Lukas et al.'s reconstruction and inference games hand the attacker
    SCRUB(SPLIT(S, C)): the target is masked and the sentence's other PII is
    scrubbed too (Algorithms 5 and 7). Off by default here (the attacker then
    knows the rest of the note, a stronger adversary); on, it is the paper's game.
    """
    text, start, end = record.text, slot.start, slot.end
    for s in sorted(record.pii or [], key=lambda s: s.start, reverse=True):
        if s.label not in labels or (s.start < slot.end and slot.start < s.end):
            continue  # not scrubbed, or the slot itself
        tag = f"[{s.label}]"
        text = text[: s.start] + tag + text[s.end :]
        if s.start < start:
            shift = len(tag) - (s.end - s.start)
            start, end = start + shift, end + shift
    return text, start, end


def fill_slot(left: str, right: str, true_value: str, candidate: str) -> str:
    """The window with ``candidate`` in the slot — and in place of any other
    occurrence of the true value in the window, which would give it away."""
    if true_value:
        left = left.replace(true_value, candidate)
        right = right.replace(true_value, candidate)
    return left + candidate + right


# ----------------------------------------------------------------------------
# distractors in the true value's format


def _refill_digits(template: str, digits: str) -> str | None:
    slots = sum(ch.isdigit() for ch in template)
    if slots != len(digits):
        return None
    it = iter(digits)
    return "".join(next(it) if ch.isdigit() else ch for ch in template)


def _date_of(value: str) -> _dt.date | None:
    d = _dates(value)
    if len(d) != 1:
        return None
    y, m, dd = (int(x) for x in next(iter(d)).split("-"))
    try:
        return _dt.date(y, m, dd)
    except ValueError:
        return None


def match_format(label: str, template: str, other: str) -> str:
    """``other``'s identity in ``template``'s surface format where that is well defined.

    SSN / PHONE / MRN: ``other``'s digits poured into ``template``'s digit
    slots (phone: the 10 national digits, keeping a ``+1`` if the template
    has one); DOB: ``other``'s date written ISO or US like ``template``.
    Anything else (names, e-mails, addresses) is returned unchanged.
    """
    if label in ("SSN", "MRN"):
        out = _refill_digits(template, "".join(ch for ch in other if ch.isdigit()))
        return other if out is None else out
    if label == "PHONE":
        digits = normalise_value("PHONE", other)
        tdig = [i for i, ch in enumerate(template) if ch.isdigit()]
        if len(digits) != 10 or len(tdig) not in (10, 11):
            return other
        chars = list(template)
        for pos, d in zip(tdig[-10:], digits):
            chars[pos] = d
        return "".join(chars)
    if label == "DOB":
        d = _date_of(other)
        if d is None or _date_of(template) is None:
            return other
        return d.strftime("%m/%d/%Y") if "/" in template else d.isoformat()
    return other
