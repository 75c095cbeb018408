"""Empirical ε: a lower bound on ε from a membership test, and the DP bound on ROC curves.

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
``tests/test_stats.py`` and ``tests/test_alarms.py``.

What these bounds assume, and why they are diagnostics, not alarms
(:mod:`privleak.audit.alarms`):

* **Independent trials.** Clopper–Pearson (and DKW in :func:`roc_band_check`)
  treat the evaluated members' outcomes as independent draws. Jagielski et
  al. train one model per trial; PrivLeak evaluates many members of *one*
  model, whose outcomes the model couples. DP itself does not make them
  independent. Steinke, Nasr & Jagielski (2023) prove the binomial bound
  still holds for the count of correct guesses when every unit's membership
  is an independent fair coin — which is how the one-run audit canaries are
  inserted (:mod:`privleak.audit.one_run`), but not how the data is split:
  the split is a random partition of fixed sizes and the evaluated units are
  matched per stratum after the split, so their membership bits are neither
  independent nor chosen blind. The bounds here are exact when trials are
  independent (as in the simulations) and indicative otherwise.
* **The unit.** Members are drawn one record per unit (person, group,
  distinct text), but every record of the unit was trained on: under
  record-level (ε, δ)-DP a unit of k records is protected only at the group
  level, (kε, k·e^{(k−1)ε}·δ) (:func:`group_privacy`). A membership bound is
  compared with the ε of the evaluated units, never the per-record ε.
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
class HeldOutBound:
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


def exceeds_scaled(lhs: float, epsilon: float, rate: float) -> bool:
    """lhs > e^ε · rate, decided in log space: a unit's ε can be in the thousands (a person with many
    records under record-level DP), where e^ε overflows a double (``math.exp`` raises past ε ≈ 709)."""
    if lhs <= 0.0:
        return False
    if rate <= 0.0:
        return True
    return math.log(lhs) > epsilon + math.log(rate)


def _scaled(rate: np.ndarray, epsilon: float) -> np.ndarray:
    """e^ε · rate elementwise, +∞ where it exceeds a double (never an OverflowError), 0 where rate is 0."""
    rate = np.asarray(rate, dtype=np.float64)
    with np.errstate(over="ignore", divide="ignore"):
        return np.where(rate > 0, np.exp(epsilon + np.log(np.where(rate > 0, rate, 1.0))), 0.0)


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


def split_halves(pos: np.ndarray, neg: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(pos_select, pos_eval, neg_select, neg_eval), each sorted: ``pos`` and ``neg`` shuffled with
    ``seed`` and cut in half, the first ⌊n/2⌋ to select with, the rest to evaluate on. The same seed
    gives every attack the same cut, so an attack chosen on the selection halves is independent of
    the evaluation halves."""
    pos = np.asarray(pos, dtype=np.float64).ravel()
    neg = np.asarray(neg, dtype=np.float64).ravel()
    rng = np.random.default_rng(seed)
    pos, neg = pos[rng.permutation(pos.size)], neg[rng.permutation(neg.size)]
    hp, hn = pos.size // 2, neg.size // 2
    return np.sort(pos[:hp]), np.sort(pos[hp:]), np.sort(neg[:hn]), np.sort(neg[hn:])


def group_privacy(epsilon: float, delta: float, k: int) -> tuple[float, float]:
    """The (ε, δ) that record-level (ε, δ)-DP gives a unit of k records: (kε, k·e^{(k−1)ε}·δ)
    (group privacy: Dwork & Roth 2014, Thm 2.2, for δ = 0; the δ term by the same induction), δ capped at 1."""
    if k < 1 or epsilon < 0 or not 0.0 <= delta <= 1.0:
        raise ValueError(f"need k ≥ 1, ε ≥ 0 and δ in [0, 1], got k={k}, ε={epsilon}, δ={delta}")
    if k == 1:
        return float(epsilon), float(delta)
    log_d = math.log(k) + (k - 1) * epsilon + math.log(delta) if delta > 0 else -math.inf
    return float(k * epsilon), float(min(1.0, math.exp(min(log_d, 0.0))))


