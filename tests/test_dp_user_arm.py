"""The ``dp-user-ε`` arm kind (issue 27): names, settings, and one tiny audit through results.json and its schema."""

from __future__ import annotations

import json

import pytest
from conftest import SMALL

from privleak.arms import parse_arm, resolve
from privleak.config import build_config
from privleak.core.errors import UserError

TOL = 1e-3  # the accountant's resolution above the target (calibrated to 1e-3 relative)


@pytest.mark.parametrize("name,canonical", [("dp-user-8", "dp-user-8"), ("scrub+dp-user-8", "dp-user-8+scrub"),
                                            ("lora+dp-user-2.5", "dp-user-2.5+lora"), ("dp-8", "dp-8")])
def test_names_parse_like_dp(name, canonical):
    spec = parse_arm(name)
    assert spec.name == canonical
    assert spec.kind == ("dp" if canonical == "dp-8" else "dp-user")


@pytest.mark.parametrize("name", ["dp-user", "dp-user-0", "dp-user-x", "dp-user-8+dp-8"])
def test_bad_names_are_refused(name):
    with pytest.raises(ValueError):
        parse_arm(name)


def test_options_are_checked_before_any_work():
    with pytest.raises(UserError, match="arm_options"):
        resolve(build_config({**SMALL, "arms": ["dp-user-8"], "arm_options": {"dp-user": {"method": "xls"}}}))
    with pytest.raises(UserError, match="qlora"):
        resolve(build_config({**SMALL, "arms": ["dp-user-8+lora"], "dp": {**SMALL["dp"], "qlora": True}}))


def test_settings_key_follows_the_options_and_keeps_dp_keys_without_public():
    from privleak.arms import get

    kind = get("dp-user")
    cfg = build_config({**SMALL, "arms": ["dp-user-8"]})
    s = kind.settings(cfg, parse_arm("dp-user-8"), 120).key()
    assert s["method"] == "uls" and s["records_per_person"] == 4 and s["target_epsilon"] == 8
    assert "public_weight" not in s
    cfg2 = build_config({**SMALL, "arms": ["dp-user-8"], "arm_options": {"dp-user": {"records_per_person": 2}},
                         "dp": {**SMALL["dp"], "public_weight": 0.5}})
    s2 = kind.settings(cfg2, parse_arm("dp-user-8"), 120).key()
    assert s2["records_per_person"] == 2 and s2["public_weight"] == 0.5
    # The record-level arm's key only carries the public fields when they are used.
    dp = get("dp")
    assert "public_weight" not in dp.settings(cfg, parse_arm("dp-8"), 120).key()
    assert dp.settings(cfg2, parse_arm("dp-8"), 120).public_weight == 0.5


@pytest.fixture(scope="module")
def user_run(audits):
    from privleak.results import json_schema

    cfg = {**SMALL, "arms": ["baseline", "dp-user-8"], "one_run": {"canaries": 0},
           "attacks": {**SMALL["attacks"], "select": ["loss", "exposure"]}}
    run = audits.get(cfg, via="cli")
    return run.out, run.results, json_schema()


def test_dp_user_results_validate_and_hold_each_person_to_epsilon(user_run):
    jsonschema = pytest.importorskip("jsonschema")
    run, results, schema = user_run
    raw = json.loads((run / "results.json").read_text())
    jsonschema.validate(raw, schema)
    arm = results.arms["dp-user-8"]
    p = arm.privacy
    assert arm.kind == "dp-user" and p.unit == "person"
    assert p.epsilon == p.epsilon_person <= 8.0 * (1 + TOL)
    assert p.epsilon_pld == pytest.approx(8.0, rel=0.01)  # calibrated to the target, not far below it
    # One record of a person with several is a replacement of their clipped contribution: the replace-one ε
    # of the same (q, σ, T), above the add/remove-person ε (about twice it).
    from privleak.accountants import record_epsilon

    assert p.epsilon_record == pytest.approx(record_epsilon(sample_rate=p.sample_rate, noise_multiplier=p.sigma,
                                                            rounds=p.steps, delta=p.delta), rel=1e-9)
    assert p.epsilon < p.epsilon_record and p.epsilon_per_record == p.epsilon_record
    # The 8× canary is one made-up person with 8 records (one definition of a person, as the record-level
    # arms'), reported apart from the real people (issue 37 item 2).
    assert p.canary_records == 8 and p.records_per_canary.get("5-8", 0) == 1 and p.epsilon_canary == p.epsilon
    d = arm.details
    assert d.kind == "dp-user" and d.method == "uls"
    assert d.people == sum(p.records_per_person.values()) + sum(p.records_per_canary.values())
    assert d.records_per_step <= d.records_per_person_cap * d.people_per_step
    assert arm.training.steps == p.steps > 0 and arm.utility.ppl_non_members > 1
    assert any("ε per person" in f for f in arm.verdict.figures)
    # A wrong details block is refused by the schema.
    bad = json.loads(json.dumps(raw))
    bad["arms"]["dp-user-8"]["details"]["method"] = "xls"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def _fit(tiny_handle, options: dict, dp: dict | None = None):
    """The kind's own fit on twelve people (every third with three notes), outside a pipeline."""
    from privleak.arms import FitContext, get
    from privleak.data.records import Record
    from privleak.models.batching import encode
    from privleak.models.handle import clone_model

    records = [Record(f"Patient {p} visit {v}: phone 555-01{p:02d}, seen for review.", meta={"person_id": f"P{p}"})
               for p in range(12) for v in range(1 + (p % 3 == 0) * 2)]
    public = [Record(f"General advice number {i}: drink water and sleep well.") for i in range(8)]
    cfg = build_config({**SMALL, "arms": ["dp-user-8"], "arm_options": {"dp-user": options},
                        "dp": {**SMALL["dp"], **(dp or {})}})
    kind = get("dp-user")
    settings = kind.settings(cfg, parse_arm("dp-user-8"), len(records))

    def enc(texts):
        return encode(tiny_handle.tokenizer, texts, tiny_handle.max_length)

    from privleak.arms.inputs import ENCODE
    from privleak.attacks.inputs import PUBLIC
    from privleak.core.inputs import FakeInputs

    ctx = FitContext(cfg=cfg, label="dp-user-8", inputs=FakeInputs({PUBLIC: public, ENCODE: enc}).view(),
                     data=enc([r.text for r in records]), records=records, pad=tiny_handle.pad_id)
    return kind.fit(clone_model(tiny_handle.model), settings, ctx)[1]


