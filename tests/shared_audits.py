"""Audits shared by the whole test session: each distinct configuration runs once.

A test asks ``audits.get(cfg)`` (the session fixture ``audits`` in conftest) and gets a :class:`SharedAudit`: the
run directory, what the run printed, and the results object ``run_audit`` returned. The key is the stable hash
(:func:`privleak.core.io.stable_hash`) of everything that decides the run's outcome: the validated config
(``build_config(cfg).model_dump()``), the executor settings (left out of that dump on purpose), how it was
started (``pipeline.run_audit`` or the ``privleak run`` command line and its extra flags) and torch's thread
count (float sums differ across thread counts, so results are bit-identical only at equal counts).

The shared directory is never written after its run: a test that changes a run (reruns it with another
setting, interrupts it, edits a file) takes ``copy(dest)`` and works there, and the stage cache redoes only
what its change touches. The store belongs to one process (an xdist worker has its own model cache, and a
run's results name the base model's path in it): conftest's xdist groups keep the readers of one audit on one
worker.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pickle
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

#: torch intra-op threads every shared audit runs at, unless a test asks for another count (conftest sets it:
#: the suite's own count).
DEFAULT_THREADS: int | None = None


@dataclass
class SharedAudit:
    """One finished shared audit. ``out`` is read-only by convention: copy it to change it."""

    key: str
    out: Path
    console: str  # the command line's stdout and stderr, or the pipeline's progress lines
    _results: Path | None = field(default=None, repr=False)

    @property
    def results(self):
        """The results object the run returned (a fresh copy per call: tests may edit it). For a command-line
        run: ``results.json`` loaded as ``privleak report`` loads it."""
        if self._results is not None:
            return pickle.loads(self._results.read_bytes())
        from privleak.report.schema import load_results

        return load_results(self.out)

    def copy(self, dest: str | os.PathLike[str]) -> Path:
        """A private copy of the run directory at ``dest`` (modification times kept; the run lock file not
        copied: it names the run that wrote the original, and the copy is another directory)."""
        dest = Path(dest)
        shutil.copytree(self.out, dest, symlinks=True, ignore=shutil.ignore_patterns(".privleak.lock"))
        return dest


class Audits:
    """The session's store of shared audits (see the module docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def key(self, cfg: dict[str, Any], via: str, args: tuple[str, ...], threads: int) -> str:
        from privleak.config import build_config
        from privleak.core.io import stable_hash

        built = build_config(cfg)
        return stable_hash("shared-audit", built.model_dump(mode="json"), built.executor.model_dump(mode="json"),
                           via, list(args), threads)

    def get(self, cfg: dict[str, Any], *, via: str = "pipeline", args: tuple[str, ...] = (),
            threads: int | None = None) -> SharedAudit:
        """The audit of ``cfg`` (a config file's dict), run now unless this session already has it.

        ``via``: ``"pipeline"`` (``pipeline.run_audit`` with the config's executor) or ``"cli"`` (``privleak run
        --config FILE --out DIR ARGS``, which also writes the report). ``threads``: torch's intra-op threads for
        the run (default :data:`DEFAULT_THREADS`)."""
        threads = threads or DEFAULT_THREADS or 1
        key = self.key(cfg, via, args, threads)
        entry = self.root / key
        if not (entry / "done.json").exists():
            self._run(entry, cfg, via, args, threads)
        info = json.loads((entry / "done.json").read_text())
        returned = entry / "returned.pkl"
        return SharedAudit(key, entry / "run", info["console"], returned if returned.exists() else None)

    def _run(self, entry: Path, cfg: dict[str, Any], via: str, args: tuple[str, ...], threads: int) -> None:
        import torch

        if entry.exists():  # a run of this key that failed earlier in the session: start it again
            shutil.rmtree(entry)
        entry.mkdir()
        before = torch.get_num_threads()
        saved = os.environ.get("OMP_NUM_THREADS")
        # The command line sets torch's threads itself (core.threads: OMP_NUM_THREADS wins when set).
        os.environ["OMP_NUM_THREADS"] = str(threads)
        torch.set_num_threads(threads)
        try:
            if via == "cli":
                console = _run_cli(cfg, entry, args)
            elif via == "pipeline":
                assert not args, "command-line flags need via='cli'"
                console = _run_pipeline(cfg, entry)
            else:
                raise ValueError(via)
        finally:
            torch.set_num_threads(before)
            if saved is None:
                os.environ.pop("OMP_NUM_THREADS", None)
            else:
                os.environ["OMP_NUM_THREADS"] = saved
        (entry / "done.json").write_text(json.dumps({"console": console, "threads": threads}))


def _run_pipeline(cfg: dict[str, Any], entry: Path) -> str:
    from privleak import pipeline
    from privleak.config import build_config
    from privleak.executors import make_executor

    built = build_config(cfg)
    lines: list[str] = []
    executor = None
    if built.executor.kind != "auto":  # a named executor: started as the command line starts it
        executor = make_executor(built.executor, notify=lines.append)
    results = pipeline.run_audit(built, entry / "run", notify=lines.append, executor=executor)
    (entry / "returned.pkl").write_bytes(pickle.dumps(results))
    return "\n".join(lines)


def _run_cli(cfg: dict[str, Any], entry: Path, args: tuple[str, ...]) -> str:
    from privleak.cli import main

    (entry / "config.yaml").write_text(yaml.safe_dump(cfg))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        try:
            main(["run", "--config", str(entry / "config.yaml"), "--out", str(entry / "run"), *args])
        except SystemExit as exc:
            assert exc.code in (0, None), buf.getvalue()[-3000:]
    return buf.getvalue()
