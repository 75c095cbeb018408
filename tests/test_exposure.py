"""Canary exposure: the definition, the KV-cache scoring, and a real memorisation signal."""

import math

import pytest
import torch

from privleak.attacks.exposure import canary_exposure, chance_exposure, continuation_loglik, exposure_from_rank
from privleak.data.canaries import make_canaries
from privleak.models.batching import encode
from privleak.models.handle import ModelHandle, clone_model
from privleak.models.train import TrainSettings, train


def test_rank_one_gives_log2_R():
    assert exposure_from_rank(1, 10_000) == pytest.approx(math.log2(10_000))
    assert exposure_from_rank(10_000, 10_000) == 0.0


def test_chance_exposure_is_about_1_44_bits():
    # E[log2 R − log2 U{1..R}] → 1/ln 2 as R grows (Stirling).
    assert chance_exposure(10_000) == pytest.approx(1 / math.log(2), abs=0.01)


def test_kv_cache_scoring_equals_full_sequence(tiny_handle):
    prefix = "Patient Ann Lee phone"
    conts = [" 555-0101.", " 555-0199 and more", " 1", " 555-0101."]
    fast = continuation_loglik(tiny_handle, prefix, conts, batch_size=3)
    tok = tiny_handle.tokenizer
    for c, got in zip(conts, fast):
        p = [tok.eos_token_id] + tok(prefix, add_special_tokens=False)["input_ids"]
        q = tok(c, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logp = torch.log_softmax(tiny_handle.model(input_ids=torch.tensor([p + q])).logits[0].double(), -1)
        want = sum(float(logp[len(p) - 1 + j, q[j]]) for j in range(len(q)))
        assert got == pytest.approx(want, abs=1e-4)
    assert fast[0] == pytest.approx(fast[3])


def test_memorised_canary_has_high_exposure_and_unseen_one_does_not(tiny_handle):
    seen, unseen = make_canaries(repeats=(1,), per_repeat=2, seed=3)
    model = clone_model(tiny_handle.model)
    texts = [seen.text()] * 40
    data = encode(tiny_handle.tokenizer, texts, tiny_handle.max_length)
    train(model, data, TrainSettings(epochs=8, batch_size=8, lr=5e-3), pad_id=tiny_handle.pad_id)
    handle = ModelHandle(model=model, tokenizer=tiny_handle.tokenizer, max_length=tiny_handle.max_length)
    res = canary_exposure(handle, [seen, unseen], n_candidates=500, seed=0)
    assert res[0].rank == 1.0 and res[0].exposure == pytest.approx(math.log2(500))
    assert res[1].exposure < res[0].exposure - 3
    assert res[0].exposure_extrapolated >= res[1].exposure_extrapolated
