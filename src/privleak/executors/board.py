"""One view of every task of a run: waiting, running (where, which attempt), finished.

The driver owns it and updates it as task references complete; a task that
runs elsewhere says where it runs through a small file in the run directory
(``stages/.running/<task>.json``: host, pid, attempt), which every worker
can write and the driver can read, so the view is the same for a local and
a remote cluster. On a terminal it is one rich live panel; otherwise (logs,
CI) it prints a line per start, retry and finish.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ..core import progress
from ..core.io import write_json

RUNNING_DIR = ".running"


def running_file(root: Path, name: str) -> Path:
    return root / "stages" / RUNNING_DIR / (name.replace("/", "_") + ".json")


def claim(root: Path, name: str) -> int:
    """Called by the worker as a task starts: records where it runs; returns the attempt (1, 2, … after a retry)."""
    path = running_file(root, name)
    attempt = 1
    try:
        attempt = int(json.loads(path.read_text())["attempt"]) + 1
    except (OSError, ValueError, KeyError, TypeError):
        pass
    write_json(path, {"host": socket.gethostname(), "pid": os.getpid(), "attempt": attempt, "started": time.time()})
    return attempt


def release(root: Path, name: str) -> None:
    running_file(root, name).unlink(missing_ok=True)


def read_claim(root: Path, name: str) -> dict | None:
    try:
        return json.loads(running_file(root, name).read_text())
    except (OSError, ValueError):
        return None


@dataclass
class _State:
    status: str = "waiting"  # waiting, queued, running, done, cached, failed
    where: str = ""
    attempt: int = 0
    started: float = 0.0
    seconds: float | None = None


@dataclass
class TaskBoard:
    """The driver's view of a graph run. ``notify`` gets the plain lines when there is no live panel."""

    root: Path
    names: list[str]
    title: str
    notify: Callable[[str], None] = lambda s: None
    live: bool = field(default_factory=progress.enabled)
    states: dict[str, _State] = field(default_factory=dict)
    retries: int = 0
    _live: Live | None = None
    _t0: float = field(default_factory=time.perf_counter)
    _finished: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.states = {n: _State() for n in self.names}

    # ------------------------------------------------------------ transitions

    def cached(self, name: str) -> None:
        self.states[name].status = "cached"
        if not self.live:
            self.notify(f"[dim]✓ {name} (cached)[/dim]")

    def submitted(self, name: str) -> None:
        s = self.states[name]
        s.status, s.started = "queued", time.time()

    def finished(self, name: str, seconds: float) -> None:
        s = self.states[name]
        s.status, s.seconds = "done", seconds
        self._finished.append(name)
        if not self.live:
            self.notify(f"[green]✓ {name}[/green] ({seconds:.1f} s{self._where(s)})")

    def failed(self, name: str) -> None:
        self.states[name].status = "failed"
        if not self.live:
            self.notify(f"[red]✗ {name}[/red]{self._where(self.states[name])}")

    def poll(self) -> None:
        """Read where the queued and running tasks run (the workers' claim files); note starts and retries."""
        for name, s in self.states.items():
            if s.status not in ("queued", "running"):
                continue
            info = read_claim(self.root, name)
            if info is None or info.get("started", 0) < s.started - 1.0:  # absent, or a previous run's
                continue
            attempt = int(info.get("attempt", 1))
            where = f"{info.get('host', '?')}:{info.get('pid', '?')}"
            if attempt > s.attempt:
                if s.attempt:  # a later attempt of a task already seen running: its worker died
                    self.retries += 1
                    if not self.live:
                        self.notify(f"[yellow]↻ {name}[/yellow]: worker {s.where} lost, attempt {attempt} on {where}")
                elif not self.live:
                    self.notify(f"▶ {name}" + (f" (attempt {attempt})" if attempt > 1 else ""))
                s.status, s.attempt, s.where, s.started = "running", attempt, where, float(info["started"])
        self.refresh()

    @staticmethod
    def _where(s: _State) -> str:
        return f", {s.where}" + (f", attempt {s.attempt}" if s.attempt > 1 else "") if s.where else ""

    # ------------------------------------------------------------ the live panel

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.states.values():
            out[s.status] = out.get(s.status, 0) + 1
        return out

    def summary(self) -> str:
        c = self.counts()
        done = c.get("done", 0) + c.get("cached", 0)
        parts = [f"{done}/{len(self.states)} done"]
        if c.get("cached"):
            parts.append(f"{c['cached']} cached")
        parts += [f"{c.get('running', 0)} running", f"{c.get('queued', 0)} queued", f"{c.get('waiting', 0)} waiting"]
        if self.retries:
            parts.append(f"{self.retries} retried")
        parts.append(f"{time.perf_counter() - self._t0:.0f} s")
        return f"{self.title} · " + " · ".join(parts)

    def render(self) -> Group:
        table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
        for col in ("task", "state", "where", "attempt", "seconds"):
            table.add_column(col)
        now = time.time()
        for name, s in self.states.items():
            if s.status in ("running", "queued"):
                table.add_row(name, s.status, s.where, str(s.attempt or ""), f"{now - s.started:.0f}")
        for name in self._finished[-5:]:
            s = self.states[name]
            table.add_row(f"[green]{name}[/green]", "done", s.where, str(s.attempt or ""), f"{s.seconds:.1f}")
        return Group(Text(self.summary(), style="bold"), table)

    def __enter__(self) -> "TaskBoard":
        if self.live:
            self._live = Live(self.render(), console=Console(stderr=True), refresh_per_second=2, transient=True)
            self._live.__enter__()
        return self

    def refresh(self) -> None:
        if self._live is not None:
            self._live.update(self.render())

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)
            self._live = None
        self.notify(self.summary())
