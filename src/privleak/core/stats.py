"""Rates and their intervals, two-sample proportion tests, combined p-values and paired tests.

One rule for every rate PrivLeak prints: a count k of n is reported with its
exact (Clopper–Pearson) 95 % interval (:func:`rate`); a difference of two
rates with Newcombe's hybrid score interval; two rates are compared with
Fisher's exact test (and χ² with Yates' correction beside it). Everything is
pure numpy/scipy and checked against ``scipy.stats`` in ``tests/test_stats.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict
from scipy import special
from scipy import stats as st

from .typed import Probability, ProbabilityInterval, Typed

# ----------------------------------------------------------------------------
# Binomial proportions


def clopper_pearson(k, n, alpha: float = 0.05, side: str = "two"):
    """Clopper–Pearson (exact) confidence bounds for a binomial proportion k/n.

    * ``side="two"``:  (B(α/2; k, n−k+1), B(1−α/2; k+1, n−k)), level 1−α;
    * ``side="lower"``: (B(α; k, n−k+1), 1), a one-sided 1−α lower bound;
    * ``side="upper"``: (0, B(1−α; k+1, n−k)), a one-sided 1−α upper bound;

    where B(q; a, b) is ``scipy.stats.beta.ppf(q, a, b)``, with the lower
    bound 0 at k = 0 and the upper bound 1 at k = n. Works elementwise on
    arrays; returns floats for scalar input.
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if side not in ("two", "lower", "upper"):
        raise ValueError(f"side must be 'two', 'lower' or 'upper', got {side!r}")
    k_arr = np.asarray(k, dtype=np.float64)
    n_arr = np.asarray(n, dtype=np.float64)
    if np.any(n_arr < 1) or np.any(k_arr < 0) or np.any(k_arr > n_arr):
        raise ValueError("need 0 ≤ k ≤ n and n ≥ 1")
    a_lo = alpha / 2 if side == "two" else alpha
    a_hi = alpha / 2 if side == "two" else alpha
    # betaincinv(a, b, q) is beta.ppf(q, a, b) (the same Boost routine) without beta.ppf's argument
    # handling, which costs ~0.5 ms a call: bounds are inverted by bisection in audit/epsilon.py.
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.where(k_arr > 0, special.betaincinv(np.maximum(k_arr, 1), n_arr - k_arr + 1, a_lo), 0.0)
        hi = np.where(k_arr < n_arr, special.betaincinv(k_arr + 1, np.maximum(n_arr - k_arr, 1), 1 - a_hi), 1.0)
    if side == "lower":
        hi = np.ones_like(lo)
    elif side == "upper":
        lo = np.zeros_like(hi)
    if lo.ndim == 0:
        return float(lo), float(hi)
    return lo, hi


