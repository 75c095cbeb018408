"""ReCaLL's prefix run once (issue 47): the shared-prefix pass against the one pass over prefix + record."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from privleak.attacks.membership.calibrated import prefixed_token_logprobs, token_logprobs
from privleak.models.handle import ModelHandle

TEXTS = ["Patient Ann Lee was seen on day 3 for asthma.", "phone 555-0101", "x", "General advice: drink water and "
         "sleep well; follow up in two weeks.", "Dr. Ray", "Ann"]


def _llama(tiny_handle) -> ModelHandle:
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tiny_handle.tokenizer), hidden_size=48, num_hidden_layers=2, num_attention_heads=6,
                      num_key_value_heads=3, intermediate_size=64, max_position_embeddings=128, rope_theta=100.0)
    return ModelHandle(model=LlamaForCausalLM(cfg).eval(), tokenizer=tiny_handle.tokenizer,
                       max_length=tiny_handle.max_length)


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
@pytest.mark.parametrize("max_tokens", [None, 40])  # 40: the bodies go in several batches
def test_prefix_once_equals_the_joined_pass(tiny_handle, arch, max_tokens):
    h = tiny_handle if arch == "gpt2" else _llama(tiny_handle)
    tok = h.tokenizer
    prefix = [tok.eos_token_id] + tok("Previous note: Bob Ray, seen on day 9 for gout.\n\n",
                                      add_special_tokens=False)["input_ids"]
    bodies = [[tok.eos_token_id] + tok(t, add_special_tokens=False)["input_ids"] for t in TEXTS]
    got = prefixed_token_logprobs(h, prefix, bodies, max_tokens=max_tokens)
    want = token_logprobs(h, [prefix + b for b in bodies])
    for b, g, w in zip(bodies, got, want):
        assert len(g) == len(b) - 1
        np.testing.assert_allclose(g, w[len(w) - len(g):], rtol=1e-4, atol=1e-4)
    # Not vacuous: without the prefix the record's log-probabilities differ.
    alone = token_logprobs(h, bodies)
    assert not np.allclose(np.concatenate(got), np.concatenate(alone), atol=1e-3)


def test_no_prefix_is_the_plain_pass(tiny_handle):
    bodies = [tiny_handle.tokenizer(t)["input_ids"] for t in TEXTS]
    for g, w in zip(prefixed_token_logprobs(tiny_handle, [], bodies), token_logprobs(tiny_handle, bodies)):
        np.testing.assert_array_equal(g, w)
