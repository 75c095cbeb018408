"""The guard's index on disk: one directory, no pickle.

``INDEX/verbatim.npy``  the :class:`VerbatimIndex` (sorted uint64 window hashes, memory-mapped on load)
``INDEX/guard.json``    format, version, settings, counts and the tripwire's salted hashes

Nothing in it is executable or unpickled; a damaged or foreign directory is
a :class:`UserError` naming the fix.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core.errors import UserError
from ...core.io import atomic_path, write_json
from ...core.jsonlimits import loads
from ...core.verbatim_index import VerbatimIndex
from .tripwire import Tripwire

FORMAT = "privleak-guard-index"
VERSION = 1
META_FILE = "guard.json"
VERBATIM_FILE = "verbatim.npy"


@dataclass
class StoredIndex:
    verbatim: VerbatimIndex
    tripwire: Tripwire
    meta: dict[str, Any]


def save_index(path: str | os.PathLike[str], verbatim: VerbatimIndex, tripwire: Tripwire, meta: dict[str, Any]) -> Path:
    """Write the index directory (created; files replaced atomically)."""
    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"--out {out}: cannot create the index directory ({exc.strerror or exc}); choose a writable path") from None
    if not out.is_dir():
        raise UserError(f"--out {out}: exists and is not a directory; choose a new path for the index")
    # Write to temporary names, then rename: a crash never leaves a half-written index behind.
    with atomic_path(out / VERBATIM_FILE, suffix=".npy") as tmp_npy:
        verbatim.save(tmp_npy)
    write_json(out / META_FILE, {"format": FORMAT, "version": VERSION, **meta, "tripwire": tripwire.to_json()}, indent=1)
    return out


def load_index(path: str | os.PathLike[str], mmap: bool = True) -> StoredIndex:
    """Read an index directory written by :func:`save_index`."""
    p = Path(path)
    fix = "build one with `privleak guard build --train FILE --out INDEX`"
    if not p.is_dir() or not (p / META_FILE).is_file() or not (p / VERBATIM_FILE).is_file():
        raise UserError(f"--index {p}: not a guard index directory (needs {META_FILE} and {VERBATIM_FILE}); {fix}")
    try:
        meta = loads((p / META_FILE).read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT or int(meta.get("version", -1)) != VERSION:
            raise ValueError(f"format {meta.get('format')!r} version {meta.get('version')!r}")
        tripwire = Tripwire.from_json(meta.pop("tripwire"))
        verbatim = VerbatimIndex.load(p / VERBATIM_FILE, mmap=mmap)
    except (ValueError, KeyError, TypeError, UnicodeDecodeError, OSError) as exc:
        raise UserError(f"--index {p}: damaged or incompatible guard index ({type(exc).__name__}: {exc}); {fix}") from None
    return StoredIndex(verbatim=verbatim, tripwire=tripwire, meta=meta)
