"""In-memory inputs of a library call, written to files the pipeline reads exactly as it reads the user's own.

``privleak.attack`` takes models as objects (a ``transformers`` model and its tokenizer, a PEFT model, an Opacus
``GradSampleModule`` around one) and records as lists (texts, dicts with a text field, PrivLeak ``Record`` s, a
``datasets.Dataset``). The pipeline's stages run in other processes too and read the run directory only, and
``privleak attack`` must attack a model given as an object exactly as one given as a directory; so each object is
written the way a user would write it — ``save_pretrained`` (safetensors), one JSON record per line — and then
goes through the same checks and readers as the command line's files (:mod:`privleak.models.external`,
:mod:`privleak.pipeline.attack_inputs`): record *n* of a list is line *n* of its file in any message.

Everything is first written to a private temporary directory and checked there, so an input that is refused
leaves no run directory behind; only then is it moved into ``<run>/inputs/``. A model's directory is named by
the hash of its files (``target-<sha256[:16]>``): a rerun with the same weights finds it in place, untouched, and
the stage cache (keyed by the files' names, sizes and times) resumes; other weights are another directory.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import UserError

#: The run directory's folder for inputs given as objects.
INPUTS = "inputs"


def is_path(value: Any) -> bool:
    return isinstance(value, (str, os.PathLike))


def unwrap(model: Any) -> Any:
    """The model inside the wrappers a training loop puts around it: Opacus's ``GradSampleModule`` (``_module``),
    torch's ``DataParallel`` / ``DistributedDataParallel`` (``module``)."""
    for _ in range(8):
        if type(model).__module__.startswith("opacus") and hasattr(model, "_module"):
            model = model._module
        elif type(model).__name__ in ("DataParallel", "DistributedDataParallel") and hasattr(model, "module"):
            model = model.module
        else:
            break
    return model


def is_peft(model: Any) -> bool:
    return hasattr(model, "peft_config") and hasattr(model, "get_base_model")


def describe(model: Any) -> str:
    """How an in-memory model is named in the results (what a directory's path is for a saved one)."""
    name = type(model).__name__
    if is_peft(model):
        base = type(model.get_base_model()).__name__
        kinds = sorted({str(getattr(c, "peft_type", "")).split(".")[-1] for c in model.peft_config.values()})
        return f"<in-memory {name} ({', '.join(k for k in kinds if k) or 'adapter'}) on {base}>"
    return f"<in-memory {name}>"


def _files_hash(path: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(path)).encode())
        h.update(b"\0")
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        h.update(b"\0")
    return h.hexdigest()[:16]


