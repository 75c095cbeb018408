"""The audit can see DP: a broken DP step is caught, a correct one is never flagged (also on a heavily
duplicated foreign corpus), and the one-run bound never exceeds the accountant's ε of a correct arm."""

from __future__ import annotations

import json

import pytest
from conftest import SMALL
from corpora.email import write_email_corpus

from privleak import pipeline
from privleak.audit.alarms import alarm_decision, canary_curves
from privleak.audit.verdicts import _canary_tests, _whitebox_test
from privleak.config import build_config

# A tiny audit in which noise-free clipped SGD memorises its audit canaries: many short canaries, a
# small δ (the bound's 2mδ term), many DP steps at a high learning rate.
TINY_DP = {**SMALL, "arms": ["dp-1"],
           "model": {"max_length": 96, "embedded": {"n_layer": 2, "n_embd": 64, "n_head": 2, "epochs": 1,
                                                    "vocab_size": 400}},
           "dp": {"epsilons": [1], "epochs": 20, "batch_size": 16, "lr": 0.01, "delta": 1e-4},
           "one_run": {"canaries": 200, "prefix_words": 2, "secret_words": 3},
           "attacks": {"bootstrap": 10, "extraction": False, "pii": False,
                       "select": ["membership", "one_run_canaries"]}}


def _flags(results) -> list[str]:
    return [w for w in results.warnings if "EXCEEDS" in w or "VIOLATED" in w or "violate" in w]


def _alarm(results):
    """The family-wise alarm recomputed from what results.json keeps (every DP arm's one-run guess counts and
    decoded secrets against its accountant's claims, every route): it must agree with the decision the audit
    wrote."""
    tests = [t for name, arm in results.arms.items()
             if arm.privacy is not None and arm.one_run_epsilon is not None and arm.one_run_epsilon.available
             for t in _canary_tests(name, arm.privacy, arm.one_run_epsilon, canary_curves(arm.privacy))]
    tests += [_whitebox_test(name, arm.privacy, arm.privacy.gradient_canaries) for name, arm in results.arms.items()
              if arm.privacy is not None and arm.privacy.gradient_canaries is not None]
    decision = alarm_decision(tests, 0.05)
    assert sorted(decision.violated) == results.alarms.violated
    return decision


def _reads_power(results, name):
    """The recommendation's standing for DP arm ``name`` says what the alarm's power figure says."""
    power = results.alarms.power[name]
    standing = next(s for s in results.recommendation.standings if s.arm == name)
    assert standing.verified is power.verified and standing.power == power.text
    return standing


def test_broken_dp_step_is_caught(tmp_path):
    cfg = {**TINY_DP, "dp": {**TINY_DP["dp"], "debug_break": {"dp-1": "no_noise"}}}
    res = pipeline.run_audit(build_config(cfg), tmp_path)
    arm = res.arms["dp-1"]
    assert arm.privacy.epsilon <= 1.0  # the claim a silently broken library makes
    one = arm.one_run_epsilon
    assert one.available and one.epsilon_steinke > 1.0 and res.alarms.violated == ["dp-1"]
    assert arm.verdict.label == "DP GUARANTEE VIOLATED"
    assert any("DP GUARANTEE VIOLATED" in w for w in res.warnings)
    decision = _alarm(res)
    assert decision.violated == ["dp-1"]
    by = {o.test.route: o for o in decision.alarms}
    assert by["one_run"].rejected and by["one_run"].bound_at_level > 1.0
    assert by["one_run_fdp"].rejected and by["one_run_fdp"].test.p_value < by["one_run"].test.p_value  # the tighter claim


# The same noise-free clipped SGD, claiming ε = 8: no in/out test of 200 canaries can refute that, so the
# alarm must come from the secrets the model gives back. Four-word secrets after a two-word query (k = 64⁴ ≈
# 1.7e7 values each) and a training that memorises (40 epochs at 0.02).
TINY_DP8 = {**TINY_DP, "arms": ["dp-8"], "one_run": {**TINY_DP["one_run"], "secret_words": 4},
            "dp": {**TINY_DP["dp"], "epsilons": [8], "epochs": 40, "lr": 0.02}}


def test_broken_dp8_step_is_caught_by_its_decoded_secrets(tmp_path):
    cfg = {**TINY_DP8, "dp": {**TINY_DP8["dp"], "debug_break": {"dp-8": "no_noise"}}}
    res = pipeline.run_audit(build_config(cfg), tmp_path)
    arm = res.arms["dp-8"]
    assert arm.privacy.epsilon <= 8.0
    assert res.alarms.violated == ["dp-8"] and arm.verdict.label == "DP GUARANTEE VIOLATED"
    rec = arm.one_run_epsilon.reconstruction
    assert rec is not None and rec.k == 64.0 ** 4 and rec.reconstructed > 0
    decision = _alarm(res)
    by = {o.test.route: o for o in decision.alarms}
    assert not by["one_run"].rejected and not by["one_run_fdp"].rejected  # m = 200 is too few for ε = 8 …
    assert by["one_run_kary"].rejected and by["one_run_kary"].bound_at_level > 8.0  # … k ≈ 1.7e7 is not
    assert res.alarms.power["dp-8"].verified  # with no baseline in the audit: "every guess right" would be caught
    assert _reads_power(res, "dp-8").lacking == "alarm"


