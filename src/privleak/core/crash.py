"""Crash reports that cannot leak: where the code failed, never what it was working on.

A bug in a privacy tool must not become a privacy incident. Python's
traceback prints each exception's message, and rich's (typer's default)
prints every frame's local variables too; in PrivLeak both routinely hold
record text, names and identifiers (the probe of issue 30 found whole
records and SSNs in one). A crash report therefore keeps only:

* the exception's type (and, for an ``OSError``, its errno name such as
  ``ENOSPC``, which says what happened without naming a file);
* the stack, one ``file:line in function`` per frame, for the exception and
  every exception it was raised from or during (``__cause__`` /
  ``__context__``), including the stack a worker process sent back;
* the versions, and the sub-command (never its arguments, which name files
  and fields).

It never holds an exception message, a source line or a local variable.
The report is written with mode 0600 and its path is printed; the same
stack (with each frame's source line, which is code, not data) goes to
stderr when ``PRIVLEAK_DEBUG=1``.
"""

from __future__ import annotations

import errno
import linecache
import os
import platform
import re
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

__all__ = ["CrashReport", "crash_dir", "debug_enabled", "sanitise", "write_crash_report"]

#: A worker process's formatted traceback (``concurrent.futures``' ``_RemoteTraceback``, Ray's task error)
#: is text: only its frame lines are kept.
_FRAME_LINE = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)\s*$', re.M)
#: At most this many exceptions of a chain (a cycle or a very long chain is cut).
MAX_CHAIN = 8
MAX_FRAMES = 200


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str

    def render(self, source: bool = False) -> str:
        text = f"  {self.file}:{self.line} in {self.function}"
        if source:
            code = linecache.getline(self.file, self.line).strip() if os.path.isabs(self.file) else ""
            if code:
                text += f"\n      {code}"
        return text


@dataclass
class Failure:
    """One exception of a chain: its type, errno name, frames, and how it relates to the next one."""

    type: str
    errno: str | None = None
    frames: list[Frame] = field(default_factory=list)
    remote: list[Frame] = field(default_factory=list)  # a worker's stack sent back as text
    link: str = ""  # "caused by" / "raised while handling" the next one in the chain


def _short(path: str) -> str:
    """A frame's file: relative to the ``sys.path`` entry holding it (no home directory or user name)."""
    p = os.path.abspath(path)
    best = ""
    for entry in sys.path:
        e = os.path.abspath(entry or ".")
        if p.startswith(e.rstrip(os.sep) + os.sep) and len(e) > len(best):
            best = e
    return os.path.relpath(p, best) if best else os.path.basename(p)


def _frames(tb: TracebackType | None) -> list[Frame]:
    out = [Frame(_short(fs.filename), fs.lineno or 0, fs.name) for fs in traceback.extract_tb(tb)]
    return out[-MAX_FRAMES:]


def _full_frames(tb: TracebackType | None) -> list[Frame]:
    # Absolute files, for the debug view's source lines.
    return [Frame(fs.filename, fs.lineno or 0, fs.name) for fs in traceback.extract_tb(tb)][-MAX_FRAMES:]


def _remote(exc: BaseException) -> list[Frame]:
    """Frames in a worker's traceback text (the exception's own ``str`` — never printed — is that text)."""
    name = type(exc).__name__
    if name not in ("_RemoteTraceback", "RayTaskError") and not name.startswith("RayTaskError"):
        return []
    try:
        text = str(exc)
    except Exception:  # a broken __str__ must not break the crash report
        return []
    return [Frame(_short(f), int(line), fn) for f, line, fn in _FRAME_LINE.findall(text)][-MAX_FRAMES:]


def _qualified(exc: BaseException) -> str:
    t = type(exc)
    module = t.__module__
    return t.__qualname__ if module in ("builtins", "__main__") else f"{module}.{t.__qualname__}"


def sanitise(exc: BaseException, full_paths: bool = False) -> list[Failure]:
    """The chain of ``exc``: types, errno names and frames only, outermost first."""
    chain: list[Failure] = []
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen and len(chain) < MAX_CHAIN:
        seen.add(id(cur))
        code = getattr(cur, "errno", None) if isinstance(cur, OSError) else None
        f = Failure(type=_qualified(cur), errno=errno.errorcode.get(code) if isinstance(code, int) else None,
                    frames=_full_frames(cur.__traceback__) if full_paths else _frames(cur.__traceback__),
                    remote=_remote(cur))
        chain.append(f)
        if cur.__cause__ is not None:
            f.link, cur = "raised from", cur.__cause__
        elif cur.__context__ is not None and not cur.__suppress_context__:
            f.link, cur = "raised while handling", cur.__context__
        else:
            cur = None
    return chain


def _versions() -> str:
    from importlib import metadata

    parts = [f"python {platform.python_version()}", platform.system()]
    for dist in ("privleak", "torch", "transformers", "typer"):
        try:
            parts.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            pass
    return ", ".join(parts)


def render(chain: list[Failure], source: bool = False) -> str:
    lines: list[str] = []
    for i, f in enumerate(chain):
        what = f.type + (f" [{f.errno}]" if f.errno else "")
        lines.append(f"exception: {what} (message omitted: it can quote your data)" if i == 0 else f"  {what}")
        lines.append("stack (most recent call last):")
        lines += [fr.render(source) for fr in f.frames]
        if f.remote:
            lines.append("stack in the worker process (most recent call last):")
            lines += [fr.render(False) for fr in f.remote]
        if f.link:
            lines.append(f"{f.link}:")
    return "\n".join(lines)


@dataclass(frozen=True)
class CrashReport:
    path: Path | None  # None when no file could be written
    exception: str  # the outermost type


def crash_dir() -> Path:
    """``PRIVLEAK_CRASH_DIR``, else ``crashes/`` in the privleak cache (``PRIVLEAK_CACHE``, ``~/.cache/privleak``)."""
    env = os.environ.get("PRIVLEAK_CRASH_DIR")
    if env:
        return Path(env).expanduser()
    cache = os.environ.get("PRIVLEAK_CACHE")
    return (Path(cache).expanduser() if cache else Path.home() / ".cache" / "privleak") / "crashes"


def debug_enabled() -> bool:
    return os.environ.get("PRIVLEAK_DEBUG", "").strip().lower() in ("1", "true", "yes")


def write_crash_report(exc: BaseException, command: str = "privleak") -> CrashReport:
    """Write the sanitised report of ``exc`` (mode 0600, never over an existing file); returns where."""
    chain = sanitise(exc)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    text = (f"privleak crash report\ntime: {time.strftime('%Y-%m-%dT%H:%M:%S%z')}\ncommand: {command} "
            f"(arguments not recorded: they can name your data)\nversions: {_versions()}\n{render(chain)}\n")
    folder = crash_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = folder / f"crash-{stamp}-{os.getpid()}.txt"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError:
        return CrashReport(None, chain[0].type)
    return CrashReport(path, chain[0].type)
