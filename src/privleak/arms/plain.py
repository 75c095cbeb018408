"""``baseline`` and ``best``: fine-tuning without a privacy defence.

``baseline`` is trained to the end with a memorising recipe: the stress test
that shows what leaks. ``best`` is the best non-private reference — the
deployable recipe (public rehearsal, early stopping on population records);
its held-out loss is the L_best of every arm's utility gain recovered G.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..attacks.inputs import PUBLIC
from .base import ArmJudging, ArmKind, ArmPresentation, BuildContext, FitContext
from .common import PlainSettings, fit_plain, plain_settings
from .inputs import VALIDATION
from .registry import ArmSpec, register


class Baseline(ArmKind):
    name = "baseline"
    summary = "plain fine-tuning, no defence, trained to the end: the memorisation stress test"
    alone = True

    def settings(self, cfg, spec: ArmSpec, n_members: int) -> PlainSettings:
        return PlainSettings(**plain_settings(cfg, spec, "baseline"))

    def fit(self, model: Any, settings: PlainSettings, ctx: FitContext) -> tuple[Any, dict[str, Any]]:
        return fit_plain(model, settings, ctx)


def rehearsal_records(public: list, n: int, replay: float, seed: int) -> list:
    """``round(replay · n)`` public records (at most the whole public split), a seeded sample: what the best
    arm rehearses so it keeps what the base model knew. Public text costs no privacy; none with a base model
    of the user's own and no ``--public`` (there is no public split to rehearse)."""
    from ..data.canaries import derive_seed

    k = min(len(public), int(round(replay * n)))
    order = np.random.default_rng(derive_seed(seed, "best-rehearsal")).permutation(len(public))[:k]
    return [public[i] for i in sorted(order)]


class StressTest(ArmJudging):
    """The baseline: every other arm is compared with it; its job is to show what leaks, a memorising recipe no
    one should deploy, so never the recommendation."""

    stress_test = True
    recommendable = False


class StressTestPresentation(ArmPresentation):
    def remark(self, arm) -> str:
        return (" It is the memorisation stress test — trained to the end on a memorising recipe, not a deployable "
                "choice; defences are compared with best, the deployable recipe.")


class UtilityReference(ArmJudging):
    """``best``: its held-out loss is the L_best of every arm's utility gain recovered G."""

    utility_reference = True


class BestSettings(PlainSettings):
    """The deployable recipe: ``best``'s epochs and step, public rehearsal, early stopping on the population."""

    kind: str = "best"
    replay: float
    validate_records: int
    validate_every_epochs: float
    patience: int


class Best(ArmKind):
    name = "best"
    summary = ("the best non-private reference: fine-tuning with public rehearsal, early-stopped on population "
               "records (BestConfig); with data defences (scrub, dedup) the deployable recipe on the defended members")
    alone = False
    needs = (PUBLIC, VALIDATION)

    def settings(self, cfg, spec: ArmSpec, n_members: int) -> BestSettings:
        b = cfg.best
        return BestSettings(**plain_settings(cfg, spec, "best", epochs=b.epochs, lr=b.lr, replay=b.replay,
                                             validate_records=b.validate_records, validate_every_epochs=0.5,
                                             patience=b.patience))

    def prepare(self, records: list, settings: BestSettings, ctx: BuildContext) -> list:
        if not settings.replay:
            return records
        return records + rehearsal_records(ctx[PUBLIC], len(records), settings.replay, ctx.seed)

    def fit(self, model: Any, settings: BestSettings, ctx: FitContext) -> tuple[Any, dict[str, Any]]:
        return fit_plain(model, settings, ctx, validate=ctx[VALIDATION](settings.validate_records))


BASELINE = register(Baseline(), judging=StressTest(), presentation=StressTestPresentation())
BEST = register(Best(), judging=UtilityReference())

__all__ = ["BASELINE", "BEST", "Baseline", "Best", "BestSettings", "rehearsal_records"]
