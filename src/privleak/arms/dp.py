"""``dp-ε``: DP-SGD fine-tuning at a target (ε, δ) per record (Abadi et al. 2016, with Opacus).

Poisson sampling, per-sample clipping to C, Gaussian noise σC on the sum, σ
calibrated by the accountant for the steps actually taken
(:mod:`privleak.models.dp_train`), ε cross-checked by three accountants.
``+lora`` trains LoRA adapters under DP instead of the full model (merged
after training). The recipe (batch, epochs) is :func:`privleak.policy.dp_recipe`.
With ``dp.public_weight`` > 0 each step adds the public split's gradient
after the noise (:mod:`privleak.models.public_grad`; no privacy cost).
"""

from __future__ import annotations

from typing import Any

from ..attacks.inputs import PUBLIC
from ..config import resolve_delta
from ..core.limits import MAX_EPSILON, MIN_EPSILON
from ..policy import dp_recipe, pretrained_dp_batch_epochs
from .base import ArmKind, FitContext, KindSettings
from .common import data_settings, person_privacy
from .inputs import ENCODE
from .registry import ArmSpec, register

_LORA_FIELDS = {"lora_rank", "lora_alpha", "lora_lr", "lora_targets", "qlora", "lora_base", "lora_layers"}
# Only a run that uses the public gradient has them in its key: the arms without keep the keys they had.
_PUBLIC_FIELDS = {"public_weight", "public_batch_size"}


class DPArmSettings(KindSettings):
    """A DP-SGD arm's settings: its target (ε, δ), the ``dp`` section (C, the recipe's batch and epochs, the
    step, the accountant, clipping), LoRA's where it has ``+lora``, the public gradient's where it is on."""

    omitted = frozenset({"lora_rank", "lora_alpha", "lora_targets", "qlora", "public_weight", "public_batch_size",
                         "debug_break", "lora_base", "lora_layers"})

    kind: str = "dp"
    target_epsilon: float
    delta: float
    lora: bool
    max_grad_norm: float
    epochs: int
    batch_size: int
    lr: float
    train_embeddings: bool
    train_output: bool
    micro_batch_tokens: int
    accountant: str
    clipping: str
    lora_rank: int | None = None
    lora_alpha: float | None = None
    lora_targets: str | tuple[str, ...] | None = None
    qlora: bool | None = None
    public_weight: float | None = None
    public_batch_size: int | None = None
    seed: int
    data_defences: dict[str, Any]
    debug_break: str | None = None
    data_size: int
    lora_base: str | None = None
    gradient_canaries: int = 0  # white-box canaries (dp.gradient_canaries)
    lora_layers: int | None = None  # adapters in the top N decoder layers only (dp.lora_layers)


