"""Membership leakage in the low-FPR tail, with exact, distribution-free bounds.

Where privacy is lost is the tail: an attack that flags 3 % of the members at a 1 % false-alarm rate
exposes those members whatever its AUC (Carlini et al. 2022). A TPR "at 1 % FPR" is read at a threshold
the non-members set, so both the threshold and the rate it gives are random; treating either as fixed
makes a test's p-value invalid (issue 44: the old route rejected 4.8–9.4 % at level 0.025).

The figure here is the attack's **advantage at a target FPR f**: with n₋ non-member scores, the
threshold t is the k-th largest of them, k = ⌊f·n₋⌋ + 1 (at most ⌊f·n₋⌋ non-members lie above it), and

    adv(t) = TPR(t) − FPR(t),  TPR(t) = P[member score > t],  FPR(t) = P[non-member score > t].

Two exact facts bound it, whatever the score distributions:

* FPR(t) of the k-th largest of n₋ continuous scores is Beta(k, n₋ − k + 1) distributed (the
  probability content above an order statistic; David & Nagaraja, *Order Statistics*, §2.5), so its
  quantiles bound FPR(t) without a second, held-out set of non-members (ties are broken by a seeded
  uniform key, which makes the scores continuous);
* given t (which depends on the non-members only), the members above it are Binomial(n₊, TPR(t)), so a
  Clopper–Pearson bound holds conditionally on t, hence unconditionally.

A union bound joins them: P[adv(t) > UB] ≤ α when each bound takes α/2 — an exact, conservative upper
bound valid at every level, Holm's tiny ones included. For a model that never saw the members (an
exchangeable split), TPR = FPR at every threshold, so adv = 0 wherever the threshold lands: the claim
is read against the chance line, and a shifted split (adv > 0 for the control too) can only make an
equivalence harder to show, never easier. The leak test compares the arm's lower bound with the
control's upper bound (four bounds at α/4 each).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from .stats import Equivalence, _invert_level, _needed, clopper_pearson


@dataclass(frozen=True)
class TailCounts:
    """One model at one target FPR: the threshold is the ``k``-th largest of ``n_neg`` non-member scores, and
    ``k_pos`` of ``n_pos`` members score strictly above it."""

    fpr: float
    k: int
    n_neg: int
    k_pos: int
    n_pos: int

    @property
    def tpr(self) -> float:
        return self.k_pos / self.n_pos

    @property
    def expected_fpr(self) -> float:
        """E[FPR(t)] = k / (n₋ + 1), the mean of Beta(k, n₋ − k + 1)."""
        return self.k / (self.n_neg + 1)

    @property
    def advantage(self) -> float:
        """The point estimate TPR − E[FPR(t)]."""
        return self.tpr - self.expected_fpr


def threshold_rank(fpr: float, n_neg: int) -> int:
    """k = ⌊f·n₋⌋ + 1: the rank (from the top) of the non-member score that sets the threshold at target FPR f."""
    if not 0.0 < fpr < 1.0:
        raise ValueError(f"target FPR must be in (0, 1), got {fpr}")
    if n_neg < 1:
        raise ValueError("need at least one non-member score")
    return min(n_neg, int(math.floor(fpr * n_neg + 1e-9)) + 1)


def tail_counts(pos, neg, fpr: float, seed: int = 0) -> TailCounts:
    """The counts of :class:`TailCounts` for member scores ``pos`` and non-member scores ``neg`` (higher =
    member). Exact ties are broken by a seeded uniform key per score, so the order statistics behave as for
    continuous scores (the Beta law above needs no ties)."""
    p = np.asarray(pos, dtype=np.float64).ravel()
    q = np.asarray(neg, dtype=np.float64).ravel()
    if p.size == 0 or q.size == 0:
        raise ValueError("need member and non-member scores")
    if not (np.isfinite(p).all() and np.isfinite(q).all()):
        raise ValueError("scores must be finite")
    k = threshold_rank(fpr, q.size)
    rng = np.random.default_rng(seed)
    kp_, kq = rng.random(p.size), rng.random(q.size)
    order = np.lexsort((-kq, -q))  # descending by score, then by key
    t, tk = q[order[k - 1]], kq[order[k - 1]]
    above = (p > t) | ((p == t) & (kp_ > tk))
    return TailCounts(fpr=fpr, k=k, n_neg=int(q.size), k_pos=int(above.sum()), n_pos=int(p.size))


def _beta_quantile(k: float, n: float, q: float) -> float:
    """The q-quantile of Beta(k, n − k + 1): the law of the FPR above the k-th largest of n scores."""
    return float(special.betaincinv(k, n - k + 1, q))


def _cp(k: float, n: float, a: float, side: str) -> float:
    lo, hi = clopper_pearson(min(k, n), n, a, side)
    return hi if side == "upper" else lo


def advantage_upper(c: TailCounts, alpha: float, scale: float = 1.0) -> float:
    """A (1 − α) upper confidence bound on adv(t): the members' Clopper–Pearson upper bound at α/2 minus the
    α/2-quantile of FPR(t)'s Beta law. ``scale`` multiplies every count (the sizes an extrapolation asks about)."""
    return (_cp(c.k_pos * scale, c.n_pos * scale, alpha / 2, "upper")
            - _beta_quantile(c.k * scale, c.n_neg * scale, alpha / 2))


