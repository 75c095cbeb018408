"""Membership-inference metrics: ROC, AUC, TPR at a fixed low FPR, plot points.

Convention everywhere: positives are members, and a *higher* score means
"more likely a member". Pure numpy, checked inputs, matching scikit-learn's
``roc_curve``/``roc_auc_score`` (a test holds us to that).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def _check(pos: np.ndarray, neg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    pos = np.asarray(pos, dtype=np.float64).ravel()
    neg = np.asarray(neg, dtype=np.float64).ravel()
    if pos.size == 0 or neg.size == 0:
        raise ValueError(f"need at least one member and one non-member score, got {pos.size} and {neg.size}")
    if not (np.isfinite(pos).all() and np.isfinite(neg).all()):
        raise ValueError("membership scores contain NaN or infinity")
    return pos, neg


def roc_curve(pos: np.ndarray, neg: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(fpr, tpr, thresholds) for the rule "member iff score ≥ threshold".

    One point per distinct score, descending, starting at (0, 0) with an
    infinite threshold — the same points as ``sklearn.metrics.roc_curve``
    with ``drop_intermediate=False``.
    """
    pos, neg = _check(pos, neg)
    scores = np.concatenate([pos, neg])
    labels = np.concatenate([np.ones(pos.size), np.zeros(neg.size)])
    order = np.argsort(-scores, kind="mergesort")
    scores, labels = scores[order], labels[order]
    last_of_run = np.r_[np.diff(scores) != 0, True]
    tps = np.cumsum(labels)[last_of_run]
    fps = np.cumsum(1 - labels)[last_of_run]
    thresholds = scores[last_of_run]
    tpr = np.r_[0.0, tps / pos.size]
    fpr = np.r_[0.0, fps / neg.size]
    return fpr, tpr, np.r_[np.inf, thresholds]


def roc_auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """AUC = P(score_member > score_nonmember) + ½ P(tie) (Mann–Whitney U / n₊n₋)."""
    pos, neg = _check(pos, neg)
    allv = np.concatenate([pos, neg])
    ranks = _average_ranks(allv)
    u = ranks[: pos.size].sum() - pos.size * (pos.size + 1) / 2.0
    return float(u / (pos.size * neg.size))


def _average_ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="mergesort")
    sorted_x = x[order]
    ranks = np.empty(x.size, dtype=np.float64)
    boundaries = np.r_[0, np.flatnonzero(np.diff(sorted_x)) + 1, x.size]
    a, b = boundaries[:-1], boundaries[1:]
    # Each run of ties a..b-1 (0-based, sorted) gets the mean of the 1-based ranks a+1..b; one array operation
    # (a Python loop over the runs made DeLong's test the cost of judging: 11 ms per call at 650 a side).
    ranks[order] = np.repeat((a + b + 1) / 2.0, b - a)
    return ranks


def tpr_at_fpr(pos: np.ndarray, neg: np.ndarray, max_fpr: float) -> float:
    """Highest TPR over thresholds whose FPR is strictly below ``max_fpr``.

    Strict: with 1,000 non-members, "TPR at 0.1 % FPR" allows zero false
    positives, never one — the low-FPR regime of Carlini et al. 2022.
    """
    if not 0.0 < max_fpr <= 1.0:
        raise ValueError(f"max_fpr must be in (0, 1], got {max_fpr}")
    fpr, tpr, _ = roc_curve(pos, neg)
    return float(tpr[fpr < max_fpr].max())


def _auc_from_roc(fpr: np.ndarray, tpr: np.ndarray) -> float:
    """Trapezoid area under the tie-grouped ROC = P(pos > neg) + ½ P(tie), as :func:`roc_auc`."""
    return float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1])) / 2.0)


def _tpr_below(fpr: np.ndarray, tpr: np.ndarray, max_fpr: float) -> float:
    return float(tpr[fpr < max_fpr].max())


