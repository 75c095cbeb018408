"""The run directory: where each stage's artefacts live and how resume works.

A stage is done when its marker ``stages/<name>.json`` exists *and* holds the
same key — a hash of the config that determines the stage and of the keys of
the stages it reads. Outputs are written to a temporary path and renamed
before the marker is written, so a run killed at any moment resumes by
redoing at most the stage it was in, and a changed config redoes exactly the
stages it affects.

One process at a time writes a run directory: :meth:`RunDir.open` takes its
lock (:mod:`.runlock`), and a worker that runs a stage for that process checks,
before it marks the stage done, that the lock is still its driver's.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import ContextManager

from ..core.errors import UserError
from ..core.io import finite, read_json, stable_hash, staging_dir, write_json
from . import runlock

__all__ = ["SENSITIVE", "RunDir", "Timer", "finite", "read_json", "stable_hash", "write_json"]

#: The run directory's files that hold training text or model generations, raw (globs relative to the run
#: directory; ``**``: everything below). They are written with mode 0600 (:func:`privleak.core.io.atomic_path`;
#: a saved model's files in a folder of mode 0700, :func:`~privleak.core.io.staging_dir`) and are never meant to
#: be shared: what is — ``results.json``, ``report.html``, the attack outputs under
#: ``arms/*/attacks/``, the console and log lines — holds masked values only. docs/guide/run-directory.md
#: lists the same files (a test holds the two together, and greps a run for the splits' raw PII outside them).
SENSITIVE = (
    "splits/**",  # the members, non-members, population and public texts; the canaries; the forget set
    "audit_canaries.json",  # the one-run audit's secrets, inserted into the training data
    "defences/scrub/*.jsonl",  # the scrubbed training text (what the scrubber missed is still in it)
    "arms/*/model/**",  # a trained model: its weights memorise its training text
    "arms/*/seeds/*/model/**",  # the same on an extra training seed
    "arms/*/samples.json",  # the model's unprompted generations, unmasked (the extraction attacks match them)
)


@dataclass
class RunDir:
    root: Path
    durations: dict[str, float] = field(default_factory=dict)
    #: The run lock's token this process writes under: the driver's own (:meth:`open`), or the one a worker was
    #: handed by its driver; ``None``: not checked (a directory only read).
    lock_token: str | None = None

    @classmethod
    def open(cls, root: str | os.PathLike[str]) -> "RunDir":
        """Create (or reuse) the run directory and hold its lock: a :class:`~.runlock.RunDirBusy` one-line error
        when another process holds it. The lock lasts to the end of the enclosing :meth:`locked` block (or the
        process)."""
        path = Path(root).expanduser()
        try:
            path.mkdir(parents=True, exist_ok=True)
            probe = path / ".write-test"
            probe.write_text("ok")
            probe.unlink()
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise UserError(f"--out {path}: cannot write there ({reason}); choose a writable directory") from None
        lock = runlock.acquire(path)
        return cls(root=path, lock_token=lock.holder.token if lock.fd is not None else None)

    @staticmethod
    def locked(root: str | os.PathLike[str], now: bool | None = None, create: bool = True) -> ContextManager[None]:
        """Hold ``root``'s lock for a block: from now when the directory exists (or :meth:`open` inside the block
        creates it) to the end of the block; openers inside the block share it. ``create`` False: a reader that
        leaves a directory without a lock file as it found it (``privleak report``)."""
        return runlock.locked(root, now=now, create=create)

    def check_lock(self) -> None:
        """Raise unless this process still writes under the run's lock (a worker's driver may have been replaced)."""
        if self.lock_token is not None:
            runlock.verify(self.root, self.lock_token)

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
        self.check_lock()
        self.durations[name] = duration
        write_json(self._marker(name), {"key": key, "duration_s": round(duration, 3)})

    def staging_dir(self, final: Path) -> ContextManager[Path]:
        return staging_dir(final)


class Timer:
    def __enter__(self) -> "Timer":
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.elapsed = time.perf_counter() - self.t0
