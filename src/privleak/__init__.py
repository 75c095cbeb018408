"""PrivLeak: audit language models for privacy leakage and compare defences.

The library's entry points (:mod:`privleak.api`, :mod:`privleak.integrations`; the guide's page
docs/guide/library.md)::

    privleak.audit(config, out=...)                      # what `privleak run` does
    privleak.attack(model, members, non_members, ...)    # what `privleak attack` does, in-memory models too
    privleak.PrivLeakCallback(...)                       # a transformers TrainerCallback: audit your DP fine-tune
    privleak.AuditHook(...)                              # the same for your own training loop
    privleak.PrivLeakError                               # the one exception: the one-line message the CLI prints

``privleak.audit`` is also the package of the judging layer (``privleak.audit.verdicts`` …): that module is made
callable here (:class:`_CallableModule`), so both ``privleak.audit(config)`` and ``from privleak.audit.verdicts
import judge`` work, whichever is imported first. Importing ``privleak`` loads neither torch nor transformers:
every name below is resolved on first use (PEP 562).
"""

from __future__ import annotations

import sys
import types
from typing import Any

__version__ = "0.1.0"

__all__ = ["AuditHook", "AuditResults", "DPClaim", "PrivLeakCallback", "PrivLeakError", "attack", "audit",
           "__version__"]


class _CallableModule(types.ModuleType):
    """The ``privleak.audit`` package, callable as :func:`privleak.api.audit`.

    A function named ``audit`` in this package would be replaced by the subpackage the moment anything imports
    ``privleak.audit.…`` (the import system sets the parent's attribute to the submodule), so the subpackage is the
    function instead: calling it runs an audit, and its submodules import as ever."""

    def __call__(self, config: Any = None, out: Any = None, **options: Any) -> Any:
        return _load("api", "audit")(config, out, **options)


def _make_audit_callable() -> None:
    from . import audit as package  # its __init__ is a docstring: nothing heavy loads

    if not isinstance(package, _CallableModule):
        package.__class__ = _CallableModule
    sys.modules[__name__].audit = package  # type: ignore[attr-defined]


_make_audit_callable()

_LAZY = {"attack": ("api", "attack"), "DPClaim": ("api", "DPClaim"), "PrivLeakError": ("core.errors", "UserError"),
         "AuditResults": ("results", "AuditResults"), "AuditHook": ("integrations", "AuditHook"),
         "PrivLeakCallback": ("integrations", "PrivLeakCallback")}


def _load(module: str, attr: str) -> Any:
    # By name, at run time: the layers below that read ``__version__`` (pipeline.assemble) import this package,
    # and must not depend on the library calls above them through it (lint-imports follows static imports).
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{module}"), attr)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = _load(*_LAZY[name])
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
