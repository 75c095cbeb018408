"""The run directory: where each stage's artefacts live and how resume works.

A stage is done when its marker ``stages/<name>.json`` exists *and* holds the
same key — a hash of the config that determines the stage and of the keys of
the stages it reads. Outputs are written to a temporary path and renamed
before the marker is written, so a run killed at any moment resumes by
redoing at most the stage it was in, and a changed config redoes exactly the
stages it affects.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from .core.errors import UserError


def stable_hash(*parts: Any) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(json.dumps(p, sort_keys=True, default=str).encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


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


def write_json(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(finite(obj), fh, indent=2, sort_keys=False, ensure_ascii=False, allow_nan=False)
        fh.write("\n")
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


@dataclass
class RunDir:
    root: Path
    durations: dict[str, float] = field(default_factory=dict)

    @classmethod
    def open(cls, root: str | os.PathLike[str]) -> "RunDir":
        path = Path(root).expanduser()
        try:
            path.mkdir(parents=True, exist_ok=True)
            probe = path / ".write-test"
            probe.write_text("ok")
            probe.unlink()
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise UserError(f"--out {path}: cannot write there ({reason}); choose a writable directory") from None
        return cls(root=path)

    def path(self, *parts: str) -> Path:
        return self.root.joinpath(*parts)

    def _marker(self, name: str) -> Path:
        return self.path("stages", name.replace("/", "_") + ".json")

    def done(self, name: str, key: str) -> bool:
        m = self._marker(name)
        if not m.exists():
            return False
        try:
            info = read_json(m)
        except (OSError, ValueError):
            return False
        if info.get("key") != key:
            return False
        self.durations[name] = float(info.get("duration_s", 0.0))
        return True

    def mark(self, name: str, key: str, duration: float) -> None:
        self.durations[name] = duration
        write_json(self._marker(name), {"key": key, "duration_s": round(duration, 3)})

    @contextmanager
    def staging_dir(self, final: Path) -> Iterator[Path]:
        """A scratch directory renamed to ``final`` only if the block succeeds."""
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}.tmp-"))
        try:
            yield tmp
            if final.exists():
                shutil.rmtree(final)
            os.replace(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


class Timer:
    def __enter__(self) -> "Timer":
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.elapsed = time.perf_counter() - self.t0
