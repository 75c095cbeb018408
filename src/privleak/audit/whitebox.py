"""The white-box route of the DP alarm: the gradient canaries' readings against the step's claimed noise and clip.

PrivLeak's own DP training loops (plain DP-SGD, dp-user, the federated server) plant m gradient canaries
(:mod:`privleak.models.gradient_canaries`) and read, at every step, how much of each canary's gradient the noisy
sum carries. The readings are a Gaussian regression on the known inclusions, so the test below is exact for any m
(Student's noncentral t) and tests the step itself — clipping and noise — rather than the trained model's
outputs: it catches a DP implementation that is broken at ε = 8, where black-box canaries lack the power.
:func:`whitebox_alarm_test` returns the same :class:`~privleak.audit.alarms.AlarmTest` as the black-box routes,
so the alarm's Holm step-down treats it as one more route.
"""

from __future__ import annotations

import math
from typing import Any

from ..accountants import GridTooLarge
from .alarms import AlarmTest, dpsgd_epsilon


def whitebox_statistic(check: Any) -> tuple[float, int, float]:
    """(t, df, λ₀ · σ) of the white-box canaries' statistics (a :class:`~privleak.results.GradientCanaryCheck`
    or its dict): the regression through the origin of the readings y_i on the inclusions N_i,

        α̂ = S_ny / S_nn,   s² = (S_yy − S_ny² / S_nn) / (m − 1),   t = α̂ · √S_nn / s,

    t = +∞ when the residuals vanish (no noise at all); and √(S_nn / T), which divided by σ is the noncentrality
    t has when the step's effective noise multiplier τ/α is exactly σ."""
    get = check.get if isinstance(check, dict) else lambda k: getattr(check, k)
    m, steps = int(get("canaries")), int(get("steps"))
    s_nn, s_ny, s_yy = float(get("sum_nn")), float(get("sum_ny")), float(get("sum_yy"))
    df = m - 1
    if s_nn <= 0 or steps < 1:
        return 0.0, df, 0.0
    slope = s_ny / s_nn
    rss = s_yy - s_ny * s_ny / s_nn
    if rss <= 1e-12 * max(s_yy, 1e-300):
        return (math.inf if slope > 0 else 0.0), df, math.sqrt(s_nn / steps)
    return slope * math.sqrt(s_nn) / math.sqrt(rss / df), df, math.sqrt(s_nn / steps)


def whitebox_p_value(t: float, df: int, noncentrality: float) -> float:
    """P[T ≥ t] for T ~ noncentral t(df, noncentrality): the white-box test's p-value at the claim's boundary."""
    from scipy import stats

    if t == math.inf:
        return 0.0
    if noncentrality <= 0:
        return 1.0
    p = float(stats.nct.sf(t, df, noncentrality))
    return min(1.0, max(0.0, p)) if math.isfinite(p) else (0.0 if t > noncentrality else 1.0)