def roc_points(pos: np.ndarray, neg: np.ndarray, max_points: int = 200) -> dict[str, list[float]]:
    """ROC points for plotting (log-FPR axis), at most ``max_points`` of them.

    The full curve (:func:`roc_curve`) can have one point per score; we keep
    (0, 0), (1, 1), and for each FPR value g of a log-spaced grid from
    1/n_non_members to 1 the *last* ROC point with FPR ≤ g (its highest TPR
    there), so the low-FPR end — where the TPR@0.1 % figure lives — is kept
    at full resolution. Returns JSON-ready ``{"fpr", "tpr", "threshold"}``
    lists (threshold of the rule "member iff score ≥ threshold"; the first is
    None for the infinite threshold of (0, 0)).
    """
    if max_points < 3:
        raise ValueError(f"max_points must be ≥ 3, got {max_points}")
    fpr, tpr, thr = roc_curve(pos, neg)
    if fpr.size > max_points:
        n_neg = np.asarray(neg).size
        grid = np.geomspace(1.0 / n_neg, 1.0, max_points - 1)
        idx = np.searchsorted(fpr, grid, side="right") - 1
        idx = np.unique(np.r_[0, idx, fpr.size - 1])
        if idx.size > max_points:  # cannot happen with the grid above, kept as a guard
            idx = np.unique(np.r_[idx[: max_points - 1], fpr.size - 1])
        fpr, tpr, thr = fpr[idx], tpr[idx], thr[idx]
    return {
        "fpr": [float(v) for v in fpr],
        "tpr": [float(v) for v in tpr],
        "threshold": [None if not np.isfinite(v) else float(v) for v in thr],
    }


@dataclass(frozen=True)
class MiaMetrics:
    auc: float
    tpr_at_1pct_fpr: float
    tpr_at_0_1pct_fpr: float
    n_members: int
    n_non_members: int
    auc_ci95: tuple[float, float] | None = None
    tpr_at_1pct_fpr_ci95: tuple[float, float] | None = None
    tpr_at_0_1pct_fpr_ci95: tuple[float, float] | None = None


def mia_metrics(pos: np.ndarray, neg: np.ndarray, bootstrap: int = 200, seed: int = 0) -> MiaMetrics:
    """AUC and TPR@{1 %, 0.1 %} FPR, each with a percentile-bootstrap 95 % CI.

    Members and non-members are resampled separately (stratified bootstrap,
    ``bootstrap`` replicates, ``seed``); each replicate's AUC and TPRs come
    from one ROC curve. With fewer than 1,000 non-members the TPR at 0.1 %
    FPR allows zero false positives (strict <), so it is very noisy — its
    CI says so.
    """
    pos, neg = _check(pos, neg)
    ci = ci1 = ci01 = None
    if bootstrap > 0:
        rng = np.random.default_rng(seed)
        reps = np.empty((bootstrap, 3))
        for b in range(bootstrap):
            f, t, _ = roc_curve(rng.choice(pos, pos.size), rng.choice(neg, neg.size))
            reps[b] = (_auc_from_roc(f, t), _tpr_below(f, t, 0.01), _tpr_below(f, t, 0.001))
        lo, hi = np.percentile(reps, 2.5, axis=0), np.percentile(reps, 97.5, axis=0)
        ci, ci1, ci01 = ((float(lo[j]), float(hi[j])) for j in range(3))
    return MiaMetrics(
        auc=roc_auc(pos, neg),
        tpr_at_1pct_fpr=tpr_at_fpr(pos, neg, 0.01),
        tpr_at_0_1pct_fpr=tpr_at_fpr(pos, neg, 0.001),
        n_members=int(pos.size),
        n_non_members=int(neg.size),
        auc_ci95=ci,
        tpr_at_1pct_fpr_ci95=ci1,
        tpr_at_0_1pct_fpr_ci95=ci01,
    )


