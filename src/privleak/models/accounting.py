r"""Privacy accounting for DP-SGD with Poisson sampling.

One concept, three numerical methods, all for the same mechanism.

The mechanism
-------------
Each of ``T`` DP-SGD steps draws a Poisson batch (every record independently
with probability ``q``), sums the per-example gradients clipped to norm ``C``
and adds ``N(0, σ²C²·I)``. By the usual reduction (Mironov, Talwar & Zhang
2019; Zhu, Dong & Wang 2022) one step is, for add/remove-one neighbours,
dominated by the one-dimensional pair

    P = N(0, σ²)      and      Q = (1 − q)·N(0, σ²) + q·N(1, σ²)

(and the same pair swapped). Its privacy loss is ``L(x) = log(Q(x)/P(x))`` and
the hockey-stick divergence gives the tight ``δ(ε) = E_Q[(1 − e^{ε − L})₊]``;
``T`` steps compose by adding ``T`` independent copies of ``L``. ε(δ) is the
smallest ε with ``δ(ε) ≤ δ``. The three accountants differ only in how they
bound this quantity:

* **RDP** (Mironov 2017; Mironov, Talwar & Zhang 2019, "Rényi differential
  privacy of the sampled Gaussian mechanism"): for each order α,
  ``A_α = E_P[(Q/P)^α]`` (a binomial sum for integer α, a two-sided series for
  fractional α), ``RDP_α = T·log(A_α)/(α − 1)``, converted with the improved
  bound of Balle et al. 2020 / Canonne, Kamath & Steinke 2020::

      ε = min_α  RDP_α + log((α − 1)/α) − (log δ + log α)/(α − 1).

  Always an upper bound, typically 10–50 % loose. Orders: :data:`RDP_ORDERS`.
* **PLD** (Meiser & Mohammadi 2018; Koskela, Jälkö & Honkela 2020;
  Doroshenko et al. 2022, "Connect the dots"): discretise the privacy-loss
  distribution on a grid of width Δ (``value_discretization_interval``) with
  pessimistic rounding, compose by FFT, read off δ(ε). A provable upper bound
  for any Δ; the excess shrinks with Δ. Measured over q ∈ [1e-3, 0.2],
  σ ∈ [0.6, 5], T ≤ 1000: relative excess ≈ 0.9·T·(Δ/ε)², so we use
  ``Δ = ε·sqrt(r/T)`` with r = 1e-4 (≈ 1e-4 relative, "well under 1 %"),
  iterating on ε because ε is what we are computing.
* **PRV** (Gopi, Lee & Wutschitz 2021), via Opacus: the same privacy loss
  random variable, truncated to [−L, L], discretised on a mesh chosen from an
  ε-error budget ``eps_error`` and δ-error budget ``delta_error`` and composed
  by FFT. ``get_epsilon`` returns the upper bound ``ε̂(δ − δ_err) + eps_error``:
  the ``eps_error`` term is *additive*, so for tiny ε the bound is loose in
  relative terms by construction (see :func:`epsilon_prv`).

The PLD and PRV numbers are tight: at fine resolution (PLD Δ ≤ 1e-5, PRV
eps_error ≤ 1e-3) the PLD bound and the PRV point estimate agree to 1e-5
relative or better on the points checked; at the default settings the gap is
PRV's additive margin (≤ 0.23 % for ε ≥ 0.5 over the 96-point grid). The RDP number is kept for
comparison with the literature (most papers report it), not for decisions.

Two findings worth knowing (both pinned by tests):

* dp_accounting 0.6.0's RDP for *fractional* orders over-estimates ``log A_α``
  (``_compute_log_a_frac`` adds the terms of the generalised binomial series
  with the sign of the coefficient dropped, e.g. log A_2.7 = 0.005023 vs the
  true 0.004999 at q=0.01, σ=0.6), and gives up on (excludes) small fractional
  orders when q is large and σ small. The result stays a valid, conservative
  upper bound, but it is not equal to Opacus's RDP (which sums with signs and
  matches numerical integration) when a fractional order is optimal. With
  integer orders the two libraries agree to ~1e-12.
* Opacus's ``make_private_with_epsilon`` calibrates σ for
  ``int(epochs / sample_rate)`` steps, but its Poisson data loader then runs
  ``int(1 / sample_rate)`` batches per epoch; in floating point these can
  differ (75 batches × 3 epochs: calibrated for 224 steps, trains 225). See
  :func:`steps_for` and :func:`opacus_calibration_steps`.

Every public function validates its inputs and raises
:class:`~privleak.errors.UserError` with a one-line message on bad values.
"""

