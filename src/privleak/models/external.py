"""A model the user already trained: a local directory, a hub id in the local cache, or a PEFT adapter.

``privleak attack`` audits such a model; a ``.gguf`` file (or a package
file carrying one) is converted once into the model cache
(:mod:`privleak.models.gguf`) and audited as that directory. Nothing is downloaded: a hub id is
resolved to its snapshot in the local Hugging Face cache
(``local_files_only``) or refused in one line. The same refusals as
``--model`` apply (no ``auto_map`` model code, no pickled weights, causal LMs
only); an adapter directory (``adapter_config.json``) needs the model it was
trained on (``--base``), and its weights must be safetensors too.

An adapter is merged into its base after loading (``merge_and_unload``):
the merged model computes the same function as base + adapter, and the
attacks then see one plain causal LM.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import UserError
from ..core.jsonlimits import loads
from .gguf import convert, converted_info, is_gguf
from .smollm2 import NAME as SMOLLM2
from .smollm2 import locate as locate_smollm2
from .handle import (TOKENIZER_CONFIG, ModelHandle, _is_hub_id, check_model_ref, check_tokenizer_config,
                     load_handle)

ADAPTER_CONFIG = "adapter_config.json"
_ADAPTER_WEIGHTS = ("adapter_model.safetensors",)
_ADAPTER_PICKLES = ("adapter_model.bin", "adapter_model.pt")


@dataclass(frozen=True)
class ModelRef:
    """A checked reference: what the user named (``ref``) and the local directory to load (``path``)."""

    ref: str
    path: str
    adapter: bool = False
    base: "ModelRef | None" = None  # the adapter's base model

    def describe(self) -> dict[str, Any]:
        return {"ref": self.ref, "path": self.path, "adapter": self.adapter,
                "base": self.base.ref if self.base else None, "base_path": self.base.path if self.base else None,
                "gguf": self.gguf()}

    def gguf(self) -> dict[str, Any] | None:
        """The GGUF file this model was converted from (models.gguf), for the results; None for a directory."""
        return converted_info(self.path)


def _reword(exc: UserError, option: str) -> UserError:
    """``check_model_ref`` names ``--model``; say the option the user actually gave."""
    msg = str(exc)
    return UserError(option + msg[len("--model"):] if msg.startswith("--model") else msg)


def hub_cache_snapshot(ref: str) -> str | None:
    """The local snapshot directory of hub id ``ref`` in the Hugging Face cache, or None (never downloads)."""
    from huggingface_hub import snapshot_download

    cache_dir = os.environ.get("HF_HUB_CACHE") or None  # read now: the test suite points it at a temporary cache
    try:
        return snapshot_download(ref, local_files_only=True, cache_dir=cache_dir)
    except Exception:  # noqa: BLE001 - every failure of a cache-only lookup means "not cached"
        return None


def resolve_dir(ref: str, option: str) -> str:
    """A local directory for ``ref``: the path itself, or the cached snapshot of a hub id."""
    local = Path(ref).expanduser()
    if ref == SMOLLM2 and not local.exists():  # a model PrivLeak knows by name: its package file (models.smollm2)
        return str(convert(locate_smollm2(), option)[0])
    if local.exists():
        if local.is_file() and is_gguf(local):
            return str(convert(ref, option)[0])  # once, into the model cache (models.gguf)
        if not local.is_dir():
            raise UserError(f"{option} {ref}: is a file; pass the directory saved with save_pretrained(), or a .gguf "
                            "model file")
        return str(local)
    if not _is_hub_id(ref) or ref.startswith(("./", "../")):
        raise UserError(f"{option} {ref}: path does not exist; pass a local model directory or a Hugging Face model id "
                        "that is in the local cache")
    snap = hub_cache_snapshot(ref)
    if snap is None:
        raise UserError(f"{option} {ref}: no such directory, and not in the local Hugging Face cache; PrivLeak downloads "
                        f"nothing — on a connected machine run `huggingface-cli download {ref}` (or save the model with "
                        "save_pretrained) and pass that")
    return snap


def check_full_model(ref: str, option: str) -> ModelRef:
    """A full causal LM (config.json, safetensors, tokenizer; no auto_map) at ``ref``."""
    path = resolve_dir(ref, option)
    if (Path(path) / ADAPTER_CONFIG).exists() and not (Path(path) / "config.json").exists():
        raise UserError(f"{option} {ref}: is a PEFT adapter (adapter_config.json), not a full model; pass the model it "
                        "was trained on, or merge the adapter first (merge_and_unload)")
    try:
        check_model_ref(path)
    except UserError as exc:
        raise _reword(exc, option) from None
    return ModelRef(ref=ref, path=path)


def check_target(ref: str, base: str | None, option: str = "--target", base_option: str = "--base") -> ModelRef:
    """``--target`` (a full model, or a PEFT adapter directory on ``--base``), checked before any work."""
    path = resolve_dir(ref, option)
    adapter_cfg = Path(path) / ADAPTER_CONFIG
    if not adapter_cfg.exists():
        if base is not None:
            raise UserError(f"{base_option} {base}: only a PEFT adapter target needs a base model, and {option} {ref} is "
                            f"a full model (no {ADAPTER_CONFIG}); drop {base_option}")
        return check_full_model(ref, option)
    if base is None:
        named = _adapter_base_name(adapter_cfg)
        hint = f" (its adapter_config.json names '{named}')" if named else ""
        raise UserError(f"{option} {ref}: is a PEFT adapter ({ADAPTER_CONFIG}); give the model it was trained on with "
                        f"{base_option} DIR|hub-id{hint}")
    try:
        cfg = loads(adapter_cfg.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # unreadable, undecodable, malformed or past the JSON limits
        raise UserError(f"{option} {ref}: {ADAPTER_CONFIG} is not readable JSON ({type(exc).__name__}); save the "
                        "adapter again with save_pretrained()") from None
    if not isinstance(cfg, dict) or not cfg.get("peft_type"):
        raise UserError(f"{option} {ref}: {ADAPTER_CONFIG} has no peft_type; save the adapter with PEFT's "
                        "save_pretrained()")
    if cfg.get("auto_mapping"):
        raise UserError(f"{option} {ref}: {ADAPTER_CONFIG} points at custom model code (auto_mapping); PrivLeak never "
                        "runs model code")
    try:  # load_model takes the adapter's own tokenizer when it has one
        check_tokenizer_config(ref, Path(path) / TOKENIZER_CONFIG)
    except UserError as exc:
        raise _reword(exc, option) from None
    names = {p.name for p in Path(path).iterdir() if p.is_file()}
    if not names & set(_ADAPTER_WEIGHTS):
        pickled = sorted(names & set(_ADAPTER_PICKLES))
        if pickled:
            raise UserError(f"{option} {ref}: the adapter weights are a pickle file ({pickled[0]}); PrivLeak loads "
                            "safetensors only, because unpickling runs arbitrary code; save the adapter again with "
                            "save_pretrained(safe_serialization=True)")
        raise UserError(f"{option} {ref}: no adapter_model.safetensors in that directory; save the adapter with "
                        "save_pretrained()")
    return ModelRef(ref=ref, path=path, adapter=True, base=check_full_model(base, base_option))


def _adapter_base_name(adapter_cfg: Path) -> str | None:
    try:
        cfg = loads(adapter_cfg.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    name = cfg.get("base_model_name_or_path") if isinstance(cfg, dict) else None
    return str(name) if name else None


def load_model(path: str, max_length: int | None = None, adapter_base: str | None = None) -> ModelHandle:
    """A handle on the checked directory ``path``; with ``adapter_base``, ``path`` is a PEFT adapter merged into it."""
    if adapter_base is None:
        return load_handle(path, max_length)
    handle = load_handle(adapter_base, max_length)
    from peft import PeftModel

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PEFT's notes on Conv1D fan_in_fan_out and the like
            peft_model = PeftModel.from_pretrained(handle.model, path, is_trainable=False)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise UserError(f"--target {path}: the adapter does not load onto --base {adapter_base} ({first}); pass the "
                        "base model the adapter was trained on") from None
    handle.model = peft_model.merge_and_unload()
    handle.model.eval()
    if any((Path(path) / f).exists() for f in ("tokenizer.json", "tokenizer_config.json")):
        from transformers import AutoTokenizer

        handle.tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
    handle.name = path
    return handle
