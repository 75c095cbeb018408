"""PII reconstruction (Lukas et al., IEEE S&P 2023, §III-C and §V-C).

The attacker knows a training sentence with one PII slot masked
("… born 09/25/1969, [MASK], weight …") and wants the value. Algorithm 1 of
the paper:

1. sample |C| continuations of the prefix (top-k = 40);
2. tag PII of the slot's type in each continuation (same Presidio analyser);
   the first tagged value is a candidate;
3. insert every distinct candidate into the masked window and keep the one
   whose window has the lowest perplexity (:func:`~.pii_scoring.choose_min`;
   ties never overwrite each other).

Correct = the chosen candidate's normalised value equals the true one.

Baselines printed beside the result: the **chance level** — the accuracy of
picking a candidate uniformly at random, mean of 1{true ∈ C}/|C| — and the
**non-member floor**: the same attack on non-member sentences (same
generator, never trained on), i.e. what the format alone lets one guess.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal, Sequence

from ..core.present import Block, Table, pct, t
from ..core.masking import mask_pii
from ..data.records import Record
from .base import by_label, PresentContext, AttackContext, AttackResult, Figure, Finding, Policy
from .pii_extraction import MaskedValue, pii_analyzer, usable_labels
from .pii_inventory import (
    IDENTIFYING,
    PiiSlot,
    fill_slot,
    normalise_value,
    pii_slots,
    scrub_others,
    slot_window,
)
from .pii_scoring import AccuracyCell, choose_min, pool, score_windows

if TYPE_CHECKING:
    from ..models.handle import ModelHandle

TAG_CONTEXT_CHARS = 32  # prompt tail kept in front of a continuation when tagging it (cue words such as "SSN")


class PiiReconstructionResult(AttackResult):
    """Lukas et al. PII reconstruction: a masked slot filled from sampled candidates, lowest perplexity wins."""

    kind: Literal["pii_reconstruction"] = "pii_reconstruction"
    title: ClassVar[str] = "PII reconstruction (Lukas et al.)"

    categories: list[AccuracyCell]
    total: AccuracyCell
    examples: list[MaskedValue]  # masked values only
    settings: dict[str, Any] = {}

    def category(self, label: str) -> AccuracyCell:
        return by_label(self.categories + [self.total], label)

    @classmethod
    def details(cls, rows: list[tuple[str, AttackResult]], ctx: PresentContext) -> list[Block]:
        runs = [(m, r) for m, r in rows if isinstance(r, PiiReconstructionResult)]
        labels = list(dict.fromkeys(c.label for _, r in runs for c in r.categories))
        table = [[m, *[t(f"{pct(r.category(lab).accuracy)} (floor {pct(r.category(lab).non_member_accuracy)})")
                       if lab in {c.label for c in r.categories} else "—" for lab in labels]] for m, r in runs]
        return [Table(["model", *labels], table, caption="PII reconstruction accuracy by type")]  # type: ignore[arg-type]

    def headline(self) -> list[Figure]:
        t = self.total
        return [Figure(f"accuracy (best of {self.settings.get('n_candidates', '?')} sampled values)", t.accuracy, "rate",
                       k=t.member_correct, n=t.n_members, floor=t.non_member_accuracy, chance=t.chance)]

    def assess(self, attack: str, control: AttackResult | None, policy: Policy) -> Finding:
        ctrl = control.total if isinstance(control, PiiReconstructionResult) else None
        return self.total.finding(attack, "masked member PII slots reconstructed", ctrl, policy)


def candidates_from_continuations(analyzer: Any, label: str, tails: Sequence[str],
                                  continuations: Sequence[Sequence[str]]) -> list[list[str]]:
    """Per slot, the distinct values of type ``label`` tagged first in each continuation.

    A continuation is tagged with the end of its prompt in front (``tails[i]``),
    so cue words ("SSN", "DOB") help the recognisers; only detections that
    start in the generated part count. Batched over all slots.
    """
    texts = [t + c for t, cs in zip(tails, continuations) for c in cs]
    uniq = list(dict.fromkeys(texts))
    dets = dict(zip(uniq, analyzer.analyze_batch(uniq, [label]))) if uniq else {}
    out: list[list[str]] = []
    for t, cs in zip(tails, continuations):
        seen: dict[str, None] = {}
        for c in cs:
            for d in dets[t + c]:
                if d.label == label and d.start >= len(t):
                    seen.setdefault((t + c)[d.start : d.end], None)
                    break
        out.append(list(seen))
    return out


def _tagged_candidates(analyzer: Any, slots: Sequence[PiiSlot], prompts: Sequence[str],
                       continuations: Sequence[Sequence[str]]) -> list[list[str]]:
    """Candidates for every slot: one batched analyser call per PII type, over both sides."""
    out: list[list[str]] = [[] for _ in slots]
    for label in dict.fromkeys(s.label for s in slots):
        idx = [i for i, s in enumerate(slots) if s.label == label]
        tails = [prompts[i][-TAG_CONTEXT_CHARS:] for i in idx]
        for i, cands in zip(idx, candidates_from_continuations(analyzer, label, tails, [continuations[i] for i in idx])):
            out[i] = cands
    return out


def pii_reconstruction(
    handle: ModelHandle,
    members: Sequence[Record],
    non_members: Sequence[Record],
    analyzer: Any,
    *,
    n_slots: int = 30,
    n_candidates: int = 16,
    top_k: int = 40,
    max_new_tokens: int = 20,
    context_chars: int = 48,
    suffix_chars: int = 24,
    seed: int = 0,
    batch_size: int = 64,
    labels: Sequence[str] = IDENTIFYING,
    scrub_context: bool = False,
    n_examples: int = 5,
) -> PiiReconstructionResult:
    """Reconstruct ``n_slots`` masked member PII slots and as many non-member ones (the floor).

    ``n_candidates`` = |C|, the number of sampled continuations per slot
    (Lukas et al. use 64 or more); windows: ``context_chars`` before the slot
    and the rest of its sentence up to ``suffix_chars`` (:func:`slot_window`).
    ``scrub_context``: replace the record's other PII by ``[LABEL]`` first (the
    paper's SCRUB(SPLIT(S, C)), :func:`scrub_others`).
    """
    from ..models.generation import GenerationSettings, generate

    labels = usable_labels(analyzer, labels)
    sides = [("member", list(members)), ("non_member", list(non_members))]
    work: list[tuple[str, PiiSlot, str, int, int]] = []  # side, slot, attacker's text, slot start, end
    for k, (side, recs) in enumerate(sides):
        for s in pii_slots(recs, n_slots, seed + k, labels):
            text, a, b = scrub_others(recs[s.record], s, labels) if scrub_context else (recs[s.record].text, s.start, s.end)
            work.append((side, s, text, a, b))
    prompts = [text[:a].rstrip() for _, _, text, a, _ in work]
    conts = generate(handle, prompts, GenerationSettings(max_new_tokens=max_new_tokens, greedy=False, top_k=top_k,
                                                          num_return_sequences=n_candidates, seed=seed,
                                                          batch_size=max(1, batch_size // max(1, n_candidates // 4))),
                     desc="PII reconstruction (candidates)") if work else []
    cands = _tagged_candidates(analyzer, [w[1] for w in work], prompts, conts)
    windows = []
    for (side, s, text, a, b), cs in zip(work, cands):
        left, right = slot_window(text, a, b, context_chars, suffix_chars)
        windows.append([fill_slot(left, right, s.value, c) for c in cs])
    nlls = score_windows(handle, windows, desc="PII reconstruction (scoring)")

    cells = {lab: AccuracyCell(label=lab) for lab in labels}
    examples: list[dict[str, Any]] = []
    for (side, s, _, _, _), cs, nll in zip(work, cands, nlls):
        keys = [normalise_value(s.label, c) for c in cs]
        true_in = s.key in keys
        if not cs:
            cells[s.label].add(side, False, False, 0, 0)
            continue
        j, tied = choose_min(nll)
        correct = keys[j] == s.key
        cells[s.label].add(side, correct, true_in, len(cs), tied)
        if side == "member" and correct and len(examples) < n_examples:
            examples.append(MaskedValue(label=s.label, value_masked=mask_pii(s.value, s.label), n_candidates=len(cs)))
    cats = [c for c in cells.values() if c.n_members or c.n_non_members]
    return PiiReconstructionResult(
        categories=cats, total=pool(cats), examples=examples,
        settings={"n_slots": n_slots, "n_candidates": n_candidates, "top_k": top_k, "max_new_tokens": max_new_tokens,
                  "context_chars": context_chars, "suffix_chars": suffix_chars, "seed": seed, "labels": list(labels),
                  "scrub_context": scrub_context},
    )


def run(target: ModelHandle, ctx: AttackContext) -> PiiReconstructionResult:
    s = ctx.settings.pii_sizes
    return pii_reconstruction(target, [r for r in ctx.members if r.kind != "canary"], ctx.non_members, pii_analyzer(ctx), n_slots=s.reconstruction_slots,
                              n_candidates=s.reconstruction_candidates, top_k=s.top_k,
                              max_new_tokens=s.reconstruction_max_new_tokens, context_chars=s.context_chars,
                              suffix_chars=s.suffix_chars, seed=ctx.seed, batch_size=s.batch_size, labels=IDENTIFYING,
                              scrub_context=s.scrub_context)