def whitebox_alarm_test(arm: str, check: Any, sigma: float, sample_rate: float, max_grad_norm: float,
                        delta: float) -> AlarmTest:
    """The white-box route: does the DP step add noise N(0, σ²C²) to a sum of contributions clipped at C?

    The readings of the m gradient canaries (:mod:`privleak.models.gradient_canaries`; ``check`` their
    :class:`~privleak.results.GradientCanaryCheck`) follow y_i = α·N_i + τ·√T·z_i with N_i known and z_i iid
    N(0, 1), so the slope's t statistic (:func:`whitebox_statistic`) is Student's noncentral t with m − 1 degrees
    of freedom and noncentrality λ = (α/τ)·√(S_nn/T) — exactly, for any m (the slope and the residual sum of
    squares of a Gaussian regression are independent). The claim is the accountant's: the step's effective noise
    multiplier τ/α is at least σ, i.e. λ ≤ λ₀ = √(S_nn/T)/σ; noncentral t grows stochastically with λ, so
    p = P[t'(m − 1, λ₀) ≥ t] is a valid p-value for the whole claim (every clip bound and noise scale whose ratio
    keeps the accountant's ε), not only for the one configured. A canary's gradient is 100·C, so a step clipping
    at C' > C contributes C' and one not clipping at all 100·C: both raise α/τ, as less noise does.

    ``bound(a)``: the ε (at ``delta``, the arm's q and T) of the smallest noise multiplier σ* the readings refute
    at level a — from the lower confidence limit of α/τ — shown no further than σ/4 below the claim (past it the
    PLD's ε is off its grid); 0 when not even 16σ is refuted.
    ``detectable(a)``: (r, ε) with r the smallest ratio (α/τ)·σ caught with probability ≥ ½ at level a."""
    t, df, root = whitebox_statistic(check)
    lam0 = root / sigma if sigma > 0 else 0.0
    p = whitebox_p_value(t, df, lam0)
    get = check.get if isinstance(check, dict) else lambda k: getattr(check, k)
    steps = int(get("steps"))

    def eps_of(s: float) -> float:
        try:
            return dpsgd_epsilon(sample_rate, s, steps, "add_remove", delta)
        except GridTooLarge:  # a noise multiplier so small its PLD does not fit: no finite figure to show
            return math.inf

    def sigma_refuted(level: float) -> float | None:
        """The smallest σ' the readings refute at ``level`` (None: none up to 16σ)."""
        from scipy import stats

        if lam0 <= 0:
            return None
        if t == math.inf:
            return 0.0
        sf = lambda lam: float(stats.nct.sf(t, df, lam)) if lam > 0 else float(stats.t.sf(t, df))  # noqa: E731
        hi = max(2.0 * t, 1.0) + 10.0
        if sf(hi) <= level:
            return root / hi
        lo = 0.0
        if sf(lo) > level:
            return None
        for _ in range(60):  # λ_lo: the largest λ with P[t'(λ) ≥ t] ≤ level
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if sf(mid) <= level else (lo, mid)
        return root / lo if lo > 0 else None

    def bound(level: float) -> float:
        s_star = sigma_refuted(level)
        if s_star is None or s_star >= 16 * sigma:
            return 0.0
        # Far below σ the PLD's ε is past its grid (infinite) or costly: show the ε of the smallest of σ/4, σ/2, σ
        # at or above σ* that has a finite one — still a lower bound, every one of them being refuted too.
        for s in sorted({max(s_star, sigma / 4), max(s_star, sigma / 2), max(s_star, sigma)}):
            if math.isfinite(e := eps_of(s)):
                return e
        return 0.0

    def detectable(level: float) -> tuple[float, float]:
        from scipy import stats

        if lam0 <= 0:
            return math.inf, math.inf
        crit = float(stats.nct.isf(level, df, lam0))
        lo, hi = 1.0, 64.0
        if float(stats.nct.sf(crit, df, hi * lam0)) < 0.5:
            return math.inf, math.inf
        for _ in range(40):
            mid = math.sqrt(lo * hi)
            lo, hi = (lo, mid) if float(stats.nct.sf(crit, df, mid * lam0)) >= 0.5 else (mid, hi)
        return hi, eps_of(sigma / hi)

    return AlarmTest(arm=arm, route="whitebox", p_value=p, alarm=True, bound=bound, detectable=detectable,
                     claim=f"a DP step adding N(0, σ²C²) noise (σ = {sigma:.3g}) to contributions clipped at "
                           f"C = {max_grad_norm:g}, read on {int(get('canaries'))} gradient canaries over {steps} steps",
                     detail={"t": t if math.isfinite(t) else None, "df": df, "noncentrality": lam0,
                             "canaries": int(get("canaries")), "steps": steps})


def noiseless(check: Any) -> dict:
    """``check``'s statistics had the step added no noise and clipped nothing (each inclusion contributing the
    canary's whole gradient, ``scale``·C): what a DP-SGD run without noise and clipping would have read."""
    get = check.get if isinstance(check, dict) else lambda k: getattr(check, k)
    b, s_nn = float(get("scale")), float(get("sum_nn"))
    return {"canaries": int(get("canaries")), "included": int(get("included")), "steps": int(get("steps")),
            "scale": b, "sum_nn": s_nn, "sum_ny": b * s_nn, "sum_yy": b * b * s_nn}
