"""A tiny audit's wall time with a CPU-bound process beside it, with and without the thread rule (issue 30).

Four runs of ``privleak run`` on the same tiny config (the test suite's SMALL corpus and model, the baseline arm,
the membership and exposure attacks; sequential executor), after one warm-up run that caches the base model:

* idle / busy: alone, or with ``python -c 'while 1: pass'`` running beside it (one per ``--busy`` process);
* before / after: OpenMP's default waiting (``OMP_WAIT_POLICY`` set empty, which OpenMP ignores: its default
  spin-then-sleep) or the rule of :mod:`privleak.core.threads` (``PASSIVE``, what the console script sets).

It prints the four wall times and, for each policy, busy ÷ idle — the slowdown another process causes. Issue 30's
goal: ≤ 2.5× for the rule (it measured 8 min 33 s against 24 s, ~20×, for the default on a loaded 2-core machine).
Run it on a machine nothing else is using: other load counts as "busy" in every run.

    python bench/bench_threads.py [--busy 1] [--repeat 1]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from conftest import SMALL  # noqa: E402

TINY = {**SMALL, "arms": ["baseline"], "attacks": {**SMALL["attacks"], "select": ["membership", "exposure"]}}


def run_once(config: Path, out: Path, policy: str, busy: int, cache: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PRIVLEAK_PROGRESS": "0", "PRIVLEAK_CACHE": str(cache),
           "OMP_WAIT_POLICY": policy}
    env.pop("OMP_NUM_THREADS", None)  # torch's own thread count: what a user who sets nothing gets
    hogs = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(busy)]
    try:
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "privleak", "run", "--config", str(config), "--out", str(out),
                               "--executor", "sequential"], env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - t0
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-2000:])
    return seconds


def main() -> None:
    import yaml

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--busy", type=int, default=1, help="CPU-bound processes beside the busy runs (default 1)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per condition (the minimum is reported)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        config = work / "small.yaml"
        config.write_text(yaml.safe_dump(TINY))
        cache = work / "cache"
        run_once(config, work / "warm-up", "PASSIVE", 0, cache)
        times: dict[tuple[str, str], float] = {}
        for rep in range(args.repeat):
            for load in ("idle", "busy"):
                for label, policy in (("before", ""), ("after", "PASSIVE")):
                    t = run_once(config, work / f"{label}-{load}-{rep}", policy, args.busy if load == "busy" else 0,
                                 cache)
                    times[label, load] = min(t, times.get((label, load), float("inf")))
                    print(f"{label:6s} {load:4s} {t:7.1f} s", flush=True)
    print(f"cores available: {len(os.sched_getaffinity(0))}, CPU-bound processes beside the busy runs: {args.busy}")
    for label in ("before", "after"):
        idle, busy = times[label, "idle"], times[label, "busy"]
        print(f"{label:6s}: idle {idle:6.1f} s, busy {busy:6.1f} s, busy / idle = {busy / idle:.2f}x")


if __name__ == "__main__":
    main()
