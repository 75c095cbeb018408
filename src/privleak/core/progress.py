"""Progress bars for anything that takes more than a few seconds.

Bars go to stderr through rich and disappear when the output is not a
terminal (CI logs stay readable); ``PRIVLEAK_PROGRESS=0`` turns them off, and
so does :func:`suppressed` for a block (library calls print nothing unless
asked: :mod:`privleak.api`).
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Callable, Iterator

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

_console = Console(stderr=True)
#: Blocks inside :func:`suppressed` (a count: nested library calls).
_suppressed = 0


@contextmanager
def suppressed(on: bool = True) -> Iterator[None]:
    """No bars within the block when ``on`` (whatever the terminal)."""
    global _suppressed
    _suppressed += bool(on)
    try:
        yield
    finally:
        _suppressed -= bool(on)


def enabled() -> bool:
    if _suppressed:
        return False
    if os.environ.get("PRIVLEAK_PROGRESS", "").lower() in ("0", "false", "no"):
        return False
    return sys.stderr.isatty()


@contextmanager
def progress_bar(description: str, total: int) -> Iterator[Callable[..., None]]:
    """Yield ``advance(n=1, **fields)``; a no-op when bars are off."""
    if not enabled():
        yield lambda n=1, **fields: None
        return
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=_console,
        transient=True,
    ) as prog:
        task = prog.add_task(description, total=total, info="")

        def advance(n: int = 1, **fields: float) -> None:
            info = " ".join(f"{k}={v:.3f}" for k, v in fields.items())
            prog.update(task, advance=n, info=info)

        yield advance
