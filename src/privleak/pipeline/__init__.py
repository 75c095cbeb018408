"""The audit pipeline: the stage graph (:mod:`.graph`) and the stages it runs."""

from .checks import check_memory, preflight
from .graph import run_audit

__all__ = ["check_memory", "preflight", "run_audit"]
