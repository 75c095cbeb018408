"""ε by the three accountants side by side, for the report and the ``accountant`` command."""

from __future__ import annotations

from dataclasses import dataclass

from privleak.core.errors import UserError

from .pld import REL_ERR, check_pld_feasible, pld_epsilon
from .prv import EPS_ERROR_MAX, check_prv_feasible, eps_error_for, prv_sizing_estimate, prv_upper
from .rdp import RDP_ORDERS, rdp_epsilon
from .validation import (PLD_DELTA_MIN, PLD_DELTA_REASON, check_delta, check_noise_multiplier, check_sample_rate,
    check_steps)


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
    # The PRV grid shrinks as its margin grows: if it does not fit at the largest margin, no PLD sizing run helps.
    check_prv_feasible(history, d, EPS_ERROR_MAX)
    estimate = prv_sizing_estimate(history, d)
    if estimate == 0.0:
        raise UserError(f"delta={d:g} is so large that epsilon is 0 at sample_rate={q:g}, noise_multiplier={sigma:g}, "
                        f"steps={t} (the two output distributions differ by less than delta), which the PRV "
                        "accountant cannot represent; use delta below 1/n for n training records")
    eps_error = eps_error_for(estimate)
    check_prv_feasible(history, d, eps_error)
    prv = prv_upper(history, d, eps_error, checked=True)  # first: the one that can still refuse
    return EpsilonReport(
        epsilon_rdp=rdp_epsilon(q, sigma, t, d, RDP_ORDERS),
        epsilon_pld=pld_epsilon(q, sigma, t, d, REL_ERR),
        epsilon_prv=prv,
        sample_rate=q,
        noise_multiplier=sigma,
        steps=t,
        delta=d,
    )
