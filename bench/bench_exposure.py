"""Canary exposure cost: the trie pass ÷ the previous per-candidate pass.

Both rank the same 15 canaries (the default corpus) among 10,000 candidates
each with the same model (the embedded architecture, random init — speed
does not depend on the weights; the tokenizer is the real one, trained on
the public split, so candidates tokenise as in an audit). The previous
algorithm is the product's per-candidate fallback (``tree=False``, what
non-GPT-2 models use; ``canary_exposure(..., tree=False)``). Runs alternate
old/new in one process and report medians, since the machine is shared.
Checks that ranks and exposures are identical, and prints the speed-up last.

    .venv/bin/python bench/bench_exposure.py [repeats] [n_candidates] [n_canaries]
"""

from __future__ import annotations

import os
import statistics
import sys
import time

os.environ.setdefault("PRIVLEAK_PROGRESS", "0")

import torch

from privleak.attacks.exposure import (
    canary_exposure,
)
from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus
from privleak.models.base import BaseModelSpec, build_model
from privleak.models.handle import ModelHandle
from privleak.models.tokenizer import train_tokenizer


def _timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    n_candidates = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    corpus = generate_corpus(ClinicalCorpusConfig())
    canaries = corpus.canaries[: int(sys.argv[3])] if len(sys.argv) > 3 else corpus.canaries
    spec = BaseModelSpec()
    tok = train_tokenizer([r.text for r in corpus.splits["public"]], spec.vocab_size)
    torch.manual_seed(0)
    handle = ModelHandle(model=build_model(spec, tok.eos_token_id).eval(), tokenizer=tok, max_length=spec.max_length)
    canary_exposure(handle, canaries[:1], n_candidates=200)  # warm-up
    t_old, t_new = [], []
    for r in range(repeats):
        old, t = _timed(canary_exposure, handle, canaries, n_candidates=n_candidates, tree=False)
        t_old.append(t)
        new, t = _timed(canary_exposure, handle, canaries, n_candidates=n_candidates)
        t_new.append(t)
        print(f"run {r + 1}: old {t_old[-1]:.1f} s  new {t_new[-1]:.1f} s", flush=True)
    same_rank = all(a.rank == b.rank and a.exposure == b.exposure for a, b in zip(old, new))
    worst_extra = max(abs(a.exposure_extrapolated - b.exposure_extrapolated) for a, b in zip(old, new))
    print(f"canaries: {len(canaries)} x {n_candidates} candidates, torch threads: {torch.get_num_threads()}, repeats: {repeats}")
    print(f"ranks and exposures identical: {same_rank}  max |Δ extrapolated exposure|: {worst_extra:.2e}")
    print(f"old (per-candidate KV cache): median {statistics.median(t_old):.1f} s  runs {[round(t, 1) for t in t_old]}")
    print(f"new (token trie):             median {statistics.median(t_new):.1f} s  runs {[round(t, 1) for t in t_new]}")
    print(f"exposure speed-up (old / new): {statistics.median(t_old) / statistics.median(t_new):.2f}x")
    if not same_rank:
        sys.exit(1)


if __name__ == "__main__":
    main()
