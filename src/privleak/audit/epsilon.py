"""Empirical ε: a lower bound on ε from a membership test, and the DP bound on ROC points.

Jagielski et al. 2020 ("Auditing differentially private machine learning:
how private is private SGD?") and Nasr et al. 2021 ("Adversary
instantiation: lower bounds for differentially private machine learning"):
an (ε, δ)-DP mechanism M satisfies, for every set S of outcomes and both
orders of a neighbouring pair,

    P[M(D) ∈ S] ≤ e^ε · P[M(D') ∈ S] + δ.

A membership test "member iff score ≥ t" is such an S, so any test gives
ε ≥ ln((TPR − δ) / FPR); with one-sided Clopper–Pearson bounds TPR_lo and
FPR_hi the bound ε ≥ ln((TPR_lo − δ) / FPR_hi) holds with confidence 1 − α.
See :func:`empirical_epsilon` for the exact procedure. Checked in
``tests/test_stats.py``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from ..core.stats import clopper_pearson

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
