"""The embedded default base model: built from a config, pre-trained on public text.

With no model hub reachable, the audit makes its own starting point: a small
GPT-2-architecture model whose tokenizer and weights have seen only the
``public`` split (generic medical text plus notes about people who appear in
no other split). Pre-training on same-format public text is what lets DP
fine-tuning keep its utility: the private data only has to teach what is
private. The result is cached by a hash of everything that determines it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from transformers import GPT2Config, GPT2LMHeadModel
from transformers.utils import logging as hf_logging

from ..core.cache import cache_root
from ..core.io import staging_dir
from .batching import encode
from .device import place
from .handle import ModelHandle, load_handle, save_handle
from .tokenizer import train_tokenizer
from .train import TrainSettings, train


@dataclass(frozen=True)
class BaseModelSpec:
    vocab_size: int = 2048
    n_layer: int = 2
    n_embd: int = 128
    n_head: int = 4
    max_length: int = 160
    epochs: float = 6.0
    batch_size: int = 32
    lr: float = 2e-3
    seed: int = 0
    # The training loop's forward precision (models.device.ComputePolicy.train_precision): bf16 changes the
    # trained weights, so it is part of the cache key; fp32 keys are what they always were.
    precision: str = "fp32"


def spec_key(spec: BaseModelSpec, public_texts: list[str]) -> str:
    fields = asdict(spec)
    if fields["precision"] == "fp32":
        del fields["precision"]
    h = hashlib.sha256(json.dumps(fields, sort_keys=True).encode())
    for t in public_texts:
        h.update(t.encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def build_model(spec: BaseModelSpec, eos_id: int) -> GPT2LMHeadModel:
    """A randomly initialised GPT-2 from a config (dropout off: nothing to regularise
    in pre-training on synthetic text, and it keeps runs reproducible)."""
    torch.manual_seed(spec.seed)
    config = GPT2Config(
        vocab_size=spec.vocab_size,
        n_positions=spec.max_length,
        n_embd=spec.n_embd,
        n_layer=spec.n_layer,
        n_head=spec.n_head,
        activation_function="gelu",
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=eos_id,
        eos_token_id=eos_id,
        pad_token_id=eos_id,
    )
    return GPT2LMHeadModel(config)


def pretrain_base(spec: BaseModelSpec, public_texts: list[str]) -> ModelHandle:
    """Train the tokenizer and the model on public text (uncached)."""
    hf_logging.set_verbosity_error()
    tokenizer = train_tokenizer(public_texts, spec.vocab_size)
    tokenizer.model_max_length = spec.max_length
    model = place(build_model(spec, tokenizer.eos_token_id))
    data = encode(tokenizer, public_texts, spec.max_length)
    settings = TrainSettings(epochs=spec.epochs, batch_size=spec.batch_size, lr=spec.lr, seed=spec.seed)
    train(model, data, settings, pad_id=tokenizer.pad_token_id, desc="pre-train base model")
    return ModelHandle(model=model, tokenizer=tokenizer, max_length=spec.max_length, name="privleak-base")


def default_base_model(spec: BaseModelSpec, public_texts: list[str]) -> tuple[ModelHandle, Path]:
    """The cached base model for (spec, public corpus), pre-training it on a miss.

    The cache entry is written to a temporary directory and renamed, so a
    crash mid-save never leaves a half-written model that a later run loads.
    """
    target = cache_root() / "base" / spec_key(spec, public_texts)
    if not (target / "config.json").exists():
        handle = pretrain_base(spec, public_texts)
        with staging_dir(target) as tmp:
            save_handle(handle, tmp)
    return load_handle(target, spec.max_length), target
