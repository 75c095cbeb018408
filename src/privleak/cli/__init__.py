"""The ``privleak`` command line: parse, call the library, print.

One package: :mod:`.common` (the consoles and the checks every command
shares) and :mod:`.usage` (typer / click errors as one line) at the bottom,
one module per group of commands above them (:mod:`.run`, :mod:`.attack`,
:mod:`.guard`, :mod:`.tools`), and this module on top, which builds the
typer app from them and is the console script (:func:`main`).

Every user error is one line on stderr and exit code 2; Ctrl-C leaves the run
directory resumable and says so.
"""

from __future__ import annotations

import sys
from typing import Any

import typer

from ..core.crash import crash_dir, debug_enabled, render, sanitise, write_crash_report
from ..core.errors import UserError
from ..core.terminal import escape_control
from .attack import attack
from .common import err, quiet_libraries
from .guard import guard_app
from .run import run
from .tools import accountant, budget, compare, data_generate, dedup, ldp, report, scrub
from .usage import click_exceptions, usage_message

__all__ = ["app", "command", "main"]

# No pretty exceptions: typer's (rich) tracebacks print every frame's local variables, i.e. record text.
app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Audit language models for privacy leakage.")
data_app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                       help="Synthetic data.")
# The order of `privleak --help`: commands, then the groups.
app.command("attack")(attack)
for function in (run, scrub, dedup, report, compare, accountant, budget, ldp):
    app.command()(function)
app.add_typer(data_app, name="data")
data_app.command("generate")(data_generate)
app.add_typer(guard_app, name="guard")


def command() -> Any:
    """The click command of :data:`app`, with every positional argument's help text in place.

    typer (≤ 0.20) stores an argument's ``help`` on its click parameter before calling click's constructor,
    which since click 8.2 sets ``help`` itself: every ``RUN_DIR``, ``IN`` and ``FILE`` lost its help in
    ``--help`` (issue 39). The texts are read back from the command functions' signatures."""
    import inspect

    from typer.main import get_command
    from typer.models import ArgumentInfo

    root = get_command(app)
    stack = [root]
    while stack:
        cmd = stack.pop()
        stack += list(getattr(cmd, "commands", {}).values())
        function = inspect.unwrap(cmd.callback) if cmd.callback is not None else None
        if function is None:
            continue
        defaults = {n: p.default for n, p in inspect.signature(function).parameters.items()}
        for param in cmd.params:
            info = defaults.get(param.name)
            if isinstance(info, ArgumentInfo) and info.help and not getattr(param, "help", None):
                param.help = info.help
    return root


def _one_line_error(message: str, code: int = 2) -> None:
    # Messages quote what the user typed (file names, field names, values): shown, never obeyed.
    err.print(f"error: {escape_control(' '.join(str(message).split()))}", markup=False, highlight=False, soft_wrap=True)
    sys.exit(code)


def _command(argv: list[str] | None) -> str:
    """The sub-command run (``privleak guard build``), for the crash report: never its arguments."""
    args = list(sys.argv[1:] if argv is None else argv)
    words = ["privleak"]
    group = app
    for a in args[:2]:
        info = {c.name or c.callback.__name__: c for c in group.registered_commands}
        groups = {g.name: g.typer_instance for g in group.registered_groups}
        if a in info:
            words.append(a)
            break
        if a in groups:
            words.append(a)
            group = groups[a]
            continue
        break
    return " ".join(words)


def _crash(exc: BaseException, argv: list[str] | None) -> None:
    """A bug: one line naming the sanitised crash report (:mod:`privleak.core.crash`), exit code 1."""
    report = write_crash_report(exc, _command(argv))
    if debug_enabled():
        err.print(render(sanitise(exc, full_paths=True), source=True), markup=False, highlight=False, soft_wrap=True)
    where = (f"crash report (where it failed, without messages or data): {report.path}" if report.path is not None
             else f"no crash report could be written in {crash_dir()}")
    _one_line_error(f"internal error ({report.exception}): this is a bug in privleak, not a problem with your input; "
                    f"{where}; rerun with PRIVLEAK_DEBUG=1 to also see that stack here, and attach the report to an "
                    "issue", code=1)


def main(argv: list[str] | None = None) -> None:
    """The console script. Every usage error — typer/click's, a pydantic
    validation, our own checks (:class:`UserError`) — is one line on stderr
    naming the option and the fix, exit code 2; Ctrl-C is 130; anything else
    is a bug: one line naming a crash report that holds where it failed and
    never what it was working on (:mod:`privleak.core.crash`), exit code 1."""
    quiet_libraries()
    usage_errors, aborts = click_exceptions()
    try:
        rc = command()(args=argv, standalone_mode=False, prog_name="privleak")
        if rc == 130:  # typer < 0.21 turns Ctrl-C into Exit(130), which non-standalone mode returns
            raise KeyboardInterrupt
    except UserError as exc:
        _one_line_error(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        err.print("interrupted: rerun the same command to resume where it stopped", soft_wrap=True)
        sys.exit(130)
    except SystemExit:
        raise
    except Exception as exc:
        if isinstance(exc, usage_errors):
            _one_line_error(usage_message(exc))
        if isinstance(exc, aborts):
            sys.exit(130)
        if type(exc).__name__ == "OutOfMemoryError":  # torch's, outside a stage that names its own setting
            _one_line_error("out of memory on the device (loading or moving a model); run on a device with more free "
                            "memory, or lower compute.memory_fraction and the batch sizes")
        from pydantic import ValidationError

        if isinstance(exc, ValidationError):  # a typed setting built from user input
            e = exc.errors()[0]
            loc = ".".join(str(x) for x in e.get("loc", ())) or exc.title
            _one_line_error(f"invalid value for {loc}: {e.get('msg', 'invalid')}; check the option or config field")
        _crash(exc, argv)
    except BaseException as exc:  # MemoryError and RecursionError are Exceptions; this is GeneratorExit & co.
        _crash(exc, argv)


if __name__ == "__main__":
    main()