@pytest.mark.parametrize("seed,cfg", [(0, TINY_DP), (1, TINY_DP), (0, TINY_DP8)], ids=["dp-1-0", "dp-1-1", "dp-8-0"])
def test_correct_dp_is_never_flagged(tmp_path, seed, cfg):
    res = pipeline.run_audit(build_config({**cfg, "seed": seed}), tmp_path)
    name = cfg["arms"][0]
    arm = res.arms[name]
    one = arm.one_run_epsilon
    assert one.available and one.epsilon_steinke <= arm.privacy.epsilon and not res.alarms.violated
    assert not _flags(res) and arm.verdict.label != "DP GUARANTEE VIOLATED"
    decision = _alarm(res)
    # Steinke, f-DP in/out, f-DP secrets, the white-box gradient canaries
    assert len(decision.alarms) == 4 and not decision.violated
    assert name in res.alarms.power  # what it could have caught is reported either way
    _reads_power(res, name)  # and the recommendation reads it


@pytest.mark.parametrize("seed", [0, 1])
def test_heavily_duplicated_foreign_corpus_is_not_a_false_alarm(tmp_path, seed):
    # A corporate mailbox: five boilerplate messages ~50× each, near-duplicate notifications, threads.
    data = write_email_corpus(tmp_path / "emails.jsonl", n=700, seed=seed)
    cfg = {**SMALL, "seed": seed, "arms": ["dp-1"], "data": {"path": str(data)},
           "dp": {"epsilons": [1], "epochs": 2, "batch_size": 32},
           "one_run": {"canaries": 100, "prefix_words": 2, "secret_words": 3},
           "attacks": {"bootstrap": 10, "extraction": False, "pii": False,
                       "select": ["membership", "one_run_canaries"]}}
    res = pipeline.run_audit(build_config(cfg), tmp_path / "run")
    design = res.data.membership_design
    assert design.unit == "distinct text"
    arm = res.arms["dp-1"]
    assert not _flags(res), res.warnings
    if arm.empirical_epsilon is not None:
        assert arm.empirical_epsilon.roc_band is not None
    else:
        assert not design.available and design.reason
    assert not res.alarms.violated and not _alarm(res).violated


def test_a_shifted_user_split_is_called_out(tmp_path):
    """Members from one generator, non-members from another (as a user's pre-split data could be): the
    blind baseline separates them without the model, and the audit says the split is shifted."""
    from corpora.shifted import build_shifted_corpus

    from privleak.data.canaries import save_canaries
    from privleak.data.clinical import generate_corpus
    from privleak.data.records import Record, write_jsonl
    from privleak.pipeline.data import data_key, synthetic_config
    from privleak.pipeline.rundir import RunDir

    a, b = build_shifted_corpus(n_per_source=140, seed=0)
    user = lambda rows: [Record(text=r["text"], pii=None, meta={"kind": "user"}) for r in rows]  # noqa: E731
    corpus = tmp_path / "brought.jsonl"
    corpus.write_text("".join(json.dumps({"text": r["text"]}) + "\n" for r in a + b))  # the user's file
    cfg = build_config({**SMALL, "arms": ["baseline"], "data": {"path": str(corpus)}, "one_run": {"canaries": 0},
                        "attacks": {"bootstrap": 20, "extraction": False, "pii": False, "select": ["membership"]}})
    run = RunDir.open(tmp_path / "run")
    public = generate_corpus(synthetic_config(cfg, n_members=0, n_non_members=0, n_population=0,
                                              canary_repeats=())).splits
    splits = {"members": user(a[:120]), "non_members": user(b[:120]), "population": user(a[120:] + b[120:]),
              "public": public["public"], "public_heldout": public["public_heldout"]}
    for name, recs in splits.items():
        write_jsonl(run.path("splits", f"{name}.jsonl"), recs)
    save_canaries(run.path("splits", "canaries.json"), [])
    run.mark("data", data_key(cfg), 0.0)  # the data stage is done: these are the splits
    res = pipeline.run_audit(cfg, run.root)
    blind = res.blind_baseline
    assert blind.auc > 0.9 and blind.shifted
    assert any("distribution shift" in w for w in res.warnings)