@dataclass(frozen=True)
class PairedAuc:
    """Two models' AUCs on the same members and non-members, and DeLong's covariance of the pair."""

    auc_a: float
    auc_b: float
    var_a: float
    var_b: float
    cov: float
    n_pos: int
    n_neg: int

    @property
    def diff(self) -> float:
        return self.auc_a - self.auc_b

    @property
    def se_diff(self) -> float:
        return float(np.sqrt(max(self.var_a + self.var_b - 2.0 * self.cov, 0.0)))

    def diff_ci(self, level: float = 0.95) -> tuple[float, float]:
        from scipy.stats import norm

        h = float(norm.ppf(0.5 + level / 2)) * self.se_diff
        return self.diff - h, self.diff + h

    def p_value(self, alternative: str) -> float:
        """DeLong's test of AUC_a = AUC_b: ``alternative`` "greater" (a > b), "less" or "two-sided". A pair with no
        variance (both perfect, say) gives 1 unless the AUCs differ."""
        from scipy.stats import norm

        if alternative not in ("greater", "less", "two-sided"):
            raise ValueError(f"alternative must be 'greater', 'less' or 'two-sided', got {alternative!r}")
        se = self.se_diff
        if se == 0.0:
            z = 0.0 if self.diff == 0 else np.copysign(np.inf, self.diff)
        else:
            z = self.diff / se
        if alternative == "greater":
            return float(norm.sf(z))
        if alternative == "less":
            return float(norm.cdf(z))
        return float(min(1.0, 2.0 * norm.sf(abs(z))))

    def relative_gap(self, level: float = 0.95) -> tuple[float, tuple[float, float]]:
        """(AUC_a − AUC_b) / AUC_b — MUSE's PrivLeak when b is the retrained model (Shi et al. 2024) — with a
        delta-method interval from the same covariance: ∇ = (1/b, −a/b²)."""
        from scipy.stats import norm

        a, b = self.auc_a, self.auc_b
        g = np.array([1.0 / b, -a / b**2])
        cov = np.array([[self.var_a, self.cov], [self.cov, self.var_b]])
        h = float(norm.ppf(0.5 + level / 2)) * float(np.sqrt(max(g @ cov @ g, 0.0)))
        gap = (a - b) / b
        return gap, (gap - h, gap + h)


def delong_paired(pos_a: np.ndarray, neg_a: np.ndarray, pos_b: np.ndarray, neg_b: np.ndarray) -> PairedAuc:
    """DeLong, DeLong & Clarke-Pearson (1988) for two correlated AUCs — two models' scores on the same members
    (``pos``, in the same order) and non-members (``neg``) — by Sun & Xu's (2014) mid-rank algorithm.

    For model k the structural components are V10_i = (R_i − R⁺_i)/n₋ per member (R: mid-rank among all
    scores, R⁺: among the members) and V01_j = 1 − (R_j − R⁻_j)/n₊ per non-member; the covariance of
    (AUC_a, AUC_b) is S10/n₊ + S01/n₋ with S10, S01 the 2×2 sample covariances of the components."""
    pa, na = _check(pos_a, neg_a)
    pb, nb = _check(pos_b, neg_b)
    if pa.size != pb.size or na.size != nb.size:
        raise ValueError("paired AUCs need both models' scores on the same members and non-members")
    m, n = pa.size, na.size
    v10, v01, aucs = [], [], []
    for pos, neg in ((pa, na), (pb, nb)):
        r_all = _average_ranks(np.concatenate([pos, neg]))
        r_pos, r_neg = _average_ranks(pos), _average_ranks(neg)
        aucs.append(float((r_all[:m].sum() - m * (m + 1) / 2.0) / (m * n)))
        v10.append((r_all[:m] - r_pos) / n)
        v01.append(1.0 - (r_all[m:] - r_neg) / m)
    s10 = np.cov(np.vstack(v10)) if m > 1 else np.zeros((2, 2))
    s01 = np.cov(np.vstack(v01)) if n > 1 else np.zeros((2, 2))
    s = s10 / m + s01 / n
    return PairedAuc(auc_a=aucs[0], auc_b=aucs[1], var_a=float(s[0, 0]), var_b=float(s[1, 1]), cov=float(s[0, 1]),
                     n_pos=m, n_neg=n)
