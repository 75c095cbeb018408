"""Unlearning: the forget set, SISA's exact retraining, NPO, DeLong's paired test and the forgetting verdict."""

from __future__ import annotations

import numpy as np
import pytest

from privleak.core.errors import UserError
from privleak.data.records import PiiSpan, Record
from privleak.data.unlearning import draw_forget_set, person_of, shard_by_person


def _corpus(n_people: int = 12, notes: int = 2, canaries: dict[str, int] | None = None) -> list[Record]:
    recs = []
    for p in range(n_people):
        for k in range(notes):
            text = f"Patient Name{p} seen visit {k} for cough; phone 555-01{p:02d}."
            start = text.index(f"Name{p}")
            recs.append(Record(text, [PiiSpan(start, start + len(f"Name{p}"), "NAME")],
                               {"kind": "phi", "person_id": f"P{p:03d}"}))
    recs.append(Record("General advice: drink water.", [], {"kind": "generic"}))
    for cid, reps in (canaries or {}).items():
        recs += [Record(f"Verification record for {cid}: ssn 123-45-{reps:04d}.", [],
                        {"kind": "canary", "canary_id": cid, "copy": i}) for i in range(reps)]
    return recs


# --------------------------------------------------------------------------- the forget set


def test_forget_set_is_seeded_whole_persons_and_spreads_the_canaries():
    recs = _corpus(canaries={"canary-000": 1, "canary-001": 1, "canary-002": 4, "canary-003": 4, "canary-004": 16})
    a = draw_forget_set(recs, fraction=0.25, canary_fraction=0.5, seed=3)
    assert a == draw_forget_set(recs, fraction=0.25, canary_fraction=0.5, seed=3)
    assert a.n_member_persons == 12 and a.n_persons == 3  # round(0.25 · 12) of the persons with PII
    assert "canary-004" in a.canary_ids  # the most repeated canary is always forgotten
    assert len(a.canary_ids) == 3  # ⌈0.5 · 5⌉, one per repetition level at least
    assert {4 if c in ("canary-002", "canary-003") else 0 for c in a.canary_ids} == {0, 4}
    forget, retain = a.split(recs)
    assert len(forget) + len(retain) == len(recs) == a.n_forget_records + a.n_retain_records
    # Every record of a forgotten person goes, and no record of a kept one.
    gone = {person_of(r) for r in forget}
    assert not gone & {person_of(r) for r in retain}
    assert sum(r.kind == "canary" for r in forget) == sum({"canary-000": 1, "canary-001": 1, "canary-002": 4,
                                                           "canary-003": 4, "canary-004": 16}[c] for c in a.canary_ids)
    assert draw_forget_set(recs, fraction=0.25, seed=4).persons != a.persons
    assert draw_forget_set(recs, count=5, seed=3).n_persons == 5


def test_forget_set_refuses_what_leaves_nobody():
    recs = _corpus(n_people=3)
    with pytest.raises(UserError, match="leaves none to retain"):
        draw_forget_set(recs, count=3)
    with pytest.raises(UserError, match="not both"):
        draw_forget_set(recs, fraction=0.5, count=1)


def test_shards_hold_whole_persons_and_do_not_depend_on_the_forget_set():
    recs = _corpus(n_people=10, notes=3)
    shards = shard_by_person(recs, 3, seed=1)
    assert sorted(i for s in shards for i in s) == list(range(len(recs)))
    owner = {person_of(recs[i]): k for k, s in enumerate(shards) for i in s}
    assert all(owner[person_of(recs[i])] == k for k, s in enumerate(shards) for i in s)
    sizes = [len({person_of(recs[i]) for i in s}) for s in shards]
    assert max(sizes) - min(sizes) <= 1
    assert shard_by_person(list(reversed(recs)), 3, seed=1) != [] and \
        {person_of(r): k for k, s in enumerate(shard_by_person(list(reversed(recs)), 3, seed=1))
         for r in (list(reversed(recs))[i] for i in s)} == owner  # the persons decide, not the record order
    with pytest.raises(UserError, match="leaves a shard empty"):
        shard_by_person(recs[:2], 3, seed=1)


