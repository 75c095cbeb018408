"""Loading a causal LM + tokenizer into one handle the attacks can query."""

from __future__ import annotations

import copy
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from ..core.errors import UserError
from ..core.jsonlimits import JSONLimitError, loads
from .device import place


@dataclass
class ModelHandle:
    """A model ready for scoring and generation, plus what is needed to feed it."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    max_length: int
    name: str = ""
    # How texts are framed for this model (models.batching.TEXT_FORMATS): the format it was trained in.
    text_format: str = "privleak"
    _frame: tuple | None = field(default=None, repr=False, compare=False)

    def lead_ids(self) -> list[int]:
        """The tokens before every text (and every prompt) in this model's text format."""
        from .batching import frame

        key = (id(self.tokenizer), self.text_format)
        if self._frame is None or self._frame[0] != key:  # the tokenizer or the format may be swapped after loading
            self._frame = (key, list(frame(self.tokenizer, self.text_format).lead))
        return list(self._frame[1])

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
    if local.is_file():
        from .gguf import convert, is_gguf

        if is_gguf(local):  # converted once into the model cache; the directory is checked like any other
            return check_model_ref(str(convert(ref, "--model")[0]))
    if local.exists():
        if not local.is_dir():
            raise UserError(f"--model {ref}: is a file; pass the directory that holds config.json and the weights, "
                            "or a .gguf model file")
        if not (local / "config.json").exists():
            raise UserError(f"--model {ref}: no config.json in that directory; pass a directory saved with save_pretrained()")
        check_model_config(ref, local / "config.json")
        check_tokenizer_config(ref, local / TOKENIZER_CONFIG)
        _check_model_files(ref, local)
        return str(local)
    if not _is_hub_id(ref) or ref.startswith(("./", "../")):
        raise UserError(f"--model {ref}: path does not exist; pass a local model directory or a Hugging Face model id")
    cached = _cached_config(ref)
    if cached is not None:
        check_model_config(ref, Path(cached))
        tokenizer_cfg = _cached_config(ref, TOKENIZER_CONFIG)
        if tokenizer_cfg is not None:
            check_tokenizer_config(ref, Path(tokenizer_cfg))
    if cached is None and not _hub_reachable():
        # Fail in seconds, before any work, instead of after the hub client's retries.
        raise UserError(
            f"--model {ref}: no such local directory, not in the local Hugging Face cache, and the hub is unreachable; "
            "pass a local directory saved with save_pretrained(), or download the model on a connected machine first"
        )
    return ref


def _cached_config(ref: str, name: str = "config.json") -> str | None:
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(ref, name)
    return found if isinstance(found, str) else None


def _read_json_object(ref: str, path: Path) -> dict:
    """The JSON object in ``path`` (a model's config file), or one line naming the file and the fix."""
    try:
        cfg = loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # unreadable, undecodable, malformed or past the JSON limits
        reason = getattr(exc, "msg", None) or (str(exc) if isinstance(exc, JSONLimitError) else type(exc).__name__)
        raise UserError(f"--model {ref}: {path.name} is not readable JSON ({reason}); save the model again with "
                        "save_pretrained()") from None
    if not isinstance(cfg, dict):
        raise UserError(f"--model {ref}: {path.name} is not a JSON object; save the model again with save_pretrained()")
    return cfg


def _refuse_auto_map(ref: str, file: str, auto_map: object, what: str) -> None:
    classes = ", ".join(sorted(str(v) for v in _flat_values(auto_map) if v is not None))[:160]  # [slow, fast]
    raise UserError(
        f"--model {ref}: {file}'s auto_map points at code shipped with the model ({classes}); PrivLeak never "
        f"runs model code (trust_remote_code stays off) and will not audit the built-in {what} in its place; use a "
        f"model of a built-in transformers architecture, or delete auto_map from {file} if the {what} is an "
        "unchanged built-in one"
    )


