"""The shared-prefix tree pass on the Llama family (issue 47): SmolLM2 is a Llama, and a canary's 10,000
candidates and the PII windows took one full forward each on it. Tiny random configs of each architecture the
pass claims (rotary positions, grouped key/value heads, RMSNorm, Qwen2's q/k/v biases), against one plain
forward per text."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM, Qwen2Config, Qwen2ForCausalLM

from privleak.attacks.prefix_scoring import _tree_supported, continuation_loglik, shared_prefix_nll
from privleak.attacks.scoring import score_texts
from privleak.models.handle import ModelHandle
from test_exposure import _loglik_by_hand as _by_hand  # one forward per candidate, float64


def _kw(vocab: int) -> dict:
    # 3 key/value heads for 6 query heads (SmolLM2: 3 for 9); a rope base small enough that positions matter.
    return dict(vocab_size=vocab, hidden_size=48, num_hidden_layers=2, num_attention_heads=6, num_key_value_heads=3,
                intermediate_size=64, max_position_embeddings=128, rope_theta=100.0, tie_word_embeddings=True)


ARCHS = {
    "llama": lambda v: LlamaForCausalLM(LlamaConfig(**_kw(v))),
    "mistral": lambda v: MistralForCausalLM(MistralConfig(**_kw(v), sliding_window=64)),
    "qwen2": lambda v: Qwen2ForCausalLM(Qwen2Config(**_kw(v))),
}


def _handle(tiny_handle, arch: str) -> ModelHandle:
    torch.manual_seed(0)
    model = ARCHS[arch](len(tiny_handle.tokenizer)).eval()
    with torch.no_grad():  # random weights large enough that every token's log p differs visibly
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(3.0)
    return ModelHandle(model=model, tokenizer=tiny_handle.tokenizer, max_length=tiny_handle.max_length)


CONTS = [" 555-0101.", " 555-0199 and more", " 1", " 12", " 555", "", " 555-0101.", " 000-00-0000 and more text.",
         " 555-0102.", " 9", " 98-76"]


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_tree_pass_equals_a_forward_per_candidate(tiny_handle, arch):
    h = _handle(tiny_handle, arch)
    assert _tree_supported(h.model)
    prefix = "Verification record for Ann Lee: phone"
    want = _by_hand(h, prefix, CONTS)
    got = continuation_loglik(h, prefix, CONTS, batch_size=3)  # every level split into chunks
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert len(set(np.round(want, 3))) > 8  # distinct values: a constant or a position-blind pass could not pass


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_shared_prefix_nll_equals_the_scoring_pass_on_the_llama_family(tiny_handle, arch, monkeypatch):
    import privleak.attacks.prefix_scoring as ps

    monkeypatch.setattr(ps, "MIN_TREE_TEXTS", 1)  # every call in the trie, however few its texts
    h = _handle(tiny_handle, arch)
    texts = [left + fill for left in ("Patient Ann Lee was seen on day ", "phone 555-01")
             for fill in ("3 for asthma.", "12 for gout.", "7", "")] + ["x"]
    np.testing.assert_allclose(shared_prefix_nll(h, texts, max_nodes=30), score_texts(h, texts).nll(),
                               rtol=2e-5, atol=2e-5)


def test_the_tree_pass_can_fail(tiny_handle):
    # Not vacuous: the same pass with the rotary removed (every node at the root's position) gives other sums.
    import privleak.attacks.prefix_scoring as ps

    h = _handle(tiny_handle, "llama")
    prefix = "Verification record for Ann Lee: phone"
    want = _by_hand(h, prefix, CONTS)
    real = ps._llama_chunk_hidden
    ps._llama_chunk_hidden = lambda model, tokens, position, *a: real(model, tokens, 0, *a)
    try:
        got = continuation_loglik(h, prefix, CONTS)
    finally:
        ps._llama_chunk_hidden = real
    assert not np.allclose(got, want, rtol=1e-4, atol=1e-4)


def test_other_models_keep_the_fallback(tiny_handle):
    h = _handle(tiny_handle, "llama")
    assert not _tree_supported(h.model.to(torch.bfloat16))
