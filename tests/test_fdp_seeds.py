"""Over seeds, at test size: a DP-SGD that claims ε = 8 but runs without noise, or without clipping, is caught
by the audit's alarm in ≥ 95 % of seeds, and a correct one is flagged in ≤ 5 % — with enough seeds that a true
10 % would fail either check (a true 90 % catch rate passes 57 of 60 with probability 0.047; a true 10 % false
alarm rate stays ≤ 6 of 120 with probability 0.037). One seed is one audit of two DP arms (the correct one and
a broken one), every alarm route of both counted in the family-wise α. The DP-SGD runs are tests/dp_toy.py's."""

from __future__ import annotations

import dp_toy
import pytest

SEEDS = 120


@pytest.fixture(scope="module")
def audits():
    dp_toy.setup(8.0)  # σ calibrated once (cached on disk)
    out = []
    for seed in range(SEEDS):
        broken = "no_noise" if seed % 2 == 0 else "no_clip"
        runs = {"dp-8": dp_toy.run(2 * seed), f"dp-8 {broken}": dp_toy.run(2 * seed + 1, debug_break=broken)}
        out.append((broken, dp_toy.alarm(runs)))
    return out


def test_a_broken_dp8_is_caught(audits):
    for mode in ("no_noise", "no_clip"):
        decisions = [d for m, d in audits if m == mode]
        caught = sum(f"dp-8 {mode}" in d.violated for d in decisions)
        assert caught >= 0.95 * len(decisions), f"{mode}: caught in {caught} of {len(decisions)} seeds"


def test_a_correct_dp8_is_not_flagged(audits):
    flagged = sum("dp-8" in d.violated for _, d in audits)
    assert flagged <= 0.05 * len(audits), f"flagged in {flagged} of {len(audits)} seeds"


def test_the_catch_is_the_reconstruction_route(audits):
    """Which route does it, at ε = 8: the in/out tests (Steinke's and the f-DP one) cannot, m = 400 perfect
    guesses being too few; the decoded secrets (k ≈ 10⁶ values each) can."""
    _, d = audits[0]
    rejected = {o.test.route for o in d.alarms if o.rejected and o.test.arm != "dp-8"}
    assert rejected == {"one_run_kary"}


def test_opacus_runs_agree():
    """The same runs through Opacus as PrivLeak sets it up (a few seeds: seconds each): caught when broken, not
    flagged when correct."""
    for seed, broken in ((0, "no_noise"), (1, "no_clip")):
        d = dp_toy.alarm({"dp-8": dp_toy.run_opacus(100 + seed), "broken": dp_toy.run_opacus(200 + seed, debug_break=broken)})
        assert d.violated == ["broken"], (broken, [(o.test.arm, o.test.route, o.test.p_value) for o in d.alarms])