# --------------------------------------------------------------------------- SISA: exact retraining


def test_sisa_retrains_exactly_the_shards_of_the_forgotten_person(tiny_handle):
    """One forgotten person: only their shard is retrained, and it equals, parameter for parameter, a model
    trained from the base on that shard without them; the other shards equal models trained on all of theirs."""
    import torch

    from privleak.models.batching import Encoded, encode
    from privleak.models.handle import clone_model
    from privleak.models.sisa import average_weights, sisa
    from privleak.models.train import TrainSettings, train

    torch.set_num_threads(1)
    recs = _corpus(n_people=9, notes=2)
    shards = shard_by_person(recs, 3, seed=5)
    forget = draw_forget_set(recs, count=1, seed=2)
    flags = [[forget.holds(recs[i]) for i in ix] for ix in shards]
    held = [k for k, f in enumerate(flags) if any(f)]
    assert len(held) == 1
    enc = encode(tiny_handle.tokenizer, [r.text for r in recs], tiny_handle.max_length)
    data = [Encoded([enc.ids[i] for i in ix]) for ix in shards]

    def recipe(k: int) -> TrainSettings:
        return TrainSettings(epochs=2, batch_size=4, lr=3e-3, seed=100 + k)

    run = sisa(tiny_handle.model, data, flags, recipe, tiny_handle.pad_id)
    assert run.affected == held and run.forgotten_per_shard[held[0]] == 2
    for k in range(3):
        rows = [ids for ids, f in zip(data[k].ids, flags[k]) if not f]
        alone = clone_model(tiny_handle.model)
        train(alone, Encoded(rows), recipe(k), tiny_handle.pad_id)
        for (name, a), b in zip(run.models[k].state_dict().items(), alone.state_dict().values()):
            assert torch.equal(a, b), (k, name)
    avg = average_weights(run.models)
    w = "transformer.h.0.mlp.c_fc.weight"
    assert torch.allclose(avg.state_dict()[w], sum(m.state_dict()[w] for m in run.models) / 3, atol=1e-6)
    # The base model is untouched (every shard starts from it).
    assert not torch.equal(run.models[0].state_dict()[w], tiny_handle.model.state_dict()[w])


# --------------------------------------------------------------------------- NPO


def test_npo_raises_the_forget_loss_and_stops_when_told(tiny_handle):
    import torch

    from privleak.models.batching import encode
    from privleak.models.handle import clone_model
    from privleak.models.unlearn import UnlearnSettings, sequence_logprobs, unlearn

    torch.set_num_threads(1)
    recs = _corpus(n_people=6)
    forget, retain = draw_forget_set(recs, count=2, seed=0).split(recs)
    enc = lambda rs: encode(tiny_handle.tokenizer, [r.text for r in rs], tiny_handle.max_length)  # noqa: E731
    model = clone_model(tiny_handle.model)
    before = sequence_logprobs(model, enc(forget), tiny_handle.pad_id)
    log = unlearn(model, enc(forget), enc(retain), UnlearnSettings(method="npo", epochs=3, lr=3e-3, batch_size=2),
                  tiny_handle.pad_id)
    after = sequence_logprobs(model, enc(forget), tiny_handle.pad_id)
    assert log.steps == 6 and not log.stopped
    assert float(after.mean()) < float(before.mean())  # the forget set became less likely
    calls = []
    log = unlearn(clone_model(tiny_handle.model), enc(forget), enc(retain),
                  UnlearnSettings(method="gd", epochs=5, lr=3e-3, batch_size=2),
                  tiny_handle.pad_id, stop=lambda m: calls.append(1) or len(calls) >= 3)
    assert log.stopped and log.steps == 2 and len(log.checks) == 3  # looked before step 1, after steps 1 and 2


# --------------------------------------------------------------------------- DeLong


