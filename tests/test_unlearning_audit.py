"""A tiny audit with the unlearning arms end to end: the forget set, retrain, NPO and SISA, their verdicts against
retrain, the report's section, results.json against the generated schema, and the privacy-budget block."""

from __future__ import annotations

import json

import pytest
from conftest import SMALL

ARMS = ["baseline", "retrain", "unlearn-ga", "unlearn-sisa", "dp-4"]
CONFIG = {**SMALL, "arms": ARMS, "one_run": {"canaries": 0},
          "attacks": {**SMALL["attacks"], "select": ["membership", "exposure", "canary_extraction", "pii_extraction",
                                                     "forget_pii_extraction"]},
          "unlearning": {"forget_fraction": 0.3, "sisa": {"shards": 2}}}


@pytest.fixture(scope="module")
def unlearning_run(audits):
    run = audits.get(CONFIG, via="cli")
    return run.out, run.results, run.console


def test_the_forget_set_is_an_artefact_every_unlearning_arm_reads(unlearning_run):
    run, results, _ = unlearning_run
    forget = json.loads((run / "splits" / "forget.json").read_text())
    f = results.data.forget
    assert f is not None and f.n_persons == len(forget["persons"]) - len(forget["canary_ids"]) > 0
    assert f.canary_ids == forget["canary_ids"] and f.canary_ids  # a canary is forgotten, so its exposure is read
    retrain = json.loads((run / "arms" / "retrain" / "train.json").read_text())
    baseline = json.loads((run / "arms" / "baseline" / "train.json").read_text())
    assert retrain["n_train_records"] == baseline["n_train_records"] - f.n_forget_records
    assert retrain["settings"]["epochs"] == baseline["settings"]["epochs"]  # the baseline's recipe


def test_every_model_is_attacked_on_the_forget_set_with_the_same_records(unlearning_run):
    _, results, _ = unlearning_run
    fm = {name: m.attacks["forget_membership"] for name, m in results.models()}
    assert set(fm) == {"base (control)", *ARMS}
    records = {tuple(r.forget_records) for r in fm.values()}
    assert len(records) == 1 and len(next(iter(records))) > 0
    assert {"loss", "min_k", "reference"} <= set(fm["retrain"].attacks)
    for name in ARMS:
        assert "forget_pii_extraction" in results.arms[name].attacks


def test_unlearning_arms_are_judged_against_retrain_and_retrain_against_the_control(unlearning_run):
    _, results, console = unlearning_run
    levels = {"forgotten", "not_forgotten", "over_forgotten", "inconclusive"}
    r = results.arms["retrain"]
    assert r.details.assessment.versus == "control" and r.verdict.level in levels
    for name in ("unlearn-ga", "unlearn-sisa"):
        a = results.arms[name]
        d = a.details.assessment
        assert d.versus == "retrain" and a.verdict.level == d.outcome
        head = d.headline()
        assert head is not None and head.diff_ci95[0] <= head.diff <= head.diff_ci95[1]
        assert d.canaries is not None and d.canaries.n == len(results.data.forget.canary_ids)
        assert d.pii is not None
        assert a.verdict.figures[0].startswith("MUSE PrivLeak")
        assert not results.recommendation or results.recommendation.arm != name
    sisa = results.arms["unlearn-sisa"].details
    assert sum(sisa.shard_sizes) == results.arms["baseline"].n_train_records and sisa.affected
    ga = results.arms["unlearn-ga"].details
    assert ga.steps == results.arms["unlearn-ga"].training.steps and ga.n_forget_records > 0
    # Each arm's time against retrain's is in the durations (never in the reproducible results).
    for key in ("train/retrain/fit", "derive/unlearn-ga/unlearn", "train/unlearn-sisa/unlearn"):
        assert results.durations_s[key] >= 0
    assert "Unlearning — each arm's forget set" in console and "retrain" in console


def test_report_and_schema_carry_the_unlearning_and_the_budget(unlearning_run):
    jsonschema = pytest.importorskip("jsonschema")
    from privleak.results import json_schema

    run, results, _ = unlearning_run
    raw = json.loads((run / "results.json").read_text())
    jsonschema.validate(raw, json_schema())
    html = (run / "report.html").read_text()
    assert "Unlearning (forget on request)" in html and "MUSE" in html
    assert "Privacy budget: the ε a release carries" in html
    [b] = results.budget
    assert [r.arms for r in b.releases] == [["dp-4"]]
    assert b.releases[0].epsilon == results.arms["dp-4"].privacy.epsilon
    ledger = (run / "budget" / "ledger.jsonl").read_text().splitlines()
    assert len(ledger) == 1 and json.loads(ledger[0])["arm"] == "dp-4"
