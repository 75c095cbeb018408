"""What every sub-command shares: the two consoles and the checks that need no work."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from rich.console import Console
from rich.errors import MarkupError
from rich.markup import escape

from ..api.checks import check_out_dir, named_field  # noqa: F401  (the commands' import of them)
from ..core.errors import UserError
from ..core.limits import MAX_EPSILON
from ..core.terminal import escape_control
from ..core.threads import passive_waiting

# Tables are wide: when output is a file or pipe, do not squeeze them into 80 columns.
out = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 160)


def shown(text: object) -> str:
    """User text (a path, a field, a warning quoting them) inside a rich markup line: control characters shown
    as escapes (:func:`~privleak.core.terminal.escape_control`), markup brackets as themselves."""
    return escape(escape_control(text))


def notify(line: str) -> None:
    """A progress line from the library (with its own markup) on stderr: control characters in the arm names and
    file names it quotes are shown, never obeyed; a line whose quoted text breaks the markup is printed plain."""
    safe = escape_control(line)
    try:
        err.print(safe)
    except MarkupError:
        err.print(safe, markup=False, highlight=False)


def given(ctx: Any, *names: str) -> list[str]:
    """Which of the parameters ``names`` (Python names) the user set on the command line (or by environment),
    as their option flags: a flag that cannot take effect is refused, not silently ignored."""
    out = []
    for name in names:
        source = ctx.get_parameter_source(name)
        if getattr(source, "name", "") in ("COMMANDLINE", "ENVIRONMENT"):
            param = next((p for p in ctx.command.params if p.name == name), None)
            flags = [o for o in getattr(param, "opts", []) if o.startswith("--")]
            out.append(max(flags, key=len) if flags else name)
    return out


def refuse_unused(ctx: Any, names: tuple[str, ...], why: str) -> None:
    """One line naming the flags in ``names`` that were given although ``why`` says they cannot take effect."""
    flags = given(ctx, *names)
    if flags:
        raise UserError(f"{' '.join(flags)}: {why}; drop {'it' if len(flags) == 1 else 'them'}")


def is_text_format(path: Path, fmt: str | None) -> bool:
    """Whether a corpus file is read as plain text (one record per line, no fields): ``--format`` or the extension."""
    if fmt is not None:
        return fmt.strip().lower() in ("text", "txt")
    return Path(path).suffix.lower() not in (".jsonl", ".json", ".ndjson", ".csv", ".tsv") and not Path(path).is_dir()


def quiet_libraries() -> None:
    # Environment, not imports: transformers reads these when (and only if) a
    # command imports it, so a usage error is reported in a fraction of a second.
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    passive_waiting()  # before torch is imported: OpenMP threads sleep, not spin, when they wait (core.threads)
    logging.getLogger("opacus").setLevel(logging.ERROR)
    logging.getLogger("huggingface_hub").setLevel(logging.ERROR)
    # Presidio's debug lines quote the words around each detection: raw PII.
    logging.getLogger("presidio-analyzer").setLevel(logging.WARNING)
    logging.getLogger("presidio-anonymizer").setLevel(logging.WARNING)


def parse_epsilons(text: str, option: str = "--epsilons", low: float = 0.0) -> list[float]:
    """Comma-separated ε in (0, MAX_EPSILON] — from ``low`` when given (DP-SGD targets: MIN_EPSILON)."""
    vals = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            v = float(part)
        except ValueError:
            raise UserError(f"{option} {text}: '{part}' is not a number; give a comma-separated list like 1,4,8") from None
        if not (0 < v <= MAX_EPSILON):
            raise UserError(f"{option} {text}: ε must be in (0, {MAX_EPSILON:g}], got {part} (above {MAX_EPSILON:g} a "
                            "DP guarantee certifies nothing); give values like 1,4,8")
        if v < low:
            raise UserError(f"{option} {text}: ε must be at least {low:g}, got {part} (below {low:g} the accountant's "
                            "error margin swamps a DP-SGD target); give values like 1,4,8")
        vals.append(v)
    return vals


def put(over: dict[str, Any], path: str, value: Any) -> None:
    """Set a flag's value at a dotted config path (``data.text_field``) in the overrides; a flag not given
    (None) sets nothing, so the file and the profile keep theirs (precedence: defaults < profile < file < flags)."""
    if value is None:
        return
    *sections, key = path.split(".")
    node = over
    for sec in sections:
        node = node.setdefault(sec, {})
    node[key] = value


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: raised where the program is, so every ``finally`` (a temporary file's removal)
    runs on the way out, as for Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextmanager
def end_cleanly_on_signals() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise :class:`Terminated` (their default ends the process at once:
    ``privleak scrub`` left its temporary output behind, issue 49); Ctrl-C already raises KeyboardInterrupt.
    SIGKILL cannot be caught: a file it leaves is named ``.OUT.*.tmp`` beside OUT."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise Terminated(signum)

    kinds = [s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s is not None]
    old = {s: signal.signal(s, handler) for s in kinds}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def interrupted_without_output(exc: KeyboardInterrupt, out_path: Path) -> None:
    """One line for a file command stopped by Ctrl-C or a signal (nothing was written), and its exit code:
    130 for Ctrl-C, 128 + the signal's number otherwise."""
    signum = getattr(exc, "signum", signal.SIGINT)
    err.print(f"interrupted ({signal.Signals(signum).name}): {shown(out_path)} was not written (an existing one is "
              "unchanged, the temporary file removed); rerun the command to start again", soft_wrap=True)
    sys.exit(128 + int(signum))
