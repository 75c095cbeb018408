"""``baseline`` and ``best``: fine-tuning without a privacy defence.

``baseline`` is trained to the end with a memorising recipe: the stress test
that shows what leaks. ``best`` is the best non-private reference — the
deployable recipe (public rehearsal, early stopping on population records);
its held-out loss is the L_best of every arm's utility gain recovered G.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import ArmKind, FitContext
from .common import data_settings, fit_plain
from .registry import ArmSpec, register


class Baseline(ArmKind):
    name = "baseline"
    summary = "plain fine-tuning, no defence, trained to the end: the memorisation stress test"
    alone = True
    stress_test = True
    #: Its job is to show what leaks: a memorising recipe no one should deploy, so never the recommendation.
    recommendable = False

    def remark(self, arm) -> str:
        return (" It is the memorisation stress test — trained to the end on a memorising recipe, not a deployable "
                "choice; defences are compared with best, the deployable recipe.")

    def settings(self, cfg, spec: ArmSpec, n_members: int) -> dict[str, Any]:
        return {"kind": "baseline", **cfg.train.model_dump(mode="json"), "seed": cfg.seed,
                "data_defences": data_settings(cfg, spec)}

    def fit(self, model: Any, settings: dict[str, Any], ctx: FitContext) -> tuple[Any, dict[str, Any]]:
        return fit_plain(model, settings, ctx)


def rehearsal_records(public: list, n: int, replay: float, seed: int) -> list:
    """``round(replay · n)`` public records (at most the whole public split), a seeded sample: what the best
    arm rehearses so it keeps what the base model knew. Public text costs no privacy; none with a base model
    of the user's own and no ``--public`` (there is no public split to rehearse)."""
    from ..data.canaries import derive_seed

    k = min(len(public), int(round(replay * n)))
    order = np.random.default_rng(derive_seed(seed, "best-rehearsal")).permutation(len(public))[:k]
    return [public[i] for i in sorted(order)]


class Best(ArmKind):
    name = "best"
    summary = ("the best non-private reference: fine-tuning with public rehearsal, early-stopped on population "
               "records (BestConfig); with data defences (scrub, dedup) the deployable recipe on the defended members")
    alone = False
    utility_reference = True

    def settings(self, cfg, spec: ArmSpec, n_members: int) -> dict[str, Any]:
        b = cfg.best
        return {"kind": "best", "epochs": b.epochs, "batch_size": cfg.train.batch_size, "lr": b.lr,
                "weight_decay": cfg.train.weight_decay, "seed": cfg.seed, "data_defences": data_settings(cfg, spec),
                "replay": b.replay, "validate_records": b.validate_records,
                "validate_every_epochs": 0.5, "patience": b.patience}

    def prepare(self, records: list, settings: dict[str, Any], ctx: FitContext) -> list:
        if not settings.get("replay"):
            return records
        return records + rehearsal_records(ctx.public(), len(records), settings["replay"], ctx.seed)

    def fit(self, model: Any, settings: dict[str, Any], ctx: FitContext) -> tuple[Any, dict[str, Any]]:
        return fit_plain(model, settings, ctx, validate=ctx.validation(settings["validate_records"]))


BASELINE = register(Baseline())
BEST = register(Best())

__all__ = ["BASELINE", "BEST", "Baseline", "Best", "rehearsal_records"]
