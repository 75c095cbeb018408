"""Training noise in the recommendation, end to end (issues 37 and 44): eligible arms the audit cannot tell apart
on utility (the contenders) are retrained on ``recommendation.seeds`` extra training seeds — training and held-out
utility — and the choice reads G's spread across them with t intervals. A tiny audit with two record-level DP arms
against a per-record requirement: the tasks, where their models live, G per seed in ``results.json``, the ledger
entry a DP retraining spends, and the sentence the recommendation says about it."""

from __future__ import annotations

import json

import pytest
from conftest import SMALL

CONFIG = {**SMALL, "arms": ["baseline", "best", "dp-4", "dp-6"], "one_run": {"canaries": 0},
          "attacks": {**SMALL["attacks"], "select": ["membership"]},
          "recommendation": {"seeds": 1, "require": "epsilon<=8 per record"}}


@pytest.fixture(scope="module")
def seeded_run(audits):
    run = audits.get(CONFIG, via="cli")
    return run.out, run.results


def test_contenders_and_only_they_are_retrained_on_extra_seeds(seeded_run):
    run, results = seeded_run
    rec = results.recommendation
    assert set(rec.eligible) == {"dp-4", "dp-6"} and rec.arm in rec.eligible
    retrained = set(rec.contenders) if len(rec.contenders) > 1 else set()
    for arm in ("baseline", "best", "dp-4", "dp-6"):
        assert (run / "arms" / arm / "seeds").exists() == (arm in retrained)
    for arm in retrained:
        main = json.loads((run / "arms" / arm / "train.json").read_text())
        extra = json.loads((run / "arms" / arm / "seeds" / "1" / "train.json").read_text())
        assert extra["settings"]["seed"] != main["settings"]["seed"]
        assert {k: v for k, v in extra["settings"].items() if k != "seed"} == \
            {k: v for k, v in main["settings"].items() if k != "seed"}  # the same recipe, another seed
        u = results.arms[arm].utility
        assert len(u.gain_recovered_seeds) == 1 and u.gain_recovered_seeds[0] != u.gain_recovered
        assert results.durations_s[f"train/{arm}/seeds/1"] >= 0
    assert rec.needs_seeds == []
    # A DP retraining spends budget on the same members: it is in the run's ledger.
    lines = {e["arm"]: e for e in map(json.loads, (run / "budget" / "ledger.jsonl").read_text().splitlines())}
    seeds = [f"{a}/seeds/1" for a in sorted(retrained)]
    assert sorted(lines) == sorted(["dp-4", "dp-6"] + seeds)
    # Issue 44 "Why" item 7: with its people (the same as the arm's), so `privleak budget` composes it per person,
    # and in results.json's "all together" beside the arms (it was left out).
    for a in retrained:
        assert lines[f"{a}/seeds/1"]["people"] == lines[a]["people"]
    [budget] = results.budget
    together = next(r for r in budget.releases if r.what == "all together")
    assert sorted(together.arms) == sorted(["dp-4", "dp-6"] + seeds) and together.epsilon_person is not None
    assert [r.arms for r in budget.releases if r.what == "alone"] == [["dp-4"], ["dp-6"]]


def test_the_recommendation_says_how_training_noise_entered(seeded_run):
    _, results = seeded_run
    rec = results.recommendation
    if len(rec.contenders) > 1:
        assert "retrained on up to 1 extra training seeds" in rec.training_noise
    else:
        assert "Training noise did not enter the choice" in rec.training_noise
    assert rec.training_noise in rec.text


def test_naming_an_arm_that_is_not_recommendable_is_refused():
    from privleak.config import build_config
    from privleak.core.errors import UserError
    from privleak.pipeline.checks import seed_arms

    cfg = build_config({**CONFIG, "recommendation": {"seeds": 2, "arms": ["dp-4", "baseline"]}})
    with pytest.raises(UserError, match="recommendation.arms: baseline is not a recommendable trained arm"):
        seed_arms(cfg)
    assert [s.name for s in seed_arms(build_config({**CONFIG, "recommendation": {"seeds": 2, "arms": ["dp-4"]}}))] \
        == ["dp-4"]
    assert seed_arms(build_config({**CONFIG, "recommendation": {"seeds": 0}})) == []
