"""A process-executor worker whose driver is killed (SIGKILL: no chance to shut the pool down) stops by itself."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

DRIVER = """
import os, sys, time
from privleak.config import ExecutorConfig
from privleak.executors.processes import ProcessExecutor
ex = ProcessExecutor(ExecutorConfig(workers=2))
pids = {ex.pool().submit(os.getpid).result() for _ in range(8)}
print(" ".join(map(str, sorted(pids))), flush=True)
time.sleep(3600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone as far as work goes
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_workers_exit_when_the_driver_is_killed():
    driver = subprocess.Popen([sys.executable, "-c", DRIVER], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    pids = [int(p) for p in driver.stdout.readline().split()]
    assert pids and all(_alive(p) for p in pids)
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    deadline = time.monotonic() + 120  # a hang guard, not a speed claim: the watch polls every 2 s
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.5)
    left = [p for p in pids if _alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert not left, f"workers {left} outlived their driver"
