"""PrivLeak inside your own training: audit canaries in, the one-run audit of your DP claim out.

:class:`AuditHook` for any training loop (an Opacus ``PrivacyEngine`` read when given),
:class:`PrivLeakCallback` for the ``transformers`` Trainer (:mod:`.trainer`; importing it loads transformers),
:class:`DPGuaranteeViolated` when the audit refutes the claim. Names resolve on first use.
"""

from __future__ import annotations

from typing import Any

__all__ = ["AuditHook", "DPGuaranteeViolated", "PrivLeakCallback"]


def __getattr__(name: str) -> Any:
    if name in ("AuditHook", "DPGuaranteeViolated"):
        from . import hook

        return getattr(hook, name)
    if name == "PrivLeakCallback":
        from .trainer import PrivLeakCallback

        return PrivLeakCallback
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
