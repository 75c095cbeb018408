"""NEAR CHANCE where privacy is lost: the low-FPR tail (core/tails.py, issue 44 items 1 and 2).

The old membership verdict tested the AUC alone for "within the margin" and read TPR at 1 % FPR with the
threshold and the control's rate taken as fixed. Each test here fails on that code: a model that memorises 2 %
of its members (TPR ≈ 3 % at 1 % FPR, AUC gap ≈ +0.01) was NEAR CHANCE at 650 a side, and the TPR route
rejected 4.8–9.4 % at its own null boundary at level 0.025.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from privleak.attacks.base import Policy
from privleak.attacks.membership.attacks import scores_result
from privleak.core.tails import (
    TailCounts,
    advantage_upper,
    tail_counts,
    tail_leak_p,
    tail_within,
    threshold_rank,
)


def _mc_bound(rate: float, n: int) -> float:
    """A one-sided 99 % Monte-Carlo allowance above a rate: a true 2α would exceed α + this with high power."""
    return rate + 2.33 * math.sqrt(rate * (1 - rate) / n)


def test_the_fpr_above_an_order_statistic_has_the_beta_law():
    """The exact fact the bounds rest on: P[score > k-th largest of n] ~ Beta(k, n − k + 1), whatever the
    distribution (checked on exponential scores, whose survival function is known)."""
    rng = np.random.default_rng(0)
    n, k = 300, 4
    fprs = []
    for _ in range(3000):
        x = rng.exponential(size=n)
        t = np.sort(x)[::-1][k - 1]
        fprs.append(math.exp(-t))
    assert stats.kstest(fprs, stats.beta(k, n - k + 1).cdf).pvalue > 0.01


def test_threshold_rank_and_tie_breaking():
    assert threshold_rank(0.01, 650) == 7 and threshold_rank(0.001, 650) == 1 and threshold_rank(0.01, 100) == 2
    with pytest.raises(ValueError):
        threshold_rank(0.0, 10)
    # Every score tied: the seeded keys still order them, and the counts stay in range.
    c = tail_counts(np.zeros(100), np.zeros(100), 0.01)
    assert c.k == 2 and 0 <= c.k_pos <= 100


def _memorised(n: int, fraction: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Member scores where ``fraction`` of the members are memorised (score far above every non-member)."""
    pos = rng.normal(size=n)
    pos[: int(round(fraction * n))] += 50.0
    return pos, rng.normal(size=n)


def test_false_equivalence_at_the_margin_is_at_most_alpha():
    """At the margin (advantage exactly 0.02 at 1 % FPR) the tail claim is made in ≤ α of draws; 600 draws give
    a true 2α a ~99 % chance to fail this test."""
    rng = np.random.default_rng(1)
    claims = 0
    reps = 600
    for s in range(reps):
        pos, neg = _memorised(650, 0.02 / 0.99, rng)
        claims += tail_within(tail_counts(pos, neg, 0.01, seed=s), 0.02, 0.05).equivalent
    assert claims / reps <= _mc_bound(0.05, reps) - 0.05 + 0.05  # ≤ α plus Monte-Carlo error


def test_the_tail_test_can_show_a_null_model_at_the_default_size():
    """Judgeable at ~650 people a side (the quick profile) at both FPRs — decided by the sizes alone."""
    for fpr, margin in ((0.01, 0.02), (0.001, 0.01)):
        k = threshold_rank(fpr, 650)
        zero = TailCounts(fpr, k, 650, int(round(650 * k / 651)), 650)
        assert advantage_upper(zero, 0.05) < margin
        assert tail_within(zero, margin).judgeable
    # 150 a side (the smoke profile) cannot show 0.02 at 1 % FPR even at a zero advantage.
    k = threshold_rank(0.01, 150)
    assert not tail_within(TailCounts(0.01, k, 150, 2, 150), 0.02).judgeable