def advantage_lower(c: TailCounts, alpha: float) -> float:
    """A (1 − α) lower confidence bound on adv(t): Clopper–Pearson lower at α/2 minus FPR(t)'s (1 − α/2)-quantile."""
    return _cp(c.k_pos, c.n_pos, alpha / 2, "lower") - _beta_quantile(c.k, c.n_neg, 1 - alpha / 2)


def tail_within(c: TailCounts, margin: float, alpha: float = 0.05) -> Equivalence:
    """Is the advantage at this target FPR below ``margin``? One-sided (flagging members *less* often than
    non-members is no leak): shown when :func:`advantage_upper` at level α is below the margin. Exact, so the
    false-equivalence rate at the margin is at most α. ``judgeable``: the sizes could show it at a zero
    advantage (members flagged at E[FPR(t)]) — decided by n₊, n₋ and f alone. ``n_needed``: members and
    non-members per side (scaled together) that would show it at the observed rates."""
    if not margin > 0 or not 0.0 < alpha < 0.5:
        raise ValueError(f"need margin > 0 and 0 < α < 0.5, got {margin}, {alpha}")
    ub = advantage_upper(c, alpha)
    eq = ub < margin
    p = _invert_level(lambda a: advantage_upper(c, a) < margin)
    zero = TailCounts(c.fpr, c.k, c.n_neg, int(round(c.n_pos * c.expected_fpr)), c.n_pos)
    needed = None
    if not eq and c.advantage < margin:
        needed = _needed(c.n_pos, lambda s: advantage_upper(c, alpha, s) < margin)
    return Equivalence(estimate=c.advantage, lower=None, upper=ub, margin=margin, alpha=alpha, p_value=p,
                       equivalent=bool(eq), one_sided=True, n=c.n_pos, n_needed=needed,
                       method="order-statistic Beta + Clopper–Pearson (exact)",
                       judgeable=bool(advantage_upper(zero, alpha) < margin))


def tail_leak_p(arm: TailCounts, control: TailCounts | None, margin: float) -> float:
    """The p-value of "the arm's advantage exceeds the control's by at most ``margin``" (exact, conservative):
    the smallest level a at which the arm's lower bound minus the control's upper bound (each at a/2) exceeds
    the margin; without a control, the arm's lower bound alone against the margin (the chance line)."""
    if not margin >= 0:
        raise ValueError(f"margin must be ≥ 0, got {margin}")
    if control is None:
        return _invert_level(lambda a: advantage_lower(arm, a) > margin)
    return _invert_level(lambda a: advantage_lower(arm, a / 2) - advantage_upper(control, a / 2) > margin)
