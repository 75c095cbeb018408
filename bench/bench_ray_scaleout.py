"""The `full` profile's arm and shadow stages on a local Ray: 2 workers ÷ 1 worker, in one run.

    PYTHONPATH=src python bench/bench_ray_scaleout.py            # the full profile (heavy: hours on 2 cores)
    PYTHONPATH=src python bench/bench_ray_scaleout.py --quick    # its shape at test sizes (a few minutes)

The stages every arm and shadow reads (data, base model, audit canaries, data
defences) run once, sequentially, in a scratch run directory. Then the timed
part — every ``train/``, ``noise/`` and ``shadow/`` task of the graph — runs
on a fresh local Ray with 1 worker and again with 2, each from a copy of that
directory, so both do exactly the same tasks; Ray's start-up is not timed.
Printed: each run's wall time, the sum of its task times (work), the 1 ÷ 2
worker ratio, whether both runs wrote the same artefacts, and the per-task
costs (median per kind) that the plan on docs/results/2026-11-23-scale-out.md
multiplies by task counts.
``--eval`` then runs the rest of the graph (utility and attacks per model)
on the 2-worker directory and prints those costs too. ``--counts`` prints the
full profile's task counts at 4, 8 and 64 shadows per arm (no training).

``--quick`` keeps the full profile's structure (DP-SGD, scrubbing, LiRA
shadows) at small sizes: 400 members, a 2-layer 64-wide model, arms
baseline, dp-8 and scrub with 2 shadows each (9 timed tasks of a few
seconds; at the test suite's sizes a task is shorter than a worker's
start-up and the ratio measures nothing). The load average is printed:
on a machine shared with other jobs, a second worker can only help as far
as a core is free.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("PRIVLEAK_PROGRESS", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np

from privleak.config import ExecutorConfig, build_config
from privleak.executors.ray_executor import RayExecutor
from privleak.pipeline.audit import Audit
from privleak.pipeline.graph import DATA, Graph, Sequential, audit_graph, data_task
from privleak.pipeline.rundir import RunDir

TIMED = ("train/", "noise/", "shadow/")
QUICK = {
    "profile": "full",
    "arms": ["baseline", "dp-8", "scrub"],
    "data": {"synthetic": {"n_public": 400, "n_members": 400, "n_non_members": 400, "n_population": 40,
                           "n_public_heldout": 40, "phi_fraction": 0.5}},
    "canaries": {"repeats": [1, 8], "per_repeat": 1, "candidates": 200},
    "model": {"max_length": 160, "embedded": {"n_layer": 2, "n_embd": 64, "n_head": 2, "epochs": 1, "vocab_size": 600}},
    "train": {"epochs": 3, "batch_size": 16},
    "dp": {"epochs": 2, "batch_size": 32},
    "shadows": {"enabled": True, "n_shadows": 2},
    "one_run": {"canaries": 100, "prefix_words": 2, "secret_words": 3},
    "attacks": {"bootstrap": 10},
}


def kind_of(name: str) -> str:
    return name.split("/")[0]


def task_seconds(root: Path, names: list[str]) -> dict[str, float]:
    out = {}
    for n in names:
        marker = root / "stages" / (n.replace("/", "_") + ".json")
        out[n] = float(json.loads(marker.read_text())["duration_s"])
    return out


def artefacts(root: Path, names: list[str]) -> dict[str, object]:
    """What the timed tasks wrote, less wall times: train.json files and shadow NLLs."""
    out: dict[str, object] = {}
    for p in sorted((root / "arms").glob("*/train.json")):
        rec = json.loads(p.read_text())
        rec.pop("seconds", None)
        out[str(p.relative_to(root))] = rec
    for p in sorted((root / "arms").glob("*/shadows/*.npz")):
        with np.load(p) as z:
            out[str(p.relative_to(root))] = {k: z[k].tolist() for k in z.files}
    return out


def summarise(sec: dict[str, float]) -> str:
    by: dict[str, list[float]] = {}
    for n, s in sec.items():
        by.setdefault(kind_of(n), []).append(s)
    return ", ".join(f"{k} ×{len(v)}: median {statistics.median(v):.1f} s (total {sum(v):.1f})" for k, v in by.items())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the full profile's shape at test sizes")
    ap.add_argument("--eval", action="store_true", help="also run (and cost) the evaluation stages after")
    ap.add_argument("--counts", action="store_true", help="only print the full profile's task counts")
    ap.add_argument("--work", type=Path, default=None, help="scratch directory (default: a temporary one)")
    args = ap.parse_args()

    work = args.work or Path(tempfile.mkdtemp(prefix="bench-ray-"))
    work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PRIVLEAK_CACHE", str(work / "cache"))

    if args.counts:
        for s in (4, 8, 64):
            cfg = build_config({"profile": "full", "shadows": {"enabled": True, "n_shadows": s}})
            audit = Audit(cfg=cfg, run=RunDir.open(work / "counts"), notify=lambda m: None)
            Sequential().run(Graph([data_task(cfg)]), audit)
            g = audit_graph(audit)
            kinds: dict[str, int] = {}
            for t in g.tasks:
                kinds[kind_of(t.name)] = kinds.get(kind_of(t.name), 0) + 1
            print(f"full profile, {s} shadows per arm: {len(g) + 1} tasks — "
                  + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
        return

    cfg = build_config(copy.deepcopy(QUICK) if args.quick else {"profile": "full"})
    prep = work / "prep"
    audit = Audit(cfg=cfg, run=RunDir.open(prep), notify=lambda m: None)
    t0 = time.perf_counter()
    Sequential().run(Graph([data_task(cfg)]), audit)
    graph = audit_graph(audit)
    timed = [t for t in graph.tasks if t.name.startswith(TIMED)]
    before = {i for t in timed for i in t.inputs} - {t.name for t in timed} - {DATA}
    Sequential().run(Graph([t for t in graph.tasks if t.name in before], external=frozenset({DATA})), audit)
    print(f"profile {'full --quick' if args.quick else 'full'}: {len(timed)} timed tasks "
          f"({', '.join(sorted({kind_of(t.name) for t in timed}))}); prepared {sorted(before)} in "
          f"{time.perf_counter() - t0:.1f} s")

    print(f"load average (1, 5, 15 min) at the start: {', '.join(f'{x:.1f}' for x in os.getloadavg())} "
          f"on {os.cpu_count()} CPUs")
    walls: dict[int, float] = {}
    seconds: dict[int, dict[str, float]] = {}
    for workers in (1, 2):
        root = work / f"workers-{workers}"
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(prep, root)
        run = Audit(cfg=cfg, run=RunDir.open(root), notify=lambda m: None)
        ex = RayExecutor(ExecutorConfig(kind="ray", workers=workers))
        ex.connect()  # Ray's start-up is not part of the timed work
        try:
            t = time.perf_counter()
            ex.run(Graph(timed, external=frozenset(before | {DATA})), run)
            walls[workers] = time.perf_counter() - t
        finally:
            ex.close()
        seconds[workers] = task_seconds(root, [t.name for t in timed])
        work_s = sum(seconds[workers].values())
        print(f"{workers} worker{'s' * (workers > 1)}: wall {walls[workers]:.1f} s, work {work_s:.1f} s "
              f"(work ÷ wall {work_s / walls[workers]:.2f}); {summarise(seconds[workers])}")
    same = artefacts(work / "workers-1", []) == artefacts(work / "workers-2", [])
    print(f"artefacts of the two runs identical (train.json less seconds, shadow NLLs): {same}")
    print(f"load average (1, 5, 15 min) at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())} "
          f"on {os.cpu_count()} CPUs")
    print(f"arm + shadow stages, wall time 1 worker ÷ 2 workers: {walls[1] / walls[2]:.2f}×")

    if args.eval:
        root = work / "workers-2"
        run = Audit(cfg=cfg, run=RunDir.open(root), notify=lambda m: None)
        rest = [t for t in graph.tasks if not t.name.startswith(TIMED) and t.name not in before]
        ex = RayExecutor(ExecutorConfig(kind="ray", workers=2))
        ex.connect()
        try:
            t = time.perf_counter()
            ex.run(Graph(rest, external=frozenset({t.name for t in graph.tasks} - {t.name for t in rest} | {DATA})), run)
            wall = time.perf_counter() - t
        finally:
            ex.close()
        sec = task_seconds(root, [t.name for t in rest])
        print(f"evaluation on 2 workers: wall {wall:.1f} s, work {sum(sec.values()):.1f} s; {summarise(sec)}")
        per_model: dict[str, float] = {}
        for n, s in sec.items():
            if "/" in n:
                per_model[n.split("/", 1)[1]] = per_model.get(n.split("/", 1)[1], 0.0) + s
        print("evaluation per model (utility + every attack family): "
              + ", ".join(f"{m} {s:.1f} s" for m, s in per_model.items()))
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
