"""``unlearn-sisa``: SISA (Bourtoule et al. 2021) — person-shards, one model each, the affected shards retrained.

Trained from the base model like ``baseline`` (its recipe on each shard),
before the erasure request: the members (and the one-run audit canaries) are
dealt to ``unlearning.sisa.shards`` shards whole persons at a time
(:func:`privleak.data.unlearning.shard_by_person`), one model is fine-tuned
per shard with the shard's own seed, and the request is answered by
retraining from the base exactly the shards that held a forgotten person,
without them (:func:`privleak.models.sisa.sisa`). The released model is the
average of the shard models' weights (why weights and not the paper's vote:
:mod:`privleak.models.sisa`); the unlearning is exact either way, so this arm
should be *forgotten* by construction — what the audit measures is what the
sharding costs in utility and what the request cost in time. A shard holds
1/S of the members, so each shard model memorises its persons as the
baseline does and the average dilutes them.

The shard count (:func:`privleak.policy.sisa_shards`) was chosen on
population data only (``bench/bench_unlearn_settings.py``).
"""

from __future__ import annotations

from typing import Any, Literal

from ..attacks.inputs import FORGET_SET
from ..data.canaries import derive_seed
from ..data.unlearning import shard_by_person
from ..policy import sisa_shards
from .base import ArmInputs, FitContext, KindSettings
from .common import data_settings
from .inputs import VALIDATION
from .registry import ArmSpec, register
from .unlearning import UnlearningDetails, UnlearningJudging, UnlearningKind, UnlearningPresentation, forget_settings


class SisaDetails(UnlearningDetails):
    kind: Literal["unlearn-sisa"] = "unlearn-sisa"
    shards: int
    shard_sizes: list[int]
    affected: list[int]  # shards retrained (1-based)
    forgotten_per_shard: list[int]
    steps_unlearn: int
    # The soundness of averaging: population NLL of the averaged model beside the shard models' mean.
    nll_population_average: float
    nll_population_shards: float


def shard_seed(seed: int, shard: int) -> int:
    return derive_seed(seed, f"sisa-shard-{shard}") % 2**32


class SisaSettings(KindSettings):
    """The baseline's recipe on each shard, the shard count, the population records the averaged model is
    validated on, and who is forgotten."""

    omitted = frozenset({"layers"})

    kind: str = "unlearn-sisa"
    epochs: float
    batch_size: int
    lr: float
    weight_decay: float
    seed: int
    shards: int
    validate_records: int
    data_defences: dict[str, Any]
    forget: dict[str, Any]
    layers: int | None = None  # train.layers, as the baseline


class UnlearnSisa(UnlearningKind):
    name = "unlearn-sisa"
    summary = "SISA: members sharded by person, one baseline-recipe model per shard, weights averaged; the shards " \
              "holding the forget set retrained"
    Details = SisaDetails
    needs = (FORGET_SET, VALIDATION)

    def settings(self, cfg, spec: ArmSpec, n_members: int) -> SisaSettings:
        return SisaSettings(kind="unlearn-sisa", **cfg.train.model_dump(mode="json"), seed=cfg.seed,
                            shards=sisa_shards(cfg.unlearning.sisa.shards), validate_records=cfg.best.validate_records,
                            data_defences=data_settings(cfg, ArmSpec("baseline")), forget=forget_settings(cfg))

    def fit(self, model: Any, s: SisaSettings, ctx: FitContext) -> tuple[Any, dict[str, Any]]:
        from ..models.batching import Encoded  # torch: only when the arm trains, not when kinds register
        from ..models.frozen_prefix import top_layers_only
        from ..models.sisa import average_weights, sisa
        from ..models.train import TrainSettings

        forget = ctx[FORGET_SET]
        shards = shard_by_person(ctx.records, s.shards, s.seed)
        data = [Encoded([ctx.data.ids[i] for i in ix]) for ix in shards]
        flags = [[forget.holds(ctx.records[i]) for i in ix] for ix in shards]

        def recipe(k: int) -> TrainSettings:
            return TrainSettings(epochs=s.epochs, batch_size=s.batch_size, lr=s.lr, weight_decay=s.weight_decay,
                                 seed=shard_seed(s.seed, k))
        # train.layers as the baseline: each shard model is a copy of the base made inside the block, frozen alike.
        with top_layers_only(model, s.layers):
            run = sisa(model, data, flags, recipe, ctx.pad, desc=f"train {ctx.label}")
        averaged = average_weights(run.models)
        for p in averaged.parameters():
            p.requires_grad_(True)  # as a freshly loaded model
        validate = ctx[VALIDATION](s.validate_records)
        shard_nll = sum(validate(m) for m in run.models) / len(run.models)
        info = {"shards": s.shards, "shard_sizes": run.shard_sizes, "affected": [k + 1 for k in run.affected],
                "forgotten_per_shard": run.forgotten_per_shard, "steps_unlearn": sum(run.steps_unlearn.values()),
                "nll_population_average": validate(averaged), "nll_population_shards": shard_nll}
        return averaged, {"kind": "unlearn-sisa", "steps": sum(run.steps_fit),
                          "epoch_losses": [sum(x) / len(x) for x in zip(*run.losses)] if run.losses else [],
                          "privacy": None, "epochs_run": s.epochs, "forget": forget.to_json(), "sisa": info,
                          "phases_s": {"fit": round(run.seconds_fit, 2), "unlearn": round(run.seconds_unlearn, 2)}}

    def own_details(self, inputs: ArmInputs) -> dict[str, Any]:
        return dict((inputs.record or {})["sisa"])



class SisaPresentation(UnlearningPresentation):
    def notes_for(self, name: str, arm) -> list[str]:
        d = arm.details
        if not isinstance(d, SisaDetails):
            return []
        worse = d.nll_population_average > d.nll_population_shards
        return [f"{name}: {d.shards} shards of {', '.join(map(str, d.shard_sizes))} records; the forget set touched "
                f"{len(d.affected)} of them ({', '.join(map(str, d.forgotten_per_shard))} forgotten records per shard), "
                f"which were retrained ({d.steps_unlearn} steps). Population NLL of the averaged model "
                f"{d.nll_population_average:.3f} vs {d.nll_population_shards:.3f} for the shard models on average"
                + (" — averaging the weights costs utility here (the shard models left a common basin); the "
                   "unlearning stays exact." if worse else ".")]


UNLEARN_SISA = register(UnlearnSisa(), judging=UnlearningJudging(), presentation=SisaPresentation())
