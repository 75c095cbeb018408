"""Statistics for the audit: exact binomial bounds, the empirical-ε lower
bound, the DP-bound check on ROC points, and two-arm proportion tests.

Everything is pure numpy/scipy and checked against ``scipy.stats`` in
``tests/test_stats.py``.

Empirical ε (Jagielski et al. 2020, "Auditing differentially private machine
learning: how private is private SGD?"; Nasr et al. 2021, "Adversary
instantiation: lower bounds for differentially private machine learning"):
an (ε, δ)-DP mechanism M satisfies, for every set S of outcomes and both
orders of a neighbouring pair,

    P[M(D) ∈ S] ≤ e^ε · P[M(D') ∈ S] + δ.

A membership test "member iff score ≥ t" is such an S, so any test gives
ε ≥ ln((TPR − δ) / FPR); with one-sided Clopper–Pearson bounds TPR_lo and
FPR_hi the bound ε ≥ ln((TPR_lo − δ) / FPR_hi) holds with confidence 1 − α.
See :func:`empirical_epsilon` for the exact procedure.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy import stats as st

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
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.where(k_arr > 0, st.beta.ppf(a_lo, np.maximum(k_arr, 1), n_arr - k_arr + 1), 0.0)
        hi = np.where(k_arr < n_arr, st.beta.ppf(1 - a_hi, k_arr + 1, np.maximum(n_arr - k_arr, 1)), 1.0)
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


@dataclass(frozen=True)
class ProportionComparison:
    """Arm 1 vs arm 2 (e.g. member PII leaked vs non-member PII "leaked")."""

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
        return asdict(self)


def compare_proportions(k1: int, n1: int, k2: int, n2: int, alpha: float = 0.05) -> ProportionComparison:
    """Everything a leak count needs: Wilson CIs per arm, Newcombe CI of p1 − p2,
    Cohen's h, Fisher exact p (two-sided and "arm 1 greater") and Yates χ² p."""
    p1, p2 = k1 / n1, k2 / n2
    return ProportionComparison(
        k1=int(k1), n1=int(n1), k2=int(k2), n2=int(n2), p1=p1, p2=p2,
        p1_ci95=wilson_ci(k1, n1, alpha), p2_ci95=wilson_ci(k2, n2, alpha),
        diff=p1 - p2, diff_ci95=newcombe_diff_ci(k1, n1, k2, n2, alpha),
        cohens_h=cohens_h(p1, p2),
        fisher_p=fisher_exact_test(k1, n1, k2, n2)[1],
        fisher_p_greater=fisher_exact_test(k1, n1, k2, n2, "greater")[1],
        chi2_p=chi2_test(k1, n1, k2, n2)[1],
    )


# ----------------------------------------------------------------------------
# Empirical ε

# The four tests one threshold t defines. Each is (name, P-side, S-side):
# ε ≥ ln((P[S | P-side] − δ) / P[S | other side]), S = {score ≥ t} or {score < t}.
_TESTS = (
    ("members >= t", "pos", "ge"),  # TPR vs FPR — the usual one
    ("non-members < t", "neg", "lt"),  # TNR vs FNR
    ("non-members >= t", "neg", "ge"),  # FPR vs TPR: an attack with the sign flipped
    ("members < t", "pos", "lt"),  # FNR vs TNR
)


@dataclass(frozen=True)
class EmpiricalEpsilon:
    """A (1 − alpha)-confidence lower bound on ε, from held-out data.

    ``test`` names the chosen set S; ``tpr_lo`` is the one-sided lower CP
    bound on P[S] for the side named first in ``test`` (members for the usual
    "members >= t", i.e. the TPR), ``fpr_hi`` the one-sided upper CP bound on
    P[S] for the other side (the FPR), both on the evaluation half;
    ``k_p_eval`` / ``k_q_eval`` are the raw counts behind them.
    """

    epsilon_lb: float
    threshold: float
    test: str
    tpr_lo: float
    fpr_hi: float
    k_p_eval: int
    k_q_eval: int
    n_pos_eval: int
    n_neg_eval: int
    n_pos_select: int
    n_neg_select: int
    epsilon_select: float
    delta: float
    alpha: float
    per_bound_alpha: float
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        d = asdict(self)
        for key in ("epsilon_select", "threshold"):
            if not math.isfinite(d[key]):
                d[key] = None
        return d


def _eps_from_bounds(p_lo: np.ndarray, q_hi: np.ndarray, delta: float) -> np.ndarray:
    num = np.asarray(p_lo, dtype=np.float64) - delta
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(num > 0, np.log(np.maximum(num, 1e-300) / np.asarray(q_hi)), -np.inf)


