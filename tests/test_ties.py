"""The recommendation's tie rule (audit/ties.py): arms within noise of the best are chosen between by ε,
then name, so the choice does not flip with the third decimal of G."""

from __future__ import annotations

import numpy as np
import pytest

from privleak.audit.ties import ReleaseCandidate as C
from privleak.audit.ties import pick_release


def test_overlapping_intervals_are_a_tie_broken_by_epsilon():
    # issue 26: dp-1 (G 0.34) vs dp-8 (G 0.61) — if their intervals overlap, the smaller ε wins either way
    a = [C("dp-1", 0.34, (0.20, 0.48), 1.0, True), C("dp-8", 0.61, (0.45, 0.77), 8.0, True),
         C("baseline", 1.0, (0.9, 1.1), None, False)]
    r = pick_release(a)
    assert r.chosen == "dp-1" and r.best_utility == "dp-8" and r.tied == ["dp-1", "dp-8"]
    assert r.leaking_better == ["baseline"] and "tie rule" in r.text and "dp-8" in r.text
    # swap which arm's G is higher by noise: same choice
    b = [C("dp-1", 0.62, (0.48, 0.76), 1.0, True), C("dp-8", 0.60, (0.45, 0.75), 8.0, True)]
    assert pick_release(b).chosen == "dp-1"


def test_a_clearly_better_arm_wins_and_no_eligible_arm_gives_none():
    r = pick_release([C("dp-1", 0.2, (0.1, 0.3), 1.0, True), C("dp-8", 0.7, (0.6, 0.8), 8.0, True)])
    assert r.chosen == "dp-8" and r.tied == ["dp-8"] and "highest utility" in r.text
    none = pick_release([C("baseline", 1.0, (0.9, 1.1), None, False)])
    assert none.chosen is None and "none is recommended" in none.text


def test_no_guarantee_counts_as_infinite_epsilon_then_name():
    r = pick_release([C("scrub", 0.9, (0.8, 1.0), None, True), C("dedup", 0.85, (0.75, 0.95), None, True),
                      C("dp-8", 0.8, (0.7, 0.9), 8.0, True)])
    assert r.tied == ["dp-8", "dedup", "scrub"] and r.chosen == "dp-8"
    r2 = pick_release([C("scrub", 0.9, (0.8, 1.0), None, True), C("dedup", 0.85, (0.75, 0.95), None, True)])
    assert r2.chosen == "dedup"  # tied, neither has an ε: by name
    # without intervals only exact equality ties
    r3 = pick_release([C("a", 0.5, None, 2.0, True), C("b", 0.51, None, 1.0, True)])
    assert r3.chosen == "b" and r3.tied == ["b"]


def test_stable_under_resampling_noise():
    """Two arms with the same true G (0.5) and intervals of ±0.1: across 200 reseeds the point
    estimates swap order about half the time, the tie rule's choice never changes."""
    rng = np.random.default_rng(0)
    picks, swaps = set(), 0
    for _ in range(200):
        g1, g2 = rng.normal(0.5, 0.03, 2)
        swaps += g1 > g2
        picks.add(pick_release([C("dp-1", g1, (g1 - 0.1, g1 + 0.1), 1.0, True),
                                C("dp-4", g2, (g2 - 0.1, g2 + 0.1), 4.0, True)]).chosen)
    assert 50 < swaps < 150 and picks == {"dp-1"}


def test_inputs_are_checked():
    with pytest.raises(ValueError, match="does not contain"):
        C("x", 0.5, (0.6, 0.7), 1.0, True)
    with pytest.raises(ValueError, match="unique"):
        pick_release([C("x", 0.5, None, 1.0, True), C("x", 0.4, None, 1.0, True)])
    with pytest.raises(ValueError):
        C("x", float("nan"), None, 1.0, True)
