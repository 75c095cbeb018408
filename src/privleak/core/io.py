"""Files written so that a crash never leaves a half-written one.

Every artefact PrivLeak writes (splits, canaries, stage outputs, models,
reports, scrubbed corpora, guard indexes) goes through :func:`atomic_path`
or :func:`staging_dir`: the content is written under a temporary name in the
target's own directory and renamed over the target only when complete
(``os.replace`` is atomic on one file system). A run killed at any moment
therefore finds either the old file or the new one, never a torso.

A path the user names as an output is checked first (:func:`check_output_file`):
only a regular file (or a new name) in an existing directory is ever replaced —
never a device (``/dev/full``), a FIFO, a socket, a directory, a symbolic link
or the input itself — and a file that can hold PII is written with mode 0600
or the input's, if that is stricter (:func:`private_mode`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Iterable, Iterator

from .errors import UserError


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


_SPECIAL = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
            (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str | None:
    for test, what in _SPECIAL:
        if test(mode):
            return what
    return None


def check_output_file(path: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str]] = (),
                      option: str | None = None) -> Path:
    """Refuse, with one line, an output path PrivLeak must not replace; returns it.

    Refused: a symbolic link (the final name is never followed: the atomic
    rename would replace the link, and writing through it would touch a file
    the user did not name), a directory, a device, FIFO or socket (replacing
    ``/dev/full`` with a regular file breaks the system; writing into a FIFO
    blocks), the same file as one of ``inputs`` (same name, or same inode
    through a hard link: the input would be overwritten before it is fully
    read), and a parent that is not a writable directory.
    """
    p = Path(path).expanduser()
    name = f"{option} {p}" if option else str(p)
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise UserError(f"{name}: cannot check the output path ({exc.strerror or exc}); choose another path") from None
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise UserError(f"{name}: is a symbolic link; privleak never writes through a link — give the path of a "
                            "regular file (or a new name)")
        if stat.S_ISDIR(st.st_mode):
            raise UserError(f"{name}: is a directory; give an output file name")
        kind = _kind(st.st_mode)
        if kind is not None:
            raise UserError(f"{name}: is {kind}, not a regular file; give the path of a regular file (or a new name)")
        for inp in inputs:
            try:
                same = os.path.samefile(p, inp)
            except OSError:
                same = False
            if same:
                raise UserError(f"{name}: is the input file {inp} itself; write to another file (and rename it "
                                "afterwards if you want to replace the input)")
    parent = p.parent
    if not parent.is_dir():
        raise UserError(f"{name}: directory {parent} does not exist; create it or choose another output path")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UserError(f"{name}: cannot write in {parent} (permission denied); choose a writable directory")
    return p


def private_mode(inputs: Iterable[str | os.PathLike[str]] = ()) -> int:
    """The mode of an output that can hold PII: 0600, or an input's mode where that is stricter (0400 stays 0400)."""
    mode = 0o600
    for inp in inputs:
        try:
            mode &= os.stat(inp).st_mode & 0o777
        except OSError:
            pass
    return mode or 0o600
