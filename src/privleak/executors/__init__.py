"""How the audit's task graph runs: in this process (``Sequential``), on local worker processes, or on Ray.

The graph (``privleak.pipeline.graph``) says what the tasks are; an executor
only decides where and when each runs. Ray is an optional extra: it is
imported only when asked for.
"""

from __future__ import annotations

import os
from typing import Callable

from ..config import ExecutorConfig
from ..core.errors import UserError
from ..pipeline.graph import Executor, Sequential

__all__ = ["RAY_INSTALL", "make_executor", "resolve_kind"]

RAY_INSTALL = "pip install 'privleak[ray]'"
KINDS = ("sequential", "processes", "ray")


def resolve_kind(cfg: ExecutorConfig, device=None, cpus: int | None = None) -> str:
    """The executor ``auto`` stands for: ``PRIVLEAK_EXECUTOR`` if set; else sequential on a GPU (one device
    to share) or a single core, local processes otherwise."""
    if cfg.kind != "auto":
        return cfg.kind
    env = os.environ.get("PRIVLEAK_EXECUTOR", "").strip().lower()
    if env and env != "auto":
        if env not in KINDS:
            raise UserError(f"PRIVLEAK_EXECUTOR={env}: unknown executor; use {', '.join(KINDS)} or auto")
        return env
    cpus = (os.cpu_count() or 1) if cpus is None else cpus
    if getattr(device, "type", "cpu") != "cpu" or cpus < 2:
        return "sequential"
    return "processes"


def make_executor(cfg: ExecutorConfig, notify: Callable[[str], None] = lambda s: None, device=None) -> Executor:
    """The executor ``cfg`` names (``auto``: :func:`resolve_kind` for ``device``); a one-line ``UserError``
    when it asks for Ray and Ray is not installed."""
    kind = resolve_kind(cfg, device)
    if kind == "sequential":
        if cfg.workers is not None:  # auto chose sequential (a GPU, one core): --workers would do nothing
            raise UserError(f"--workers {cfg.workers}: the executor here is sequential (auto picks it on a GPU or a "
                            "single core, or PRIVLEAK_EXECUTOR says so); name --executor processes or ray, or drop "
                            "--workers")
        from ..core.threads import use_thread_rule

        use_thread_rule(workers=1)  # every core this process may use, OpenMP waiting passively (core.threads)
        return Sequential()
    if kind == "processes":
        from .processes import ProcessExecutor

        return ProcessExecutor(cfg, notify=notify)
    try:
        import ray  # noqa: F401  (only to see that it is there; the executor imports it again)
    except ImportError:
        raise UserError(f"--executor ray needs Ray, which is not installed; install it with: {RAY_INSTALL}") from None
    from .ray_executor import RayExecutor

    return RayExecutor(cfg, notify=notify)
