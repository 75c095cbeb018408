"""How fast every bad input of ``tests/test_bad_inputs.py`` is refused, beside Python's own start-up.

The test checks *what* each refusal is (one line, exit 2, nothing written); this
times it, because a clock belongs in a benchmark, not in a test. Each case runs
``python -m privleak …`` on fresh scratch files, one at a time, as the test
does; the baseline is ``python -m privleak --help`` (the console script's
import and its help text), timed in the same run. Prints the slowest cases, the
median and maximum, and each against the baseline (a refusal ≈ 1× the start-up
means it came before any work)::

    python bench/bench_refusals.py            # every case once
    python bench/bench_refusals.py --top 10
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import test_bad_inputs as cases  # noqa: E402  (the test module's cases and scratch files)


def _start_up(repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "privleak", "--help"], capture_output=True,
                       env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}, check=False)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--top", type=int, default=5, help="how many of the slowest cases to print")
    args = ap.parse_args()
    base = _start_up(3)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    seconds: dict[str, float] = {}
    holder = None
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for cid, argv, _ in cases.CASES:
                d = Path(tmp) / cid
                d.mkdir()
                cases._write_inputs(d)
                if cid == "run-dir-locked":
                    holder = subprocess.Popen([sys.executable, "-c", cases.HOLDER, str(d / "locked")],
                                              stdout=subprocess.PIPE, text=True,
                                              env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
                    holder.stdout.readline()
                t0 = time.perf_counter()
                cases._run_case(argv, d, port)
                seconds[cid] = time.perf_counter() - t0
        finally:
            listener.close()
            if holder is not None:
                holder.kill()
                holder.wait()
    values = sorted(seconds.values())
    print(f"python -m privleak --help (start-up): {base:.2f} s (median of 3)")
    print(f"{len(values)} refusals: median {statistics.median(values):.2f} s ({statistics.median(values) / base:.2f}×), "
          f"max {values[-1]:.2f} s ({values[-1] / base:.2f}×); over 5 s: {sum(v > 5 for v in values)}")
    for cid, s in sorted(seconds.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"  {cid:40s} {s:6.2f} s  {s / base:5.2f}×")


if __name__ == "__main__":
    main()
