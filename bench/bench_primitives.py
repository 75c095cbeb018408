"""Speed of the small building blocks whose timings used to be asserted in tests.

Tests check what these functions compute; how fast they are is measured
here, each beside the thing it should beat, measured in the same run:

* σ calibration by PLD for an E2E-like DP-SGD run, in CPU seconds;
* what a PLD grid point costs (time and memory, one step and composed): the figures behind the
  accountants' grid limits (privleak/accountants/analysis/grid.py);
* 10,000 exposure candidates drawn for one canary;
* the default synthetic corpus generated;
* near-duplicate detection over 10,000 records;
* min-k % and min-k %++ over 3,000 texts: vectorised ÷ a per-text loop;
* verbatim-index lookups: a 2,000-text index ÷ a 20-text index (should be ≈ 1);
* whitespace normalisation of a 10 MB text (what every guard check of normalised text does first): the numpy
  path ÷ a loop over the regex's matches (the code it replaced), answers checked identical;
* rendering the HTML report of a results.json (give a run directory as argv[1]; skipped otherwise).
"""

from __future__ import annotations

import os
import random
import sys
import time

os.environ.setdefault("PRIVLEAK_PROGRESS", "0")

import numpy as np

from privleak.attacks.membership.scores import min_k_pp_scores, min_k_scores
from privleak.attacks.scoring import TokenScores
from privleak.core.verbatim_index import _WS, VerbatimIndex, normalise_ws
from privleak.data.canaries import make_canaries, sample_candidates
from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus
from privleak.defenses.dedup import dedup_near
from privleak import accountants as acc


def best_of(fn, repeats: int = 3, clock=time.perf_counter) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = clock()
        fn()
        best = min(best, clock() - t0)
    return best


def pld_grid_costs() -> None:
    """µs and bytes per point of a PLD grid: one step (Gaussian, mixture of Gaussians) and the composition."""
    import tracemalloc

    from privleak.accountants.analysis import group, pld

    def measure(fn):
        # Timed without tracemalloc (which slows allocation several-fold), then traced for the peak.
        t0 = time.process_time()
        out = fn()
        dt = time.process_time() - t0
        tracemalloc.start()
        fn()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return out, dt, peak

    ev = pld.gaussian_event(sample_rate=0.01, noise_multiplier=1.0, steps=1000)
    n = ev.single_points(1e-5)
    one, dt, peak = measure(lambda: ev.build(1e-5))
    print(f"PLD one step, Gaussian: {n:,} points, {dt / n * 1e6:.1f} µs and {peak / n:.0f} B per point")
    gauss_us = dt / n * 1e6
    m = max(pld.composed_points(p, ev.count) for p in pld._pmfs(one))
    _, dt, peak = measure(lambda: one.self_compose(ev.count))
    print(f"PLD composition: {m:,} FFT points, {dt / m * 1e6:.2f} µs and {peak / m:.0f} B per point")
    mix = group.mixture_event(0.1, 0.8, 30, 4)
    n = mix.single_points(5e-3)
    t0 = time.process_time()
    mix.build(5e-3)
    mix_us = (time.process_time() - t0) / n * 1e6
    print(f"PLD one step, mixture of 5 Gaussians: {n:,} points, {mix_us:.0f} µs per point "
          f"({mix_us / gauss_us:.0f}× a Gaussian's; the grid limits assume 50×)")