def _counts_ge(sorted_vals: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    return sorted_vals.size - np.searchsorted(sorted_vals, thresholds, side="left")


def _test_counts(kp_ge, np_, kn_ge, nn, who: str, side: str):
    """(k_P, n_P, k_Q, n_Q) for a test, from ≥-counts of members (p) and non-members (n)."""
    kp = kp_ge if side == "ge" else np_ - kp_ge
    kn = kn_ge if side == "ge" else nn - kn_ge
    return (kp, np_, kn, nn) if who == "pos" else (kn, nn, kp, np_)


def empirical_epsilon(
    pos: np.ndarray,
    neg: np.ndarray,
    delta: float,
    alpha: float = 0.05,
    seed: int = 0,
    max_thresholds: int = 2000,
    bonferroni: bool = True,
) -> EmpiricalEpsilon:
    """Empirical ε lower bound from member (``pos``) and non-member (``neg``) scores.

    Procedure (DESIGN.md; Jagielski et al. 2020, Nasr et al. 2021):

    1. Shuffle ``pos`` and ``neg`` with ``seed`` and split each in half: the
       first ⌊n/2⌋ select, the rest evaluate.
    2. Selection half: for every candidate threshold t (the distinct selection
       scores, thinned to ``max_thresholds`` quantiles) and each of the four
       sets S ∈ {members ≥ t, non-members < t, non-members ≥ t, members < t}
       (the last two catch an attack whose sign is flipped; DP bounds every S
       in both directions of the neighbouring relation) compute the same
       bound as step 3 on the selection half; keep the (t, S) maximising it.
    3. Evaluation half, that one (t, S) only: P_lo = one-sided lower
       Clopper–Pearson bound on the rate of S on its own side (the TPR for the
       usual test), Q_hi = one-sided upper CP bound on the other side's rate
       (the FPR), and ε_lb = max(0, ln((P_lo − δ) / Q_hi)).

    Because the test is fixed before the evaluation half is looked at, and
    with ``bonferroni=True`` each CP bound is taken at level 1 − α/2, P_lo ≤
    P and Q_hi ≥ Q hold jointly with probability ≥ 1 − α, and then
    (P_lo − δ)/Q_hi ≤ (P − δ)/Q ≤ e^ε for any (ε, δ)-DP mechanism: the
    result exceeds the true ε with probability at most α. (``bonferroni=False``
    uses 1 − α per bound, as some papers do: joint level 1 − 2α.)
    """
    pos = np.asarray(pos, dtype=np.float64).ravel()
    neg = np.asarray(neg, dtype=np.float64).ravel()
    if pos.size < 2 or neg.size < 2:
        raise ValueError(f"need at least 2 member and 2 non-member scores, got {pos.size} and {neg.size}")
    if not (np.isfinite(pos).all() and np.isfinite(neg).all()):
        raise ValueError("scores contain NaN or infinity")
    if not 0.0 <= delta < 1.0:
        raise ValueError(f"delta must be in [0, 1), got {delta}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    a = alpha / 2 if bonferroni else alpha
    rng = np.random.default_rng(seed)
    pos, neg = pos[rng.permutation(pos.size)], neg[rng.permutation(neg.size)]
    hp, hn = pos.size // 2, neg.size // 2
    pos_sel, pos_ev = np.sort(pos[:hp]), np.sort(pos[hp:])
    neg_sel, neg_ev = np.sort(neg[:hn]), np.sort(neg[hn:])

    cand = np.unique(np.concatenate([pos_sel, neg_sel]))
    if cand.size > max_thresholds:
        cand = np.unique(np.quantile(cand, np.linspace(0.0, 1.0, max_thresholds), method="nearest"))
    kp_ge = _counts_ge(pos_sel, cand)
    kn_ge = _counts_ge(neg_sel, cand)
    best_eps, best_t, best_test = -np.inf, float(cand[-1]), _TESTS[0]
    for test in _TESTS:
        kP, nP, kQ, nQ = _test_counts(kp_ge, hp, kn_ge, hn, test[1], test[2])
        p_lo, _ = clopper_pearson(kP, np.full_like(kP, nP), a, "lower")
        _, q_hi = clopper_pearson(kQ, np.full_like(kQ, nQ), a, "upper")
        eps = _eps_from_bounds(p_lo, q_hi, delta)
        i = int(np.argmax(eps))
        if eps[i] > best_eps:
            best_eps, best_t, best_test = float(eps[i]), float(cand[i]), test

    ne_p, ne_n = pos_ev.size, neg_ev.size
    kp_e = int(_counts_ge(pos_ev, np.array([best_t]))[0])
    kn_e = int(_counts_ge(neg_ev, np.array([best_t]))[0])
    kP, nP, kQ, nQ = _test_counts(kp_e, ne_p, kn_e, ne_n, best_test[1], best_test[2])
    p_lo = clopper_pearson(kP, nP, a, "lower")[0]
    q_hi = clopper_pearson(kQ, nQ, a, "upper")[1]
    eps_eval = float(_eps_from_bounds(np.array(p_lo), np.array(q_hi), delta))
    notes = []
    if min(ne_p, ne_n) < 100:
        notes.append("fewer than 100 held-out members or non-members: the bound is necessarily weak")
    return EmpiricalEpsilon(
        epsilon_lb=max(0.0, eps_eval) if math.isfinite(eps_eval) else 0.0,
        threshold=best_t,
        test=best_test[0],
        tpr_lo=float(p_lo),
        fpr_hi=float(q_hi),
        k_p_eval=int(kP),
        k_q_eval=int(kQ),
        n_pos_eval=int(ne_p),
        n_neg_eval=int(ne_n),
        n_pos_select=int(hp),
        n_neg_select=int(hn),
        epsilon_select=best_eps,
        delta=float(delta),
        alpha=float(alpha),
        per_bound_alpha=float(a),
        notes=notes,
    )


# ----------------------------------------------------------------------------
# The DP bound on measured ROC points


@dataclass(frozen=True)
class BoundViolation:
    index: int
    inequality: str
    fpr: float
    tpr: float
    lhs: float
    rhs: float
    excess: float


@dataclass(frozen=True)
class DpBoundCheck:
    """``max_excess`` = max over points and inequalities of lhs − rhs
    (≤ 0: every point is within the bound; > 0: the largest violation)."""

    epsilon: float
    delta: float
    violations: list[BoundViolation]
    max_excess: float

    @property
    def ok(self) -> bool:
        return not self.violations

    def to_dict(self) -> dict:
        return asdict(self) | {"ok": self.ok}


def dp_bound_check(
    fpr: np.ndarray,
    tpr: np.ndarray,
    epsilon: float,
    delta: float,
    n_pos: int | None = None,
    n_neg: int | None = None,
    alpha: float = 0.05,
    symmetric: bool = True,
    tol: float = 1e-12,
) -> DpBoundCheck:
    """Check measured operating points against the (ε, δ)-DP hypothesis-testing bound.

    Source document 004: "no attacker … can achieve a true-positive rate
    exceeding e^ε · FPR + δ at any chosen false-positive rate". Checked:
    TPR ≤ e^ε·FPR + δ, and with ``symmetric=True`` also the complement
    1 − FPR ≤ e^ε·(1 − TPR) + δ and the two swapped forms
    FPR ≤ e^ε·TPR + δ, 1 − TPR ≤ e^ε·(1 − FPR) + δ (DP bounds both directions).

    Point estimates violate the bound by chance at small n; pass ``n_pos``
    and ``n_neg`` (the counts behind the rates) to check statistically
    instead: the left-hand rate is replaced by its one-sided lower CP bound
    and the right-hand rate by its upper one (each at 1 − α/2), so a
    reported violation is significant at level α (per point).
    Returns every violating point and the maximum excess lhs − rhs.
    """
    fpr = np.asarray(fpr, dtype=np.float64).ravel()
    tpr = np.asarray(tpr, dtype=np.float64).ravel()
    if fpr.shape != tpr.shape:
        raise ValueError(f"fpr and tpr differ in length: {fpr.size} vs {tpr.size}")
    if epsilon < 0 or not 0 <= delta <= 1:
        raise ValueError(f"need epsilon ≥ 0 and delta in [0, 1], got {epsilon}, {delta}")
    stat = n_pos is not None and n_neg is not None
    e = math.exp(epsilon)

    def lo(rate, n):
        if not stat:
            return rate
        return clopper_pearson(np.rint(rate * n), np.full(rate.shape, n), alpha / 2, "lower")[0]

    def hi(rate, n):
        if not stat:
            return rate
        return clopper_pearson(np.rint(rate * n), np.full(rate.shape, n), alpha / 2, "upper")[1]

    forms = [("TPR <= e^eps*FPR + delta", tpr, n_pos, fpr, n_neg)]
    if symmetric:
        forms += [
            ("1-FPR <= e^eps*(1-TPR) + delta", 1 - fpr, n_neg, 1 - tpr, n_pos),
            ("FPR <= e^eps*TPR + delta", fpr, n_neg, tpr, n_pos),
            ("1-TPR <= e^eps*(1-FPR) + delta", 1 - tpr, n_pos, 1 - fpr, n_neg),
        ]
    violations: list[BoundViolation] = []
    max_excess = -np.inf
    for name, l_rate, l_n, r_rate, r_n in forms:
        lhs = lo(l_rate, l_n)
        rhs = e * hi(r_rate, r_n) + delta
        excess = lhs - rhs
        if excess.size:
            max_excess = max(max_excess, float(excess.max()))
        for i in np.flatnonzero(excess > tol):
            violations.append(
                BoundViolation(int(i), name, float(fpr[i]), float(tpr[i]), float(lhs[i]), float(rhs[i]), float(excess[i]))
            )
    return DpBoundCheck(epsilon=float(epsilon), delta=float(delta), violations=violations, max_excess=float(max_excess))
