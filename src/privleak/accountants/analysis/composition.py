"""Several DP-SGD trainings on the same data composed into one ε: the budget ledger's arithmetic.

Every training that reads the same records spends budget on them (tuning
runs, one arm per ε, retraining); releasing the results of several costs
their composition, not the largest single ε. Each training is ``T_i`` steps
of the Poisson(q_i)-subsampled Gaussian with noise multiplier σ_i; the
composition of all of them is accounted exactly as one heterogeneous run:

* PLD: the PMF of each training is self-composed ``T_i`` times and the
  results convolved (dp_accounting's ``PLDAccountant`` on a ``ComposedDpEvent``
  does the same), on a grid fitted to the composed ε with the total step
  count in :func:`~.pld.vdi_for`;
* PRV: Opacus's ``PRVAccountant`` with a history of one entry per training
  (``compose_heterogeneous``);
* RDP: RDP values add across trainings (dp_accounting's ``RdpAccountant``).

Composition is over the trainings given, whatever their order, and assumes
each one's privacy unit is the same record (a person-level ledger composes
person-level events instead).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

from privleak.core.errors import UserError

from .grid import VDI_MAX, GridTooLarge, describe
from .pld import REL_ERR, PldEvent, adaptive_epsilon, estimate_grid
from .prv import eps_error_for, prv_sizing_estimate, prv_upper
from .rdp import QUICK_RDP_ORDERS, RDP_ORDERS, rdp_epsilon_composed
from .validation import (PLD_DELTA_MIN, PLD_DELTA_REASON, check_delta, check_noise_multiplier, check_sample_rate,
    check_steps)


@dataclass(frozen=True)
class Training:
    """One DP-SGD training: Poisson rate q, noise multiplier σ, steps T (checked when made)."""

    sample_rate: float
    noise_multiplier: float
    steps: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "sample_rate", check_sample_rate(self.sample_rate))
        object.__setattr__(self, "noise_multiplier", check_noise_multiplier(self.noise_multiplier))
        object.__setattr__(self, "steps", check_steps(self.steps))


def _rdp(trainings: Sequence[Training], delta: float, orders: Sequence[float]) -> float:
    return rdp_epsilon_composed([(t.noise_multiplier, t.sample_rate, t.steps) for t in trainings], delta, orders)


def compose_epsilon(*, trainings: Sequence[Training], delta: float,
                    accountant: Literal["pld", "prv", "rdp"] = "pld") -> float:
    """ε at δ of releasing everything the ``trainings`` produced (an upper bound, by ``accountant``).

    PLD (default, ~1e-4 relative above the exact composition), PRV (its
    additive margin as in :func:`~.prv.epsilon_prv`) or RDP (looser). With one
    training the PLD and PRV figures equal :func:`~.pld.epsilon_pld` and
    :func:`~.prv.epsilon_prv` exactly. Grids are sized first: a composition
    that cannot fit is refused naming the limit.
    """
    if isinstance(trainings, Training) or not trainings:
        raise UserError("trainings must be a non-empty list of Training(sample_rate, noise_multiplier, steps)")
    runs = [t if isinstance(t, Training) else Training(*t) for t in trainings]
    if accountant not in ("pld", "prv", "rdp"):
        raise UserError(f"accountant={accountant!r} is unknown; use one of 'pld', 'prv', 'rdp'")
    if accountant == "rdp":
        return _rdp(runs, check_delta(delta), RDP_ORDERS)
    d = check_delta(delta, floor=PLD_DELTA_MIN, floor_reason=PLD_DELTA_REASON)
    events = [PldEvent(noise_multiplier=t.noise_multiplier, sample_rate=t.sample_rate, count=t.steps) for t in runs]
    size = estimate_grid(events, VDI_MAX)
    if not size.fits():
        raise GridTooLarge(f"the composition of these {len(runs)} trainings cannot be accounted by PLD: "
                           f"{describe(size)}; drop the trainings with the smallest noise_multiplier or most steps",
                           points=max(size.single_points, size.composed_points))
    history = [(t.noise_multiplier, t.sample_rate, t.steps) for t in runs]
    if accountant == "prv":
        return prv_upper(history, d, eps_error_for(prv_sizing_estimate(history, d)))
    return adaptive_epsilon(events, d, REL_ERR, _rdp(runs, d, QUICK_RDP_ORDERS))