def main() -> None:
    q = 1024 / 42061
    steps = acc.steps_for(sample_rate=q, epochs=10)
    t = best_of(lambda: acc.calibrate_sigma(target_epsilon=8.0, delta=1 / (2 * 42061), sample_rate=q, steps=steps,
                                            accountant="pld"), 1, time.process_time)
    print(f"PLD σ calibration (q={q:.4f}, T={steps}, ε=8): {t:.2f} CPU s")
    pld_grid_costs()

    canary = make_canaries(repeats=(1,), per_repeat=1, seed=0)[0]
    t = best_of(lambda: sample_candidates(canary, 10_000, np.random.default_rng(0)))
    print(f"10,000 exposure candidates: {t:.3f} s")

    t = best_of(lambda: generate_corpus(ClinicalCorpusConfig()), 1)
    print(f"default synthetic corpus: {t:.1f} s")

    rng = random.Random(0)
    words = [f"w{i}" for i in range(3000)]
    texts = [" ".join(rng.choice(words) for _ in range(25)) for _ in range(10_000)]
    t = best_of(lambda: dedup_near(texts, threshold=0.8), 1)
    print(f"near dedup, 10,000 records: {t:.1f} s")

    g = np.random.default_rng(1)
    lengths = g.integers(1, 200, 3000)
    offsets = np.r_[0, np.cumsum(lengths)]
    n = int(offsets[-1])
    s = TokenScores(logprob=-g.exponential(2, n).astype(np.float32), mu=-g.exponential(2, n).astype(np.float32),
                    var=g.exponential(1, n).astype(np.float32), offsets=offsets)

    def loop() -> None:
        for i in range(len(s)):
            lp = np.sort(s.logprob[s.tokens(i)].astype(np.float64))
            lp[: max(1, int(0.2 * len(lp)))].mean()

    vec = best_of(lambda: (min_k_scores(s, 0.2), min_k_pp_scores(s, 0.2)))
    slow = best_of(loop)
    print(f"min-k% + min-k%++ over 3,000 texts: {vec * 1e3:.1f} ms vectorised; a per-text min-k% loop alone "
          f"{slow * 1e3:.1f} ms; ratio loop ÷ vectorised {slow / vec:.1f}×")

    vocab = [f"t{i}" for i in range(500)]
    small = VerbatimIndex.build([" ".join(rng.choices(vocab, k=60)) for _ in range(20)])
    big = VerbatimIndex.build([" ".join(rng.choices(vocab, k=60)) for _ in range(2000)])
    queries = [" ".join(rng.choices(vocab, k=40)) for _ in range(200)]
    ts, tb = (best_of(lambda idx=idx: [idx.contains(x) for x in queries]) for idx in (small, big))
    print(f"verbatim lookups, 2,000-text ÷ 20-text index ({len(big)} vs {len(small)} windows): {tb / ts:.2f}×")

    def regex_loop(text: str) -> tuple[str, np.ndarray]:  # normalise_ws before 2026-12-06: one match at a time
        out, idx, pos = [], [], 0
        lead = len(text) - len(text.lstrip())
        body = text.strip()
        for m in _WS.finditer(body):
            out.append(body[pos:m.start()])
            idx.extend(range(lead + pos, lead + m.start()))
            out.append(" ")
            idx.append(lead + m.start())
            pos = m.end()
        out.append(body[pos:])
        idx.extend(range(lead + pos, lead + len(body)))
        return "".join(out), np.asarray(idx, dtype=np.int64)

    spaces = [" ", " ", " ", "  ", "\n", " \n\t", "\u00a0"]
    text = "".join(rng.choice(vocab) + rng.choice(spaces) for _ in range(1_700_000))[:10_000_000]
    a, b = normalise_ws(text), regex_loop(text)
    assert a[0] == b[0] and np.array_equal(a[1], b[1])
    tn, tl = best_of(lambda: normalise_ws(text)), best_of(lambda: regex_loop(text))
    print(f"whitespace normalisation of {len(text) / 1e6:.0f} MB: numpy {tn:.2f} s, regex loop {tl:.2f} s; "
          f"ratio loop ÷ numpy {tl / tn:.1f}× (identical)")

    if len(sys.argv) > 1:
        from privleak.report.html import render_report
        from privleak.report.schema import load_results

        results = load_results(sys.argv[1])
        render_report(results, sys.argv[1])  # warm imports
        t = best_of(lambda: render_report(results, sys.argv[1]), 2)
        print(f"report render ({len(results.arms)} arms): {t:.2f} s")


if __name__ == "__main__":
    main()
