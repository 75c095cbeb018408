"""The forget-set stage: who an audit's unlearning arms forget (``splits/forget.json``).

It runs when an arm's kind forgets (:attr:`privleak.arms.ArmKind.forgets`:
``retrain``, ``unlearn-ga``, ``unlearn-sisa``), after the data stage, and is
an artefact like the splits: every task that reads it — the unlearning arms'
training, the forget-set attacks on every model — reads the file, so worker
processes see exactly the set the stage drew.
"""

from __future__ import annotations

from typing import Any

from ..arms import specs
from ..config import AuditConfig
from ..core.io import stable_hash
from ..data.unlearning import draw_forget_set, save_forget_set
from ..policy import forget_plan
from .audit import Audit

FORGET_TASK = "forget-set"
FORGET_FILE = ("splits", "forget.json")


def forgets(cfg: AuditConfig) -> bool:
    """Whether one of the audit's arms forgets (and so the audit has a forget set)."""
    return any(s.kind_obj.forgets for s in specs(cfg))


def forget_settings(cfg: AuditConfig) -> dict[str, Any]:
    """The forget set's settings as drawn (the policy's defaults filled in): part of every key that reads it."""
    u = cfg.unlearning
    return forget_plan(u.forget_fraction, u.forget_count, u.canary_fraction, u.seed, cfg.seed)


def forget_key(cfg: AuditConfig, data_key: str) -> str:
    return stable_hash("forget", data_key, forget_settings(cfg))


def forget_stage(audit: Audit) -> None:
    s = forget_settings(audit.cfg)
    fs = draw_forget_set(audit.splits()["members"], fraction=s["fraction"], count=s["count"],
                         canary_fraction=s["canary_fraction"], seed=s["seed"])
    save_forget_set(audit.run.path(*FORGET_FILE), fs)
    audit.shared.pop("forget_set", None)
