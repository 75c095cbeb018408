"""Over seeds, at test size: a DP-SGD that claims ε = 8 but runs without noise, or without clipping, is caught
by the audit's alarm in ≥ 95 % of seeds, and a correct one is flagged in ≤ 5 % — with enough seeds that a true
10 % would fail either check: 120 audits, each of three DP arms (the correct one and both broken ones, every
alarm route of all three — Steinke, f-DP in/out, reconstruction, white-box — counted in the family-wise α), so each rate is read on 120 runs — a true 90 % catch
rate reaches 114 of 120 with probability 0.038, a true 10 % false-alarm rate stays ≤ 6 of 120 with probability
0.038. The DP-SGD runs are tests/dp_toy.py's."""

from __future__ import annotations

import math

import dp_toy
import pytest

SEEDS = 120


@pytest.fixture(scope="module")
def audits():
    dp_toy.setup(8.0)  # σ calibrated once (cached on disk)
    out = []
    for seed in range(SEEDS):
        runs = {"dp-8": dp_toy.run(3 * seed), "dp-8 no_noise": dp_toy.run(3 * seed + 1, debug_break="no_noise"),
                "dp-8 no_clip": dp_toy.run(3 * seed + 2, debug_break="no_clip")}
        out.append(dp_toy.alarm(runs))
    return out


def test_enough_seeds_that_a_true_ten_percent_fails():
    """The thresholds below, at SEEDS runs each, fail a true 10 % miss or false-alarm rate 19 times in 20."""
    from scipy import stats

    assert stats.binom.sf(math.ceil(0.95 * SEEDS) - 1, SEEDS, 0.9) < 0.05  # P[a 90 % catch rate passes]
    assert stats.binom.cdf(math.floor(0.05 * SEEDS), SEEDS, 0.1) < 0.05  # P[a 10 % false-alarm rate passes]


def test_a_broken_dp8_is_caught(audits):
    for mode in ("no_noise", "no_clip"):
        caught = sum(f"dp-8 {mode}" in d.violated for d in audits)
        assert caught >= 0.95 * len(audits), f"{mode}: caught in {caught} of {len(audits)} seeds"


def test_a_correct_dp8_is_not_flagged(audits):
    flagged = sum("dp-8" in d.violated for d in audits)
    assert flagged <= 0.05 * len(audits), f"flagged in {flagged} of {len(audits)} seeds"


def test_the_catch_is_the_reconstruction_and_white_box_routes(audits):
    """Which routes do it, at ε = 8: the in/out tests (Steinke's and the f-DP one) cannot, m = 400 perfect
    guesses being too few; the decoded secrets (k ≈ 10⁶ values each) can, and so can the white-box gradient
    canaries' readings of the step itself."""
    for d in audits[:3]:
        for mode in ("no_noise", "no_clip"):
            rejected = {o.test.route for o in d.alarms if o.rejected and o.test.arm == f"dp-8 {mode}"}
            assert rejected == {"one_run_kary", "whitebox"}, (mode, rejected)


def test_opacus_runs_agree():
    """The same runs through Opacus as PrivLeak sets it up (a few seeds: seconds each): caught when broken, not
    flagged when correct."""
    for seed, broken in ((0, "no_noise"), (1, "no_clip")):
        d = dp_toy.alarm({"dp-8": dp_toy.run_opacus(100 + seed), "broken": dp_toy.run_opacus(200 + seed, debug_break=broken)})
        assert d.violated == ["broken"], (broken, [(o.test.arm, o.test.route, o.test.p_value) for o in d.alarms])
