"""Loading a causal LM + tokenizer into one handle the attacks can query."""

from __future__ import annotations

import copy
import os
import re
from dataclasses import dataclass
from pathlib import Path

from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from ..core.errors import UserError


@dataclass
class ModelHandle:
    """A model ready for scoring and generation, plus what is needed to feed it."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    max_length: int
    name: str = ""

    @property
    def pad_id(self) -> int:
        tok = self.tokenizer
        for cand in (tok.pad_token_id, tok.eos_token_id, tok.bos_token_id, 0):
            if cand is not None:
                return int(cand)
        return 0


_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")


def _is_hub_id(ref: str) -> bool:
    return bool(_HUB_ID.match(ref))


def check_model_ref(ref: str) -> str:
    """Validate ``--model`` before any work starts; returns what to load from.

    A reference that exists on disk must be a saved model directory; one that
    does not exist must look like a hub id (``org/name``), otherwise it is a
    mistyped path and we say so instead of asking the hub.
    """
    local = Path(ref).expanduser()
    if local.exists():
        if not local.is_dir():
            raise UserError(f"--model {ref}: is a file; pass the directory that holds config.json and the weights")
        if not (local / "config.json").exists():
            raise UserError(f"--model {ref}: no config.json in that directory; pass a directory saved with save_pretrained()")
        return str(local)
    if not _is_hub_id(ref) or ref.startswith(("./", "../")):
        raise UserError(f"--model {ref}: path does not exist; pass a local model directory or a Hugging Face model id")
    if not _in_hub_cache(ref) and not _hub_reachable():
        # Fail in seconds, before any work, instead of after the hub client's retries.
        raise UserError(
            f"--model {ref}: no such local directory, not in the local Hugging Face cache, and the hub is unreachable; "
            "pass a local directory saved with save_pretrained(), or download the model on a connected machine first"
        )
    return ref


def _in_hub_cache(ref: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(ref, "config.json"), str)


def _hub_reachable(timeout: float = 3.0) -> bool:
    import socket
    from urllib.parse import urlparse

    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return False
    url = urlparse(constants.ENDPOINT)
    try:
        socket.create_connection((url.hostname, url.port or 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def load_handle(ref: str | os.PathLike[str], max_length: int | None = None) -> ModelHandle:
    """Load a Hugging Face causal LM from a local directory or a hub id.

    Weights load through safetensors only and ``trust_remote_code`` stays off:
    an audit must never execute code or unpickle files that came with a model.
    """
    ref = str(ref)
    source = check_model_ref(ref)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=False)
        model = AutoModelForCausalLM.from_pretrained(source, trust_remote_code=False, use_safetensors=True)
    except (OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(
            f"--model {ref}: could not load a causal LM with safetensors weights ({first}); "
            "pass a local directory saved with save_pretrained(safe_serialization=True)"
        ) from None
    model.eval()
    ctx = getattr(model.config, "n_positions", None) or getattr(model.config, "max_position_embeddings", None) or 1024
    length = min(int(max_length or ctx), int(ctx))
    return ModelHandle(model=model, tokenizer=tokenizer, max_length=length, name=ref)


def save_handle(handle: ModelHandle, out_dir: str | os.PathLike[str]) -> None:
    """Save model + tokenizer in Hugging Face format (safetensors)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    handle.model.save_pretrained(out, safe_serialization=True)
    handle.tokenizer.save_pretrained(out)


def clone_model(model: PreTrainedModel) -> PreTrainedModel:
    """A fresh copy to fine-tune, leaving the base model untouched (ties preserved)."""
    return copy.deepcopy(model)
