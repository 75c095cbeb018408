"""Rates and their intervals, two-sample proportion tests, combined p-values and paired tests.

One rule for every rate PrivLeak prints: a count k of n is reported with its
exact (Clopper–Pearson) 95 % interval (:func:`rate`); a difference of two
rates with Newcombe's hybrid score interval; two rates are compared with
Fisher's exact test (and χ² with Yates' correction beside it). Everything is
pure numpy/scipy and checked against ``scipy.stats`` in ``tests/test_stats.py``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict
from scipy import special
from scipy import stats as st

from .typed import Typed

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
    p1: float
    p2: float
    p1_ci95: tuple[float, float]
    p2_ci95: tuple[float, float]
    diff: float
    diff_ci95: tuple[float, float]
    cohens_h: float
    fisher_p: float
    fisher_p_greater: float
    chi2_p: float

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
