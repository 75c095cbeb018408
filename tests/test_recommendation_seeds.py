"""Training noise in the recommendation, end to end (issue 37 item 5): ``recommendation.seeds`` retrains every
recommendable trained arm on extra training seeds — training and held-out utility only — and the tie rule reads
G's spread across them. A tiny audit: the tasks, where their models live, G per seed in ``results.json``, the
ledger entry a DP retraining spends, and the sentence the recommendation says about it."""

from __future__ import annotations

import contextlib
import io
import json

import pytest
from conftest import SMALL

CONFIG = {**SMALL, "arms": ["baseline", "best", "dp-4"], "one_run": {"canaries": 0},
          "attacks": {**SMALL["attacks"], "select": ["membership"]}, "recommendation": {"seeds": 1}}


@pytest.fixture(scope="module")
def seeded_run(tmp_path_factory):
    import yaml

    from privleak.cli import main
    from privleak.report.schema import load_results

    tmp = tmp_path_factory.mktemp("seeds")
    (tmp / "c.yaml").write_text(yaml.safe_dump(CONFIG))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        try:
            main(["run", "--config", str(tmp / "c.yaml"), "--out", str(tmp / "run")])
        except SystemExit as exc:
            assert exc.code in (0, None), buf.getvalue()[-3000:]
    return tmp / "run", load_results(tmp / "run")


def test_recommendable_arms_are_retrained_on_extra_seeds(seeded_run):
    run, results = seeded_run
    # best and dp-4 are recommendable trained arms; the baseline (the memorisation stress test) is not.
    for arm in ("best", "dp-4"):
        main = json.loads((run / "arms" / arm / "train.json").read_text())
        extra = json.loads((run / "arms" / arm / "seeds" / "1" / "train.json").read_text())
        assert extra["settings"]["seed"] != main["settings"]["seed"]
        assert {k: v for k, v in extra["settings"].items() if k != "seed"} == \
            {k: v for k, v in main["settings"].items() if k != "seed"}  # the same recipe, another seed
        assert (run / "arms" / arm / "seeds" / "1" / "utility.json").exists()
        u = results.arms[arm].utility
        assert len(u.gain_recovered_seeds) == 1 and u.gain_recovered_seeds[0] != u.gain_recovered
        assert results.durations_s[f"train/{arm}/seeds/1"] >= 0
    assert not (run / "arms" / "baseline" / "seeds").exists() and not results.arms["baseline"].utility.gain_recovered_seeds
    # A DP retraining spends budget on the same members: it is in the run's ledger.
    ledger = [json.loads(x)["arm"] for x in (run / "budget" / "ledger.jsonl").read_text().splitlines()]
    assert sorted(ledger) == ["dp-4", "dp-4/seeds/1"]


def test_the_recommendation_says_how_training_noise_entered(seeded_run):
    _, results = seeded_run
    rec = results.recommendation
    assert "Training noise is in the tie rule" in rec.training_noise and "2 training seeds" in rec.training_noise
    assert rec.training_noise in rec.text or rec.arm is None


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
