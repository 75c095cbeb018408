"""DP-LoRA arms for GPT-2, GPT-NeoX (Pythia), Llama, Mistral and Qwen2 (issue 14).

Each architecture is a tiny random-initialised config built here (nothing is
downloaded); each goes through the pipeline's DP-LoRA arm trainer (the
settings a ``dp-8+lora`` arm gets) and the accountant.
"""

from __future__ import annotations

import pytest
import torch
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    GPTNeoXConfig,
    GPTNeoXForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from privleak.arms import parse_arm
from privleak.config import build_config
from privleak.core.errors import UserError
from privleak.models.batching import Encoded
from privleak.models.lora import add_lora, lora_targets_for
from privleak.arms import FitContext
from privleak.arms.dp import DP_KIND
from privleak.pipeline.training import arm_settings


def fit_dp(model, data, settings, cfg, label):
    """The DP kind's fit on ``data`` (no public or population split: DP-LoRA reads neither)."""
    from privleak.attacks.inputs import PUBLIC
    from privleak.core.inputs import FakeInputs

    ctx = FitContext(cfg=cfg, label=label, inputs=FakeInputs({PUBLIC: []}).view(), data=data, records=[], pad=0)
    return DP_KIND.fit(model, settings, ctx)

V, D, L, H = 64, 32, 2, 4
_LLAMA = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

ARCHS = {
    "gpt2": (lambda: GPT2LMHeadModel(GPT2Config(vocab_size=V, n_positions=64, n_embd=D, n_layer=L, n_head=H,
                                                 resid_pdrop=0, embd_pdrop=0, attn_pdrop=0)),
             ("c_attn", "c_proj", "c_fc")),
    "gpt_neox": (lambda: GPTNeoXForCausalLM(GPTNeoXConfig(vocab_size=V, hidden_size=D, num_hidden_layers=L,
                                                          num_attention_heads=H, intermediate_size=2 * D,
                                                          max_position_embeddings=64, hidden_dropout=0.0,
                                                          attention_dropout=0.0)),
                 ("query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h")),
    "llama": (lambda: LlamaForCausalLM(LlamaConfig(vocab_size=V, hidden_size=D, num_hidden_layers=L,
                                                   num_attention_heads=H, num_key_value_heads=2,
                                                   intermediate_size=2 * D, max_position_embeddings=64)), _LLAMA),
    "mistral": (lambda: MistralForCausalLM(MistralConfig(vocab_size=V, hidden_size=D, num_hidden_layers=L,
                                                         num_attention_heads=H, num_key_value_heads=2,
                                                         intermediate_size=2 * D, max_position_embeddings=64,
                                                         sliding_window=32)), _LLAMA),
    "qwen2": (lambda: Qwen2ForCausalLM(Qwen2Config(vocab_size=V, hidden_size=D, num_hidden_layers=L,
                                                   num_attention_heads=H, num_key_value_heads=2,
                                                   intermediate_size=2 * D, max_position_embeddings=64)), _LLAMA),
}


def _model(arch: str):
    torch.manual_seed(0)
    return ARCHS[arch][0]().eval()


def _data(n: int = 60) -> Encoded:
    g = torch.Generator().manual_seed(1)
    return Encoded([[0] + torch.randint(1, V, (int(torch.randint(4, 20, (1,), generator=g)),), generator=g).tolist() + [0]
                    for _ in range(n)])


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_lora_targets_are_found_per_architecture(arch):
    model = _model(arch)
    assert model.config.model_type == arch
    assert lora_targets_for(model) == ARCHS[arch][1]
    peft_model = add_lora(model, rank=2, alpha=4.0)
    trainable = [n for n, p in peft_model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_A" in n or "lora_B" in n for n in trainable)
    for target in ARCHS[arch][1]:  # every projection kind got adapters in every layer
        assert sum(f".{target}.lora_A" in n for n in trainable) >= L, target  # GPT-2: c_proj in attn and mlp


def test_named_targets_missing_from_the_model_are_a_user_error():
    with pytest.raises(UserError, match="no module named c_attn"):
        lora_targets_for(_model("llama"), ("c_attn", "q_proj"))
    assert lora_targets_for(_model("llama"), ("q_proj", "v_proj")) == ("q_proj", "v_proj")


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_dp_lora_arm_trains_and_is_accounted(arch):
    cfg = build_config({"arms": ["baseline", "dp-8+lora"], "dp": {"epochs": 2, "batch_size": 12, "lora_rank": 4},
                        "seed": 3, "model": {"max_length": 32}}, {"device": "cpu"})
    data = _data()
    settings = arm_settings(cfg, parse_arm("dp-8+lora"), len(data))
    assert settings.lora and settings.lora_targets == "auto" and settings.clipping == "bk"
    model = _model(arch)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    trained, record = fit_dp(model, data, settings, cfg, label=f"{arch} dp-8+lora")
    assert type(trained) is type(_model(arch)), "adapters are merged back into a plain transformers model"
    privacy = record["privacy"]
    assert record["steps"] == privacy["steps"] > 0
    assert 0 < privacy["epsilon"] <= 8.0 * (1 + 1e-6)
    assert privacy["epsilon_pld"] <= 8.0 * 1.01 and privacy["epsilon_rdp"] >= privacy["epsilon_pld"] * 0.99
    after = dict(trained.named_parameters())
    changed = {n for n in before if not torch.equal(before[n], after[n].detach())}
    targets = ARCHS[arch][1]
    assert changed and all(n.rsplit(".", 2)[-2] in targets for n in changed), sorted(changed)[:5]
    emb = trained.get_input_embeddings().weight
    assert torch.equal(emb.detach(), before[next(n for n in before if n.endswith(
        {"gpt2": "wte.weight", "gpt_neox": "embed_in.weight"}.get(arch, "embed_tokens.weight")))])


@pytest.mark.parametrize("mode", ["hooks", "ghost"])
def test_dp_lora_llama_with_opacus_clipping_modes(mode):
    cfg = build_config({"arms": ["baseline", "dp-8+lora"], "dp": {"epochs": 1, "batch_size": 12, "lora_rank": 2,
                                                                   "clipping": mode},
                        "seed": 3, "model": {"max_length": 32}}, {"device": "cpu"})
    data = _data(36)
    settings = arm_settings(cfg, parse_arm("dp-8+lora"), len(data))
    trained, record = fit_dp(_model("llama"), data, settings, cfg, label="llama")
    assert isinstance(trained, LlamaForCausalLM) and 0 < record["privacy"]["epsilon"] <= 8.0 * (1 + 1e-6)


def test_qlora_needs_cuda():
    from privleak.models.dp_train import DPSettings, train_dp

    settings = DPSettings(target_epsilon=8.0, delta=1e-3, max_grad_norm=1.0, epochs=1, expected_batch_size=12,
                          lr=1e-2, lora_rank=2, qlora=True)
    with pytest.raises(UserError, match="CUDA only"):
        train_dp(_model("llama"), _data(24), settings, pad_id=0, max_length=32)
    with pytest.raises(UserError, match="applies to the \\+lora arms"):
        train_dp(_model("llama"), _data(24), DPSettings(**{**settings.__dict__, "lora_rank": None}), 0, 32)