class DP(ArmKind):
    name = "dp"
    param = "ε"
    example = "dp-8"
    param_range = (MIN_EPSILON, MAX_EPSILON)
    summary = "DP-SGD at target ε per record (+lora: DP LoRA adapters)"
    alone = False
    private = True
    modifiers = ("lora",)
    needs = (PUBLIC, ENCODE)  # the public gradient (dp.public_weight)

    def settings(self, cfg, spec: ArmSpec, n_members: int) -> DPArmSettings:
        lora = "lora" in spec.modifiers
        delta, _ = resolve_delta(cfg, n_members)
        settings = {"kind": "dp", "target_epsilon": spec.param, "delta": delta, "lora": lora,
                    **cfg.dp.model_dump(mode="json", exclude={"epsilons", "delta", "debug_break", "lora_base",
                                                              "lora_layers", "recipe"}
                                        | (set() if lora else _LORA_FIELDS)
                                        | (set() if cfg.dp.public_weight > 0 else _PUBLIC_FIELDS)),
                    "seed": cfg.seed, "data_defences": data_settings(cfg, spec)}
        if spec.name in cfg.dp.debug_break:  # only a broken arm's key (and train.json) carries it
            settings["debug_break"] = cfg.dp.debug_break[spec.name]
        # The recipe enters the key through the batch and epochs it resolves to, as an explicit setting would.
        if cfg.dp.recipe == "pretrained":
            recipe_batch, recipe_epochs = pretrained_dp_batch_epochs(public_data_size(cfg, n_members))
        else:
            recipe_batch, recipe_epochs = dp_recipe(n_members, spec.param)
        settings["batch_size"] = settings["batch_size"] or recipe_batch
        settings["epochs"] = settings["epochs"] or recipe_epochs
        settings["data_size"] = public_data_size(cfg, n_members)
        if lora:
            settings["lr"] = settings.pop("lora_lr")
            if cfg.dp.lora_layers is not None:  # only then in the key: the arms on every layer keep their keys
                settings["lora_layers"] = cfg.dp.lora_layers
            if lora_base_bf16(cfg.dp.lora_base) and not cfg.dp.qlora:
                settings["lora_base"] = "bf16"  # only then in the key: fp32 arms keep the keys they had
        return DPArmSettings(**settings)

    def check(self, cfg, spec: ArmSpec, names: list[str]) -> None:
        if cfg.dp.qlora and "lora" in spec.modifiers:
            from ..models.device import resolve_device
            from ..models.lora import check_qlora

            check_qlora(resolve_device(cfg.device))  # one line before any work, not after the other arms trained

    def check_audit(self, cfg, specs: list[ArmSpec]) -> None:
        dp_arms = {s.name for s in specs if s.kind == self.name}
        for a in cfg.dp.debug_break:
            if a not in dp_arms:
                raise ValueError(f"dp.debug_break: '{a}' is not a DP arm of this audit")

    def fit(self, model: Any, s: DPArmSettings, ctx: FitContext) -> tuple[Any, dict[str, Any]]:
        """DP-SGD fine-tuning (no early stopping: looking at held-out loss to stop would need accounting too)."""
        from ..accountants import epsilons as accountant_epsilons
        from ..models.dp_train import DPSettings, train_dp

        dps = DPSettings(
            target_epsilon=s.target_epsilon, delta=s.delta, max_grad_norm=s.max_grad_norm, epochs=s.epochs,
            expected_batch_size=s.batch_size, lr=s.lr, seed=ctx.seed, accountant=s.accountant,
            train_embeddings=s.train_embeddings, train_output=s.train_output, micro_batch_tokens=s.micro_batch_tokens,
            grad_sample_mode=s.clipping, data_size=s.data_size, lora_rank=s.lora_rank if s.lora else None,
            debug_break=s.debug_break,
            **({"lora_alpha": s.lora_alpha, "qlora": bool(s.qlora), "lora_base_bf16": s.lora_base == "bf16",
                "lora_targets": s.lora_targets, "lora_layers": s.lora_layers} if s.lora else {}),
            public_weight=s.public_weight or 0.0, public_batch_size=s.public_batch_size or 64,
            gradient_canaries=s.gradient_canaries,
        )
        public = ctx[ENCODE]([r.text for r in ctx[PUBLIC]]) if dps.public_weight > 0 else None
        model, tlog = train_dp(model, ctx.data, dps, ctx.pad, ctx.max_length, desc=f"train {ctx.label}", public=public)
        cross = accountant_epsilons(sample_rate=tlog.sample_rate, noise_multiplier=tlog.sigma, steps=tlog.steps,
                                    delta=dps.delta)
        privacy = {"target_epsilon": dps.target_epsilon, "epsilon": tlog.epsilon, "accountant": tlog.accountant,
                   "delta": dps.delta, "sigma": tlog.sigma, "sample_rate": tlog.sample_rate, "steps": tlog.steps,
                   "max_grad_norm": dps.max_grad_norm, "epsilon_rdp": cross.epsilon_rdp,
                   "epsilon_pld": cross.epsilon_pld, "epsilon_prv": cross.epsilon_prv,
                   "empty_batches": tlog.empty_batches, "gradient_canaries": tlog.gradient_canaries,
                   **person_privacy(ctx.records, sample_rate=tlog.sample_rate, noise_multiplier=tlog.sigma,
                                    steps=tlog.steps, delta=dps.delta)}
        # Poisson sampling: each step sees q·n records in expectation.
        return model, {"kind": "dp", "steps": tlog.steps, "epoch_losses": tlog.losses, "privacy": privacy,
                       "epochs_run": tlog.sample_rate * tlog.steps}


def public_data_size(cfg, n_members: int) -> int:
    """The training-set size a DP arm's q = B / N is computed from: the members (with the planted exposure
    canaries, which the config fixes) and the one-run audit's canaries each is expected to include (½ of m).
    The realised count moves with the audit canaries' random inclusion; q, σ and the steps must not."""
    return int(n_members + round(cfg.one_run.canaries / 2))


def lora_base_bf16(setting: str) -> bool:
    """``dp.lora_base`` resolved on this run's device: auto is bf16 where the hardware multiplies bf16."""
    if setting != "auto":
        return setting == "bf16"
    from ..models.device import current, native_bf16

    return native_bf16(current().device)


DP_KIND = register(DP())