def epsilon_test_p_value(k_p: int, n_p: int, k_q: int, n_q: int, epsilon: float, delta: float) -> float:
    """p-value of "P ≤ e^ε·Q + δ" from k_p of n_p (the rate P of a set S on one side) and k_q of n_q
    (the rate Q of S on the other side), with S fixed before these counts were seen.

    Rejected at level a when CP_lo(P; a/2) − δ > e^ε · CP_hi(Q; a/2) (one-sided Clopper–Pearson, a/2
    each: jointly 1 − a, as :func:`empirical_epsilon`); p is the smallest such a (bisection on log a;
    the condition only gets easier as a grows). Equivalently p ≤ a iff the bound ln((P_lo − δ)/Q_hi)
    at a exceeds ε. Valid when the n_p and n_q outcomes are independent trials (module docstring).
    """
    if n_p < 1 or n_q < 1 or not (0 <= k_p <= n_p and 0 <= k_q <= n_q):
        raise ValueError(f"need 0 ≤ k ≤ n, n ≥ 1, got {k_p}/{n_p} and {k_q}/{n_q}")
    if epsilon < 0 or not 0.0 <= delta <= 1.0:
        raise ValueError(f"need ε ≥ 0 and δ in [0, 1], got {epsilon}, {delta}")

    def rejects(log_a: float) -> bool:
        a = math.exp(log_a)
        p_lo = clopper_pearson(k_p, n_p, a / 2, "lower")[0]
        q_hi = clopper_pearson(k_q, n_q, a / 2, "upper")[1]
        return exceeds_scaled(p_lo - delta, epsilon, q_hi)

    lo, hi = -700.0, math.log(1.0 - 1e-12)
    if not rejects(hi):
        return 1.0
    if rejects(lo):
        return 0.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if rejects(mid) else (mid, hi)
    return float(math.exp(hi))


def held_out_counts(bound) -> tuple[int, int, int, int]:
    """(k_P, n_P, k_Q, n_Q) of an :class:`HeldOutBound` (or its serialised form) on its evaluation
    half: P is the side named first in ``bound.test``, so :func:`epsilon_test_p_value` can test the same
    (t, S) against another (ε, δ)."""
    test = next((t for t in _TESTS if t[0] == bound.test), None)
    if test is None:
        raise ValueError(f"unknown test {bound.test!r}")
    n_p, n_q = (bound.n_pos_eval, bound.n_neg_eval) if test[1] == "pos" else (bound.n_neg_eval, bound.n_pos_eval)
    return int(bound.k_p_eval), int(n_p), int(bound.k_q_eval), int(n_q)


