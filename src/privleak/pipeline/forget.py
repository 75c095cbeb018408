"""The forget set's provider: who an audit's unlearning arms forget (``splits/forget.json``).

It exists where an arm's kind reads it (``FORGET_SET`` in :attr:`privleak.arms.ArmKind.needs`: ``retrain``,
``unlearn-ga``, ``unlearn-sisa``), after the data stage, and is an artefact like the splits: every task that
reads it — the unlearning arms' training, the forget-set attacks on every model — reads the file, so worker
processes see exactly the set the stage drew. An attack that needs it runs only where it exists.
"""

from __future__ import annotations

from typing import Any

from ..arms import specs
from ..attacks.inputs import FORGET_SET, SPLITS
from ..config import AuditConfig
from ..core.inputs import Persist, View, as_need, provides
from ..core.io import stable_hash
from ..data.unlearning import draw_forget_set, load_forget_set, save_forget_set
from ..policy import forget_plan

FORGET_TASK = "forget-set"
FORGET_FILE = ("splits", "forget.json")


def forgets(cfg: AuditConfig) -> bool:
    """Whether one of the audit's arms reads the forget set (and so the audit has one)."""
    want = as_need(FORGET_SET)
    return any(want in map(as_need, s.kind_obj.needs) for s in specs(cfg))


def forget_settings(cfg: AuditConfig) -> dict[str, Any]:
    """The forget set's settings as drawn (the policy's defaults filled in): part of every key that reads it."""
    u = cfg.unlearning
    return forget_plan(u.forget_fraction, u.forget_count, u.canary_fraction, u.seed, cfg.seed)


def forget_key(cfg: AuditConfig, data_key: str) -> str:
    return stable_hash("forget", data_key, forget_settings(cfg))


@provides(FORGET_SET, needs=(SPLITS,), when=lambda w: forgets(w.cfg), key_formula=lambda k: forget_key(k.cfg, k.key(SPLITS)),
          persist=Persist(FORGET_TASK, ("/".join(FORGET_FILE),), load=lambda view: load_forget_set(view.path(*FORGET_FILE))))
def _forget_set(view: View) -> None:
    s = forget_settings(view.cfg)
    fs = draw_forget_set(view[SPLITS]["members"], fraction=s["fraction"], count=s["count"],
                         canary_fraction=s["canary_fraction"], seed=s["seed"])
    save_forget_set(view.path(*FORGET_FILE), fs)
