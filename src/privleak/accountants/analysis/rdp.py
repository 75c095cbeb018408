r"""ε by Rényi DP (RDP) of the Poisson-subsampled Gaussian.

Mironov 2017; Mironov, Talwar & Zhang 2019, "Rényi differential privacy of
the sampled Gaussian mechanism": for each order α, ``A_α = E_P[(Q/P)^α]``
with ``P = N(0, σ²)``, ``Q = (1 − q)·N(0, σ²) + q·N(1, σ²)`` (a binomial sum
for integer α, a two-sided series for fractional α), ``RDP_α = T·log(A_α)/(α
− 1)``, converted with the improved bound of Balle et al. 2020 / Canonne,
Kamath & Steinke 2020::

    ε = min_α  RDP_α + log((α − 1)/α) − (log δ + log α)/(α − 1).

Always an upper bound, typically 10–50 % loose; kept for comparison with the
literature (most papers report it), not for decisions. The cost does not
depend on T, and δ enters only through log δ, so RDP takes any δ > 0.

A finding worth knowing (pinned by tests): dp_accounting 0.6.0's RDP for
*fractional* orders over-estimates ``log A_α`` (``_compute_log_a_frac`` adds
the terms of the generalised binomial series with the sign of the
coefficient dropped, e.g. log A_2.7 = 0.005023 vs the true 0.004999 at
q = 0.01, σ = 0.6), and gives up on (excludes) small fractional orders when
q is large and σ small. The result stays a valid, conservative upper bound,
but it is not equal to Opacus's RDP (which sums with signs and matches
numerical integration) when a fractional order is optimal. With integer
orders the two libraries agree to ~1e-12.
"""

from __future__ import annotations

import logging
import math
import warnings
from contextlib import contextmanager
from typing import Callable, Iterator, Sequence

import dp_accounting
import numpy as np
from dp_accounting import rdp as dp_rdp

from .validation import check_delta, check_noise_multiplier, check_sample_rate, check_steps

#: Integer RDP orders: Opacus's default integers (2…10 via its fractional grid,
#: 12…63) plus 11 and a geometric tail up to 4096 for small ε (large σ), where
#: the optimal order is large. For integer orders dp_accounting and Opacus
#: evaluate the same exact binomial sum.
INTEGER_RDP_ORDERS: tuple[float, ...] = tuple(
    float(a)
    for a in list(range(2, 64))
    + [64, 72, 80, 96, 112, 128, 160, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096]
)

#: The orders every RDP number in this package uses: Opacus's
#: ``RDPAccountant.DEFAULT_ALPHAS`` (1.1, 1.2, …, 10.9 and 12…63), plus
#: 1.05, 1.15, …, 1.95 (large-ε regime), 11, and the large integer tail of
#: :data:`INTEGER_RDP_ORDERS`. Orders ≤ 1.01 are left out on purpose:
#: dp_accounting maps them to ε = ∞ while Opacus does not, which would make the
#: two libraries differ for a reason that has nothing to do with privacy.
RDP_ORDERS: tuple[float, ...] = tuple(
    sorted(
        set([1 + x / 20 for x in range(1, 20)] + [1 + x / 10.0 for x in range(1, 100)])
        | set(INTEGER_RDP_ORDERS)
    )
)

#: Cheap subset for first guesses only (never reported): integer orders ≤ 64
#: cost a few ms; any subset of orders still gives a valid upper bound.
QUICK_RDP_ORDERS: tuple[float, ...] = tuple(a for a in INTEGER_RDP_ORDERS if a <= 64)


class _DropFracSeriesWarnings(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "_compute_log_a_frac failed to converge" not in str(record.msg)


@contextmanager
def quiet_rdp() -> Iterator[None]:
    """Silence dp_accounting's per-order "failed to converge" log lines (the
    order is excluded, which is conservative) and Opacus's "optimal order is
    the largest alpha" warning; both would otherwise repeat on every step of a
    σ search."""
    logger = logging.getLogger("absl")
    flt = _DropFracSeriesWarnings()
    logger.addFilter(flt)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Optimal order is the")
            yield
    finally:
        logger.removeFilter(flt)


def dpsgd_event(sample_rate: float, noise_multiplier: float, steps: int) -> dp_accounting.DpEvent:
    """dp_accounting's event for T steps of the Poisson-subsampled Gaussian."""
    return dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(sample_rate, dp_accounting.GaussianDpEvent(noise_multiplier)), steps
    )


def rdp_epsilon(sample_rate: float, noise_multiplier: float, steps: int, delta: float,
                orders: Sequence[float] = RDP_ORDERS) -> float:
    """dp_accounting's RDP ε for checked inputs."""
    acc = dp_rdp.RdpAccountant(orders=list(orders))
    with quiet_rdp():
        acc.compose(dpsgd_event(sample_rate, noise_multiplier, steps))
        return float(acc.get_epsilon(delta))


def epsilon_rdp(*, sample_rate: float, noise_multiplier: float, steps: int, delta: float,
                orders: Sequence[float] = RDP_ORDERS) -> float:
    """ε by dp_accounting's ``RdpAccountant`` over :data:`RDP_ORDERS` (upper bound)."""
    return rdp_epsilon(check_sample_rate(sample_rate), check_noise_multiplier(noise_multiplier),
                       check_steps(steps), check_delta(delta), orders)


def epsilon_opacus_rdp(*, sample_rate: float, noise_multiplier: float, steps: int, delta: float,
                       orders: Sequence[float] = RDP_ORDERS) -> float:
    """ε by Opacus's ``RDPAccountant`` with the same orders as :func:`epsilon_rdp`
    (for cross-checking; see the module docstring for where the two differ)."""
    q, sigma = check_sample_rate(sample_rate), check_noise_multiplier(noise_multiplier)
    t, d = check_steps(steps), check_delta(delta)
    from opacus.accountants import RDPAccountant

    acc = RDPAccountant()
    acc.history = [(sigma, q, t)]
    with quiet_rdp():
        return float(acc.get_epsilon(d, alphas=list(orders)))


def opacus_rdp_curve(sample_rate: float, noise_multiplier: float, steps: int,
                     orders: Sequence[float] = RDP_ORDERS) -> Callable[[float], float]:
    """ε as a function of log δ by RDP, for δ below the smallest float (group privacy needs δ/e^{kε}).

    Opacus's ``compute_rdp`` (exact signed series, see the module docstring),
    computed once, and the same conversion as above, written in log δ.
    """
    from opacus.accountants.analysis.rdp import compute_rdp

    a = np.asarray(orders, dtype=float)
    with quiet_rdp(), np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        rdp = np.asarray(compute_rdp(q=sample_rate, noise_multiplier=noise_multiplier, steps=steps, orders=list(a)))

    def epsilon(log_delta: float) -> float:
        with np.errstate(over="ignore", invalid="ignore"):
            eps = rdp + np.log1p(-1.0 / a) - (log_delta + np.log(a)) / (a - 1.0)
        eps = eps[np.isfinite(eps)]
        return max(0.0, float(eps.min())) if eps.size else math.inf

    return epsilon


def rdp_epsilon_composed(history: Sequence[tuple[float, float, int]], delta: float,
                         orders: Sequence[float] = RDP_ORDERS) -> float:
    """dp_accounting's RDP ε of several DP-SGD runs, history entries (noise_multiplier, sample_rate, steps)."""
    acc = dp_rdp.RdpAccountant(orders=list(orders))
    with quiet_rdp():
        acc.compose(dp_accounting.ComposedDpEvent([dpsgd_event(q, s, int(t)) for s, q, t in history]))
        return float(acc.get_epsilon(delta))