#: The tokenizer's own config: AutoTokenizer reads its auto_map (and tokenizer_class) as config.json's.
TOKENIZER_CONFIG = "tokenizer_config.json"


def check_tokenizer_config(ref: str, path: Path) -> None:
    """Refuse a tokenizer whose class lives in code shipped with the model (``auto_map`` in
    tokenizer_config.json): with ``trust_remote_code`` off transformers would load a built-in tokenizer in its
    place, and the audit would score different token ids than the model's users see."""
    if not path.is_file():
        return
    cfg = _read_json_object(ref, path)
    if cfg.get("auto_map"):
        _refuse_auto_map(ref, path.name, cfg["auto_map"], "tokenizer")


def check_model_config(ref: str, config_path: Path) -> None:
    """Refuse, before any work, a model PrivLeak would not audit as named.

    * ``auto_map`` in config.json: the model's classes live in code shipped
      with it (the tokenizer's: :func:`check_tokenizer_config`). With
      ``trust_remote_code`` off (always) transformers would either refuse or
      silently fall back to the built-in class of the same ``model_type`` —
      an audit of a different model than the user named.
    * a ``model_type`` transformers does not know: only the model's own code
      could load it.
    * an architecture that is not a causal (decoder) language model.
    """
    cfg = _read_json_object(ref, config_path)
    if cfg.get("auto_map"):
        _refuse_auto_map(ref, "config.json", cfg["auto_map"], "model class")
    from transformers import __version__ as tf_version
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    model_type = cfg.get("model_type")
    if not model_type:
        raise UserError(f"--model {ref}: config.json has no model_type; save the model with save_pretrained() from "
                        "a transformers model class")
    if model_type not in CONFIG_MAPPING_NAMES:
        raise UserError(
            f"--model {ref}: model_type '{model_type}' is not an architecture transformers {tf_version} ships, so only "
            "the model's own code could load it and PrivLeak never runs model code; use a model of a built-in "
            "architecture (or upgrade transformers if it is a newer built-in one)"
        )
    if model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise UserError(f"--model {ref}: a '{model_type}' model is not a causal (decoder) language model; pass a "
                        "causal LM such as GPT-2, Llama, Mistral or Qwen")


_PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "vocab.txt", "tokenizer.model",
                    "spiece.model")


def _check_model_files(ref: str, local: Path) -> None:
    """Safetensors weights and a tokenizer must be there (what load_handle loads)."""
    names = [p.name for p in local.iterdir() if p.is_file()]
    if not any(n.endswith(".safetensors") or n == "model.safetensors.index.json" for n in names):
        pickled = sorted(n for n in names if n.endswith(_PICKLE_SUFFIXES) or n.endswith(".bin.index.json"))
        if pickled:
            out = f"{str(local).rstrip('/')}-safetensors"
            raise UserError(
                f"--model {ref}: the weights are pickle files only ({', '.join(pickled[:3])}); PrivLeak loads "
                "safetensors only, because unpickling runs arbitrary code; on a machine where you trust the files, "
                "convert them: python -c \"from transformers import AutoModelForCausalLM as M, AutoTokenizer as T; "
                f"M.from_pretrained('{local}').save_pretrained('{out}', safe_serialization=True); "
                f"T.from_pretrained('{local}').save_pretrained('{out}')\" and pass --model {out}"
            )
        raise UserError(f"--model {ref}: no weights (*.safetensors) in that directory; save the model there with "
                        "save_pretrained(safe_serialization=True)")
    if not any(n in _TOKENIZER_FILES for n in names):
        raise UserError(f"--model {ref}: no tokenizer files (tokenizer.json, vocab.json, …) in that directory; save "
                        "the tokenizer there too with tokenizer.save_pretrained()")


def _flat_values(obj) -> list:
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in _flat_values(v)]
    if isinstance(obj, (list, tuple)):
        return [x for v in obj for x in _flat_values(v)]
    return [obj]


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
    place(model)  # onto the run's device (models.device); a no-op on the CPU
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
