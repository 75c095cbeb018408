"""DP-LoRA on a bf16 frozen base (``dp.lora_base: bf16``), checked numerically against the fp32 base.

The base's matrix products run in bf16 (8 mantissa bits: ~0.4 % relative error per product), the adapters, their
per-sample gradients, the clipping and the noise in fp32, and the adapters are merged into the fp32 base. Same
seed, same data, same noise draws: the two runs must train the same adapters up to bf16's rounding of the
activations — losses within 2 %, merged weight updates pointing the same way — and the merged model must be
fp32, with every weight outside the adapted projections exactly the base's.
"""

from __future__ import annotations

import copy

import pytest
import torch

from privleak.models.batching import Encoded
from privleak.models.device import native_bf16
from privleak.models.dp_train import DPSettings, train_dp


def _tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                        bos_token_id=0, eos_token_id=0, pad_token_id=0)).eval()


def _data(n: int = 32) -> Encoded:
    g = torch.Generator().manual_seed(1)
    return Encoded([[0] + torch.randint(1, 96, (int(torch.randint(8, 24, (1,), generator=g)),), generator=g).tolist()
                    + [0] for _ in range(n)], lead=1)


def _train(base, bf16: bool):
    s = DPSettings(target_epsilon=8.0, delta=1e-4, max_grad_norm=1.0, epochs=3, expected_batch_size=16, lr=5e-3,
                   seed=0, lora_rank=4, lora_alpha=8.0, lora_base_bf16=bf16)
    return train_dp(copy.deepcopy(base), _data(), s, pad_id=0, max_length=32, desc="t")


def test_bf16_base_trains_the_adapters_fp32_does():
    base = _tiny_llama()
    m32, log32 = _train(base, False)
    m16, log16 = _train(base, True)
    assert log16.sigma == log32.sigma and log16.steps == log32.steps
    assert log16.losses == pytest.approx(log32.losses, rel=0.02)
    assert all(p.dtype == torch.float32 for p in m16.parameters())  # merged into the fp32 base
    b = dict(base.named_parameters())
    d32 = {n: p.detach() - b[n].detach() for n, p in m32.named_parameters()}
    d16 = {n: p.detach() - b[n].detach() for n, p in m16.named_parameters()}
    adapted = [n for n in d32 if d32[n].abs().max() > 0]
    assert adapted and all(n.endswith("proj.weight") for n in adapted)
    for n in d16:
        if n not in adapted:
            assert torch.equal(d16[n], torch.zeros_like(d16[n])), n  # untouched weights are the fp32 base's
    u32 = torch.cat([d32[n].flatten() for n in adapted])
    u16 = torch.cat([d16[n].flatten() for n in adapted])
    assert torch.nn.functional.cosine_similarity(u32, u16, dim=0) > 0.95
    assert (u16 - u32).norm() < 0.2 * u32.norm()


def test_auto_is_bf16_only_where_the_hardware_has_it():
    from privleak.arms.dp import lora_base_bf16
    from privleak.models.device import make_policy, use_policy

    with use_policy(make_policy("cpu")):
        assert lora_base_bf16("auto") == native_bf16(torch.device("cpu"))
        assert lora_base_bf16("bf16") and not lora_base_bf16("fp32")