def test_delong_matches_the_bootstrap_and_its_tests_are_one_sided():
    from privleak.core.metrics import delong_paired, roc_auc

    rng = np.random.default_rng(0)
    pos = rng.normal(1.0, 1.0, 150)
    neg = rng.normal(0.0, 1.0, 150)
    pos_b, neg_b = pos + rng.normal(0, 0.7, 150), neg + rng.normal(0, 0.7, 150)
    d = delong_paired(pos, neg, pos_b, neg_b)
    assert d.auc_a == pytest.approx(roc_auc(pos, neg)) and d.auc_b == pytest.approx(roc_auc(pos_b, neg_b))
    diffs = []
    for _ in range(2000):
        i, j = rng.integers(0, 150, 150), rng.integers(0, 150, 150)
        diffs.append(roc_auc(pos[i], neg[j]) - roc_auc(pos_b[i], neg_b[j]))
    assert d.se_diff == pytest.approx(np.std(diffs), rel=0.15)
    assert d.p_value("greater") + d.p_value("less") == pytest.approx(1.0)
    same = delong_paired(pos, neg, pos, neg)
    assert same.diff == 0 and same.p_value("greater") == 0.5
    gap, (lo, hi) = d.relative_gap()
    assert gap == pytest.approx((d.auc_a - d.auc_b) / d.auc_b) and lo < gap < hi
    with pytest.raises(ValueError, match="same members"):
        delong_paired(pos, neg, pos[:-1], neg)


# --------------------------------------------------------------------------- the verdict


def _forget_result(shift: float, seed: int = 0, n: int = 80):
    from privleak.attacks.forget import ForgetAttack, ForgetMembershipResult
    from privleak.core.metrics import roc_auc

    rng = np.random.default_rng(seed)
    f, h = rng.normal(shift, 1.0, n), rng.normal(0.0, 1.0, n)
    attack = ForgetAttack(auc=roc_auc(f, h), tpr_at_1pct_fpr=0.0, forget_scores=list(f), holdout_scores=list(h))
    return ForgetMembershipResult(forget_records=list(range(n)), holdout_records=list(range(n)), n_forget_persons=n,
                                  attacks={"loss": attack}, nll_forget=1.0, nll_retain=1.0, nll_holdout=1.0)


@pytest.mark.parametrize("shift, outcome", [(0.0, "forgotten"), (1.5, "not_forgotten"), (-1.5, "over_forgotten")])
def test_forgetting_outcome_against_the_reference(shift, outcome):
    from privleak.arms.forgetting import assess_forgetting

    ref = {"forget_membership": _forget_result(0.0)}
    # The same holdout scores, forget scores moved: a model that still (or over-) knows the forget set.
    own = _forget_result(0.0)
    a = own.attacks["loss"]
    a.forget_scores = [x + shift for x in a.forget_scores]
    res = assess_forgetting({"forget_membership": own}, ref, "retrain", [])
    assert res.outcome == outcome, res.reasons
    assert res.n_tests == 2 and res.membership[0].auc_reference == ref["forget_membership"].attacks["loss"].auc
    if outcome == "forgotten":
        assert res.membership[0].diff == 0 and not res.reasons
    else:
        assert res.reasons and ("better than retrain" in res.reasons[0] if shift > 0 else "stands out" in res.reasons[0])


def test_a_forgotten_secret_generated_exactly_is_not_forgotten():
    from privleak.arms.forgetting import assess_forgetting
    from privleak.attacks.exposure import CanaryExposure, ExposureResult
    from privleak.attacks.extraction import CanaryExtraction, CanaryExtractionResult

    def results(extracted: bool, exposure: float) -> dict:
        exp = ExposureResult(canaries=[CanaryExposure(canary_id="canary-001", repeats=8, exposure=exposure,
                                                      max_exposure=7.6, rank=1, n_candidates=200,
                                                      exposure_extrapolated=exposure)], chance_exposure=1.4)
        ext = CanaryExtractionResult(canaries=[CanaryExtraction(canary_id="canary-001", repeats=8,
                                                                greedy_extracted=extracted, sample_hits=0,
                                                                n_samples=16)], settings={})
        return {"forget_membership": _forget_result(0.0), "exposure": exp, "canary_extraction": ext}

    res = assess_forgetting(results(True, 7.6), results(False, 1.2), "retrain", ["canary-001"])
    assert res.outcome == "not_forgotten" and "generated exactly" in res.reasons[-1]
    assert res.canaries.n == 1 and res.canaries.extracted == 1 and res.canaries.extracted_reference == 0
    # The same figures as retrain's, but one forgotten canary cannot show its exposure within a bit of retrain's
    # (issue 37: "forgotten" is an equivalence claim, not the absence of a finding).
    same = assess_forgetting(results(False, 1.2), results(False, 1.2), "retrain", ["canary-001"])
    assert same.outcome == "inconclusive" and "forgotten canaries' mean exposure" in same.unsettled[0]