from __future__ import annotations

import functools
import logging
import math
import numbers
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, Literal, Sequence

import dp_accounting
import numpy as np
from dp_accounting import pld as dp_pld
from dp_accounting import rdp as dp_rdp

from privleak.core.errors import UserError

__all__ = [
    "RDP_ORDERS",
    "INTEGER_RDP_ORDERS",
    "EpsilonReport",
    "SigmaReport",
    "calibrate_sigma",
    "epsilon_opacus_rdp",
    "epsilon_pld",
    "epsilon_prv",
    "epsilon_rdp",
    "epsilons",
    "opacus_calibration_steps",
    "sigmas",
    "steps_for",
    "validate_privacy_params",
]

Accountant = Literal["rdp", "pld", "prv"]

# --------------------------------------------------------------------------
# RDP orders
# --------------------------------------------------------------------------

#: Integer RDP orders: Opacus's default integers (2…10 via its fractional grid,
#: 12…63) plus 11 and a geometric tail up to 4096 for small ε (large σ), where
#: the optimal order is large. For integer orders dp_accounting and Opacus
#: evaluate the same exact binomial sum.
INTEGER_RDP_ORDERS: tuple[float, ...] = tuple(
    float(a)
    for a in list(range(2, 64))
    + [64, 72, 80, 96, 112, 128, 160, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096]
)

#: The orders every RDP number in this module uses: Opacus's
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

# Cheap subset for first guesses only (never reported): integer orders ≤ 64
# cost a few ms; any subset of orders still gives a valid upper bound.
_QUICK_RDP_ORDERS: tuple[float, ...] = tuple(a for a in INTEGER_RDP_ORDERS if a <= 64)

# --------------------------------------------------------------------------
# Numerical settings
# --------------------------------------------------------------------------

_PLD_REL_ERR = 1e-4  # target relative excess of epsilon_pld over the exact ε
_PLD_SEARCH_REL_ERR = 1e-3  # coarser grid used inside calibrate_sigma's search
_PLD_VDI_MIN = 1e-6
_PLD_VDI_MAX = 5e-3
_PLD_MAX_REFINEMENTS = 6

_PRV_EPS_ERROR_MAX = 1e-2  # Opacus's default
_PRV_EPS_ERROR_MIN = 1e-3  # below this the PRV mesh gets too large to be fast
_PRV_EPS_ERROR_REL = 2e-3  # aim for ≤ 0.2 % additive margin where affordable
_PRV_SIZING_REL_ERR = 1e-2  # coarse PLD used only to size PRV's margin
_PRV_MAX_GRID_POINTS = 3e7  # ~20 s and a few GB in Opacus; beyond, refuse rather than swap

# calibrate_sigma search range (not a cap on the answer: outside it no
# accountant gives a meaningful number, and we say so).
_SIGMA_SEARCH_MIN = 1e-2
_SIGMA_SEARCH_MAX = 1e6


# --------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------


