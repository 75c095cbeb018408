"""ε by the three accountants side by side, for the report and the ``accountant`` command."""

from __future__ import annotations

from dataclasses import dataclass

from .pld import REL_ERR, check_pld_feasible, pld_epsilon
from .prv import check_prv_feasible, eps_error_for, prv_sizing_estimate, prv_upper
from .rdp import RDP_ORDERS, rdp_epsilon
from .validation import (
    PLD_DELTA_MIN,
    PLD_DELTA_REASON,
    check_delta,
    check_noise_multiplier,
    check_sample_rate,
    check_steps,
)


@dataclass(frozen=True)
class EpsilonReport:
    """ε for one (q, σ, T, δ) by the three accountants."""

    epsilon_rdp: float
    epsilon_pld: float
    epsilon_prv: float
    sample_rate: float
    noise_multiplier: float
    steps: int
    delta: float

    @property
    def epsilon(self) -> float:
        """The number to report: PLD (tight upper bound, cross-checked by PRV)."""
        return self.epsilon_pld


def epsilons(*, sample_rate: float, noise_multiplier: float, steps: int, delta: float) -> EpsilonReport:
    """ε by RDP, PLD and PRV side by side.

    Every limit is checked before the three are computed: the fixed ranges,
    the PLD grid (:func:`~.pld.check_pld_feasible`) and, after the coarse PLD
    bound that sizes PRV's margin (tens of ms), the PRV grid.
    """
    q, sigma = check_sample_rate(sample_rate), check_noise_multiplier(noise_multiplier)
    t = check_steps(steps)
    d = check_delta(delta, floor=PLD_DELTA_MIN, floor_reason=PLD_DELTA_REASON)
    check_pld_feasible(sample_rate=q, noise_multiplier=sigma, steps=t)
    history = [(sigma, q, t)]
    eps_error = eps_error_for(prv_sizing_estimate(history, d))
    check_prv_feasible(history, d, eps_error)
    return EpsilonReport(
        epsilon_rdp=rdp_epsilon(q, sigma, t, d, RDP_ORDERS),
        epsilon_pld=pld_epsilon(q, sigma, t, d, REL_ERR),
        epsilon_prv=prv_upper(history, d, eps_error, checked=True),
        sample_rate=q,
        noise_multiplier=sigma,
        steps=t,
        delta=d,
    )
