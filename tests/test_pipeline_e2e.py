"""A small real audit end to end: contract, reproducibility, resume after a crash, stale caches."""

from __future__ import annotations

import copy
import json
import os

import pytest
from conftest import SMALL

from privleak import pipeline
from privleak.config import build_config
from privleak.data.records import read_jsonl
from privleak.models.handle import load_handle
from privleak.models import dp_train as train_stage  # the DP kind imports its trainer from here at call time
from privleak.results import SCHEMA_VERSION


def _comparable(results) -> dict:
    r = copy.deepcopy(results.to_json())
    r.pop("durations_s")
    r["base_model"]["source"].pop("path")  # the cache location, not a result
    return r


@pytest.fixture(scope="module")
def first_run(audits):
    """SMALL, shared with the session's other tests of it: read-only here (a test that reruns it copies it)."""
    run = audits.get(SMALL)
    return run.out, run.results


def test_results_contract(first_run):
    out, results = first_run
    on_disk = json.loads((out / "results.json").read_text())
    assert on_disk == results.to_json()
    assert results.schema_version == SCHEMA_VERSION
    assert set(results.arms) == {"baseline", "dp-4"}
    dp = results.arms["dp-4"].privacy
    assert dp.epsilon <= 4.0 and dp.epsilon == pytest.approx(dp.epsilon_pld, rel=0.01)
    assert dp.delta < 1 / results.data.n_members
    assert results.arms["baseline"].privacy is None
    for arm in results.arms.values():
        loss = arm.attacks["loss"]
        assert 0.0 <= loss.auc <= 1.0 and loss.tpr_at_1pct_fpr is not None
        exposure = arm.attacks["exposure"]
        assert {c.repeats for c in exposure.canaries} == {1, 8}
        assert all(0 <= c.exposure <= c.max_exposure for c in exposure.canaries)
        assert arm.utility.ppl_non_members > 1
        assert arm.verdict is not None and arm.verdict.level in ("chance", "inconclusive", "some", "leaks")
    assert results.recommendation is not None
    assert set(results.durations_s) >= {"data", "base-model", "train/baseline", "train/dp-4", "membership/dp-4"}


def test_attack_family_and_empirical_epsilon(first_run):
    _, results = first_run
    family = {"loss", "zlib", "min_k", "min_k_pp", "reference", "rmia", "recall", "con_recall", "dc_pdd"}
    for name, arm in results.arms.items():
        assert set(arm.membership()) == family | {"loss_group"}, name
        for a in arm.membership().values():
            assert len(a.roc.fpr) == len(a.roc.tpr) >= 2
        # the person-level attack is group privacy: never a record-level ε
        assert set(arm.empirical_epsilon.by_attack) == family
        assert all(b.epsilon_lb >= 0.0 for b in arm.empirical_epsilon.by_attack.values())
        assert arm.empirical_epsilon.attack in family
    # The base model has no reference model of its own.
    assert set(results.base_model.membership()) == family - {"reference", "rmia"} | {"loss_group"}
    dp = results.arms["dp-4"]
    emp = dp.empirical_epsilon
    assert emp.epsilon_lb <= dp.privacy.epsilon
    assert emp.roc_band is not None and emp.roc_band.unit_records >= 1
    assert results.alarms is not None and results.alarms.violated == [] and "false alarm" in results.alarms.statement
    assert not any("EXCEEDS" in w for w in results.warnings)
    assert results.versions["opacus"]


def test_run_directory_contract(first_run):
    out, _ = first_run
    for split in ("members", "non_members", "population", "public"):
        recs = read_jsonl(out / "splits" / f"{split}.jsonl")
        assert recs, split
        for r in recs:
            for s in r.pii:
                assert 0 <= s.start < s.end <= len(r.text)
        raw = json.loads((out / "splits" / f"{split}.jsonl").read_text().splitlines()[0])
        assert set(raw) >= {"text", "pii"}
    for arm in ("baseline", "dp-4"):
        handle = load_handle(out / "arms" / arm / "model")
        assert (out / "arms" / arm / "model" / "model.safetensors").exists()
        assert handle.tokenizer.eos_token_id is not None
        for family in ("membership", "canaries", "extraction", "pii"):
            assert (out / "arms" / arm / "attacks" / f"{family}.json").exists(), (arm, family)


