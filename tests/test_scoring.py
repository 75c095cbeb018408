"""The shared scoring pass against hand computation on a tiny model."""

import math
import zlib

import numpy as np
import pytest
from hand import (
    token_stats_by_hand,  # tests/ is on sys.path (pytest default import mode)
)

from privleak.attacks.membership.scores import loss_scores
from privleak.attacks.scoring import TokenScores, score_texts
from privleak.audit.utility import perplexity

TEXTS = [
    "Patient Ann Lee was seen on day 3 for asthma.",
    "General advice: drink water.",
    "Bo Kim, gout, phone 555-0101, seen again on day 7 with a much longer note than the others here.",
    "x",
]


_by_hand = token_stats_by_hand


def test_per_token_values_equal_hand_computation(tiny_handle):
    # A tiny token budget forces several padded, length-sorted batches.
    scores = score_texts(tiny_handle, TEXTS, max_tokens=40)
    for i, text in enumerate(TEXTS):
        tok, mu, var = _by_hand(tiny_handle, text)
        sl = scores.tokens(i)
        np.testing.assert_allclose(scores.logprob[sl], tok, atol=2e-5)
        np.testing.assert_allclose(scores.mu[sl], mu, atol=2e-5)
        np.testing.assert_allclose(scores.var[sl], var, atol=5e-5)


def test_loss_and_perplexity_definitions(tiny_handle):
    scores = score_texts(tiny_handle, TEXTS)
    hand = [_by_hand(tiny_handle, t)[0] for t in TEXTS]
    expected_nll = np.array([-t.mean() for t in hand])
    np.testing.assert_allclose(scores.nll(), expected_nll, rtol=1e-5)
    # LOSS: higher = member, so it is −NLL.
    np.testing.assert_allclose(loss_scores(scores), -expected_nll, rtol=1e-5)
    all_tokens = np.concatenate(hand)
    assert perplexity(scores) == pytest.approx(math.exp(-all_tokens.mean()), rel=1e-5)
    assert zlib.compress(TEXTS[0].encode())  # zlib scores build on the same NLL (attack issue)


def test_cache_round_trip_has_no_pickle(tiny_handle, tmp_path):
    scores = score_texts(tiny_handle, TEXTS)
    scores.save(tmp_path / "s.npz")
    back = TokenScores.load(tmp_path / "s.npz")
    np.testing.assert_array_equal(back.logprob, scores.logprob)
    np.testing.assert_array_equal(back.offsets, scores.offsets)


def test_gpt2_head_chunks_equal_the_full_logits_path(tiny_handle):
    # The flat path runs the LM head on real positions only, a few rows at a
    # time; a causal LM without a plain head goes through the model's full logits.
    import torch

    from privleak.attacks.scoring import _flat_token_stats as _gpt2_token_stats
    from privleak.attacks.scoring import _generic_token_stats
    from privleak.models.batching import encode, pad_batch

    ids, mask = pad_batch(encode(tiny_handle.tokenizer, TEXTS, tiny_handle.max_length).ids, tiny_handle.pad_id)
    with torch.inference_mode():
        fast = _gpt2_token_stats(tiny_handle.model, ids, mask, rows=5)
        full = _generic_token_stats(tiny_handle.model, ids, mask)
    assert len(fast[0]) == int(mask[:, 1:].sum())
    for a, b in zip(fast, full):
        # σ² = E[(log p)²] − μ² cancels in float32: the same 5e-5 as the hand test.
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=5e-5)


def test_token_ids_fast_path_gives_the_tokenizers_own_ids(tiny_handle):
    """``token_ids`` asks the Rust backend directly: the very ids ``tokenizer(texts, add_special_tokens=False)``
    gives, special-token strings, empty texts and unicode included; and a tokenizer with truncation set goes
    the usual way (which truncates)."""
    from privleak.models.batching import token_ids

    tok = tiny_handle.tokenizer
    texts = ["Patient Ann Lee, phone 555-0101.", "", " leading space", "<|endoftext|> inside", "naïve café — ünï"]
    assert token_ids(tok, texts) == tok(texts, add_special_tokens=False)["input_ids"]
    assert token_ids(tok, []) == []
    long = ["word " * 50]
    tok.backend_tokenizer.enable_truncation(max_length=5)
    try:
        assert token_ids(tok, long) == tok(long, add_special_tokens=False)["input_ids"]
    finally:
        tok.backend_tokenizer.no_truncation()
