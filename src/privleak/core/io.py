"""Files written so that a crash never leaves a half-written one.

Every artefact PrivLeak writes (splits, canaries, stage outputs, models,
reports, scrubbed corpora, guard indexes) goes through :func:`atomic_path`
or :func:`staging_dir`: the content is written under a temporary name in the
target's own directory and renamed over the target only when complete
(``os.replace`` is atomic on one file system). A run killed at any moment
therefore finds either the old file or the new one, never a torso.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Iterator


@contextmanager
def atomic_path(path: str | os.PathLike[str], suffix: str = ".tmp") -> Iterator[Path]:
    """A temporary path beside ``path``; renamed to ``path`` if the block succeeds.

    ``suffix`` lets writers that insist on an extension (``np.savez`` appends
    ``.npz`` to names without it) keep theirs. On any exception the temporary
    file is removed and ``path`` is left exactly as it was.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=suffix)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)


@contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w", encoding: str | None = "utf-8",
                newline: str | None = None, fsync: bool = False) -> Iterator[IO[Any]]:
    """``open(path, mode)`` whose content appears at ``path`` only when the block succeeds."""
    binary = "b" in mode
    with atomic_path(path) as tmp:
        with open(tmp, mode, encoding=None if binary else encoding, newline=None if binary else newline) as fh:
            yield fh
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())


def write_text(path: str | os.PathLike[str], text: str) -> None:
    with atomic_open(path) as fh:
        fh.write(text)


def finite(obj: Any) -> Any:
    """NaN/±inf → None, recursively: JSON has no NaN, and an undefined figure
    (a rate over zero cases, a p-value of an all-zero table) is not a number."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, (list, tuple)):
        return [finite(x) for x in obj]
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    return obj


def write_json(path: str | os.PathLike[str], obj: Any, indent: int | None = 2) -> None:
    """``obj`` as JSON (non-finite floats written as null), atomically."""
    with atomic_open(path) as fh:
        json.dump(finite(obj), fh, indent=indent, ensure_ascii=False, allow_nan=False)
        fh.write("\n")


def read_json(path: str | os.PathLike[str]) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


@contextmanager
def staging_dir(final: str | os.PathLike[str]) -> Iterator[Path]:
    """A scratch directory renamed to ``final`` only if the block succeeds
    (a directory that already exists at ``final`` is replaced)."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}.tmp-"))
    try:
        yield tmp
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def stable_hash(*parts: Any) -> str:
    """A short digest of JSON-able ``parts`` that is the same in every process and on every machine."""
    h = hashlib.sha256()
    for p in parts:
        h.update(json.dumps(p, sort_keys=True, default=str).encode())
        h.update(b"\0")
    return h.hexdigest()[:16]
