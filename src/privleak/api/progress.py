"""Where a library call's progress goes: nowhere (the default), a callable of yours, or rich on stderr.

The pipeline reports each stage as one line in rich markup (``[green]✓ data[/green] (0.1 s)``); a callable is
handed the same line as plain text, ``True`` prints it as the command line does (control characters in the names
it quotes shown as escapes, never obeyed). Progress bars (:mod:`privleak.core.progress`) show only with ``True``
and a terminal: a notebook or a log gets no bars.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Union

from ..core.errors import UserError

#: ``None`` / ``False``: silent; ``True``: rich lines (and bars) on stderr; a callable: ``f(line)``, plain text.
Progress = Union[Callable[[str], None], bool, None]


def _silent(line: str) -> None:
    pass


def plain(line: str) -> str:
    """A progress line without its rich markup."""
    from rich.errors import MarkupError
    from rich.text import Text

    try:
        return Text.from_markup(line).plain
    except MarkupError:  # a quoted name that reads as markup: the line as it is
        return line


def _rich() -> Callable[[str], None]:
    from rich.console import Console
    from rich.errors import MarkupError

    from ..core.terminal import escape_control

    # As the command line's own console: tables and lines are wide when stderr is a file or a pipe.
    console = Console(stderr=True, width=None if sys.stderr.isatty() else 160)

    def show(line: str) -> None:
        safe = escape_control(line)
        try:
            console.print(safe)
        except MarkupError:
            console.print(safe, markup=False, highlight=False)
    return show


def notifier(progress: Progress) -> Callable[[str], None]:
    """The pipeline's ``notify`` for ``progress`` (a one-line error for anything else)."""
    if progress is None or progress is False:
        return _silent
    if progress is True:
        return _rich()
    if callable(progress):
        return lambda line: progress(plain(line))
    raise UserError(f"progress={progress!r}: give None (silent), True (rich lines on stderr) or a function that "
                    "takes one line of text, e.g. progress=print")


@contextmanager
def reporting(progress: Progress) -> Iterator[Callable[[str], None]]:
    """The ``notify`` for ``progress``, with the progress bars off inside the block unless it is ``True``."""
    from ..core.progress import suppressed

    notify = notifier(progress)
    with suppressed(progress is not True):
        yield notify
