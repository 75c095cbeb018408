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
    for a, b in zip(boundaries[:-1], boundaries[1:]):
        ranks[order[a:b]] = (a + b + 1) / 2.0  # mean of 1-based ranks a+1..b
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
