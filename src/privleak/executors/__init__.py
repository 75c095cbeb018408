"""How the audit's task graph runs: in this process (``Sequential``, the default) or on Ray.

The graph (``privleak.pipeline.graph``) says what the tasks are; an executor
only decides where and when each runs. Ray is an optional extra: it is
imported only when asked for.
"""

from __future__ import annotations

from typing import Callable

from ..config import ExecutorConfig
from ..core.errors import UserError
from ..pipeline.graph import Executor, Sequential

__all__ = ["RAY_INSTALL", "make_executor"]

RAY_INSTALL = "pip install 'privleak[ray]'"


def make_executor(cfg: ExecutorConfig, notify: Callable[[str], None] = lambda s: None) -> Executor:
    """The executor ``cfg`` names; a one-line ``UserError`` when it asks for Ray and Ray is not installed."""
    if cfg.kind == "sequential":
        return Sequential()
    try:
        import ray  # noqa: F401  (only to see that it is there; the executor imports it again)
    except ImportError:
        raise UserError(f"--executor ray needs Ray, which is not installed; install it with: {RAY_INSTALL}") from None
    from .ray_executor import RayExecutor

    return RayExecutor(cfg, notify=notify)
