"""Shared fixtures: a private model cache and a tiny saved model.

Tests never download anything: every model they use is built here from a
config and saved to a local directory.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("PRIVLEAK_PROGRESS", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    os.environ["PRIVLEAK_CACHE"] = str(tmp_path_factory.mktemp("privleak-cache"))


TINY_TEXTS = [
    f"Patient {first} {last} was seen on day {d} for {cond}; phone 555-01{d:02d}."
    for d, (first, last, cond) in enumerate(
        [("Ann", "Lee", "asthma"), ("Bo", "Kim", "gout"), ("Cy", "Ray", "flu"), ("Di", "Fox", "acne")] * 10
    )
] + ["General advice: drink water and sleep well."] * 5


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny GPT-2 (2 layers, 32 dims) + BPE tokenizer saved with save_pretrained."""
    from privleak.models.base import BaseModelSpec, pretrain_base
    from privleak.models.handle import save_handle

    spec = BaseModelSpec(vocab_size=320, n_layer=2, n_embd=32, n_head=2, max_length=96, epochs=2, batch_size=8, lr=3e-3)
    handle = pretrain_base(spec, TINY_TEXTS)
    out = tmp_path_factory.mktemp("tiny-model")
    save_handle(handle, out)
    return out


@pytest.fixture(scope="session")
def tiny_handle(tiny_model_dir: Path):
    from privleak.models.handle import load_handle

    return load_handle(tiny_model_dir)