def wilson_ci(k: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Wilson score interval for k/n (two-sided, level 1−α); equals
    ``scipy.stats.binomtest(k, n).proportion_ci(1-α, method="wilson")``."""
    if n < 1 or not 0 <= k <= n:
        raise ValueError(f"need 0 ≤ k ≤ n and n ≥ 1, got k={k}, n={n}")
    z = st.norm.isf(alpha / 2)
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return float(max(0.0, centre - half)), float(min(1.0, centre + half))


def proportion_ci(k: int, n: int, alpha: float = 0.05, method: str = "wilson") -> tuple[float, float]:
    """Two-sided 1−α interval for k/n: ``method`` "wilson" or "cp" (Clopper–Pearson)."""
    if method == "wilson":
        return wilson_ci(k, n, alpha)
    if method in ("cp", "exact", "clopper-pearson"):
        return clopper_pearson(k, n, alpha, "two")
    raise ValueError(f"method must be 'wilson' or 'cp', got {method!r}")


def newcombe_diff_ci(k1: int, n1: int, k2: int, n2: int, alpha: float = 0.05) -> tuple[float, float]:
    """Newcombe's hybrid score interval (1998, method 10) for p1 − p2.

    With Wilson intervals (l1, u1), (l2, u2) and d = p1 − p2:
    lower = d − sqrt((p1 − l1)² + (u2 − p2)²), upper = d + sqrt((u1 − p1)² + (p2 − l2)²).
    Newcombe's example 56/70 − 48/80 gives (0.0524, 0.3339).
    """
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson_ci(k1, n1, alpha)
    l2, u2 = wilson_ci(k2, n2, alpha)
    d = p1 - p2
    return float(d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)), float(d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2))


def cohens_h(p1: float, p2: float) -> float:
    """Cohen's h effect size: 2·asin(√p1) − 2·asin(√p2) (0.2 small, 0.5 medium, 0.8 large)."""
    return 2 * math.asin(math.sqrt(p1)) - 2 * math.asin(math.sqrt(p2))


def _table(k1: int, n1: int, k2: int, n2: int) -> np.ndarray:
    if n1 < 1 or n2 < 1 or not (0 <= k1 <= n1 and 0 <= k2 <= n2):
        raise ValueError(f"need 0 ≤ k ≤ n, n ≥ 1 for both arms, got {k1}/{n1} and {k2}/{n2}")
    return np.array([[k1, n1 - k1], [k2, n2 - k2]])


def fisher_exact_test(k1: int, n1: int, k2: int, n2: int, alternative: str = "two-sided") -> tuple[float, float]:
    """Fisher's exact test on the 2×2 table [[k1, n1−k1], [k2, n2−k2]] → (odds ratio, p).

    ``alternative="greater"`` tests whether arm 1's rate exceeds arm 2's.
    """
    res = st.fisher_exact(_table(k1, n1, k2, n2), alternative=alternative)
    return float(res[0]), float(res[1])


def chi2_test(k1: int, n1: int, k2: int, n2: int, correction: bool = True) -> tuple[float, float]:
    """Pearson χ² test of equal proportions (Yates-corrected by default) → (statistic, p).

    A table with an all-zero row or column has no information: (0.0, 1.0).
    """
    table = _table(k1, n1, k2, n2)
    if (table.sum(0) == 0).any() or (table.sum(1) == 0).any():
        return 0.0, 1.0
    res = st.chi2_contingency(table, correction=correction)
    return float(res[0]), float(res[1])


class Comparison(Typed):
    """Arm 1 vs arm 2 on a leak count (e.g. member PII leaked vs non-member PII "leaked"): a ``results.json``
    block as it stands (:func:`compare_proportions`)."""

    k1: int
    n1: int
    k2: int
    n2: int
    p1: Probability
    p2: Probability
    p1_ci95: ProbabilityInterval
    p2_ci95: ProbabilityInterval
    diff: float
    diff_ci95: tuple[float, float]
    cohens_h: float
    fisher_p: Probability
    fisher_p_greater: Probability
    chi2_p: Probability

    def to_dict(self) -> dict:
        return self.model_dump(mode="json")


def compare_proportions(k1: int, n1: int, k2: int, n2: int, alpha: float = 0.05) -> Comparison:
    """Everything a leak count needs: Clopper–Pearson CIs per arm (the one rule for a rate),
    Newcombe's CI of p1 − p2, Cohen's h, Fisher exact p (two-sided and "arm 1 greater") and Yates χ² p."""
    p1, p2 = k1 / n1, k2 / n2
    return Comparison(
        k1=int(k1), n1=int(n1), k2=int(k2), n2=int(n2), p1=p1, p2=p2,
        p1_ci95=clopper_pearson(k1, n1, alpha), p2_ci95=clopper_pearson(k2, n2, alpha),
        diff=p1 - p2, diff_ci95=newcombe_diff_ci(k1, n1, k2, n2, alpha),
        cohens_h=cohens_h(p1, p2),
        fisher_p=fisher_exact_test(k1, n1, k2, n2)[1],
        fisher_p_greater=fisher_exact_test(k1, n1, k2, n2, "greater")[1],
        chi2_p=chi2_test(k1, n1, k2, n2)[1],
    )


class Rate(BaseModel):
    """k of n, the rate and its two-sided 95 % Clopper–Pearson interval (None for n = 0)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    k: int
    n: int
    rate: float | None
    ci95: tuple[float, float] | None


def rate(k: int, n: int, alpha: float = 0.05) -> Rate:
    """The :class:`Rate` k/n; an empty denominator gives no rate rather than NaN."""
    if n == 0:
        return Rate(k=int(k), n=0, rate=None, ci95=None)
    lo, hi = clopper_pearson(k, n, alpha)
    return Rate(k=int(k), n=int(n), rate=k / n, ci95=(lo, hi))


def rate_ci(k: int, n: int, alpha: float = 0.05) -> tuple[float, float] | None:
    """The Clopper–Pearson interval of k/n; None when n = 0 (no interval, and JSON has no NaN)."""
    return None if n == 0 else clopper_pearson(k, n, alpha)


def diff_ci(k1: int, n1: int, k2: int, n2: int, alpha: float = 0.05) -> tuple[float, float] | None:
    """Newcombe's interval of k1/n1 − k2/n2; None when a side is empty."""
    if n1 == 0 or n2 == 0:
        return None
    return newcombe_diff_ci(k1, n1, k2, n2, alpha)


def exceeds(k1: int, n1: int, k2: int, n2: int, alpha: float = 0.05) -> bool:
    """Whether k1/n1 is significantly above k2/n2: one-sided Fisher exact p < α (False when a side is empty)."""
    if n1 == 0 or n2 == 0 or k1 / n1 <= k2 / n2:
        return False
    return fisher_exact_test(k1, n1, k2, n2, "greater")[1] < alpha


# ----------------------------------------------------------------------------
# Combining p-values, paired permutation tests, bootstrap intervals


def _p_array(p) -> np.ndarray:
    arr = np.asarray(p, dtype=np.float64).ravel()
    if arr.size == 0:
        raise ValueError("no p-values to combine")
    if np.any(~np.isfinite(arr)) or np.any(arr <= 0) or np.any(arr > 1):
        raise ValueError("p-values must lie in (0, 1]")
    return arr


def fisher_combined_p(p) -> float:
    """Fisher's method: P[χ²_{2n} ≥ −2 Σ ln p_i] for n independent p-values, each valid
    (P[p_i ≤ u] ≤ u under its null). Sensitive to many p-values each a little small."""
    arr = _p_array(p)
    return float(st.chi2.sf(-2.0 * np.log(arr).sum(), 2 * arr.size))


def min_p_combined(p) -> float:
    """Tippett's method: 1 − (1 − min p_i)^n for n independent valid p-values. Sensitive to one
    very small p-value (e.g. one canary ranked first among 10,000)."""
    arr = _p_array(p)
    return float(-np.expm1(arr.size * np.log1p(-arr.min()))) if arr.min() < 1 else 1.0


def sign_flip_p(d, alternative: str = "greater", n_resamples: int = 20_000, seed: int = 0) -> float:
    """Paired permutation test of "mean of d is 0" by flipping the signs of the differences d_i.

    Valid when, under the null, each d_i is symmetric about 0 given |d_i| (the pair's two members
    exchangeable). Exact (all 2^n sign patterns) for n ≤ 16; otherwise ``n_resamples`` random
    patterns with the observed one counted in, p = (1 + #{T* ≥ T}) / (1 + B), which is valid too.
    ``alternative``: "greater" (mean > 0), "less" or "two-sided"."""
    x = np.asarray(d, dtype=np.float64).ravel()
    if x.size == 0 or not np.isfinite(x).all():
        raise ValueError("need finite paired differences")
    if alternative not in ("greater", "less", "two-sided"):
        raise ValueError(f"alternative must be 'greater', 'less' or 'two-sided', got {alternative!r}")
    n = x.size
    if n <= 16:
        stats_ = np.zeros(1)
        for v in x:  # every sign pattern's sum, doubling the list once per difference
            stats_ = np.concatenate([stats_ + v, stats_ - v])
        observed, extra = x.sum(), 0
    else:
        rng = np.random.default_rng(seed)
        signs = rng.choice(np.array([-1.0, 1.0]), size=(n_resamples, n))
        stats_ = signs @ x
        observed, extra = x.sum(), 1
    tol = 1e-12 * max(1.0, float(np.abs(x).sum()))
    if alternative == "greater":
        hits = np.count_nonzero(stats_ >= observed - tol)
    elif alternative == "less":
        hits = np.count_nonzero(stats_ <= observed + tol)
    else:
        hits = np.count_nonzero(np.abs(stats_) >= abs(observed) - tol)
    return float((hits + extra) / (stats_.size + extra))


def bootstrap_mean_ci(x, alpha: float = 0.05, n_resamples: int = 4000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval (level 1 − alpha) of the mean of x, resampling its items.

    Approximate: with few items (a dozen canaries) it is somewhat too narrow; it is the effect's
    size, and the decision rests on an exact test beside it."""
    arr = np.asarray(x, dtype=np.float64).ravel()
    if arr.size == 0 or not np.isfinite(arr).all():
        raise ValueError("need finite values")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    rng = np.random.default_rng(seed)
    means = arr[rng.integers(0, arr.size, size=(n_resamples, arr.size))].mean(axis=1)
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


# ----------------------------------------------------------------------------
# Equivalence (two one-sided tests), paired counts and family-wise control


class Equivalence(Typed):
    """An equivalence claim "|θ| < margin" (or "θ < margin" when ``one_sided``) by Schuirmann's (1987) two
    one-sided tests: H0⁺ θ ≥ margin and H0⁻ θ ≤ −margin each rejected at level α, which is the (1 − 2α)
    interval lying inside (−margin, margin). By the intersection–union principle (Berger 1982)
    the claim's error rate is ≤ α with no multiplicity correction, and an arm whose every attack is shown
    equivalent is shown near chance at α too.

    ``lower``/``upper``: the (1 − 2α) interval (None: unbounded on that side, as a one-sided claim is);
    ``p_value``: max(p⁺, p⁻) (p⁺ alone when one-sided); ``n``: the items the estimate rests on;
    ``n_needed``: how many items (per side, at the same share between sides) would show it at the observed
    estimate and spread — None when the estimate itself is at or beyond the margin (more data could only
    confirm that it is not within)."""

    estimate: float
    lower: float | None
    upper: float | None
    margin: float
    alpha: Probability
    p_value: Probability
    equivalent: bool
    one_sided: bool = False
    n: int = 0
    n_needed: int | None = None
    method: str = ""
    #: Whether this many items could show the claim at all: it would hold had the estimate been exactly zero
    #: (at the observed spread). Decided by the size and spread, not by the estimate, so which attacks a
    #: near-chance claim rests on is not chosen by their outcomes.
    judgeable: bool = True


def _needed(n: int, shows_at: Callable[[float], bool], limit: int = 10**9) -> int | None:
    """The smallest item count m ≥ n (scaling every side by m / n) at which ``shows_at(m / n)`` holds; None
    beyond ``limit``. ``shows_at`` must be monotone in the scale (more items: a narrower interval)."""
    if n < 1:
        return None
    lo, hi = 1.0, 2.0
    while not shows_at(hi):
        lo, hi = hi, 2.0 * hi
        if hi * n > limit:
            return None
    while (hi - lo) * n > 0.5:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if shows_at(mid) else (mid, hi)
    return int(math.ceil(hi * n))


def two_figures(n: int) -> int:
    """n rounded up to two significant figures: what an extrapolated sample size (``n_needed``) is worth."""
    if n < 100:
        return int(n)
    step = 10 ** (len(str(int(n))) - 2)
    return int(-(-int(n) // step) * step)


def auc_null_se(n_pos: int, n_neg: int) -> float:
    """The standard error of an AUC (Mann–Whitney) under no effect, from the sizes alone:
    √((n₊ + n₋ + 1) / (12 n₊ n₋)) (Hanley & McNeil 1982; ≈ √(1/(6n)) at n a side)."""
    if n_pos < 1 or n_neg < 1:
        return math.inf
    return math.sqrt((n_pos + n_neg + 1) / (12.0 * n_pos * n_neg))


def tost_normal(estimate: float, se: float, margin: float, alpha: float = 0.05, *, n: int = 0,
                one_sided: bool = False, method: str = "normal", design_se: float | None = None) -> Equivalence:
    """TOST with a normal estimate: p⁺ = Φ((θ̂ − Δ)/se), p⁻ = 1 − Φ((θ̂ + Δ)/se); interval θ̂ ± z_{1−α}·se.

    Used for AUC differences with DeLong's standard error (DeLong et al. 1988; two-sided: an AUC well below
    the control's is a membership signal too). ``se`` = 0 (e.g. two identical score sets) decides by the
    estimate alone. ``n_needed`` assumes se ∝ 1/√n. ``judgeable``: whether the design could show the margin
    at a zero estimate, z·se < Δ — with ``design_se``, the standard error the sizes alone imply (e.g.
    :func:`auc_null_se`), so which tests a claim rests on is decided before any outcome is read; without it,
    the observed ``se``."""
    if not margin > 0 or not 0.0 < alpha < 0.5:
        raise ValueError(f"need margin > 0 and 0 < α < 0.5, got {margin}, {alpha}")
    if not (math.isfinite(estimate) and math.isfinite(se) and se >= 0):
        raise ValueError(f"need a finite estimate and se ≥ 0, got {estimate}, {se}")
    if se == 0.0:
        p_up = 0.0 if estimate < margin else 1.0
        p_lo = 0.0 if estimate > -margin else 1.0
    else:
        p_up = float(st.norm.cdf((estimate - margin) / se))
        p_lo = float(st.norm.sf((estimate + margin) / se))
    p = p_up if one_sided else max(p_up, p_lo)
    z = float(st.norm.isf(alpha))
    interval = (-math.inf if one_sided else estimate - z * se, estimate + z * se)
    eq = p <= alpha
    gap = margin - (estimate if one_sided else abs(estimate))
    needed = None
    if not eq and gap > 0 and se > 0 and n > 0:
        needed = int(math.ceil(n * (z * se / gap) ** 2))
    return Equivalence(estimate=float(estimate), lower=None if one_sided else float(interval[0]),
                       upper=float(interval[1]), margin=margin,
                       alpha=alpha, p_value=p, equivalent=eq, one_sided=one_sided, n=n, n_needed=needed,
                       method=method, judgeable=z * (se if design_se is None else design_se) < margin)


def tost_paired_t(d, margin: float, alpha: float = 0.05) -> Equivalence:
    """Schuirmann's TOST on paired differences ``d`` (e.g. a canary's exposure under the arm minus under the
    control): t = (d̄ ∓ Δ)/(s/√n) against Student's t with n − 1 degrees of freedom. Fewer than two
    differences cannot show anything (p = 1). ``n_needed`` at the observed mean and spread."""
    x = np.asarray(d, dtype=np.float64).ravel()
    if not margin > 0 or not 0.0 < alpha < 0.5:
        raise ValueError(f"need margin > 0 and 0 < α < 0.5, got {margin}, {alpha}")
    if x.size == 0 or not np.isfinite(x).all():
        raise ValueError("need finite paired differences")
    n, mean = int(x.size), float(x.mean())
    if n < 2:
        return Equivalence(estimate=mean, lower=None, upper=None, margin=margin, alpha=alpha, p_value=1.0,
                           equivalent=False, n=n, n_needed=None, method="paired t", judgeable=False)
    sd = float(x.std(ddof=1))
    se = sd / math.sqrt(n)
    t = float(st.t.isf(alpha, n - 1))
    if se == 0.0:
        p = 0.0 if abs(mean) < margin else 1.0
    else:
        p = max(float(st.t.cdf((mean - margin) / se, n - 1)), float(st.t.sf((mean + margin) / se, n - 1)))
    eq = p <= alpha
    gap = margin - abs(mean)
    needed = None
    if not eq and gap > 0 and sd > 0:
        needed = _needed(n, lambda s: float(st.t.isf(alpha, max(1.0, s * n - 1))) * sd / math.sqrt(s * n) < gap)
    return Equivalence(estimate=mean, lower=mean - t * se, upper=mean + t * se, margin=margin, alpha=alpha,
                       p_value=p, equivalent=eq, n=n, n_needed=needed, method="paired t", judgeable=t * se < margin)


def _invert_level(rejects: Callable[[float], bool]) -> float:
    """The smallest level a in (0, 0.5] at which ``rejects(a)`` holds (rejection only gets easier as a grows),
    by bisection on log a; 1.0 when it does not hold even at 0.5."""
    if not rejects(0.5):
        return 1.0
    lo, hi = -30.0, math.log(0.5)
    if rejects(math.exp(lo)):
        return math.exp(lo)
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if rejects(math.exp(mid)) else (mid, hi)
    return math.exp(hi)


def rate_excess_within(k1: int, n1: int, k2: int, n2: int, margin: float, alpha: float = 0.05) -> Equivalence:
    """Is rate 1 at most ``margin`` above rate 2 (two independent counts)? One-sided: the upper end of
    Newcombe's hybrid score interval for p1 − p2 at level 1 − 2α lies below the margin (a count below the
    reference's is no leak, so the lower test is not asked). Unpaired, hence conservative when the two counts
    share items (positively correlated outcomes). ``n_needed``: items of side 1 (side 2 scaled alike) that
    would show it at the observed rates."""
    if not margin > 0 or not 0.0 < alpha < 0.5:
        raise ValueError(f"need margin > 0 and 0 < α < 0.5, got {margin}, {alpha}")
    if n1 < 1 or n2 < 1:
        raise ValueError("need both counts over at least one item")
    d = k1 / n1 - k2 / n2

    def upper(a: float, s: float = 1.0) -> float:
        return newcombe_diff_ci(k1 * s, n1 * s, k2 * s, n2 * s, 2 * a)[1]

    hi = upper(alpha)
    p = _invert_level(lambda a: upper(a) < margin)
    eq = hi < margin
    needed = _needed(n1, lambda s: upper(alpha, s) < margin) if not eq and d < margin else None
    # At zero excess: side 1 at side 2's rate.
    at_zero = newcombe_diff_ci(k2 / n2 * n1, n1, k2, n2, 2 * alpha)[1] < margin
    return Equivalence(estimate=d, lower=None, upper=hi, margin=margin, alpha=alpha, p_value=p, equivalent=eq,
                       one_sided=True, n=int(n1), n_needed=needed, method="Newcombe hybrid score",
                       judgeable=bool(at_zero))


def paired_excess_within(b: int, c: int, n: int, margin: float, alpha: float = 0.05,
                         two_sided: bool = False) -> Equivalence:
    """Is P[A only] − P[B only] within ``margin`` on n paired items (b: items where only A succeeds, c: only
    B)? An exact, conservative bound: the difference is at most P[A only], whose one-sided Clopper–Pearson
    (1 − α) upper bound is taken (and, ``two_sided``, at least −P[B only]). Exact whatever the pairs'
    dependence; tight when the other model's successes are rare, as for a model close to its reference."""
    if n < 1 or not (0 <= b and 0 <= c and b + c <= n):
        raise ValueError(f"need 0 ≤ b, c and b + c ≤ n ≥ 1, got b={b}, c={c}, n={n}")
    if not margin > 0 or not 0.0 < alpha < 0.5:
        raise ValueError(f"need margin > 0 and 0 < α < 0.5, got {margin}, {alpha}")

    def up(k: float, a: float, s: float = 1.0) -> float:
        return clopper_pearson(min(k * s, n * s), n * s, a, "upper")[1] if k * s < n * s else 1.0

    hi, lo = up(b, alpha), (-up(c, alpha) if two_sided else None)
    d = (b - c) / n

    def shows(a: float, s: float = 1.0) -> bool:
        return up(b, a, s) < margin and (not two_sided or up(c, a, s) < margin)

    eq = shows(alpha)
    p = _invert_level(lambda a: shows(a))
    needed = None
    if not eq and b / n < margin and (not two_sided or c / n < margin):
        needed = _needed(n, lambda s: shows(alpha, s))
    return Equivalence(estimate=d, lower=lo, upper=hi, margin=margin, alpha=alpha, p_value=p, equivalent=eq,
                       one_sided=not two_sided, n=int(n), n_needed=needed, method="exact bound on discordant pairs",
                       judgeable=up(0, alpha) < margin)


def rate_within(k: int, n: int, margin: float, alpha: float = 0.05) -> Equivalence:
    """Is a rate below ``margin`` (a count with no reference to compare with: its excess over zero)? The
    one-sided Clopper–Pearson (1 − α) upper bound of k/n below the margin: exact."""
    e = paired_excess_within(k, 0, n, margin, alpha)
    return e.model_copy(update={"method": "Clopper–Pearson"})


def mcnemar_p(b: int, c: int, alternative: str = "greater") -> float:
    """McNemar's exact (conditional binomial) test on paired binary outcomes: of the b + c discordant pairs,
    b are "A only"; under H0 (A and B succeed alike) b ~ Binomial(b + c, ½). ``alternative`` "greater": A
    succeeds more often; "less"; "two-sided" (doubled smaller tail, capped at 1). No discordant pair: 1."""
    if b < 0 or c < 0:
        raise ValueError(f"need b, c ≥ 0, got {b}, {c}")
    m = b + c
    if m == 0:
        return 1.0
    greater = float(st.binom.sf(b - 1, m, 0.5))
    less = float(st.binom.cdf(b, m, 0.5))
    if alternative == "greater":
        return greater
    if alternative == "less":
        return less
    if alternative == "two-sided":
        return min(1.0, 2.0 * min(greater, less))
    raise ValueError(f"alternative must be 'greater', 'less' or 'two-sided', got {alternative!r}")


def holm(p_values, alpha: float = 0.05) -> list[bool]:
    """Holm's (1979) step-down procedure: sort the m p-values, reject p_(i) while p_(i) ≤ α/(m − i + 1).
    Family-wise error ≤ α under any dependence; uniformly more powerful than Bonferroni. Returns the
    rejections in input order."""
    p = [float(x) for x in p_values]
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if any(not 0.0 <= x <= 1.0 for x in p):
        raise ValueError("p-values must lie in [0, 1]")
    order = sorted(range(len(p)), key=lambda i: p[i])
    out = [False] * len(p)
    for rank, i in enumerate(order):
        if p[i] > alpha / (len(p) - rank):
            break
        out[i] = True
    return out
