"""What runs a task in a worker process (Ray's or the local pool's): rebuild the audit, run its stage.

A worker rebuilds the :class:`~privleak.pipeline.audit.Audit` from the
config and the run directory and runs the task through ``Audit.stage`` —
the same key check, the same marker after — so a task re-run after its
worker died, or a rerun after the driver was stopped, finds whatever
finished already. It writes under its driver's run lock (the token it is
handed) and never takes the lock itself: the driver holds it for the whole run.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from ..config import AuditConfig
from ..pipeline.audit import Audit
from ..pipeline.graph import Task
from ..pipeline.rundir import RunDir
from . import board

# One Audit per (run, config) per worker process: like the sequential run's one process, a worker that
# runs several tasks loads the splits, the base model and the shared attack state once.
_AUDITS: dict[tuple[str, str], Audit] = {}


def _worker_audit(cfg: AuditConfig, root: str, lock_token: str | None) -> Audit:
    key = (root, cfg.fingerprint(), lock_token)
    if key not in _AUDITS:
        _AUDITS.clear()
        _AUDITS[key] = Audit(cfg=cfg, run=RunDir(root=Path(root), lock_token=lock_token), notify=lambda s: None)
    return _AUDITS[key]


def execute(cfg: AuditConfig, root: str, task: Task, threads: int,
            lock_token: str | None = None) -> tuple[float, list[str]]:
    """Run one task in a worker: (seconds, warnings it raised). Done already (a retry) → returns at once.

    ``lock_token``: the driver's run lock; the task does not start, and is not marked done, unless the run
    directory is still locked with it."""
    import torch

    torch.set_num_threads(threads)
    audit = _worker_audit(cfg, root, lock_token)
    audit.run.check_lock()
    board.claim(Path(root), task.name)
    seen = len(audit.warnings)
    from ..models.device import use_policy

    with use_policy(cfg.compute_policy()):  # the device and precision the driver's config says, in this process too
        audit.stage(task.name, task.key, partial(task.run, audit))
    board.release(Path(root), task.name)
    return audit.run.durations.get(task.name, 0.0), audit.warnings[seen:]
