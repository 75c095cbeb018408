"""DP-LoRA: adapters trained with DP-SGD, merged back into a plain model."""

import pytest
import torch
from opacus import GradSampleModule
from opacus.grad_sample import GradSampleModuleFastGradientClipping
from transformers import GPT2LMHeadModel

from privleak.core.errors import UserError
from privleak.models import ghost_norms  # noqa: F401  (registers the Conv1D norm sampler)
from privleak.models.base import BaseModelSpec, build_model
from privleak.models.batching import (
    encode,
    pad_batch,
    per_sequence_nll,
    position_ids_for,
)
from privleak.models.book_keeping import BookKeeping
from privleak.models.dp_train import DPSettings, train_dp
from privleak.models.handle import ModelHandle, clone_model, load_handle, save_handle
from privleak.models.lora import add_lora, merge_lora

SEQS = [[0, 5, 7, 9, 3, 0], [0, 4, 4, 0], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0]]


def _lora_tiny():
    model = build_model(BaseModelSpec(vocab_size=50, n_layer=2, n_embd=16, n_head=2, max_length=16), eos_id=0)
    peft_model = add_lora(model, rank=2, alpha=4.0)
    torch.manual_seed(1)
    for name, p in peft_model.named_parameters():
        if "lora_B" in name:  # B starts at zero; make A's per-sample gradients non-zero too
            p.data.normal_(0, 0.1)
    return peft_model


def _batch():
    ids, mask = pad_batch(SEQS, 0)
    return ids, mask, position_ids_for(mask)


def test_only_adapters_train():
    model = _lora_tiny()
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_A" in n or "lora_B" in n for n in trainable)
    assert sum("c_attn" in n for n in trainable) == 2 * 2  # A and B in each of 2 layers


def test_lora_per_sample_norms_ghost_and_book_keeping_equal_hooks():
    model = _lora_tiny().train()
    ids, mask, pos = _batch()
    gsm = GradSampleModule(model, loss_reduction="mean")
    per_sequence_nll(gsm(input_ids=ids, attention_mask=mask, position_ids=pos).logits, ids, mask).mean().backward()
    params = [p for p in model.parameters() if p.requires_grad]
    reference = torch.cat([p.grad_sample.reshape(len(SEQS), -1) for p in params], 1).norm(2, dim=1)
    gsm._close()
    model.zero_grad(set_to_none=True)
    ghost = GradSampleModuleFastGradientClipping(model, loss_reduction="mean", max_grad_norm=1.0)
    per_sequence_nll(ghost(input_ids=ids, attention_mask=mask, position_ids=pos).logits, ids, mask).mean().backward()
    torch.testing.assert_close(ghost.get_norm_sample(), reference, rtol=1e-5, atol=1e-6)
    ghost._close()
    model.zero_grad(set_to_none=True)
    bk = BookKeeping(model, max_grad_norm=1.0)
    with bk.capture():
        per_sequence_nll(model(input_ids=ids, attention_mask=mask, position_ids=pos).logits, ids, mask).sum().backward()
    torch.testing.assert_close(bk.write_clipped_sum(), reference, rtol=1e-5, atol=1e-6)
    bk.remove()


def test_merged_model_computes_what_the_adapted_model_computes():
    model = _lora_tiny().eval()
    ids, mask, pos = _batch()
    with torch.no_grad():
        adapted = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits
        merged = merge_lora(model)
        plain = merged(input_ids=ids, attention_mask=mask, position_ids=pos).logits
    assert type(merged) is GPT2LMHeadModel
    assert not any("lora" in n for n, _ in merged.named_parameters())
    torch.testing.assert_close(plain, adapted, atol=1e-5, rtol=1e-5)


def test_dp_lora_run_returns_a_plain_model_that_saves_and_loads(tiny_handle, tmp_path):
    texts = [f"record {i} of the ward, value {i * 7 % 13}" for i in range(36)]
    data = encode(tiny_handle.tokenizer, texts, tiny_handle.max_length)
    settings = DPSettings(target_epsilon=4.0, delta=1e-3, max_grad_norm=1.0, epochs=1, expected_batch_size=6,
                          lr=1e-2, accountant="rdp", lora_rank=2)
    model, log = train_dp(clone_model(tiny_handle.model), data, settings, tiny_handle.pad_id, tiny_handle.max_length)
    assert type(model) is GPT2LMHeadModel and log.steps == 6 and log.epsilon <= 4.0
    base = tiny_handle.model.state_dict()
    for name, value in model.state_dict().items():
        targeted = any(t in name for t in ("c_attn.weight", "c_proj.weight", "c_fc.weight"))
        assert torch.equal(value, base[name]) != targeted, name  # only the adapted weights moved
    save_handle(ModelHandle(model, tiny_handle.tokenizer, tiny_handle.max_length), tmp_path)
    loaded = load_handle(tmp_path).model
    for (name, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a, b), name


def test_lora_with_trained_embeddings_is_refused(tiny_handle):
    data = encode(tiny_handle.tokenizer, ["a b c"] * 4, tiny_handle.max_length)
    settings = DPSettings(target_epsilon=4.0, delta=1e-3, max_grad_norm=1.0, epochs=1, expected_batch_size=2,
                          lr=1e-3, accountant="rdp", lora_rank=2, train_embeddings=True)
    with pytest.raises(UserError, match="lora_rank"):
        train_dp(clone_model(tiny_handle.model), data, settings, tiny_handle.pad_id, tiny_handle.max_length)
