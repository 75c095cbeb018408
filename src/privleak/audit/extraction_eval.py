"""The extraction attacks on one model: prefix, canary, sampling and PHI prompts.

Each attack is its own module (``attacks/extraction.py``,
``attacks/phi_extraction.py``); this stage runs them with the run's splits
and writes one JSON document whose texts are masked: example completions
that reproduce training text would otherwise put raw PII into
``results.json``.
"""

from __future__ import annotations

import time
from typing import Any

from ..attacks.extraction import (
    canary_extraction,
    prefix_extraction,
    sampling_extraction,
)
from ..attacks.phi_extraction import phi_extraction
from ..core.masking import PiiMasker
from ..core.verbatim_index import VerbatimIndex
from ..data.canaries import Canary, derive_seed, make_canaries
from ..data.records import Record
from ..models.handle import ModelHandle


def mask_strings(obj: Any, masker: PiiMasker) -> Any:
    """Every string inside ``obj`` with known and pattern-shaped PII masked."""
    if isinstance(obj, str):
        return masker.mask(obj)
    if isinstance(obj, list):
        return [mask_strings(x, masker) for x in obj]
    if isinstance(obj, dict):
        return {k: mask_strings(v, masker) for k, v in obj.items()}
    return obj


def run_extraction(
    handle: ModelHandle,
    reference: ModelHandle | None,
    splits: dict[str, list[Record]],
    canaries: list[Canary],
    *,
    seed: int,
    n_samples: int,
    prefix_records: int,
    phi_records: int,
    masker: PiiMasker,
) -> dict[str, Any]:
    """``{"results": {attack: result}, "seconds": {attack: wall time}}``, texts masked."""
    members, non_members = splits["members"], splits["non_members"]
    out: dict[str, Any] = {}
    seconds: dict[str, float] = {}

    t = time.perf_counter()
    out["prefix"] = prefix_extraction(handle, members, non_members, max_records=prefix_records).to_json()
    seconds["prefix"] = time.perf_counter() - t

    if canaries:
        t = time.perf_counter()
        # Control canaries from the same frame and space, never planted: their
        # extraction rate is the floor for the planted ones.
        controls = make_canaries(repeats=(1,), per_repeat=5, seed=derive_seed(seed, "control-canaries"))
        planted = {c.text() for c in canaries}
        controls = [c for c in controls if c.text() not in planted]
        out["canaries"] = canary_extraction(handle, canaries, seed=seed, controls=controls).to_json()
        seconds["canaries"] = time.perf_counter() - t

    t = time.perf_counter()
    member_idx = VerbatimIndex.build([r.text for r in members])
    non_member_idx = VerbatimIndex.build([r.text for r in non_members])
    public_idx = VerbatimIndex.build([r.text for r in splits["public"]]) if splits["public"] else None
    out["sampling"] = sampling_extraction(
        handle, member_idx, non_member_idx, reference=reference, n_samples=n_samples, seed=seed, public_index=public_idx
    ).to_json()
    seconds["sampling"] = time.perf_counter() - t

    if any(r.has_pii for r in members):
        t = time.perf_counter()
        out["phi_prompts"] = phi_extraction(handle, members, non_members, n_records=phi_records, seed=seed).to_json()
        seconds["phi_prompts"] = time.perf_counter() - t

    # Timings are not results: same config + seed must give the same results.json.
    for part in out.values():
        part.pop("seconds", None)
    return {"results": mask_strings(out, masker), "seconds": {k: round(v, 2) for k, v in seconds.items()}}
