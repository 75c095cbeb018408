"""Verdicts, the recommendation and utility recovered G across audits that differ only in their seed.

    python bench/seed_variance.py runs/seed0/results.json runs/seed1/results.json runs/seed2/results.json

Issue 37 asks of the default audit at seeds 0, 1 and 2: every arm's verdict and the recommendation per seed —
the same arm, or stated within noise with the rule. This prints that table, each arm's G per seed with its mean
and standard deviation, and the pooled standard deviation across arms — the measured figure for
``Policy.g_seed_sd`` (the training-noise term the recommendation's tie rule assumes for an arm retrained on no
extra seed; an audit's own ``recommendation.seeds`` measure it per arm instead). Different seeds also redraw the
synthetic corpus and its split, so this spread is an upper bound on the training noise alone.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="+", type=Path, help="results.json of each run (or its directory)")
    args = ap.parse_args(argv)
    runs = []
    for p in args.results:
        path = p / "results.json" if p.is_dir() else p
        doc = json.loads(path.read_text())
        runs.append((doc.get("config", {}).get("seed", "?"), doc))
    arms = list(dict.fromkeys(a for _, d in runs for a in d["arms"]))
    print("seed | " + " | ".join(arms) + " | recommended")
    for seed, d in runs:
        rec = d.get("recommendation") or {}
        cells = [(d["arms"].get(a, {}).get("verdict") or {}).get("label", "—") for a in arms]
        picked = rec.get("arm") or (f"none (provisional {rec['provisional']})" if rec.get("provisional") else "none")
        tied = f"; tied: {', '.join(rec['tied'])}" if len(rec.get("tied") or []) > 1 else ""
        print(f"{seed} | " + " | ".join(cells) + f" | {picked}{tied}")
    print()
    print("arm | G per seed | mean | sd")
    sds = []
    for a in arms:
        if any((d["arms"].get(a) or {}).get("serves") for _, d in runs):
            continue  # a served arm (the guard) is its source's model: its G is not a training of its own
        gs = [g for _, d in runs if (g := ((d["arms"].get(a) or {}).get("utility") or {}).get("gain_recovered")) is not None]
        if not gs:
            continue
        sd = statistics.stdev(gs) if len(gs) > 1 else math.nan
        if len(gs) > 1:
            sds.append(sd)
        print(f"{a} | " + ", ".join(f"{g:.3f}" for g in gs) + f" | {statistics.fmean(gs):.3f} | {sd:.3f}")
    if sds:
        print(f"\npooled sd of G across seeds ({len(sds)} arms): {math.sqrt(sum(s * s for s in sds) / len(sds)):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