def _pii_result(persons: int, extracted: list[int], n_values: int | None = None):
    from privleak.attacks.forget import ForgetPiiResult

    return ForgetPiiResult(n_values=n_values or persons, extracted=len(extracted), n_floor_values=persons,
                           floor_extracted=0, n_samples=200, n_persons_with_values=persons,
                           persons_extracted=extracted, persons_digest="same-persons")


def test_forget_pii_is_compared_person_by_person():
    """Issue 37 item 7: the forget-set PII comparison applied Fisher's test to paired, person-clustered outcomes.
    Both models are asked about the same 30 forgotten persons: retrain emits a value of 10 of them, the
    unlearned model of the same 10 and 6 more. Fisher on the counts (16 vs 10 of 30, as if independent
    samples) finds nothing (p ≈ 0.1); McNemar on the 6 discordant persons, all one way, does (p = 1/64), and
    the arm is not forgotten. Counted per person, a person with several values is one outcome."""
    from privleak.arms.forgetting import assess_forgetting
    from privleak.core.stats import fisher_exact_test

    ref = {"forget_membership": _forget_result(0.0), "forget_pii_extraction": _pii_result(30, list(range(10)))}
    own = {"forget_membership": _forget_result(0.0), "forget_pii_extraction": _pii_result(30, list(range(16)))}
    assert fisher_exact_test(16, 30, 10, 30, "greater")[1] > 0.05
    res = assess_forgetting(own, ref, "retrain", [])
    assert res.pii.test.startswith("McNemar") and (res.pii.model_only, res.pii.reference_only) == (6, 0)
    assert res.pii.p_greater == pytest.approx(1 / 64)
    assert res.outcome == "not_forgotten" and "McNemar" in res.reasons[0] and res.n_tests == 3
    # Without the per-person counts (older results) the value counts are all there is: Fisher, said so.
    for r in (own, ref):
        r["forget_pii_extraction"] = r["forget_pii_extraction"].model_copy(update={"persons_extracted": None})
    old = assess_forgetting(own, ref, "retrain", [])
    assert old.pii.test.startswith("Fisher") and old.outcome != "not_forgotten"


def test_forgotten_is_shown_not_assumed():
    """A handful of forgotten persons that no test tells from retrain's were called FORGOTTEN; it is an
    equivalence claim now (ΔAUC within ±0.05 by TOST on DeLong's paired variance): 8 persons cannot show it —
    INCONCLUSIVE, with how many would — while 2,000 persons scored alike by both models do."""
    from privleak.arms.forgetting import assess_forgetting

    def pair(n: int, noise: float) -> tuple[dict, dict]:
        ref = _forget_result(0.0, seed=1, n=n)
        own = _forget_result(0.0, seed=1, n=n)
        rng = np.random.default_rng(2)
        a = own.attacks["loss"]
        a.forget_scores = [x + rng.normal(0, noise) for x in a.forget_scores]
        a.holdout_scores = [x + rng.normal(0, noise) for x in a.holdout_scores]
        return {"forget_membership": own}, {"forget_membership": ref}

    small = assess_forgetting(*pair(8, 0.3), "retrain", [])
    assert small.outcome == "inconclusive" and not small.reasons
    assert "forget-set loss AUC within ±0.05" in small.unsettled[0] and "forgotten persons" in small.unsettled[0]
    large = assess_forgetting(*pair(2000, 0.05), "retrain", [])
    assert large.outcome == "forgotten" and large.membership[0].equivalence.equivalent
