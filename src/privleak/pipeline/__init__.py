"""The audit pipeline: the stage graph (:mod:`.graph`) and the stages it runs.

Its names are imported on first use (PEP 562): the run lock (:mod:`.rundir`)
is taken, and a busy run directory refused, before torch and transformers load.
"""

from __future__ import annotations

from typing import Any

__all__ = ["check_memory", "preflight", "run_audit"]


def __getattr__(name: str) -> Any:
    if name in ("check_memory", "preflight"):
        from . import checks

        return getattr(checks, name)
    if name == "run_audit":
        from .graph import run_audit

        return run_audit
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
