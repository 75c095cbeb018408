"""Output guard: catch rate, check latency, index build time and memory, all in one run.

    python bench/bench_guard.py [--records 100000] [--threshold 50] [--reps 30] [--naive-windows 100] [--seed 0]

On a synthetic clinical corpus of ``--records`` member records (canaries
included):

* index build: wall time, then peak traced memory (tracemalloc: Python +
  numpy allocations, measured on a second, untimed build) and the max-RSS
  growth; index size on disk; load time (verbatim hashes memory-mapped,
  tripwire keys parsed from JSON);
* catch rate: 300 exact member spans of ``threshold``–3×``threshold``
  characters, each inside random non-member text, must all be blocked;
* latency for one 1 kB output (non-member text, no hit), medians over
  ``--reps`` interleaved repetitions:
  - verbatim check alone (``VerbatimIndex.spans``) vs a naive scan of the
    corpus (every 50-character window of the output searched in the joined,
    normalised corpus with ``str.__contains__``). The naive scan costs the
    same per window; ``--naive-windows`` of them are timed and scaled to the
    output's window count (``--naive-windows 0``: time all of them);
  - the full check (PII + verbatim + tripwire) vs Presidio alone (the
    project's analyser, same settings, same text);
  - the verbatim check against a 1,000-record index (lookup cost must not
    grow with the corpus).

The last line carries the ratios measured in this run.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
os.environ.setdefault("PRIVLEAK_PROGRESS", "0")

from privleak.core.verbatim_index import _WS, VerbatimIndex
from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus
from privleak.defenses.guard import Guard, GuardPolicy, inventory_from_records


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _median_time(fn, reps: int) -> float:
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def _one_kb(texts: list[str], rng: random.Random) -> str:
    out = ""
    while len(out) < 1000:
        out += rng.choice(texts) + " "
    return out[:1000]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--threshold", type=int, default=50)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--naive-windows", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)

    t = time.perf_counter()
    corpus = generate_corpus(ClinicalCorpusConfig(n_public=10, n_members=args.records, n_non_members=2000,
                                                  n_population=10, seed=args.seed))
    members, non_members = corpus.splits["members"], corpus.splits["non_members"]
    texts = [r.text for r in members]
    print(f"corpus: {len(texts)} member records ({sum(map(len, texts)) / 1e6:.1f} M chars), "
          f"generated in {time.perf_counter() - t:.1f} s")

    inventory = inventory_from_records(members)
    rss0 = _rss_mb()
    t = time.perf_counter()
    guard = Guard.build(texts, canaries=corpus.canaries, inventory=inventory, threshold=args.threshold)
    build_s = time.perf_counter() - t
    rss1 = _rss_mb()
    # Peak memory from a second build under tracemalloc (which slows Python code several-fold,
    # so the timed build above runs without it).
    tracemalloc.start()
    Guard.build(texts, canaries=corpus.canaries, inventory=inventory, threshold=args.threshold)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    with tempfile.TemporaryDirectory() as tmp:
        guard.save(Path(tmp) / "idx")
        size = sum(f.stat().st_size for f in (Path(tmp) / "idx").iterdir())
        t = time.perf_counter()
        guard = Guard.load(Path(tmp) / "idx", mmap=True)
        load_s = time.perf_counter() - t
        guard.warm_up()
        print(f"index build: {build_s:.2f} s, peak traced memory {peak / 2**20:.0f} MiB, max-RSS growth "
              f"{rss1 - rss0:.0f} MiB; {len(guard.index):,} windows, {guard.meta['n_tripwire_keys']} tripwire keys, "
              f"{size / 2**20:.0f} MiB on disk; mmap load {1000 * load_s:.1f} ms")

        # catch rate: exact member spans inside random non-member text
        nm = [r.text for r in non_members]
        caught = 0
        n_trials = 300
        verbatim_only = Guard(guard.index, guard.tripwire, GuardPolicy(pii="off", canary="off"), guard.scan)
        for _ in range(n_trials):
            doc = _WS.sub(" ", rng.choice(texts).strip())
            while len(doc) < args.threshold:
                doc = _WS.sub(" ", rng.choice(texts).strip())
            length = rng.randint(args.threshold, min(len(doc), 3 * args.threshold))
            s = rng.randint(0, len(doc) - length)
            span = doc[s : s + length]
            left, right = rng.choice(nm)[: rng.randint(0, 200)], rng.choice(nm)[: rng.randint(0, 200)]
            v = verbatim_only.check(left + span + right)
            caught += any(f.reason == "verbatim" and f.start <= len(left) and f.end >= len(left) + len(span)
                          for f in v.findings)
        print(f"catch rate: {caught}/{n_trials} member spans of {args.threshold}-{3 * args.threshold} chars in random text")

        # latency on one benign 1 kB output
        # non-member texts with no member window (generic notes share boilerplate sentences with members)
        clean = [t for t in nm if not guard.index.spans(t)]
        q = _one_kb(clean, rng)
        assert not guard.index.spans(q), "benign query hit the index; pick another seed"
        small = VerbatimIndex.build(texts[:1000], window=args.threshold)
        analyzer = guard._analyzer()
        joined = "\x00".join(_WS.sub(" ", t.strip()) for t in texts)
        qn = _WS.sub(" ", q.strip())
        windows = [qn[i : i + args.threshold] for i in range(len(qn) - args.threshold + 1)]
        sample = windows if args.naive_windows <= 0 else rng.sample(windows, min(args.naive_windows, len(windows)))
        t = time.perf_counter()
        hits = sum(w in joined for w in sample)
        naive_s = (time.perf_counter() - t) * len(windows) / len(sample)
        assert hits == 0
        for _ in range(3):  # warm-up
            guard.check(q), analyzer.analyze(q)
        v_t, s_t, f_t, p_t = [], [], [], []
        for _ in range(args.reps):  # interleaved: machine load hits every arm alike
            # the cheap verbatim lookups: median of 5 back-to-back calls (caches warm, as in a busy service)
            s_t.append(_median_time(lambda: small.spans(q), 5))
            v_t.append(_median_time(lambda: guard.index.spans(q), 5))
            f_t.append(_median_time(lambda: guard.check(q), 1))
            p_t.append(_median_time(lambda: analyzer.analyze(q), 1))
        v, s_, f, p = (statistics.median(x) for x in (v_t, s_t, f_t, p_t))
        print(f"1 kB output, {len(windows)} windows: verbatim check {1e3 * v:.3f} ms (1k-record index {1e3 * s_:.3f} ms); "
              f"naive corpus scan {1e3 * naive_s:.0f} ms ({len(sample)} windows timed, scaled)")
        print(f"1 kB output: full check (PII + verbatim + tripwire) {1e3 * f:.2f} ms; Presidio alone {1e3 * p:.2f} ms")
        print(f"RESULT catch={caught / n_trials:.3f} verbatim_vs_naive={naive_s / v:.0f}x "
              f"full_vs_presidio={f / p:.3f}x lookup_100k_vs_1k={v / s_:.2f}x build={build_s:.1f}s "
              f"peak_mem={peak / 2**20:.0f}MiB records={len(texts)}")


if __name__ == "__main__":
    main()