def test_same_config_and_seed_reproduce_results(first_run, tmp_path, monkeypatch):
    _, results = first_run
    # A separate model cache: the base model is pre-trained again from scratch.
    monkeypatch.setenv("PRIVLEAK_CACHE", str(tmp_path / "cache"))
    again = pipeline.run_audit(build_config(SMALL), tmp_path / "run-b")
    assert _comparable(again) == _comparable(results)


def test_interrupted_run_resumes_and_matches(first_run, tmp_path, monkeypatch):
    _, results = first_run
    real_train_dp = train_stage.train_dp
    calls = {"n": 0}

    def killed_mid_training(*args, **kwargs):
        calls["n"] += 1
        raise KeyboardInterrupt  # as if Ctrl-C arrived inside the DP arm

    monkeypatch.setattr(train_stage, "train_dp", killed_mid_training)
    out = tmp_path / "run-c"
    with pytest.raises(KeyboardInterrupt):
        pipeline.run_audit(build_config(SMALL), out)
    assert calls["n"] == 1
    assert (out / "stages" / "train_baseline.json").exists()
    assert not (out / "arms" / "dp-4" / "model").exists()  # nothing half-written looks finished
    baseline_mtime = os.path.getmtime(out / "arms" / "baseline" / "model" / "model.safetensors")

    monkeypatch.setattr(train_stage, "train_dp", real_train_dp)
    resumed = pipeline.run_audit(build_config(SMALL), out)
    assert os.path.getmtime(out / "arms" / "baseline" / "model" / "model.safetensors") == baseline_mtime
    assert _comparable(resumed) == _comparable(results)


def test_changed_config_redoes_only_affected_stages(audits, tmp_path):
    out = audits.get(SMALL).copy(tmp_path / "run")
    cfg = copy.deepcopy(SMALL)
    cfg["attacks"]["bootstrap"] = 5
    train_marker = out / "stages" / "train_dp-4.json"
    extraction_marker = out / "stages" / "extraction_dp-4.json"
    before = train_marker.stat().st_mtime, extraction_marker.stat().st_mtime
    results = pipeline.run_audit(build_config(cfg), out)
    # training and the extraction attacks do not read the bootstrap count: reused
    assert (train_marker.stat().st_mtime, extraction_marker.stat().st_mtime) == before
    assert results.config["attacks"]["bootstrap"] == 5


def test_retrained_arm_never_reads_stale_scores(first_run, audits, tmp_path):
    """Changing how an arm trains redoes its training *and* its scoring pass: the cached
    per-token scores are keyed by the model, not only by where they are stored."""
    _, results = first_run
    out = audits.get(SMALL).copy(tmp_path / "run")
    cfg = copy.deepcopy(SMALL)
    cfg["train"] = {**cfg["train"], "epochs": 4}
    changed = pipeline.run_audit(build_config(cfg), out)
    assert changed.arms["baseline"].attacks["loss"].auc != results.arms["baseline"].attacks["loss"].auc
    assert changed.arms["baseline"].utility != results.arms["baseline"].utility


def test_results_json_holds_no_identifying_pii(first_run):
    """Extraction examples reproduce training text; results.json must still not
    carry any identifying ground-truth value (issue: the report must not leak)."""
    out, results = first_run
    text = (out / "results.json").read_text()
    identifying = {"NAME", "EMAIL", "SSN", "PHONE", "ADDRESS", "DOB", "MRN"}
    values = set()
    for split in ("members", "non_members", "population"):
        for r in read_jsonl(out / "splits" / f"{split}.jsonl"):
            values.update(s.value(r.text) for s in r.pii if s.label in identifying)
    leaked = sorted(v for v in values if len(v) >= 6 and v in text)
    assert not leaked, leaked[:5]
