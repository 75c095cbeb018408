"""σ for a target ε: the smallest noise multiplier whose ε meets the target, by each accountant."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable, Literal

from privleak.core.errors import UserError

from .grid import GridTooLarge
from .pld import REL_ERR, SEARCH_REL_ERR, pld_epsilon
from .prv import eps_error_for, prv_upper
from .rdp import QUICK_RDP_ORDERS, RDP_ORDERS, rdp_epsilon
from .validation import (PLD_DELTA_MIN, PLD_DELTA_REASON, check_delta, check_sample_rate, check_steps,
    check_target_epsilon, real)

AccountantName = Literal["rdp", "pld", "prv"]

# calibrate_sigma search range (not a cap on the answer: outside it no
# accountant gives a meaningful number, and we say so).
SIGMA_SEARCH_MIN = 1e-2
SIGMA_SEARCH_MAX = 1e6


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
            if s > SIGMA_SEARCH_MAX:
                raise UserError(
                    f"target epsilon is unreachable with the {what} accountant for sigma up to {SIGMA_SEARCH_MAX:g}; "
                    "raise the target epsilon or delta, or use fewer steps / a smaller sample rate"
                )
        else:  # need less noise (at most 2× at a time: ε, and PLD's cost, explode as σ → 0)
            step = math.exp(min(-1.25 * ghi, math.log(2.0))) * 1.01
            s = hi / step
            if s < SIGMA_SEARCH_MIN:
                raise UserError(
                    f"the target is met by the {what} accountant even with sigma below {SIGMA_SEARCH_MIN:g}, "
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
    for _ in range(200):
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
    *,
    target_epsilon: float,
    delta: float,
    sample_rate: float,
    steps: int,
    accountant: AccountantName = "pld",
    tol: float = 1e-3,
) -> float:
    """Smallest σ (to relative tolerance ``tol``) with ε(σ) ≤ ``target_epsilon``.

    ε(σ) is :func:`~.rdp.epsilon_rdp`, :func:`~.pld.epsilon_pld` or
    :func:`~.prv.epsilon_prv` for ``accountant`` "rdp", "pld" or "prv"; the
    returned σ is checked with exactly that function's computation, so
    ``epsilon_<accountant>(sample_rate=q, noise_multiplier=σ, steps=T,
    delta=δ) ≤ target`` holds for the returned σ, while ε(σ/(1 + tol)) >
    target up to the accountant's own resolution. No caps or floors on σ; a
    target no σ in [1e-2, 1e6] can meet raises :class:`UserError`, and so does
    one that needs a σ whose PLD grid cannot fit the memory limits.

    Search: bracket then Illinois regula falsi in log σ, with cheaper
    variants of the accountant during the search (a quick integer-order RDP
    bound to start from, PLD on a ~3× coarser grid (1e-3 relative), PRV with
    a fixed eps_error), then a final check with the exact function, nudging σ up by
    tol/4 steps if that check fails. The search range [1e-2, 1e6] is not a cap:
    below σ = 1e-2 every setting has ε in the thousands (unless δ ≥ q, where
    no noise is needed at all) and PLD/PRV grids would need gigabytes.
    """
    target = check_target_epsilon(target_epsilon)
    q, t = check_sample_rate(sample_rate), check_steps(steps)
    if accountant not in ("rdp", "pld", "prv"):
        raise UserError(f"accountant={accountant!r} is unknown; use one of 'pld', 'prv', 'rdp'")
    d = check_delta(delta, floor=0.0 if accountant == "rdp" else PLD_DELTA_MIN, floor_reason=PLD_DELTA_REASON)
    tol_f = real("tol", tol, "use a relative tolerance such as 1e-3")
    if not (1e-6 <= tol_f <= 0.1):
        raise UserError(f"tol={tol!r} is out of range; use a relative tolerance between 1e-6 and 0.1, e.g. 1e-3")
    try:
        return _calibrate(target, d, q, t, accountant, tol_f)
    except GridTooLarge as exc:
        raise GridTooLarge(
            f"target_epsilon={target:g} cannot be calibrated with the {accountant.upper()} accountant at "
            f"sample_rate={q:g}, steps={t}: the search reaches noise multipliers whose grid does not fit ({exc}); "
            "use a smaller target_epsilon or the RDP accountant", points=exc.points, limit=exc.limit) from None


def _calibrate(target: float, delta: float, q: float, steps: int, accountant: str, tol: float) -> float:
    final: Callable[[float], float]
    search: Callable[[float], float]
    if accountant == "rdp":
        final = search = functools.lru_cache(maxsize=None)(lambda s: rdp_epsilon(q, s, steps, delta, RDP_ORDERS))
    elif accountant == "pld":
        final = lambda s: pld_epsilon(q, s, steps, delta, REL_ERR)  # noqa: E731
        search = lambda s: pld_epsilon(q, s, steps, delta, SEARCH_REL_ERR)  # noqa: E731
    else:
        ee = eps_error_for(target)
        if target <= 2 * ee:
            raise UserError(
                f"target epsilon={target:g} is too small for the PRV accountant, whose bound carries an additive "
                f"error margin of {ee:g}; use the PLD accountant"
            )
        from .prv import SIZING_REL_ERR

        def final(s: float) -> float:
            return prv_upper([(s, q, steps)], delta, eps_error_for(pld_epsilon(q, s, steps, delta, SIZING_REL_ERR)))

        search = lambda s: prv_upper([(s, q, steps)], delta, ee)  # noqa: E731

    # Start from the quick RDP σ when it exists: it meets the target for
    # every accountant here (all are ≤ RDP up to discretisation), so it is
    # usually the upper end of the bracket already. PRV starts from PLD's σ
    # (same quantity, within ~0.1 %): PRV is slow, and costly far from the root.
    if accountant == "prv":
        start: float | None = _calibrate(target, delta, q, steps, "pld", tol)
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
    g = lambda s: _log_ratio(rdp_epsilon(q, s, steps, delta, QUICK_RDP_ORDERS), target)  # noqa: E731
    try:
        lo, glo, hi, ghi = _bracket(g, 1.0, "RDP")
        return _root(g, lo, glo, hi, ghi, 1e-2)[1]
    except UserError:
        return None


@dataclass(frozen=True)
class SigmaReport:
    """Noise multiplier each accountant needs for one target (ε, δ) at (q, T)."""

    noise_multiplier_rdp: float
    noise_multiplier_pld: float
    noise_multiplier_prv: float
    target_epsilon: float
    delta: float
    sample_rate: float
    steps: int

    @property
    def noise_multiplier(self) -> float:
        """The σ to train with: PLD's (tight, and checked against PRV)."""
        return self.noise_multiplier_pld


def sigmas(*, target_epsilon: float, delta: float, sample_rate: float, steps: int) -> SigmaReport:
    """σ for a target (ε, δ) by RDP, PLD and PRV side by side (every input checked before the first search)."""
    check_target_epsilon(target_epsilon)
    check_sample_rate(sample_rate)
    check_steps(steps)
    check_delta(delta, floor=PLD_DELTA_MIN, floor_reason=PLD_DELTA_REASON)
    kw = dict(target_epsilon=target_epsilon, delta=delta, sample_rate=sample_rate, steps=steps)
    return SigmaReport(
        noise_multiplier_rdp=calibrate_sigma(**kw, accountant="rdp"),
        noise_multiplier_pld=calibrate_sigma(**kw, accountant="pld"),
        noise_multiplier_prv=calibrate_sigma(**kw, accountant="prv"),
        target_epsilon=float(target_epsilon),
        delta=float(delta),
        sample_rate=float(sample_rate),
        steps=int(steps),
    )