def test_els_option_accounts_the_record_mechanism_and_the_person(tiny_handle):
    from privleak.results import Privacy

    rec = _fit(tiny_handle, {"method": "els", "records_per_person": 2, "epochs": 1, "batch_size": 4})
    p = Privacy.model_validate(rec["privacy"])
    assert p.unit == "record" and p.epsilon_record is None  # record-level DP-SGD: the ledger composes records
    assert p.epsilon_person <= 8.0 * (1 + TOL) and p.epsilon_person == pytest.approx(8.0, rel=0.01)
    assert p.epsilon < p.epsilon_person  # a record is held tighter than a person with two of them
    assert rec["user_dp"]["method"] == "els" and rec["user_dp"]["records_used"] == 8 + 4 * 2


def test_public_gradient_reaches_the_user_level_trainer(tiny_handle):
    with_public = _fit(tiny_handle, {"epochs": 1, "batch_size": 4}, {"public_weight": 0.5, "public_batch_size": 4})
    without = _fit(tiny_handle, {"epochs": 1, "batch_size": 4})
    assert with_public["user_dp"]["public_weight"] == 0.5 and without["user_dp"]["public_weight"] == 0.0
    # Public gradients cost no privacy: the same σ and ε, a different model (different losses).
    assert with_public["privacy"]["sigma"] == without["privacy"]["sigma"]
    assert with_public["privacy"]["epsilon"] == without["privacy"]["epsilon"]
    assert with_public["epoch_losses"] != without["epoch_losses"]


def _privacy(unit: str, eps: float, person: float | None, k: int):
    from privleak.results import Privacy

    return Privacy(target_epsilon=8.0, epsilon=eps, accountant="prv", delta=1e-5, sigma=1.0, sample_rate=0.2,
                   steps=100, max_grad_norm=1.0, epsilon_rdp=None, epsilon_pld=None, epsilon_prv=None, unit=unit,
                   epsilon_person=person, person_records=k)


def test_the_recommendation_says_whether_record_level_dp_is_enough():
    from types import SimpleNamespace as NS

    from privleak.audit.wording import people_sentence

    many = {"dp-8": NS(privacy=_privacy("record", 8.0, 511.0, 16)),
            "dp-user-8": NS(privacy=_privacy("person", 8.0, 8.0, 16)), "baseline": NS(privacy=None)}
    s = people_sentence("dp-user-8", many["dp-user-8"], many)
    assert s.startswith("Record-level DP is not enough")
    # An accountant's figure is an upper bound, printed with its δ (issue 37 item 3).
    assert "dp-8 guarantees that person only ε ≤ 511 at δ = 1e-05" in s
    assert "dp-user-8 guarantees every person, up to 16 records each, ε ≤ 8 at δ = 1e-05" in s
    s = people_sentence("dp-8", many["dp-8"], many)
    assert "not enough" in s and "dp-user-ε" in s
    few = {"dp-8": NS(privacy=_privacy("record", 8.0, 9.5, 2))}
    assert people_sentence("dp-8", few["dp-8"], few).startswith("Record-level DP is enough")
    one = {"dp-8": NS(privacy=_privacy("record", 8.0, 8.0, 1))}
    assert "no person has more than one record" in people_sentence("dp-8", one["dp-8"], one)
    assert people_sentence("baseline", many["baseline"], many) == ""
