"""The LM head on scored rows only, for the Llama family (issue 47): each fast path against the plain one.

SmolLM2 is a Llama with a 49,152-token vocabulary, where the full (batch, length, vocab) logits dominate a
scoring pass's memory and a training step's memory traffic. The models here are tiny random configs of each
architecture :data:`~privleak.models.decoders.FLAT_HEAD_TYPES` names (nothing downloaded): the flat path must
give the per-sequence NLL, the gradients, the scoring pass's (log p, μ, σ²) and a DP-LoRA step's clipped
sum that the model's own full-logit forward gives.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import (
    GPTNeoXConfig,
    GPTNeoXForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from privleak.attacks.scoring import _flat_token_stats, _generic_token_stats
from privleak.models.batching import pad_batch, per_sequence_nll, position_ids_for, sequence_nll
from privleak.models.book_keeping import BookKeeping
from privleak.models.decoders import decoder_and_head
from privleak.models.lora import add_lora

V, D = 64, 32
SEQS = [[0, 5, 7, 9, 3, 11, 2, 0], [0, 4, 4, 8, 0], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0], [0, 9], [3]]
_LLAMA_KW = dict(vocab_size=V, hidden_size=D, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=2 * D, max_position_embeddings=64, tie_word_embeddings=True)
ARCHS = {
    "llama": lambda: LlamaForCausalLM(LlamaConfig(**_LLAMA_KW)),
    "mistral": lambda: MistralForCausalLM(MistralConfig(**_LLAMA_KW, sliding_window=32)),
    "qwen2": lambda: Qwen2ForCausalLM(Qwen2Config(**_LLAMA_KW)),
    "gpt_neox": lambda: GPTNeoXForCausalLM(GPTNeoXConfig(vocab_size=V, hidden_size=D, num_hidden_layers=2,
                                                          num_attention_heads=4, intermediate_size=2 * D,
                                                          max_position_embeddings=64, hidden_dropout=0.0,
                                                          attention_dropout=0.0)),
}


def _model(arch: str, seed: int = 0):
    torch.manual_seed(seed)
    return ARCHS[arch]().eval()


def _plain_nll(model, ids, mask):
    logits = model(input_ids=ids, attention_mask=mask, position_ids=position_ids_for(mask)).logits
    return per_sequence_nll(logits, ids, mask)


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_flat_head_nll_and_gradients_equal_the_full_logits(arch):
    ids, mask = pad_batch(SEQS, 0)
    a, b = _model(arch), _model(arch)
    assert decoder_and_head(a) is not None
    fast, slow = sequence_nll(a, ids, mask), _plain_nll(b, ids, mask)
    torch.testing.assert_close(fast, slow, rtol=1e-5, atol=1e-6)
    fast.sum().backward()
    slow.sum().backward()
    for (n, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters()):
        torch.testing.assert_close(pa.grad, pb.grad, rtol=1e-4, atol=1e-6, msg=n)


def test_flat_head_nll_can_fail():
    # Not vacuous: one changed target token moves its row's loss.
    ids, mask = pad_batch(SEQS, 0)
    other = ids.clone()
    other[0, 3] = 17
    m = _model("llama")
    assert not torch.allclose(sequence_nll(m, ids, mask)[0], _plain_nll(m, other, mask)[0])


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_flat_scoring_stats_equal_the_full_logits(arch):
    ids, mask = pad_batch(SEQS, 0)
    m = _model(arch)
    with torch.inference_mode():
        fast = _flat_token_stats(m, ids, mask, rows=5)
        full = _generic_token_stats(m, ids, mask)
    assert len(fast[0]) == int(mask[:, 1:].sum())
    for x, y in zip(fast, full):
        np.testing.assert_allclose(x.numpy(), y.numpy(), atol=5e-5)


def test_peft_wrapped_models_use_their_decoder_with_the_adapters_in_it():
    ids, mask = pad_batch(SEQS, 0)
    m = add_lora(_model("llama"), 4, 8.0)
    for p in m.parameters():  # non-zero adapters, so a path that skipped them would differ
        if p.requires_grad:
            torch.nn.init.normal_(p, std=0.5)
    assert decoder_and_head(m) is not None
    torch.testing.assert_close(sequence_nll(m, ids, mask), _plain_nll(m, ids, mask), rtol=1e-5, atol=1e-6)


def test_a_head_with_scaling_after_it_keeps_the_full_forward():
    # Gemma 2 soft-caps its logits after the head: the flat path would score other logits, so it is not taken.
    from transformers import Gemma2Config, Gemma2ForCausalLM

    m = Gemma2ForCausalLM(Gemma2Config(vocab_size=V, hidden_size=D, num_hidden_layers=1, num_attention_heads=2,
                                       num_key_value_heads=1, intermediate_size=2 * D, head_dim=16,
                                       max_position_embeddings=64))
    assert decoder_and_head(m) is None


def test_book_keeping_dp_lora_step_is_the_same_with_the_flat_head():
    # The DP-LoRA step book-keeping takes on a Llama (the smollm2 profile's dp-8+lora): the clipped sum from the
    # flat head equals the one from the full logits.
    ids, mask = pad_batch(SEQS[:4], 0)
    sums = []
    for flat in (True, False):
        m = add_lora(_model("llama"), 4, 8.0)
        torch.manual_seed(1)
        for p in m.parameters():
            if p.requires_grad:
                torch.nn.init.normal_(p, std=0.3)
        m.train()
        bk = BookKeeping(m, max_grad_norm=0.05)
        with bk.capture():
            per_seq = sequence_nll(m, ids, mask, flat_head=flat)
            per_seq.sum().backward()
        bk.write_clipped_sum()
        sums.append({n: p.grad.clone() for n, p in m.named_parameters() if p.requires_grad})
        bk.remove()
    assert sums[0].keys() == sums[1].keys() and sums[0]
    for n in sums[0]:
        torch.testing.assert_close(sums[0][n], sums[1][n], rtol=1e-4, atol=1e-7, msg=n)


@pytest.mark.parametrize("arch", ["llama", "gpt_neox"])
def test_continuation_loglik_fallback_equals_one_full_forward_per_continuation(arch):
    # Exposure's pass for models the tree pass does not implement: the prefix's cache repeated over a batch,
    # the head on the real continuation tokens only; against Σ log p from the model's own forward of each
    # prefix + continuation.
    from privleak.attacks.prefix_scoring import _batched_forward

    m = _model(arch)
    prefix, conts = [0, 5, 7, 9], [[3, 11], [3, 12, 14, 2], [40], [8, 8, 8]]
    with torch.inference_mode():
        fast = _batched_forward(m, prefix, conts, batch_size=3, pad_id=0, rows=2)
        want = []
        for c in conts:
            ids = torch.tensor([prefix + c])
            logp = torch.log_softmax(m(input_ids=ids).logits[0, :-1].float(), -1)
            want.append(float(logp[len(prefix) - 1 :].gather(-1, ids[0, len(prefix):, None]).sum()))
    np.testing.assert_allclose(fast, want, rtol=1e-5, atol=1e-5)