def empirical_epsilon(
    pos: np.ndarray,
    neg: np.ndarray,
    delta: float,
    alpha: float = 0.05,
    seed: int = 0,
    max_thresholds: int = 2000,
    bonferroni: bool = True,
) -> HeldOutBound:
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
    result exceeds the true ε with probability at most α — *if* the held-out
    outcomes are independent trials (module docstring: with many members of
    one model they are not, so this is a diagnostic). (``bonferroni=False``
    uses 1 − α per bound, as some papers do: joint level 1 − 2α.) The
    held-out counts are returned, so the same (t, S) can be tested against
    another (ε, δ), e.g. a unit's group ε (:func:`epsilon_test_p_value`).
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
    pos_sel, pos_ev, neg_sel, neg_ev = split_halves(pos, neg, seed)
    hp, hn = pos_sel.size, neg_sel.size

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
    return HeldOutBound(
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
    reported violation is significant at level α **per point** only: over
    the thousands of points of a ROC curve, on the attack chosen on the same
    data, it flagged 6–15 % of exactly ε-DP mechanisms (issue 26). Never an
    alarm: for a statement about the whole curve use :func:`roc_band_check`.
    Returns every violating point and the maximum excess lhs − rhs.
    """
    fpr = np.asarray(fpr, dtype=np.float64).ravel()
    tpr = np.asarray(tpr, dtype=np.float64).ravel()
    if fpr.shape != tpr.shape:
        raise ValueError(f"fpr and tpr differ in length: {fpr.size} vs {tpr.size}")
    if epsilon < 0 or not 0 <= delta <= 1:
        raise ValueError(f"need epsilon ≥ 0 and delta in [0, 1], got {epsilon}, {delta}")
    stat = n_pos is not None and n_neg is not None

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
        rhs = _scaled(hi(r_rate, r_n), epsilon) + delta
        excess = lhs - rhs
        if excess.size:
            max_excess = max(max_excess, float(excess.max()))
        for i in np.flatnonzero(excess > tol):
            violations.append(
                BoundViolation(int(i), name, float(fpr[i]), float(tpr[i]), float(lhs[i]), float(rhs[i]), float(excess[i]))
            )
    return DpBoundCheck(epsilon=float(epsilon), delta=float(delta), violations=violations, max_excess=float(max_excess))


# ----------------------------------------------------------------------------
# The DP bound on a whole held-out ROC curve, simultaneously


@dataclass(frozen=True)
class RocBandCheck:
    """:func:`roc_band_check`'s answer. ``p_value``: of "every point of the curve is inside the
    (ε, δ) region"; ``worst``: the threshold, inequality and point estimates where the margin is
    largest; ``half_widths``: the DKW half-widths (members, non-members) at level ``alpha``."""

    epsilon: float
    delta: float
    alpha: float
    p_value: float
    n_pos: int
    n_neg: int
    half_widths: tuple[float, float]
    worst_threshold: float
    worst_inequality: str
    worst_fpr: float
    worst_tpr: float

    @property
    def violated(self) -> bool:
        return self.p_value <= self.alpha

    def to_dict(self) -> dict:
        d = asdict(self) | {"violated": self.violated}
        if not math.isfinite(d["worst_threshold"]):
            d["worst_threshold"] = None
        return d


def dkw_half_width(n: int, alpha: float) -> float:
    """λ with P[sup_t |F̂_n(t) − F(t)| > λ] ≤ alpha for n i.i.d. draws: √(ln(2/alpha) / (2n))
    (Dvoretzky–Kiefer–Wolfowitz with Massart's 1990 constant; any distribution, ties included)."""
    if n < 1 or not 0.0 < alpha < 1.0:
        raise ValueError(f"need n ≥ 1 and alpha in (0, 1), got {n}, {alpha}")
    return math.sqrt(math.log(2.0 / alpha) / (2.0 * n))


def roc_band_check(pos_eval: np.ndarray, neg_eval: np.ndarray, epsilon: float, delta: float,
                   alpha: float = 0.05) -> RocBandCheck:
    """Test a whole held-out ROC curve against (ε, δ)-DP with one simultaneous band.

    With DKW bands at level alpha/2 on each side's empirical CDF (half-widths
    λ_P = √(ln(4/alpha)/(2 n_pos)), λ_Q likewise), TPR(t) and FPR(t) lie within
    ±λ of their estimates *for every threshold t at once* with probability
    ≥ 1 − alpha. So every point and all four forms of the DP inequality
    (TPR ≤ e^ε·FPR + δ, 1 − FPR ≤ e^ε·(1 − TPR) + δ and the two swapped ones,
    as :func:`dp_bound_check`) are tested together at level alpha, with no
    union bound over points: a violation is lhs − λ_lhs > e^ε·(rhs + λ_rhs) + δ.
    The p-value is closed-form: with c* = max over points and forms of
    (lhs − e^ε·rhs − δ) / (1/√(2 n_lhs) + e^ε/√(2 n_rhs)), p = min(1, 4·e^{−c*²})
    (computed as (e^{−ε}(lhs − δ) − rhs) / (e^{−ε}/√(2 n_lhs) + 1/√(2 n_rhs)): finite for any ε).

    Pass scores the attack choice has not seen (the evaluation halves of
    :func:`split_halves`, the attack chosen on the selection halves): the band
    is then valid for the chosen attack. It assumes independent draws (module
    docstring), so it is a diagnostic. It is weaker than the Clopper–Pearson
    bound at a single threshold (additive λ at small FPR) but needs no
    threshold choice.
    """
    pos = np.sort(np.asarray(pos_eval, dtype=np.float64).ravel())
    neg = np.sort(np.asarray(neg_eval, dtype=np.float64).ravel())
    if pos.size < 1 or neg.size < 1:
        raise ValueError(f"need member and non-member scores, got {pos.size} and {neg.size}")
    if not (np.isfinite(pos).all() and np.isfinite(neg).all()):
        raise ValueError("scores contain NaN or infinity")
    if epsilon < 0 or not 0.0 <= delta <= 1.0:
        raise ValueError(f"need ε ≥ 0 and δ in [0, 1], got {epsilon}, {delta}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    # Numerator and denominator of c are divided by e^ε, so no e^ε is ever formed: e^{−ε} underflows
    # harmlessly to 0 for a unit ε in the thousands, where e^ε would overflow.
    e_inv = math.exp(-epsilon)
    t = np.append(np.unique(np.concatenate([pos, neg])), np.inf)
    tpr = _counts_ge(pos, t) / pos.size
    fpr = _counts_ge(neg, t) / neg.size
    sp, sn = 1.0 / math.sqrt(2.0 * pos.size), 1.0 / math.sqrt(2.0 * neg.size)
    forms = (("TPR <= e^eps*FPR + delta", tpr, sp, fpr, sn),
             ("1-FPR <= e^eps*(1-TPR) + delta", 1 - fpr, sn, 1 - tpr, sp),
             ("FPR <= e^eps*TPR + delta", fpr, sn, tpr, sp),
             ("1-TPR <= e^eps*(1-FPR) + delta", 1 - tpr, sp, 1 - fpr, sn))
    best_c, best = -np.inf, (0, forms[0][0])
    for name, lhs, s_l, rhs, s_r in forms:
        c = (e_inv * (lhs - delta) - rhs) / (e_inv * s_l + s_r)
        i = int(np.argmax(c))
        if c[i] > best_c:
            best_c, best = float(c[i]), (i, name)
    p = 1.0 if best_c <= 0 else min(1.0, 4.0 * math.exp(-best_c * best_c))
    i, name = best
    return RocBandCheck(epsilon=float(epsilon), delta=float(delta), alpha=float(alpha), p_value=float(p),
                        n_pos=int(pos.size), n_neg=int(neg.size),
                        half_widths=(dkw_half_width(pos.size, alpha / 2), dkw_half_width(neg.size, alpha / 2)),
                        worst_threshold=float(t[i]), worst_inequality=name, worst_fpr=float(fpr[i]),
                        worst_tpr=float(tpr[i]))