def test_the_leak_route_rejects_at_most_alpha_at_its_null_boundary():
    """The arm's advantage exceeds the control's by exactly the margin: rejections at level 0.025 ≤ 0.025 (the
    old route's binomial on a fixed threshold rejected 4.8–9.4 % here). 800 draws: a true 0.05 fails."""
    rng = np.random.default_rng(2)
    reps, level, margin = 800, 0.025, 0.02
    rejected = 0
    for s in range(reps):
        pos, neg = _memorised(650, margin / 0.99, rng)
        cpos, cneg = rng.normal(size=650), rng.normal(size=650)
        arm, ctrl = tail_counts(pos, neg, 0.01, seed=s), tail_counts(cpos, cneg, 0.01, seed=s + 1)
        rejected += tail_leak_p(arm, ctrl, margin) <= level
    assert rejected / reps <= _mc_bound(level, reps) - level + level


def test_the_leak_route_finds_a_heavy_memoriser_at_holm_levels():
    rng = np.random.default_rng(3)
    pos, neg = _memorised(650, 0.2, rng)
    arm = tail_counts(pos, neg, 0.01)
    ctrl = tail_counts(rng.normal(size=650), rng.normal(size=650), 0.01)
    assert tail_leak_p(arm, ctrl, 0.02) < 5e-4


def _verdict_level(pos, neg, cpos, cneg) -> tuple[bool, bool]:
    """(every membership test within its margin, the AUC alone within its margin) for one arm vs its control."""
    arm = scores_result(pos, neg, evaluated="x")
    ctrl = scores_result(cpos, cneg, evaluated="x")
    found = arm.assess_all("loss", ctrl, Policy())
    auc = next(f for f in found if not f.test)
    return all(f.within_margin for f in found), auc.within_margin


def test_two_percent_memorised_at_650_a_side_is_not_near_chance():
    """The issue's case: 2 % of members memorised — TPR ≈ 3 % at 1 % FPR, an AUC gap of ≈ +0.01. The AUC alone
    is shown within ±0.05 (the old verdict's whole basis); the tail test refuses the claim in every draw."""
    rng = np.random.default_rng(4)
    auc_only = within = 0
    for _ in range(40):
        # The arm's scores are the control's on the same texts (a paired design, as an audit's are), plus the
        # memorised members.
        cpos, cneg = rng.normal(size=650), rng.normal(size=650)
        pos = cpos + rng.normal(scale=0.3, size=650)
        pos[:13] += 50.0
        neg = cneg + rng.normal(scale=0.3, size=650)
        w, a = _verdict_level(pos, neg, cpos, cneg)
        within += w
        auc_only += a
    assert auc_only >= 30  # the old claim: NEAR CHANCE on most draws
    assert within == 0


def test_a_model_at_chance_is_shown_within_every_margin_often():
    rng = np.random.default_rng(5)
    shown = 0
    for _ in range(40):
        cpos, cneg = rng.normal(size=650), rng.normal(size=650)
        shown += _verdict_level(cpos + rng.normal(scale=0.3, size=650), cneg + rng.normal(scale=0.3, size=650),
                                cpos, cneg)[0]
    assert shown >= 10  # power: the claim is makeable at the default size


def test_tail_findings_are_separate_leak_tests_with_their_margins():
    rng = np.random.default_rng(6)
    pos, neg = _memorised(650, 0.3, rng)
    arm, ctrl = scores_result(pos, neg, evaluated="x"), scores_result(rng.normal(size=650), rng.normal(size=650),
                                                                      evaluated="x")
    found = arm.assess_all("loss", ctrl, Policy())
    assert [f.key for f in found] == ["loss", "loss@tail 0.01", "loss@tail 0.001"]
    tail = found[1]
    assert tail.leaks and "1% FPR" in tail.figure and "below 0.02" in tail.margin
    assert tail.equivalence.one_sided and tail.equivalence.upper is not None
