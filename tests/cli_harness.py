"""The console entry point called in this process, as a subprocess would see it; and the real console script.

``run_cli(args)`` calls :func:`privleak.cli.main` with ``args`` and returns what a ``subprocess.run`` of
``privleak ARGS`` would: a ``CompletedProcess`` with the exit code and everything written to stdout and stderr,
at the Python level (``sys.stdout`` / ``sys.stderr``) *and* at the file-descriptor level (C extensions, Rust
tokenizers, OpenMP), so a stray line or traceback printed by anything counts as it does in a subprocess. A
Python start-up costs 0.5-3 s on a busy 2-core machine and the refusal matrices hold ~200 cases; in this
process a refusal costs milliseconds.

What the command line sets on its way is put back after each call, so one case cannot leak into the next or
into the tests that follow: the environment (``quiet_libraries`` sets variables with ``setdefault``), the
working directory, torch's thread count, the levels of the loggers it quiets, warning filters, run-directory
locks a refused command left held, and ``sys.stdin`` (``/dev/null``, as the subprocesses had). A case that
hangs is stopped after ``timeout`` seconds (SIGALRM) and reported as hung; that is a guard, not a measurement.

What only a real process proves stays in a subprocess (``run_console_script``): that the installed console
script starts, and that a refusal comes before torch and transformers are imported (it reports which of
``HEAVY`` the process had imported when ``main`` returned).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import signal
import stat
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path(sys.executable).with_name("privleak")
#: Modules a refusal must not wait for: importing them takes seconds (issue 30).
HEAVY = ("torch", "transformers")
CASE_TIMEOUT = float(os.environ.get("PRIVLEAK_CASE_TIMEOUT", "120"))


class CaseHung(Exception):
    pass


@contextlib.contextmanager
def _fd_captured(fd: int) -> Iterator[tempfile.TemporaryFile]:
    """Point file descriptor ``fd`` at a temporary file for the block (what C code and stale handles write)."""
    saved = os.dup(fd)
    sink = tempfile.TemporaryFile(mode="w+b")
    try:
        os.dup2(sink.fileno(), fd)
        yield sink
    finally:
        os.dup2(saved, fd)
        os.close(saved)


def _read(sink) -> str:
    sink.seek(0)
    return sink.read().decode("utf-8", "replace")


@contextlib.contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    def hung(signum, frame):
        raise CaseHung(f"no answer in {seconds:g} s")

    if seconds <= 0 or not hasattr(signal, "SIGALRM"):
        yield
        return
    previous = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _exit_code(code: object) -> tuple[int, str]:
    """``sys.exit(code)``'s status as the interpreter reports it (a string is printed and means 1)."""
    if code is None:
        return 0, ""
    if isinstance(code, int):
        return code, ""
    return 1, f"{code}\n"


def run_cli(args: list[str], env: dict[str, str] | None = None, cwd: str | os.PathLike[str] | None = None,
            timeout: float = CASE_TIMEOUT) -> subprocess.CompletedProcess:
    """``privleak ARGS`` in this process: a ``CompletedProcess`` (``returncode``, ``stdout``, ``stderr``;
    ``returncode`` None when the call hung). ``env`` adds environment variables for the call only."""
    from privleak.cli import main
    from privleak.pipeline import runlock

    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else None
    loggers = {name: lg.level for name, lg in logging.Logger.manager.loggerDict.items()
               if isinstance(lg, logging.Logger)}
    root_level = logging.getLogger().level
    held = set(runlock._HELD)
    saved_stdin = sys.stdin
    out, err = io.StringIO(), io.StringIO()
    code: int | None
    tail = ""
    try:
        os.environ.update(env or {})
        if cwd is not None:
            os.chdir(cwd)
        with open(os.devnull) as devnull, warnings.catch_warnings(), \
                _fd_captured(1) as fd_out, _fd_captured(2) as fd_err:
            sys.stdin = devnull
            try:
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _alarm(timeout):
                    try:
                        main(list(args))
                        code = 0
                    except SystemExit as exc:
                        code, tail = _exit_code(exc.code)
            except CaseHung:
                code = None
            finally:
                sys.stdin = saved_stdin
            for stream in (sys.__stdout__, sys.__stderr__):  # what was buffered on the real descriptors
                if stream is not None:
                    stream.flush()
            fd_text = _read(fd_out), _read(fd_err)
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.set_num_threads(threads if threads is not None else torch.get_num_threads())
        for name, level in loggers.items():
            lg = logging.Logger.manager.loggerDict.get(name)
            if isinstance(lg, logging.Logger):
                lg.setLevel(level)
        logging.getLogger().setLevel(root_level)
        for key in set(runlock._HELD) - held:
            runlock.release(key, force=True)
    return subprocess.CompletedProcess(list(args), code, out.getvalue() + fd_text[0],
                                       err.getvalue() + tail + fd_text[1])