@dataclass
class Staging:
    """A temporary directory where the objects of one call are written before any of them is checked."""

    root: Path | None = None
    #: staged path → the name it takes under ``<run>/inputs/``
    names: dict[str, str] = field(default_factory=dict)

    def __enter__(self) -> "Staging":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    def _dir(self) -> Path:
        if self.root is None:
            self.root = Path(tempfile.mkdtemp(prefix="privleak-inputs-"))
        return self.root

    # ------------------------------------------------------------------ models

    def model(self, model: Any, tokenizer: Any, role: str, option: str) -> tuple[str, str | None, str]:
        """``model`` saved as a directory the pipeline loads: (its path, the base model's path for a PEFT adapter,
        how it is named). ``role``: target / reference (the directory's name)."""
        model = unwrap(model)
        if tokenizer is None:
            raise UserError(f"{option}: an in-memory model needs its tokenizer; pass tokenizer=... (the one it was "
                            "trained with, e.g. AutoTokenizer.from_pretrained(...))")
        if not hasattr(tokenizer, "save_pretrained"):
            raise UserError(f"tokenizer: a {type(tokenizer).__name__} is not a transformers tokenizer; pass the "
                            "model's tokenizer (AutoTokenizer.from_pretrained(...))")
        if is_peft(model):
            return self._peft(model, tokenizer, role, option)
        if not (hasattr(model, "save_pretrained") and hasattr(model, "config")):
            raise UserError(f"{option}: a {type(model).__name__} is not a transformers model; pass a causal LM "
                            "(e.g. AutoModelForCausalLM.from_pretrained(...)), a PEFT model on one, or the directory "
                            "it was saved to")
        return self._save(model, tokenizer, role), None, describe(model)

    def _save(self, model: Any, tokenizer: Any, role: str) -> str:
        d = Path(tempfile.mkdtemp(prefix=f"{role}-", dir=self._dir()))
        model.save_pretrained(d)
        tokenizer.save_pretrained(d)
        self.names[str(d)] = f"{role}-{_files_hash(d)}"
        return str(d)

    def _peft(self, model: Any, tokenizer: Any, role: str, option: str) -> tuple[str, str, str]:
        """The adapter (``save_pretrained``: its config and weights) and its base model without the adapter
        layers, as ``privleak attack --target ADAPTER --base BASE`` reads them (and merges them again)."""
        tuner = getattr(model, "base_model", None)
        if not hasattr(tuner, "unload"):
            raise UserError(f"{option}: this PEFT model's adapter cannot be taken off its base in memory; save the "
                            "adapter and its base with save_pretrained and pass their directories (target=..., base=...)")
        adapter = Path(tempfile.mkdtemp(prefix=f"{role}-adapter-", dir=self._dir()))
        model.save_pretrained(adapter)
        tokenizer.save_pretrained(adapter)
        self.names[str(adapter)] = f"{role}-adapter-{_files_hash(adapter)}"
        # A copy: unloading rewires the model's modules, and the caller's model must stay as it was.
        base = copy.deepcopy(model).base_model.unload()
        base_dir = self._save(base, tokenizer, f"{role}-base")
        return str(adapter), base_dir, describe(model)

    # ------------------------------------------------------------------ records

    def records(self, items: Any, name: str, option: str, text_field: str) -> str:
        """``items`` (texts, dicts, ``Record`` s or a ``datasets.Dataset``) as a JSONL file: ``{text_field: text}``
        per text, a dict as it is, a Record in PrivLeak's own format (its PII spans kept)."""
        if isinstance(items, (str, bytes, dict)) or not hasattr(items, "__iter__"):
            raise UserError(f"{option}: give a file path, or a list of texts, of dicts with a '{text_field}' field "
                            f"or of privleak Records (got a {type(items).__name__})")
        path = self._dir() / f"{name}.jsonl"
        kinds: set[str] = set()
        with open(path, "w", encoding="utf-8") as fh:
            for n, item in enumerate(items, 1):
                fh.write(_line(item, n, option, text_field, kinds) + "\n")
        if len(kinds) > 1:
            raise UserError(f"{option}: mixes {' and '.join(sorted(kinds))}; give one kind of record per list")
        self.names[str(path)] = f"{name}.jsonl"
        return str(path)

    # ------------------------------------------------------------------ into the run directory

    def commit(self, run_root: Path) -> dict[str, str]:
        """Move every staged file and directory into ``<run_root>/inputs/``: {staged path → its path there}. A model
        directory already there under the same content hash is kept as it is (its times key the stage cache), as is
        nothing else: the inputs of an earlier call that this one does not use are removed."""
        if not self.names:
            return {}
        dest = run_root / INPUTS
        dest.mkdir(parents=True, exist_ok=True)
        moved: dict[str, str] = {}
        for staged, name in self.names.items():
            final = dest / name
            if Path(staged).is_dir() and final.is_dir():
                shutil.rmtree(staged)
            else:
                if final.is_dir():
                    shutil.rmtree(final)
                os.replace(staged, final) if _same_device(Path(staged), dest) else shutil.move(staged, final)
            moved[staged] = str(final)
        keep = set(self.names.values())
        for old in dest.iterdir():
            if old.name not in keep:
                shutil.rmtree(old) if old.is_dir() else old.unlink()
        return moved


def _same_device(a: Path, b: Path) -> bool:
    try:
        return a.stat().st_dev == b.stat().st_dev
    except OSError:
        return False


def _line(item: Any, n: int, option: str, text_field: str, kinds: set[str]) -> str:
    from ..data.records import Record

    if isinstance(item, Record):
        kinds.add("Records")
        obj: Any = item.to_json()
    elif isinstance(item, str):
        kinds.add("texts")
        obj = {text_field: item}
    elif isinstance(item, dict):
        kinds.add("dicts")
        if not isinstance(item.get(text_field, item.get("text") if "pii" in item else None), str):
            raise UserError(f"{option}: record {n} has no string '{text_field}' field; give every record its text "
                            f"(or name the field with text_field=...)")
        obj = item
    else:
        raise UserError(f"{option}: record {n} is a {type(item).__name__}; give texts, dicts with a '{text_field}' "
                        "field or privleak Records")
    try:
        return json.dumps(obj, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise UserError(f"{option}: record {n} cannot be written as JSON ({exc}); give plain strings, numbers and "
                        "lists in its fields") from None