def _real(name: str, value: object, hint: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise UserError(f"{name}={value!r} is not a number; {hint}")
    return float(value)


def validate_privacy_params(
    *,
    q: float | None = None,
    sigma: float | None = None,
    steps: int | None = None,
    delta: float | None = None,
    epsilon: float | None = None,
) -> None:
    """Check the parameters that are given (``None`` = not checked).

    Raises :class:`UserError` naming the bad value and the fix:
    ``0 < q ≤ 1``, finite ``σ > 0``, integer ``steps ≥ 1``, ``0 < δ < 1``,
    finite ``ε > 0``.
    """
    if q is not None:
        hint = "the sample rate must satisfy 0 < q <= 1 (q = expected batch size / dataset size)"
        v = _real("q", q, hint)
        if not (0.0 < v <= 1.0):
            raise UserError(f"sample rate q={q!r} is out of range; {hint}")
    if sigma is not None:
        hint = "the noise multiplier must be a finite number > 0 (noise std = sigma * max_grad_norm)"
        v = _real("sigma", sigma, hint)
        if not (v > 0.0 and math.isfinite(v)):
            raise UserError(f"noise multiplier sigma={sigma!r} is invalid; {hint}")
    if steps is not None:
        hint = "steps must be a whole number >= 1 (optimizer steps = epochs * batches per epoch)"
        if isinstance(steps, bool) or not isinstance(steps, numbers.Integral):
            raise UserError(f"steps={steps!r} is not a whole number; {hint}")
        if int(steps) < 1:
            raise UserError(f"steps={steps!r} is out of range; {hint}")
    if delta is not None:
        hint = "delta must satisfy 0 < delta < 1; use delta below 1/n, e.g. 1/(2n) for n training records"
        v = _real("delta", delta, hint)
        if not (0.0 < v < 1.0):
            raise UserError(f"delta={delta!r} is out of range; {hint}")
    if epsilon is not None:
        hint = "epsilon must be a finite number > 0 (typical DP-SGD targets are 1 to 10)"
        v = _real("epsilon", epsilon, hint)
        if not (v > 0.0 and math.isfinite(v)):
            raise UserError(f"epsilon={epsilon!r} is out of range; {hint}")


def _validated(q: float, sigma: float, steps: int, delta: float) -> tuple[float, float, int, float]:
    validate_privacy_params(q=q, sigma=sigma, steps=steps, delta=delta)
    return float(q), float(sigma), int(steps), float(delta)


# --------------------------------------------------------------------------
# Library noise control
# --------------------------------------------------------------------------


class _DropFracSeriesWarnings(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "_compute_log_a_frac failed to converge" not in str(record.msg)


@contextmanager
def _quiet_rdp() -> Iterator[None]:
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


def _event(q: float, sigma: float, steps: int) -> dp_accounting.DpEvent:
    return dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps
    )


# --------------------------------------------------------------------------
# ε for (q, σ, T, δ)
# --------------------------------------------------------------------------


def _rdp_eps(q: float, sigma: float, steps: int, delta: float, orders: Sequence[float]) -> float:
    acc = dp_rdp.RdpAccountant(orders=list(orders))
    with _quiet_rdp():
        acc.compose(_event(q, sigma, steps))
        return float(acc.get_epsilon(delta))


def epsilon_rdp(q: float, sigma: float, steps: int, delta: float, *, orders: Sequence[float] = RDP_ORDERS) -> float:
    """ε by dp_accounting's ``RdpAccountant`` over :data:`RDP_ORDERS` (upper bound)."""
    q, sigma, steps, delta = _validated(q, sigma, steps, delta)
    return _rdp_eps(q, sigma, steps, delta, orders)


def epsilon_opacus_rdp(
    q: float, sigma: float, steps: int, delta: float, *, orders: Sequence[float] = RDP_ORDERS
) -> float:
    """ε by Opacus's ``RDPAccountant`` with the same orders as :func:`epsilon_rdp`
    (for cross-checking; see the module docstring for where the two differ)."""
    q, sigma, steps, delta = _validated(q, sigma, steps, delta)
    from opacus.accountants import RDPAccountant

    acc = RDPAccountant()
    acc.history = [(sigma, q, steps)]
    with _quiet_rdp():
        return float(acc.get_epsilon(delta, alphas=list(orders)))


def _pld_eps(q: float, sigma: float, steps: int, delta: float, vdi: float) -> float:
    acc = dp_pld.PLDAccountant(value_discretization_interval=vdi)
    acc.compose(_event(q, sigma, steps))
    return float(acc.get_epsilon(delta))


def _pld_vdi(eps: float, steps: int, rel_err: float) -> float:
    """Grid width Δ for a relative excess ≈ rel_err at this ε and T
    (empirical law: excess/ε ≈ 0.9·T·(Δ/ε)², see the module docstring)."""
    if not math.isfinite(eps):
        return _PLD_VDI_MAX
    return min(_PLD_VDI_MAX, max(_PLD_VDI_MIN, eps * math.sqrt(rel_err / steps)))


def epsilon_pld(
    q: float,
    sigma: float,
    steps: int,
    delta: float,
    *,
    value_discretization_interval: float | None = None,
) -> float:
    """ε by dp_accounting's ``PLDAccountant`` (pessimistic, so an upper bound).

    With ``value_discretization_interval=None`` (default) the grid width is
    chosen from ε itself: start from a quick RDP bound, compute, and refine
    until Δ ≤ 1.5·ε·sqrt(1e-4/T), which keeps the excess over the exact ε at
    about 1e-4 relative (≤ ~2.3e-4). Typically < 0.3 s; < 1 s up to T ≈ 10⁴.
    """
    q, sigma, steps, delta = _validated(q, sigma, steps, delta)
    if value_discretization_interval is not None:
        vdi = _real("value_discretization_interval", value_discretization_interval, "use a small positive width, e.g. 1e-4")
        if not (vdi > 0 and math.isfinite(vdi)):
            raise UserError(f"value_discretization_interval={vdi!r} must be a finite number > 0, e.g. 1e-4")
        return _pld_eps(q, sigma, steps, delta, vdi)
    return _pld_eps_adaptive(q, sigma, steps, delta, _PLD_REL_ERR)


def _pld_eps_adaptive(q: float, sigma: float, steps: int, delta: float, rel_err: float) -> float:
    """PLD ε on a grid fitted to ε itself. Every pass is an upper bound, so
    the grid is never finer than the true ε needs (which also bounds memory:
    huge ε → coarse grid)."""
    eps = _rdp_eps(q, sigma, steps, delta, _QUICK_RDP_ORDERS)
    vdi = _pld_vdi(eps, steps, rel_err)
    for _ in range(_PLD_MAX_REFINEMENTS):
        eps = _pld_eps(q, sigma, steps, delta, vdi)
        needed = _pld_vdi(eps, steps, rel_err)
        if vdi <= 1.5 * needed:
            break
        vdi = needed
    return eps


def _prv_eps_error(eps: float) -> float:
    return min(_PRV_EPS_ERROR_MAX, max(_PRV_EPS_ERROR_MIN, _PRV_EPS_ERROR_REL * eps))


def _prv_grid_points(q: float, sigma: float, steps: int, delta: float, eps_error: float) -> float:
    """Size of the grid Opacus's PRVAccountant will allocate: it mirrors
    ``PRVAccountant._get_domain`` (opacus/accountants/prv.py): domain [-L, L]
    from ``compute_safe_domain_size``, mesh ``eps_error / sqrt(T·log(12/δ_err)/2)``."""
    from opacus.accountants.analysis.prv import (
        PoissonSubsampledGaussianPRV,
        compute_safe_domain_size,
    )

    delta_error = delta / 1000
    with _quiet_rdp(), np.errstate(divide="ignore", over="ignore"):
        half_width = compute_safe_domain_size(
            prvs=[PoissonSubsampledGaussianPRV(q, sigma)],
            max_self_compositions=[steps],
            eps_error=eps_error,
            delta_error=delta_error,
        )
    mesh = eps_error / math.sqrt(steps * math.log(12 / delta_error) / 2)
    return 2 * half_width / mesh


def _prv_upper(q: float, sigma: float, steps: int, delta: float, eps_error: float) -> float:
    """Opacus ``PRVAccountant.get_epsilon`` (the upper bound) for history [(σ, q, T)]."""
    from opacus.accountants import PRVAccountant

    points = _prv_grid_points(q, sigma, steps, delta, eps_error)
    if not points <= _PRV_MAX_GRID_POINTS:
        raise UserError(
            f"the PRV accountant would need a grid of {points:.2g} points for q={q:g}, sigma={sigma:g}, "
            f"steps={steps} (epsilon far beyond any useful budget); use the PLD accountant for such settings"
        )
    acc = PRVAccountant()
    acc.history = [(sigma, q, steps)]
    try:
        # Opacus sizes the PRV domain with an RDP bound (which warns about its
        # orders) and takes log(1 - q), which numpy flags as a division by 0 at q = 1.
        with _quiet_rdp(), np.errstate(divide="ignore"):
            return float(acc.get_epsilon(delta, eps_error=eps_error))
    except (RuntimeError, ValueError) as exc:  # Opacus: "Cannot compute epsilon" / float limits
        raise UserError(
            f"PRV accountant cannot compute epsilon for q={q:g}, sigma={sigma:g}, steps={steps}, delta={delta:g} "
            f"({exc}); use the PLD accountant"
        ) from exc


def epsilon_prv(
    q: float, sigma: float, steps: int, delta: float, *, eps_error: float | None = None
) -> float:
    """ε upper bound by Opacus's ``PRVAccountant`` (history ``[(σ, q, T)]``).

    The bound is the PRV point estimate plus ``eps_error`` (absolute). Default
    (``None``): ``eps_error = min(0.01, max(1e-3, 2e-3·ε̃))`` with ε̃ a coarse
    PLD bound (~1 % above ε), so the margin is ≤ 0.2 % of ε for ε ≥ 0.5 and
    ≤ 1e-3 absolute below; 0.01 is Opacus's default. A smaller margin
    for tiny ε would need a PRV mesh of 10⁷+ points (several seconds); use
    :func:`epsilon_pld` there.
    """
    q, sigma, steps, delta = _validated(q, sigma, steps, delta)
    if eps_error is not None:
        ee = _real("eps_error", eps_error, "use a small positive number, e.g. 0.01")
        if not (ee > 0 and math.isfinite(ee)):
            raise UserError(f"eps_error={ee!r} must be a finite number > 0, e.g. 0.01")
        return _prv_upper(q, sigma, steps, delta, ee)
    # Size the margin from a coarse PLD bound (~1 % above ε, tens of ms). Only
    # the margin depends on it, the PRV number itself does not. (A quick RDP
    # bound is cheaper but up to 20× loose at T = 1.)
    estimate = _pld_eps_adaptive(q, sigma, steps, delta, _PRV_SIZING_REL_ERR)
    return _prv_upper(q, sigma, steps, delta, _prv_eps_error(estimate))


@dataclass(frozen=True)
class EpsilonReport:
    """ε for one (q, σ, T, δ) by the three accountants."""

    epsilon_rdp: float
    epsilon_pld: float
    epsilon_prv: float
    q: float
    sigma: float
    steps: int
    delta: float

    @property
    def epsilon(self) -> float:
        """The number to report: PLD (tight upper bound, cross-checked by PRV)."""
        return self.epsilon_pld


def epsilons(q: float, sigma: float, steps: int, delta: float) -> EpsilonReport:
    """ε by RDP, PLD and PRV side by side."""
    q, sigma, steps, delta = _validated(q, sigma, steps, delta)
    return EpsilonReport(
        epsilon_rdp=epsilon_rdp(q, sigma, steps, delta),
        epsilon_pld=epsilon_pld(q, sigma, steps, delta),
        epsilon_prv=epsilon_prv(q, sigma, steps, delta),
        q=q,
        sigma=sigma,
        steps=steps,
        delta=delta,
    )


# --------------------------------------------------------------------------
# σ for a target ε
# --------------------------------------------------------------------------


def _log_ratio(eps: float, target: float) -> float:
    if eps <= 0.0:
        return -745.0  # log of the smallest double: "far below target"
    if not math.isfinite(eps):
        return 745.0
    return math.log(eps) - math.log(target)


def _bracket(g: Callable[[float], float], start: float, what: str) -> tuple[float, float, float, float]:
    """Find lo < hi with g(lo) > 0 ≥ g(hi) (g decreasing in σ), stepping in
    log σ with a slope guess ε ∝ σ^-1. Returns (lo, g_lo, hi, g_hi)."""
    s, gs = start, g(start)
    lo = hi = None
    glo = ghi = 0.0
    if gs > 0:
        lo, glo = s, gs
    else:
        hi, ghi = s, gs
    for _ in range(60):
        if lo is not None and hi is not None:
            return lo, glo, hi, ghi
        if hi is None:  # need more noise
            # ε ∝ σ^-p with p ≥ ~0.8 in practice: jump past the predicted root.
            step = math.exp(min(1.25 * glo, math.log(8.0))) * 1.01
            s = lo * step
            if s > _SIGMA_SEARCH_MAX:
                raise UserError(
                    f"target epsilon is unreachable with the {what} accountant for sigma up to {_SIGMA_SEARCH_MAX:g}; "
                    "raise the target epsilon or delta, or use fewer steps / a smaller sample rate"
                )
            gs = g(s)
            if gs > 0:
                lo, glo = s, gs
            else:
                hi, ghi = s, gs
        else:  # need less noise (at most 2× at a time: ε, and PLD's cost, explode as σ → 0)
            step = math.exp(min(-1.25 * ghi, math.log(2.0))) * 1.01
            s = hi / step
            if s < _SIGMA_SEARCH_MIN:
                raise UserError(
                    f"the target is met by the {what} accountant even with sigma below {_SIGMA_SEARCH_MIN:g}, "
                    "i.e. essentially without noise; delta is too large (use delta below 1/n) or the target epsilon too loose"
                )
            gs = g(s)
            if gs > 0:
                lo, glo = s, gs
            else:
                hi, ghi = s, gs
    raise UserError(f"could not bracket sigma for the target with the {what} accountant; check the parameters")


def _root(g: Callable[[float], float], lo: float, glo: float, hi: float, ghi: float, tol: float) -> tuple[float, float, float]:
    """Shrink the bracket until hi/lo ≤ 1 + tol: Illinois regula falsi in
    log σ, aimed a quarter-tolerance to the feasible side and followed by a
    probe one tolerance away, so that both ends close in; bisection whenever
    the bracket fails to halve. Returns (lo, hi, slope d log ε / d log σ)."""
    a, fa, b, fb = math.log(lo), glo, math.log(hi), ghi
    w = math.log1p(tol)
    side = 0
    history = [b - a]
    for it in range(200):
        if b - a <= w:
            break
        if len(history) >= 3 and (b - a) > 0.5 * history[-3]:
            x = 0.5 * (a + b)
            history.clear()
        else:
            x = b - fb * (b - a) / (fb - fa) if fa != fb else 0.5 * (a + b)
            x = min(max(x + 0.25 * w, a + 0.1 * w), b - 0.1 * w)
        fx = g(math.exp(x))
        if fx > 0:
            a, fa = x, fx
            if side == -1:
                fb *= 0.5
            side = -1
        else:
            b, fb = x, fx
            if side == 1:
                fa *= 0.5
            side = 1
        # The fresh end is probably within a tolerance of the root: probe one
        # tolerance beyond it, which closes the bracket if it is.
        if b - a > w and abs(fx) < w:
            y = b - w if side == 1 else a + w
            fy = g(math.exp(y))
            if fy > 0:
                a, fa = y, fy
            else:
                b, fb = y, fy
        history.append(b - a)
    # Slope over the initial bracket: a wide baseline, robust to the PLD's
    # ε grid (steps of ~3e-4 relative) that a tol-wide bracket would not be.
    slope = (ghi - glo) / (math.log(hi) - math.log(lo)) if hi > lo and ghi < glo else -1.0
    return math.exp(a), math.exp(b), slope


def calibrate_sigma(
    target_epsilon: float,
    delta: float,
    q: float,
    steps: int,
    accountant: Accountant = "pld",
    tol: float = 1e-3,
) -> float:
    """Smallest σ (to relative tolerance ``tol``) with ε(σ) ≤ ``target_epsilon``.

    ε(σ) is :func:`epsilon_rdp`, :func:`epsilon_pld` or :func:`epsilon_prv`
    for ``accountant`` "rdp", "pld" or "prv"; the returned σ is checked with
    exactly that public function, so ``epsilon_<accountant>(q, σ, T, δ) ≤
    target`` holds for the returned σ, while ε(σ/(1 + tol)) > target up to
    the accountant's own resolution. No caps or floors on σ; a target no σ in
    [1e-2, 1e6] can meet raises :class:`UserError`.

    Search: bracket then Illinois regula falsi in log σ, with cheaper
    variants of the accountant during the search (a quick integer-order RDP
    bound to start from, PLD on a ~3× coarser grid (1e-3 relative), PRV with
    a fixed eps_error), then a final check with the exact function, nudging σ up by
    tol/4 steps if that check fails. The search range [1e-2, 1e6] is not a cap:
    below σ = 1e-2 every setting has ε in the thousands (unless δ ≥ q, where
    no noise is needed at all) and PLD/PRV grids would need gigabytes.
    """
    validate_privacy_params(q=q, steps=steps, delta=delta, epsilon=target_epsilon)
    if accountant not in ("rdp", "pld", "prv"):
        raise UserError(f"accountant={accountant!r} is unknown; use one of 'pld', 'prv', 'rdp'")
    tol_f = _real("tol", tol, "use a relative tolerance such as 1e-3")
    if not (1e-6 <= tol_f <= 0.1):
        raise UserError(f"tol={tol!r} is out of range; use a relative tolerance between 1e-6 and 0.1, e.g. 1e-3")
    target, q, steps, delta = float(target_epsilon), float(q), int(steps), float(delta)

    final: Callable[[float], float]
    search: Callable[[float], float]
    if accountant == "rdp":
        final = search = functools.lru_cache(maxsize=None)(lambda s: _rdp_eps(q, s, steps, delta, RDP_ORDERS))
    elif accountant == "pld":
        final = lambda s: epsilon_pld(q, s, steps, delta)  # noqa: E731
        search = lambda s: _pld_eps_adaptive(q, s, steps, delta, _PLD_SEARCH_REL_ERR)  # noqa: E731
    else:
        ee = _prv_eps_error(target)
        if target <= 2 * ee:
            raise UserError(
                f"target epsilon={target:g} is too small for the PRV accountant, whose bound carries an additive "
                f"error margin of {ee:g}; use the PLD accountant"
            )
        final = lambda s: epsilon_prv(q, s, steps, delta)  # noqa: E731
        search = lambda s: _prv_upper(q, s, steps, delta, ee)  # noqa: E731

    # Start from the quick RDP σ when it exists: it meets the target for
    # every accountant here (all are ≤ RDP up to discretisation), so it is
    # usually the upper end of the bracket already. PRV starts from PLD's σ
    # (same quantity, within ~0.1 %): PRV is slow, and costly far from the root.
    if accountant == "prv":
        start: float | None = calibrate_sigma(target, delta, q, steps, "pld", tol)
    else:
        start = _quick_rdp_sigma(target, delta, q, steps)
    g = lambda s: _log_ratio(search(s), target)  # noqa: E731
    lo, glo, hi, ghi = _bracket(g, start if start is not None else 1.0, accountant.upper())
    lo, hi, slope = _root(g, lo, glo, hi, ghi, tol)

    sigma = hi
    eps = final(sigma)
    if accountant != "rdp" and eps <= target and slope < 0:
        # The search grid over-estimates ε a little, so hi may be a bit too
        # noisy for the final accountant: one secant step on the final one.
        guess = sigma * math.exp(-_log_ratio(eps, target) / slope) * (1 + 0.25 * tol)
        if guess < sigma / (1 + 0.5 * tol):
            eps_guess = final(guess)
            if eps_guess <= target:
                sigma, eps = guess, eps_guess
    for _ in range(200):
        if eps <= target:
            return float(sigma)
        sigma *= 1 + 0.25 * tol
        eps = final(sigma)
    raise UserError(f"could not meet epsilon={target:g} with the {accountant.upper()} accountant; check the parameters")


def _quick_rdp_sigma(target: float, delta: float, q: float, steps: int) -> float | None:
    """σ meeting the target under RDP with integer orders ≤ 64 (few ms per
    evaluation, a valid but looser bound); None if those orders cannot reach it."""
    g = lambda s: _log_ratio(_rdp_eps(q, s, steps, delta, _QUICK_RDP_ORDERS), target)  # noqa: E731
    try:
        lo, glo, hi, ghi = _bracket(g, 1.0, "RDP")
        return _root(g, lo, glo, hi, ghi, 1e-2)[1]
    except UserError:
        return None


@dataclass(frozen=True)
class SigmaReport:
    """σ each accountant needs for one target (ε, δ) at (q, T)."""

    sigma_rdp: float
    sigma_pld: float
    sigma_prv: float
    target_epsilon: float
    delta: float
    q: float
    steps: int

    @property
    def sigma(self) -> float:
        """The σ to train with: PLD's (tight, and checked against PRV)."""
        return self.sigma_pld


def sigmas(target_epsilon: float, delta: float, q: float, steps: int) -> SigmaReport:
    """σ for a target (ε, δ) by RDP, PLD and PRV side by side."""
    validate_privacy_params(q=q, steps=steps, delta=delta, epsilon=target_epsilon)
    return SigmaReport(
        sigma_rdp=calibrate_sigma(target_epsilon, delta, q, steps, "rdp"),
        sigma_pld=calibrate_sigma(target_epsilon, delta, q, steps, "pld"),
        sigma_prv=calibrate_sigma(target_epsilon, delta, q, steps, "prv"),
        target_epsilon=float(target_epsilon),
        delta=float(delta),
        q=float(q),
        steps=int(steps),
    )


# --------------------------------------------------------------------------
# Steps, the Opacus way
# --------------------------------------------------------------------------


def _check_rate_epochs(sample_rate: float, epochs: int) -> None:
    validate_privacy_params(q=sample_rate)
    if isinstance(epochs, bool) or not isinstance(epochs, numbers.Integral) or int(epochs) < 1:
        raise UserError(f"epochs={epochs!r} is invalid; epochs must be a whole number >= 1")


def steps_for(sample_rate: float, epochs: int) -> int:
    """Optimizer steps Opacus actually takes for ``epochs`` epochs at ``sample_rate``.

    Opacus 1.6 ``DPDataLoader(sample_rate=q)`` builds a
    ``UniformWithReplacementSampler`` whose length is ``int(1 / sample_rate)``
    (opacus/utils/uniform_sampler.py: ``self.steps = int(1 / self.sample_rate)``),
    one optimizer step per batch, empty Poisson batches included; with
    ``make_private*`` the rate is ``1 / len(data_loader)`` (opacus/data_loader.py,
    ``DPDataLoader.from_data_loader``). Note the float quirk: 93 batches give
    ``int(1 / (1 / 93)) = 92`` steps per epoch, exactly as Opacus runs it.
    These are the steps the privacy guarantee must cover.
    """
    _check_rate_epochs(sample_rate, epochs)
    return int(epochs) * int(1 / float(sample_rate))


def opacus_calibration_steps(sample_rate: float, epochs: int) -> int:
    """Steps ``PrivacyEngine.make_private_with_epsilon`` calibrates σ for.

    Opacus 1.6 opacus/privacy_engine.py ``make_private_with_epsilon`` sets
    ``sample_rate = 1 / len(data_loader)`` and calls
    ``get_noise_multiplier(..., epochs=epochs)``, which
    (opacus/accountants/utils.py) uses ``steps = int(epochs / sample_rate)``.
    This can be one step *fewer* than :func:`steps_for` (e.g. 75 batches,
    3 epochs: 224 vs 225), so Opacus's own σ can leave the spent ε slightly
    above target; calibrate with :func:`steps_for` instead.
    """
    _check_rate_epochs(sample_rate, epochs)
    return int(int(epochs) / float(sample_rate))
