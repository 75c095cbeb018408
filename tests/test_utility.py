"""Utility: log-perplexity in nats, the utility gain recovered G, the early-stopped best reference."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from privleak.attacks.scoring import TokenScores
from privleak.audit.utility import MIN_GAIN_NATS, gain_recovered, mean_nll, perplexity
from privleak.audit.verdicts import LOW_GAIN, judge
from privleak.models.batching import encode
from privleak.models.handle import clone_model
from privleak.models.train import EarlyStopping, TrainSettings, train
from privleak.report.console import utility_table


def _scores(per_text: list[list[float]]) -> TokenScores:
    lp = np.concatenate([np.asarray(t, dtype=np.float32) for t in per_text])
    offsets = np.cumsum([0] + [len(t) for t in per_text])
    return TokenScores(logprob=lp, mu=np.zeros_like(lp), var=np.ones_like(lp), offsets=offsets)


def test_mean_nll_is_token_weighted():
    s = _scores([[-1.0, -1.0, -1.0], [-4.0]])
    assert mean_nll(s) == pytest.approx(7.0 / 4)  # not the mean of per-text means (2.5)
    assert perplexity(s) == pytest.approx(math.exp(7.0 / 4))
    assert mean_nll(_scores([[]])) is None


def test_gain_recovered_formula_and_undefined_cases():
    assert gain_recovered(3.0, 2.0, 1.0) == pytest.approx(0.5)
    assert gain_recovered(3.0, 1.0, 1.0) == pytest.approx(1.0)
    assert gain_recovered(3.0, 3.5, 1.0) == pytest.approx(-0.25)  # worse than not fine-tuning
    assert gain_recovered(3.0, 2.0, None) is None
    assert gain_recovered(None, 2.0, 1.0) is None
    assert gain_recovered(3.0, 2.9, 3.0 - MIN_GAIN_NATS / 2) is None  # nothing to recover: a ratio of noise


def test_early_stopping_keeps_the_best_validated_weights(tiny_handle):
    texts = [f"note {i}: the patient reports mild pain and takes drug {i % 5}." for i in range(40)]
    val = [f"note {i}: the patient reports mild pain and takes drug {i % 5}." for i in range(100, 120)]
    tok = tiny_handle.tokenizer
    data, held = encode(tok, texts, 64), encode(tok, val, 64)
    from privleak.models.batching import pad_batch, per_sequence_nll, position_ids_for

    def validate(model) -> float:
        ids, mask = pad_batch(held.ids, tok.pad_token_id)
        logits = model(input_ids=ids, attention_mask=mask, position_ids=position_ids_for(mask)).logits
        return float(per_sequence_nll(logits, ids, mask).mean())

    model = clone_model(tiny_handle.model)
    # A learning rate high enough to overfit, so validation turns up and stopping has something to do.
    log = train(model, data, TrainSettings(epochs=40, batch_size=8, lr=5e-2, seed=0), tok.pad_token_id,
                early_stopping=EarlyStopping(validate=validate, every=5, patience=2))
    steps, losses = zip(*log.val_losses)
    assert log.best_step == steps[int(np.argmin(losses))]
    with torch.no_grad():
        assert validate(model) == pytest.approx(min(losses), rel=1e-5)
    assert log.steps < 40 * 5  # stopped early


def test_every_model_of_a_real_audit_has_utility_in_nats_and_g(audited):
    r = audited.results
    base, best = r.base_model, r.arms["best"]
    assert base.utility.gain_recovered == pytest.approx(0.0)
    assert best.utility.gain_recovered == pytest.approx(1.0)
    for name, arm in r.arms.items():
        u = arm.utility
        assert u.nll_non_members is not None and u.ppl_non_members == pytest.approx(math.exp(u.nll_non_members), rel=1e-6)
        assert u.nll_public is not None and u.ppl_public == pytest.approx(math.exp(u.nll_public), rel=1e-6)
        expected = (base.utility.nll_non_members - u.nll_non_members) / (
            base.utility.nll_non_members - best.utility.nll_non_members)
        assert u.gain_recovered == pytest.approx(expected), name
        if arm.training is not None:
            assert arm.training.tokens > 0 and r.durations_s[f"train/{name}"] > 0, name
    assert best.kind == "best" and best.training.stopped_epoch is not None
    # The best reference is early-stopped within its own horizon, and rehearsed public text 1:1.
    assert 0 < best.training.stopped_epoch <= best.training.settings["epochs"]
    assert best.training.rehearsal_records == best.n_train_records
    from rich.console import Console
    console = Console(width=200, record=True)
    console.print(utility_table(r))
    text = console.export_text()
    assert "G" in text and "best" in text and "ppl public" in text


def test_recommendation_ranks_by_g_and_names_an_arm_that_learned_little(audited):
    r = audited.results.model_copy(deep=True)
    judge(r)
    # Make every arm but dp-8 leak, and dp-8 learn little: it may be recommended, but never silently.
    for name, arm in r.arms.items():
        if name != "dp-8" and arm.kind != "guard":
            arm.attacks = r.arms["baseline"].attacks
    dp8 = r.arms["dp-8"]
    dp8.attacks = dict(r.base_model.attacks)
    dp8.empirical_epsilon = None
    dp8.utility.gain_recovered = LOW_GAIN / 2
    judged = judge(r)
    rec = judged.recommendation
    if rec.arm == "dp-8":
        assert "learned little" in rec.text and "utility recovered" in rec.text
    assert "learned little" in judged.arms["dp-8"].verdict.text


def test_the_best_arm_rehearses_a_seeded_sample_of_public_records_only():
    from privleak.arms.plain import rehearsal_records
    from privleak.data.records import Record

    public = [Record(text=f"public note {i}", meta={"kind": "generic"}) for i in range(50)]
    picked = rehearsal_records(public, 20, 1.0, seed=3)
    assert len(picked) == 20 and all(any(r is p for p in public) for r in picked)
    assert len({id(r) for r in picked}) == 20  # no public record twice
    assert [r.text for r in picked] == [r.text for r in rehearsal_records(public, 20, 1.0, seed=3)]  # seeded
    assert len(rehearsal_records(public, 40, 2.0, seed=3)) == 50  # at most the whole public split
    assert rehearsal_records([], 20, 1.0, seed=3) == []