r"""ε per person: what a record-level DP-SGD run implies for a unit of k records.

A person (patient, author) with k records in a run of DP-SGD with Poisson
rate q, noise multiplier σ and T steps is protected at a weaker level than a
record. Two sound upper bounds at the same target δ:

(a) **Group privacy, generic** (Dwork & Roth 2014, Thm 2.2; Vadhan 2017,
    Lemma 2.2): chaining (ε₁, δ₁)-DP over the k − 1 intermediate datasets
    gives ``(kε₁, δ₁·Σ_{i<k} e^{iε₁})``-DP for the group, and ``Σ_{i<k}
    e^{iε₁} ≤ k·e^{(k−1)ε₁}`` is the textbook form. We hold the **group δ
    fixed at the target** and solve for the record-level δ₁ = δ / Σ_{i<k}
    e^{iε₁} self-consistently with ε₁ = ε_record(δ₁): any ε₁ with
    ε_record(δ / Σ e^{iε₁}) ≤ ε₁ certifies (kε₁, δ); we bisect (to 0.1 %) for the
    smallest. ε_record is the PLD bound while δ₁ ≥ 1e-12 and the RDP bound
    (Opacus's exact series, in log δ) below, where δ₁ = δ·e^{−(k−1)ε₁} soon
    is.
(b) **Direct accounting** (Ganesh 2024, "Tight group-level DP guarantees for
    DP-SGD with sampling via mixture of Gaussians mechanisms", arXiv
    2401.10294): under Poisson sampling the j ~ Binomial(k, q) sampled
    records of the group add at most j·C to the clipped sum, so one step is
    dominated by ``N(0, σ²)`` vs ``Σ_j Bin(j; k, q)·N(j, σ²)`` (vector-valued
    reduced to scalar by Choquette-Choo et al. 2023, Cor. 4.7), composed T
    times by dp_accounting's mixture-of-Gaussians PLD with pessimistic
    discretisation — a sound upper bound, tight up to the grid. For k = 1 it
    is the record-level mechanism itself.

:func:`group_epsilon` reports both and **uses the smaller** (both are sound);
in every setting the tests check, that is (b). (b) needs a PLD grid that
grows with k; where it cannot fit the memory limits, (a) is used and the
result says so (``method``).

:func:`calibrate_group_sigma` inverts (b): the σ that holds a person of k
records to a target ε (user-level DP by example-level sampling after a
per-person cap, Charles et al. 2024).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable, Literal

import numpy as np
from scipy.stats import binom

from privleak.core.errors import UserError

from .calibration import _bracket, _log_ratio, _quick_rdp_sigma, _root
from . import pld as _pld
from .grid import GridTooLarge, describe, largest_fitting
from .pld import REL_ERR, PldEvent, adaptive_epsilon, check_pld_feasible, estimate_grid, gaussian_event, pld_epsilon
from .rdp import opacus_rdp_curve
from .validation import (PLD_DELTA_MIN, PLD_DELTA_REASON, check_delta, check_group_size, check_noise_multiplier,
    check_sample_rate, check_steps, check_target_epsilon, real)

_LOG_PLD_DELTA_MIN = math.log(PLD_DELTA_MIN)


@dataclass(frozen=True)
class GroupEpsilon:
    """ε at ``delta`` for a unit of ``group_size`` records of one record-level DP-SGD run."""

    group_size: int
    delta: float
    epsilon: float
    method: Literal["direct", "conversion"]
    epsilon_direct: float | None  # (b); None when its grid cannot fit the limits
    epsilon_conversion: float  # (a)
    record_epsilon: float  # ε₁ of (a)
    record_log_delta: float  # log δ₁ of (a) (δ₁ can be below the smallest float)


def _checked(sample_rate: object, noise_multiplier: object, steps: object, delta: object,
             group_size: object) -> tuple[float, float, int, float, int]:
    q, s = check_sample_rate(sample_rate), check_noise_multiplier(noise_multiplier)
    t, k = check_steps(steps), check_group_size(group_size)
    d = check_delta(delta, floor=PLD_DELTA_MIN, floor_reason=PLD_DELTA_REASON)
    check_pld_feasible(sample_rate=q, noise_multiplier=s, steps=t)
    return q, s, t, d, k


def _log_geometric_sum(eps: float, k: int) -> float:
    """log Σ_{i<k} e^{iε} = (k−1)ε + log((1 − e^{−kε}) / (1 − e^{−ε})), stable for small and large ε."""
    if k == 1:
        return 0.0
    if eps <= 0.0:
        return math.log(k)
    return (k - 1) * eps + math.log(-math.expm1(-k * eps)) - math.log(-math.expm1(-eps))


def _record_epsilon_curve(q: float, s: float, t: int) -> Callable[[float], float]:
    """Tightest record-level ε this package certifies, as a function of log δ."""
    rdp = opacus_rdp_curve(q, s, t)

    def epsilon(log_delta: float) -> float:
        if log_delta >= _LOG_PLD_DELTA_MIN:
            return min(pld_epsilon(q, s, t, math.exp(log_delta), REL_ERR), rdp(log_delta))
        return rdp(log_delta)

    return epsilon


def conversion(q: float, s: float, t: int, delta: float, k: int, rel_tol: float = 1e-3) -> tuple[float, float, float]:
    """(kε₁, ε₁, log δ₁) of (a) for checked inputs; ε₁ = ∞ when no finite ε₁ certifies it."""
    log_delta = math.log(delta)
    if k == 1:
        eps = pld_epsilon(q, s, t, delta, REL_ERR)
        return eps, eps, log_delta
    record = _record_epsilon_curve(q, s, t)

    def excess(e1: float) -> float:  # ≤ 0: e1 certifies (k·e1, δ)
        return record(log_delta - _log_geometric_sum(e1, k)) - e1

    lo = record(log_delta)  # ε₁ ≥ this: δ₁ ≤ δ
    if not math.isfinite(lo):
        return math.inf, math.inf, -math.inf
    hi = max(lo, 1e-6) * 2
    while excess(hi) > 0:
        lo, hi = hi, hi * 2
        if hi > 1e6:
            return math.inf, math.inf, -math.inf
    while hi - lo > rel_tol * hi:
        mid = 0.5 * (lo + hi)
        if excess(mid) <= 0:
            hi = mid
        else:
            lo = mid
    return k * hi, hi, log_delta - _log_geometric_sum(hi, k)


def mixture_event(q: float, s: float, t: int, k: int) -> PldEvent:
    """One step of a k-record group under Poisson sampling: N(0, σ²) vs Σ_j Bin(j; k, q)·N(j, σ²), T times.
    For k = 1 the Poisson-subsampled Gaussian itself (the same pair, dp_accounting's dedicated code)."""
    if k == 1:
        return gaussian_event(sample_rate=q, noise_multiplier=s, steps=t)
    j = np.arange(k + 1)
    p = binom.pmf(j, k, q)
    # Components whose probability underflows to 0 are dropped: their true mass (< 1e-300 per step) moves δ by
    # less than T·k·1e-300, far below the smallest δ accepted here (1e-12).
    keep = p > 0.0
    return PldEvent(noise_multiplier=s, count=t, sensitivities=tuple(float(x) for x in j[keep]),
                    probabilities=tuple(float(x) for x in p[keep]))


def direct_fits(q: float, s: float, t: int, k: int) -> bool:
    ev = mixture_event(q, s, t, k)
    return estimate_grid([ev], ev.max_vdi).fits()


def direct(q: float, s: float, t: int, delta: float, k: int) -> float:
    """(b) for checked inputs whose grid fits."""
    if k == 1:
        return pld_epsilon(q, s, t, delta, REL_ERR)
    return adaptive_epsilon([mixture_event(q, s, t, k)], delta, REL_ERR, math.inf)


def group_epsilon_direct(*, sample_rate: float, noise_multiplier: float, steps: int, delta: float,
                         group_size: int) -> float:
    """(b) alone: the mixture-of-Gaussians PLD of a k-record group. Refused, naming the largest group size
    that fits, when its grid cannot fit the memory limits."""
    q, s, t, d, k = _checked(sample_rate, noise_multiplier, steps, delta, group_size)
    try:
        return direct(q, s, t, d, k)
    except GridTooLarge:
        ev = mixture_event(q, s, t, k)
        size = estimate_grid([ev], ev.max_vdi)
        kmax = int(largest_fitting(lambda x: direct_fits(q, s, t, int(x)), 1.0, float(k), log=False))
        raise GridTooLarge(f"group_size={k} is too large for the direct person-level accounting at "
                           f"sample_rate={q:g}, noise_multiplier={s:g}, steps={t}: {describe(size)}; use "
                           f"group_size <= {kmax}, or group_epsilon, which falls back to group privacy") from None


def group_epsilon_conversion(*, sample_rate: float, noise_multiplier: float, steps: int, delta: float,
                             group_size: int) -> float:
    """(a) alone: kε₁ with the group δ held at ``delta`` (see the module docstring)."""
    q, s, t, d, k = _checked(sample_rate, noise_multiplier, steps, delta, group_size)
    return conversion(q, s, t, d, k)[0]


def group_epsilon(*, sample_rate: float, noise_multiplier: float, steps: int, delta: float,
                  group_size: int) -> GroupEpsilon:
    """ε at ``delta`` for a person with ``group_size`` records in a record-level DP-SGD run: both bounds,
    and the smaller (``method`` says which) as ``epsilon``. For ``group_size`` = 1 both are the
    record-level PLD ε."""
    q, s, t, d, k = _checked(sample_rate, noise_multiplier, steps, delta, group_size)
    return _group_epsilon(q, s, t, d, k, _grid_limits())


def _grid_limits() -> tuple[int, int, int]:
    """The PLD grid limits in force: part of a memo's key, so a result computed under other limits (a test
    narrows them, on :mod:`.pld`) is never handed back. Only these three: no other constant the answer depends on
    (the PLD accuracies, ``grid``'s own copies of the limits) is ever changed at run time."""
    return _pld.SINGLE_POINTS_MAX, _pld.COMPOSED_POINTS_MAX, _pld.MIXTURE_POINT_COST


# One audit asks the same person-level question in several places (the arm's person ε as it trains, the alarm's
# unit claim as it judges): each answer costs about a second of PLD work, and GroupEpsilon is frozen.
@functools.lru_cache(maxsize=256)
def _group_epsilon(q: float, s: float, t: int, d: float, k: int, limits: tuple[int, int, int]) -> GroupEpsilon:
    eps_a, eps1, log_d1 = conversion(q, s, t, d, k)
    try:  # every grid is checked before it is allocated; one that cannot fit leaves (a)
        eps_b: float | None = direct(q, s, t, d, k)
    except GridTooLarge:
        eps_b = None
    use_direct = eps_b is not None and eps_b <= eps_a
    return GroupEpsilon(group_size=k, delta=d, epsilon=eps_b if use_direct else eps_a,  # type: ignore[arg-type]
                        method="direct" if use_direct else "conversion", epsilon_direct=eps_b,
                        epsilon_conversion=eps_a, record_epsilon=eps1, record_log_delta=log_d1)


#: Relative PLD excess allowed inside :func:`calibrate_group_sigma`'s search (the final σ is checked on the
#: fine grid of :func:`group_epsilon_direct`): the mixture grid costs ~k times a record's, and the search
#: only needs to land near the root.
GROUP_SEARCH_REL_ERR = 1e-2


def calibrate_group_sigma(*, target_epsilon: float, delta: float, sample_rate: float, steps: int, group_size: int,
                          tol: float = 1e-3) -> float:
    """Smallest σ (to relative ``tol``) whose person-level ε for a ``group_size``-record person meets the target.

    The σ a record-level DP-SGD run (Poisson rate q, T steps) needs so that
    :func:`group_epsilon_direct` — the mixture-of-Gaussians PLD of Ganesh 2024
    / Charles et al. 2024 ("Fine-Tuning LLMs with User-Level DP", arXiv
    2407.07737), the tight accountant of *example-level sampling* after each
    person is capped at k records — is ≤ ``target_epsilon`` at ``delta``. ε is
    decreasing in σ and close to a power law, so the search is
    :func:`calibrate_sigma`'s (bracket, then regula falsi in log σ), first on
    a coarse grid (:data:`GROUP_SEARCH_REL_ERR`; it over-states ε, so its root
    lies above the true one), then on the fine grid from there; the σ returned
    satisfies ``group_epsilon_direct(…) ≤ target_epsilon`` by that very
    function. For ``group_size`` = 1 it is the record-level calibration by PLD.
    """
    target = check_target_epsilon(target_epsilon)
    q, t, k = check_sample_rate(sample_rate), check_steps(steps), check_group_size(group_size)
    d = check_delta(delta, floor=PLD_DELTA_MIN, floor_reason=PLD_DELTA_REASON)
    tol_f = real("tol", tol, "use a relative tolerance such as 1e-3")
    if not (1e-6 <= tol_f <= 0.1):
        raise UserError(f"tol={tol!r} is out of range; use a relative tolerance between 1e-6 and 0.1, e.g. 1e-3")
    return _calibrate_group_sigma(target, d, q, t, k, tol_f, _grid_limits())


# Every ELS training at one q, step count and cap asks for the same σ (an arm retrained on extra seeds for the
# recommendation, in one process): a few seconds of mixture PLD each time.
@functools.lru_cache(maxsize=64)
def _calibrate_group_sigma(target: float, d: float, q: float, t: int, k: int, tol_f: float,
                           limits: tuple[int, int, int]) -> float:
    def coarse(s: float) -> float:
        return _log_ratio(adaptive_epsilon([mixture_event(q, s, t, k)], d, GROUP_SEARCH_REL_ERR, math.inf), target)

    def fine(s: float) -> float:
        return _log_ratio(direct(q, s, t, d, k), target)

    # A k-record person under record-level ε/k noise is held to about ε (group privacy's kε, which the
    # mixture accounting improves on): that σ is a near, cheap start.
    start = _quick_rdp_sigma(target / k, d, q, t) or 1.0
    try:
        lo, glo, hi, ghi = _bracket(coarse, start, "person-level PLD")
        _, hi, _ = _root(coarse, lo, glo, hi, ghi, tol_f)
        lo, glo, hi, ghi = _bracket(fine, hi, "person-level PLD")
        _, hi, _ = _root(fine, lo, glo, hi, ghi, tol_f)
    except GridTooLarge as exc:
        raise GridTooLarge(f"target_epsilon={target:g} for a {k}-record person cannot be calibrated at "
                           f"sample_rate={q:g}, steps={t}: {exc}; cap fewer records per person or raise the target",
                           points=exc.points, limit=exc.limit) from None
    for _ in range(200):  # the regula falsi keeps hi feasible; guard against a grid-rounding wobble
        if fine(hi) <= 0:
            return float(hi)
        hi *= 1 + 0.25 * tol_f
    raise UserError(f"could not meet the person-level epsilon={target:g}; check the parameters")
