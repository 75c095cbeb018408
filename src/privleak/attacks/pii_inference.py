"""PII inference (Lukas et al., IEEE S&P 2023, §III-D and §V-D).

Like reconstruction, but the attacker already holds a candidate set C of
size |C| that contains the true value: the true value plus |C| − 1 values
of the same type drawn from the *population* split (same generator, never
trained on). Every candidate is inserted into the masked window and the
lowest-perplexity one is chosen (:func:`~.pii_scoring.choose_min`). The
chance level is 1/|C|.

Distractors are rewritten in the true value's format
(:func:`~.pii_inventory.match_format`: same digit layout for SSN / PHONE /
MRN, same date format for DOB), so the set cannot be solved from formatting.
The smaller candidate sets are nested in the largest (the true value plus
the first |C| − 1 distractors), so every window is scored once, and each set
is put in its own seeded random order, so the tie rule (first in order)
favours no one. The **non-member floor** runs the same attack on
non-member sentences: what the model guesses about people it never saw.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Sequence

import numpy as np
from pydantic import computed_field

from ..core.typed import Typed
from ..data.records import Record
from .base import AttackContext, AttackResult, Figure, Finding, Policy
from .pii_inventory import (
    IDENTIFYING,
    PiiSlot,
    build_inventory,
    fill_slot,
    match_format,
    normalise_value,
    pii_slots,
    scrub_others,
    slot_window,
)
from .pii_scoring import AccuracyCell, choose_min, pool, score_windows

if TYPE_CHECKING:
    from ..models.handle import ModelHandle


class InferenceSize(Typed):
    size: int  # |C| asked for
    categories: list[AccuracyCell]
    total: AccuracyCell

    @computed_field
    @property
    def chance_nominal(self) -> float:
        return 1.0 / self.size


class PiiInferenceResult(AttackResult):
    """Lukas et al. PII inference: the true value chosen among |C| candidates of its type by perplexity."""

    kind: Literal["pii_inference"] = "pii_inference"
    title: ClassVar[str] = "PII inference (Lukas et al.)"

    sizes: list[InferenceSize]
    settings: dict[str, Any] = {}

    def size(self, n: int) -> InferenceSize:
        for s in self.sizes:
            if s.size == n:
                return s
        raise KeyError(n)

    def headline(self) -> list[Figure]:
        return [Figure(f"accuracy (true value among {s.size} candidates)", s.total.accuracy, "rate", k=s.total.member_correct, n=s.total.n_members,
                       floor=s.total.non_member_accuracy, chance=s.total.chance) for s in self.sizes]

    def assess(self, attack: str, control: AttackResult | None, policy: Policy) -> Finding:
        """Judged on the smallest candidate set (the most examples per guess above chance)."""
        if not self.sizes:
            return Finding(attack, None, "")
        s = self.sizes[0]
        ctrl = None
        if isinstance(control, PiiInferenceResult):
            ctrl = next((c.total for c in control.sizes if c.size == s.size), None)
        return s.total.finding(attack, f"member PII values picked out of {s.size} candidates", ctrl, policy)


def distractors(slot: PiiSlot, pool_values: Sequence[str], n: int, rng: random.Random) -> list[str]:
    """Up to ``n`` population values of the slot's type, in its format, distinct and ≠ the true value."""
    order = list(range(len(pool_values)))
    rng.shuffle(order)
    keys = {slot.key}
    out: list[str] = []
    for i in order:
        if len(out) >= n:
            break
        v = match_format(slot.label, slot.value, pool_values[i])
        k = normalise_value(slot.label, v)
        if k and k not in keys:
            keys.add(k)
            out.append(v)
    return out


def pii_inference(
    handle: ModelHandle,
    members: Sequence[Record],
    non_members: Sequence[Record],
    population: Sequence[Record],
    *,
    sizes: Sequence[int] = (10, 100),
    n_slots: int = 12,
    context_chars: int = 48,
    suffix_chars: int = 24,
    seed: int = 0,
    labels: Sequence[str] = IDENTIFYING,
    scrub_context: bool = False,
) -> PiiInferenceResult:
    """Accuracy of choosing the true value among |C| ∈ ``sizes`` candidates, members vs non-members.

    ``scrub_context``: the record's other PII replaced by ``[LABEL]`` first
    (the paper's SCRUB(SPLIT(S, C)), :func:`scrub_others`).
    """
    sizes = sorted({int(s) for s in sizes if int(s) >= 2})
    inv = build_inventory(population, "population", labels)
    pool_by_label: dict[str, list[str]] = {}
    for e in inv.entries.values():
        pool_by_label.setdefault(e.label, []).append(e.value)
    labels = [lab for lab in labels if pool_by_label.get(lab)]  # no population values: no candidate set
    rng = random.Random(seed)
    work: list[tuple[str, PiiSlot, list[str], list[list[int]]]] = []  # side, slot, [true]+distractors, per-size order
    windows: list[list[str]] = []
    for k, (side, recs) in enumerate((("member", list(members)), ("non_member", list(non_members)))):
        for s in pii_slots(recs, n_slots, seed + k, labels):
            cand = [s.value] + distractors(s, pool_by_label[s.label], max(sizes) - 1, rng)
            orders = []
            for size in sizes:
                idx = list(range(min(size, len(cand))))
                rng.shuffle(idx)
                orders.append(idx)
            text, a, b = scrub_others(recs[s.record], s, labels) if scrub_context else (recs[s.record].text, s.start, s.end)
            left, right = slot_window(text, a, b, context_chars, suffix_chars)
            work.append((side, s, cand, orders))
            windows.append([fill_slot(left, right, s.value, c) for c in cand])
    nlls = score_windows(handle, windows, desc="PII inference (scoring)")
    out = []
    for si, size in enumerate(sizes):
        cells = {lab: AccuracyCell(label=lab) for lab in labels}
        for (side, s, cand, orders), nll in zip(work, nlls):
            order = orders[si]
            j, tied = choose_min(np.asarray(nll)[order])
            cells[s.label].add(side, order[j] == 0, True, len(order), tied)
        cats = [c for c in cells.values() if c.n_members or c.n_non_members]
        out.append(InferenceSize(size=size, categories=cats, total=pool(cats)))
    return PiiInferenceResult(sizes=out, settings={"sizes": sizes, "n_slots": n_slots, "context_chars": context_chars,
                                                   "suffix_chars": suffix_chars, "seed": seed, "labels": list(labels),
                                                   "scrub_context": scrub_context})


def run(target: ModelHandle, ctx: AttackContext) -> PiiInferenceResult:
    s = ctx.settings.pii_sizes
    return pii_inference(target, [r for r in ctx.members if r.kind != "canary"], ctx.non_members, ctx.population, sizes=s.inference_sizes,
                         n_slots=s.inference_slots, context_chars=s.context_chars, suffix_chars=s.suffix_chars,
                         seed=ctx.seed, labels=IDENTIFYING, scrub_context=s.scrub_context)
