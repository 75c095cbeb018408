"""Membership-inference metrics: ROC, AUC, TPR at a fixed low FPR.

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


@dataclass(frozen=True)
class MiaMetrics:
    auc: float
    tpr_at_1pct_fpr: float
    tpr_at_0_1pct_fpr: float
    n_members: int
    n_non_members: int
    auc_ci95: tuple[float, float] | None = None


def mia_metrics(pos: np.ndarray, neg: np.ndarray, bootstrap: int = 200, seed: int = 0) -> MiaMetrics:
    """AUC and TPR@{1 %, 0.1 %} FPR, with a percentile-bootstrap 95 % CI on the AUC."""
    pos, neg = _check(pos, neg)
    ci = None
    if bootstrap > 0:
        rng = np.random.default_rng(seed)
        aucs = [
            roc_auc(rng.choice(pos, pos.size), rng.choice(neg, neg.size)) for _ in range(bootstrap)
        ]
        ci = (float(np.percentile(aucs, 2.5)), float(np.percentile(aucs, 97.5)))
    return MiaMetrics(
        auc=roc_auc(pos, neg),
        tpr_at_1pct_fpr=tpr_at_fpr(pos, neg, 0.01),
        tpr_at_0_1pct_fpr=tpr_at_fpr(pos, neg, 0.001),
        n_members=int(pos.size),
        n_non_members=int(neg.size),
        auc_ci95=ci,
    )
