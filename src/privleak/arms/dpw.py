"""``dpw-σ``: DP-Weights — the baseline's trained weights plus N(0, σ²I) (source document 002).

It carries no formal ε: the sensitivity of trained weights to one record is
unbounded, so no σ buys a guarantee; the audit measures what it does
(:mod:`privleak.defenses.weight_noise`). Its shadows are made the same way:
the baseline's recipe, then the noise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from ..attacks.inputs import BASE, MODEL
from ..config.sections import MAX_WEIGHT_SIGMA
from ..core.present import Cell, t
from ..core.typed import ArmDetails
from .base import ArmInputs, ArmKind, ArmPresentation, BuildContext, FitContext, KindSettings
from .common import PlainSettings, fit_plain
from .inputs import TRAINING
from .plain import BASELINE
from .registry import ArmSpec, register

if TYPE_CHECKING:
    from ..results import ArmResult


class WeightNoise(ArmDetails):
    """A DP-Weights arm's noise: θ + N(0, σ²I) after training. ``guarantee`` says in words that there is no
    formal ε; there is deliberately no ε field."""

    kind: Literal["dpw"] = "dpw"
    sigma: float
    n_parameters: int
    weight_rms: float
    update_rms: float | None
    seed: int
    guarantee: str


def _scale(w: WeightNoise) -> str:
    upd = f", fine-tuning update RMS {w.update_rms:.3g} (σ/update {w.sigma / w.update_rms:.2g})" if w.update_rms else ""
    return f"weight RMS {w.weight_rms:.3g}{upd}; {w.n_parameters:,} parameters noised"


class WeightNoiseSettings(KindSettings):
    """σ, the noise's seed, and the baseline's training that the weights come from (its shadows are trained so)."""

    kind: str = "dpw"
    sigma: float
    noise_seed: int
    trained_as: PlainSettings


class DPWeights(ArmKind):
    name = "dpw"
    param = "σ"
    example = "dpw-0.01"
    param_range = (0.0, MAX_WEIGHT_SIGMA)  # as dp_weights.sigmas
    summary = "DP-Weights: the baseline's weights + N(0, σ²I), no formal ε (audited empirically)"
    model = "derived"
    source = "baseline"
    Details = WeightNoise
    needs = (MODEL.of("source"), TRAINING.of("source"), BASE)  # derive: the baseline's model and record

    def settings(self, cfg, spec: ArmSpec, n_members: int) -> WeightNoiseSettings:
        # The baseline's training, then noise on the weights: the shadows of a DP-Weights arm are made the same way.
        from ..data.canaries import derive_seed

        return WeightNoiseSettings(sigma=spec.param, noise_seed=derive_seed(cfg.seed, spec.name),
                                   trained_as=BASELINE.settings(cfg, ArmSpec("baseline"), n_members))

    def fit(self, model: Any, s: WeightNoiseSettings, ctx: FitContext) -> tuple[Any, dict[str, Any]]:
        """From scratch (the shadows): plain training as the baseline, then θ + N(0, σ²I)."""
        from ..defenses.weight_noise import add_weight_noise

        model, record = fit_plain(model, s.trained_as, ctx)
        noise = add_weight_noise(model, s.sigma, s.noise_seed)
        return model, {**record, "kind": "dpw", "weight_noise": noise.to_dict()}

    def derive(self, s: WeightNoiseSettings, ctx: BuildContext) -> tuple[Any, dict[str, Any]]:
        """The baseline's trained model (not retrained) plus N(0, σ²I) on every weight."""
        from ..defenses.weight_noise import add_weight_noise

        handle = ctx[MODEL.of("source")]
        noise = add_weight_noise(handle.model, s.sigma, s.noise_seed, start=ctx[BASE].model)
        return handle.model, {**ctx[TRAINING.of("source")], "kind": "dpw", "settings": s.key(), "privacy": None,
                              "weight_noise": noise.to_dict()}

    def details(self, inputs: ArmInputs) -> WeightNoise | None:
        wn = (inputs.record or {}).get("weight_noise")
        return WeightNoise.model_validate(wn) if wn else None


class WeightNoisePresentation(ArmPresentation):
    """No formal ε: its cells and figure lines say so, in words."""

    def guarantee(self, arm: ArmResult) -> str | None:
        return arm.details.guarantee if isinstance(arm.details, WeightNoise) else None

    def figures(self, arm: ArmResult) -> list[str]:
        w = arm.details
        return [f"DP-Weights σ = {w.sigma:g}: {w.guarantee}"] if isinstance(w, WeightNoise) else []

    def epsilon_cell(self, arm: ArmResult) -> Cell | None:
        w = arm.details
        if not isinstance(w, WeightNoise):
            return None
        return t(w.guarantee, title="DP-Weights: noise after training bounds nothing, since one record can move the "
                                    "trained weights arbitrarily far; judge it by the attacks")

    def sigma_cell(self, arm: ArmResult) -> Cell | None:
        w = arm.details
        return t(f"{w.sigma:g} (on weights)", title=_scale(w)) if isinstance(w, WeightNoise) else None

    def sigma_value(self, arm: ArmResult) -> float | None:
        w = arm.details
        return w.sigma if isinstance(w, WeightNoise) else None


DPW = register(DPWeights(), presentation=WeightNoisePresentation())
