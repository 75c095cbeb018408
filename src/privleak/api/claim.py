"""The DP guarantee a user's own training claims: what the one-run audit of their model tests.

A DP-SGD run's claim is (ε, δ) per record, from its noise multiplier σ, its Poisson sampling rate q, its
steps T and its clipping bound C. :meth:`DPClaim.from_engine` reads them from an Opacus ``PrivacyEngine`` (its
accountant's history and ε); :class:`DPClaim` takes them from the user otherwise. PrivLeak does not take the
claim on trust for the figures it prints beside it: ε is recomputed by three accountants of its own (RDP, PLD,
PRV; :func:`privleak.accountants.epsilons`) at the same (σ, q, T, δ), shown next to the claim, while the alarm
tests the ε the user's accountant claims (:mod:`privleak.audit.alarms`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..core.errors import UserError
from ..core.limits import MAX_EPSILON


@dataclass(frozen=True)
class DPClaim:
    """(ε, δ)-DP per record, claimed for a DP-SGD run of ``steps`` steps at noise multiplier ``noise_multiplier``,
    Poisson sampling rate ``sample_rate`` and clipping bound ``max_grad_norm``; ``accountant``: whose ε it is."""

    epsilon: float
    delta: float
    noise_multiplier: float
    sample_rate: float
    steps: int
    max_grad_norm: float
    accountant: str = "stated"
    #: The white-box gradient canaries' statistics from the training's own DP steps
    #: (:meth:`privleak.integrations.AuditHook.watch`; :class:`privleak.results.GradientCanaryCheck`'s fields).
    gradient_canaries: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        checks = (
            (0.0 < self.epsilon <= MAX_EPSILON, f"epsilon={self.epsilon!r}: a claimed ε must be in (0, {MAX_EPSILON:g}] "
                                                "(above it a DP guarantee certifies nothing)"),
            (0.0 < self.delta < 1.0, f"delta={self.delta!r}: δ must satisfy 0 < δ < 1; give your accountant's δ, "
                                     "e.g. 1e-5"),
            (self.noise_multiplier > 0 and math.isfinite(self.noise_multiplier),
             f"noise_multiplier={self.noise_multiplier!r}: a DP-SGD run claims a guarantee only with noise "
             "(σ > 0); give the σ your training ran with"),
            (0.0 < self.sample_rate <= 1.0, f"sample_rate={self.sample_rate!r}: the sampling rate q must be in (0, 1] "
                                            "(expected batch size / training records)"),
            (isinstance(self.steps, int) and self.steps >= 1, f"steps={self.steps!r}: give the number of DP-SGD steps "
                                                               "taken (≥ 1)"),
            (self.max_grad_norm > 0 and math.isfinite(self.max_grad_norm),
             f"max_grad_norm={self.max_grad_norm!r}: the clipping bound C must be positive"),
        )
        for ok, message in checks:
            if not ok:
                raise UserError(message)

    @classmethod
    def from_engine(cls, engine: Any, delta: float, *, optimizer: Any = None, max_grad_norm: float | None = None,
                    epsilon: float | None = None) -> "DPClaim":
        """The claim of an Opacus ``PrivacyEngine`` after training: σ, q and T from its accountant's history, ε its
        accountant's at ``delta`` (unless ``epsilon`` states it), C from the DP optimizer (``optimizer``: the one
        ``make_private`` returned, or a wrapper of it such as the Trainer's) or ``max_grad_norm``."""
        accountant = getattr(engine, "accountant", None)
        history = list(getattr(accountant, "history", None) or [])
        if not history:
            raise UserError("privacy_engine: its accountant has recorded no DP-SGD step (train with the optimizer "
                            "make_private returned, or give the claim as DPClaim(epsilon=..., ...))")
        rates = {(float(s), float(q)) for s, q, _ in history}
        if len(rates) != 1:
            raise UserError(f"privacy_engine: the run changed its noise multiplier or sampling rate ({sorted(rates)}); "
                            "one claim needs one (σ, q): give it as DPClaim(epsilon=..., ...)")
        (sigma, q), = rates
        steps = sum(int(n) for _, _, n in history)
        clip = max_grad_norm if max_grad_norm is not None else _max_grad_norm(optimizer)
        if clip is None:
            raise UserError("privacy_engine: the clipping bound is not known; pass the DP optimizer (optimizer=...) "
                            "or max_grad_norm=C")
        if epsilon is None:
            epsilon = float(engine.get_epsilon(delta))
        name = accountant.mechanism() if hasattr(accountant, "mechanism") else type(accountant).__name__
        return cls(epsilon=float(epsilon), delta=float(delta), noise_multiplier=sigma, sample_rate=q, steps=steps,
                   max_grad_norm=float(clip), accountant=f"opacus {name}")

    def privacy(self) -> dict[str, Any]:
        """The target's ``Privacy`` block (:class:`privleak.results.Privacy`): the claim, and ε by PrivLeak's
        own accountants at the same (σ, q, T, δ)."""
        from ..accountants import epsilons

        try:
            cross = epsilons(sample_rate=self.sample_rate, noise_multiplier=self.noise_multiplier, steps=self.steps,
                             delta=self.delta)
            checked = {"epsilon_rdp": cross.epsilon_rdp, "epsilon_pld": cross.epsilon_pld,
                       "epsilon_prv": cross.epsilon_prv}
        except UserError:  # parameters past what the accountants can compute: the claim stands alone
            checked = {"epsilon_rdp": None, "epsilon_pld": None, "epsilon_prv": None}
        return {"target_epsilon": self.epsilon, "epsilon": self.epsilon, "accountant": self.accountant,
                "delta": self.delta, "sigma": self.noise_multiplier, "sample_rate": self.sample_rate,
                "steps": self.steps, "max_grad_norm": self.max_grad_norm, **checked, "unit": "record",
                **({"gradient_canaries": dict(self.gradient_canaries)} if self.gradient_canaries else {})}


def _max_grad_norm(optimizer: Any) -> float | None:
    """C of a DP optimizer, through the wrappers a trainer puts around it (``.optimizer``)."""
    seen = 0
    while optimizer is not None and seen < 8:
        clip = getattr(optimizer, "max_grad_norm", None)
        if isinstance(clip, (int, float)) and not isinstance(clip, bool):
            return float(clip)
        optimizer, seen = getattr(optimizer, "optimizer", None), seen + 1
    return None
