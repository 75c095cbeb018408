"""What runs a task in a worker process (Ray's or the local pool's): rebuild the audit, run its stage.

A worker rebuilds the :class:`~privleak.pipeline.audit.Audit` from the
config and the run directory and runs the task through ``Audit.stage`` —
the same key check, the same marker after — so a task re-run after its
worker died, or a rerun after the driver was stopped, finds whatever
finished already.
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


def _worker_audit(cfg: AuditConfig, root: str) -> Audit:
    key = (root, cfg.fingerprint())
    if key not in _AUDITS:
        _AUDITS.clear()
        _AUDITS[key] = Audit(cfg=cfg, run=RunDir(root=Path(root)), notify=lambda s: None)
    return _AUDITS[key]


def execute(cfg: AuditConfig, root: str, task: Task, threads: int) -> tuple[float, list[str]]:
    """Run one task in a worker: (seconds, warnings it raised). Done already (a retry) → returns at once."""
    import torch

    torch.set_num_threads(threads)
    audit = _worker_audit(cfg, root)
    board.claim(Path(root), task.name)
    seen = len(audit.warnings)
    from ..models.device import use_policy

    with use_policy(cfg.compute_policy()):  # the device and precision the driver's config says, in this process too
        audit.stage(task.name, task.key, partial(task.run, audit))
    board.release(Path(root), task.name)
    return audit.run.durations.get(task.name, 0.0), audit.warnings[seen:]
