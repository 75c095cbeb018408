"""The three PII attacks of Lukas et al. (IEEE S&P 2023) on one model.

One entry point for the pipeline, :func:`run_pii_attacks`: extraction
(tagged PII in samples, base-model PII subtracted), reconstruction (masked
slot filled from sampled candidates) and inference (masked slot, candidate
set of size |C|), each with its baselines — the chance level and the
non-member floor — next to the result. The output is JSON-able and carries
counts and masked example values only, never a raw PII string.

:func:`base_emissions` tags what the base model emits unprompted; compute it
once per audit and pass it to every arm (the same base every time).

:func:`pii_table_rows` / :func:`pii_summary_cells` turn one arm's output into
console-table rows where every number stands beside its baselines.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Any, Sequence

from ..attacks.pii_extraction import TaggedSamples, pii_extraction, sample_and_tag
from ..attacks.pii_inference import pii_inference
from ..attacks.pii_inventory import IDENTIFYING
from ..attacks.pii_reconstruction import pii_reconstruction
from ..data.records import Record
from ..models.handle import ModelHandle


@dataclass(frozen=True)
class PiiAttackSettings:
    """Sizes of the three attacks. ``quick()`` fits ≈ 12 s per small CPU model; ``full()`` is closer to the paper."""

    extraction: bool = True
    reconstruction: bool = True
    inference: bool = True
    # extraction: M samples of max_new_tokens from each prompt ("" = unconditioned, Lukas et al.)
    extraction_samples: int = 200
    extraction_max_new_tokens: int = 64
    extraction_prompts: tuple[str, ...] = ("",)
    top_k: int = 40  # Lukas et al. sample with top-k = 40
    # reconstruction: member slots (as many non-member slots for the floor), |C| sampled continuations each
    reconstruction_slots: int = 21
    reconstruction_candidates: int = 16
    reconstruction_max_new_tokens: int = 16
    # inference: member slots (and as many non-member), candidate set sizes (nested)
    inference_slots: int = 70  # 10 per identifying type: scoring is cheap, and 21 left ±20 % CIs
    inference_sizes: tuple[int, ...] = (10, 100)
    # scored window around a slot: characters of left context; rest of the sentence up to suffix_chars
    context_chars: int = 32
    suffix_chars: int = 16
    # the paper's game scrubs the sentence's other PII ([LABEL]); off = the attacker knows the rest of the note
    scrub_context: bool = False
    labels: tuple[str, ...] = IDENTIFYING
    batch_size: int = 64

    @classmethod
    def quick(cls) -> "PiiAttackSettings":
        return cls()

    @classmethod
    def full(cls) -> "PiiAttackSettings":
        return cls(extraction_samples=1000, extraction_max_new_tokens=96, reconstruction_slots=140,
                   reconstruction_candidates=64, reconstruction_max_new_tokens=24, inference_slots=140,
                   context_chars=160, suffix_chars=64)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


def base_emissions(base: ModelHandle, analyzer: Any, settings: PiiAttackSettings, *, seed: int) -> TaggedSamples:
    """PII the base model emits when sampled exactly like the arms (once per audit)."""
    s = settings
    return sample_and_tag(base, analyzer, s.extraction_samples, s.extraction_prompts, s.extraction_max_new_tokens,
                          s.top_k, seed, s.batch_size, s.labels)


def run_pii_attacks(
    handle: ModelHandle,
    base: ModelHandle | TaggedSamples | None,
    splits: dict[str, list[Record]],
    analyzer: Any,
    *,
    seed: int,
    settings: PiiAttackSettings = PiiAttackSettings(),
    samples: Sequence[str] | None = None,
) -> dict[str, Any]:
    """``{"results": {"extraction", "reconstruction", "inference"}, "seconds": {...}}`` for one model.

    ``base``: the base model, or its :func:`base_emissions` (preferred: one
    sampling pass per audit), or None (no baseline subtraction — e.g. when
    ``handle`` *is* the base model). ``splits`` needs members, non_members and
    population. ``samples``: pre-generated samples for extraction (else
    ``settings.extraction_samples`` are drawn). Attacks whose inputs are
    missing (no PII in the members) are left out. Same inputs and seed give
    the same results; timings are kept apart under "seconds".
    """
    s = settings
    members, non_members = splits["members"], splits["non_members"]
    population = splits.get("population", [])
    out: dict[str, Any] = {}
    seconds: dict[str, float] = {}
    if not any(r.has_pii for r in members):
        return {"results": out, "seconds": seconds}
    if s.extraction:
        t = time.perf_counter()
        out["extraction"] = pii_extraction(
            handle, members, non_members, analyzer, base=base, samples=samples, n_samples=s.extraction_samples,
            prompts=s.extraction_prompts, max_new_tokens=s.extraction_max_new_tokens, top_k=s.top_k,
            seed=seed, batch_size=s.batch_size, labels=s.labels).to_json()
        seconds["extraction"] = time.perf_counter() - t
    if s.reconstruction:
        t = time.perf_counter()
        out["reconstruction"] = pii_reconstruction(
            handle, members, non_members, analyzer, n_slots=s.reconstruction_slots,
            n_candidates=s.reconstruction_candidates, top_k=s.top_k, max_new_tokens=s.reconstruction_max_new_tokens,
            context_chars=s.context_chars, suffix_chars=s.suffix_chars, seed=seed, batch_size=s.batch_size,
            labels=s.labels, scrub_context=s.scrub_context).to_json()
        seconds["reconstruction"] = time.perf_counter() - t
    if s.inference and population:
        t = time.perf_counter()
        out["inference"] = pii_inference(
            handle, members, non_members, population, sizes=s.inference_sizes, n_slots=s.inference_slots,
            context_chars=s.context_chars, suffix_chars=s.suffix_chars, seed=seed, labels=s.labels,
            scrub_context=s.scrub_context).to_json()
        seconds["inference"] = time.perf_counter() - t
    for part in out.values():  # timings are not results (same config + seed → same results.json)
        part.pop("seconds", None)
    return {"results": out, "seconds": {k: round(v, 2) for k, v in seconds.items()}}


# ----------------------------------------------------------------------------
# console rows: every figure beside its chance level and non-member floor


#: "chance" for extraction is ≈0: sampling an exact high-entropy value by luck; its floor is
#: the non-member recall/precision. For reconstruction it is the random pick among the
#: sampled candidates; for inference 1/|C|.
PII_TABLE_COLUMNS: tuple[str, ...] = ("PII attack", "member result", "chance", "non-member floor", "n")


def _pct(x: Any) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * float(x):.1f}%"


def pii_table_rows(pii: dict[str, Any]) -> list[tuple[str, ...]]:
    """Rows (``PII_TABLE_COLUMNS``) for one arm's ``run_pii_attacks(...)["results"]``."""
    rows: list[tuple[str, ...]] = []
    ex = pii.get("extraction")
    if ex:
        t = ex["total"]
        sub = "base subtracted" if ex.get("baseline_subtracted") else "no base subtraction"
        rows.append((f"extraction recall ({sub})", _pct(t["recall"]), "≈0", _pct(t["recall_floor"]),
                     str(t["n_member_values"])))
        rows.append(("extraction precision", _pct(t["precision"]), "≈0", _pct(t["precision_floor"]), str(t["n_tagged"])))
        for b in ex.get("by_duplicates", []):
            if b["bucket"] != "1":
                rows.append((f"  recall, PII seen {b['bucket']}×", _pct(b["recall"]), "≈0", "—", str(b["n_values"])))
    rc = pii.get("reconstruction")
    if rc:
        t = rc["total"]
        rows.append((f"reconstruction (|C|={rc['settings']['n_candidates']} samples)", _pct(t["accuracy"]),
                     _pct(t["chance"]), _pct(t["non_member_accuracy"]), str(t["n_members"])))
    inf = pii.get("inference")
    if inf:
        for size in inf["sizes"]:
            t = size["total"]
            rows.append((f"inference |C|={size['size']}", _pct(t["accuracy"]), _pct(t["chance"]),
                         _pct(t["non_member_accuracy"]), str(t["n_members"])))
    return rows