# What the console script runs, plus a report of the heavy modules imported when main returned (or exited):
# written to a file, so stdout and stderr stay exactly the command's.
_REPORTING_MAIN = """
import json, os, sys
try:
    from privleak.cli import main
    main(sys.argv[1:])
finally:
    with open(os.environ["PRIVLEAK_TEST_IMPORTS"], "w") as f:
        json.dump(sorted(m for m in {heavy!r} if m in sys.modules), f)
"""


def console_command() -> list[str]:
    """The installed console script, or ``python -m privleak`` where none is installed."""
    return [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "privleak"]


def subprocess_env(**extra: str) -> dict[str, str]:
    """This checkout's ``src`` first on the path (the code under test is the code that runs), no progress bars."""
    return {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PRIVLEAK_PROGRESS": "0", "COLUMNS": "200", **extra}


def run_console_script(args: list[str], env: dict[str, str] | None = None, timeout: float = CASE_TIMEOUT,
                       imports: bool = False) -> tuple[subprocess.CompletedProcess | None, list[str] | None]:
    """``privleak ARGS`` as a real process: (the completed process or None when it hung, and with ``imports``
    the modules of ``HEAVY`` it had imported when ``main`` returned — else None)."""
    full = subprocess_env(**(env or {}))
    if imports:
        report = Path(tempfile.mkdtemp(prefix="privleak-imports-")) / "imports.json"
        full["PRIVLEAK_TEST_IMPORTS"] = str(report)
        cmd = [sys.executable, "-c", _REPORTING_MAIN.format(heavy=HEAVY)]
    else:
        cmd = console_command()
    try:
        proc = subprocess.run(cmd + list(args), capture_output=True, text=True, env=full, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None, None
    if not imports:
        return proc, None
    try:
        return proc, json.loads(report.read_text())
    finally:
        report.unlink(missing_ok=True)
        report.parent.rmdir()


def snapshot(d: Path) -> dict[str, tuple]:
    """Every entry under ``d``: its type, size, mode and modification time (links not followed)."""
    out = {}
    for root, dirs, files in os.walk(d):
        for name in dirs + files:
            p = Path(root) / name
            st = p.lstat()
            out[str(p.relative_to(d))] = (stat.S_IFMT(st.st_mode), st.st_size, st.st_mode, st.st_mtime_ns)
    return out


def expand(argv: str, **values: object) -> list[str]:
    """A case's argv string split on single spaces, ``{name}`` replaced by ``values[name]`` in each word."""
    words = argv.split(" ") if argv else []
    for name, value in values.items():
        words = [w.replace("{" + name + "}", str(value)) for w in words]
    return words


def assert_one_line_refusal(proc: subprocess.CompletedProcess | None, needle: str, what: object = "") -> None:
    """Exit 2, exactly one non-blank stderr line, starting ``error: `` and holding ``needle``; no traceback and
    no raw control character anywhere in the output."""
    assert proc is not None and proc.returncode is not None, f"{what!r} hung: no answer in {CASE_TIMEOUT} s"
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, (what, proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-2000:]
    assert needle in lines[0], (needle, lines[0])
    assert not any(ch in proc.stderr + proc.stdout for ch in "\x1b\x07\r"), repr(lines[0])  # shown, never obeyed
