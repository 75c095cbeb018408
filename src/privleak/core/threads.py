"""How many threads torch may use, so a busy machine slows an audit in proportion, not 20×.

The rule (issue 30, measured in the README's "Threads" note):

* **Passive waiting.** ``OMP_WAIT_POLICY=PASSIVE`` is set before torch is
  imported (the console script and the test suite do it first thing;
  :func:`passive_waiting`). With OpenMP's default a thread that reaches a
  barrier first spins on its core for a while before sleeping; when another
  process needs that core, the spinning threads and the process fight for it
  at every one of the thousands of parallel regions a training step has, and
  a 24-second audit took 8.5 minutes. Passive threads sleep at once, so the
  other process gets the core and the audit keeps the rest.
* **One intra-op thread per core this process may use, divided among the
  workers** (:func:`intra_op_threads`): the cores of its CPU affinity mask and
  cgroup quota (a container's ``cpu.max``), not the machine's; a worker
  process of ``--executor processes`` gets ``cpus_per_task`` (one by default),
  the sequential executor all of them.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cores_available", "intra_op_threads", "passive_waiting", "use_thread_rule"]


def _cgroup_quota() -> float | None:
    """CPUs a cgroup v2 quota allows (``cpu.max`` = "quota period"), or None when unlimited or unknown."""
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    try:
        return max(1.0, int(quota) / int(period))
    except (ValueError, ZeroDivisionError):
        return None


def cores_available() -> int:
    """Cores this process may run on: its affinity mask, capped by a cgroup CPU quota."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    quota = _cgroup_quota()
    if quota is not None:
        cores = min(cores, int(quota))
    return max(1, cores)


def intra_op_threads(workers: int = 1) -> int:
    """torch intra-op threads for each of ``workers`` processes sharing this process's cores."""
    return max(1, cores_available() // max(1, workers))


def passive_waiting() -> bool:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` unless the user chose a policy; True when it can still take effect
    (OpenMP reads it once, when torch is first imported)."""
    import sys

    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return "torch" not in sys.modules


def use_thread_rule(workers: int = 1) -> int:
    """Apply the rule to this process's torch (imports it); returns the intra-op threads set.
    ``OMP_NUM_THREADS``, when the user set it, wins (it is their explicit choice)."""
    import torch

    env = os.environ.get("OMP_NUM_THREADS", "").strip()
    threads = int(env) if env.isdigit() and int(env) > 0 else intra_op_threads(workers)
    torch.set_num_threads(threads)
    return threads