PII_SUMMARY_COLUMNS: tuple[str, ...] = ("PII extraction recall", "PII reconstruction", "PII inference |C|=10",
                                        "PII inference |C|=100")


def pii_summary_cells(pii: dict[str, Any]) -> dict[str, str]:
    """One cell per ``PII_SUMMARY_COLUMNS`` for a one-row-per-arm table: ``"result (chance c · floor f)"``."""
    out = {c: "—" for c in PII_SUMMARY_COLUMNS}
    ex = pii.get("extraction")
    if ex:
        t = ex["total"]
        out["PII extraction recall"] = f"{_pct(t['recall'])} (floor {_pct(t['recall_floor'])})"
    rc = pii.get("reconstruction")
    if rc:
        t = rc["total"]
        out["PII reconstruction"] = (f"{_pct(t['accuracy'])} (chance {_pct(t['chance'])} · "
                                     f"floor {_pct(t['non_member_accuracy'])})")
    for size in (pii.get("inference") or {}).get("sizes", []):
        col = f"PII inference |C|={size['size']}"
        if col in out:
            t = size["total"]
            out[col] = f"{_pct(t['accuracy'])} (chance {_pct(t['chance'])} · floor {_pct(t['non_member_accuracy'])})"
    return out


__all__ = ["PII_SUMMARY_COLUMNS", "PII_TABLE_COLUMNS", "PiiAttackSettings", "base_emissions", "pii_summary_cells",
           "pii_table_rows", "run_pii_attacks"]
