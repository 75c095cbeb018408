"""The building blocks of issue 30, each on its own: control characters, JSON limits, output paths and modes,
memory estimates, the thread rule and the crash report's sanitising."""

from __future__ import annotations

import json
import os
import stat

import pytest

from privleak.core import crash, jsonlimits, limits, threads
from privleak.core.errors import UserError
from privleak.core.io import check_output_file, private_mode
from privleak.core.terminal import escape_control


# ---------------------------------------------------------------- control characters

@pytest.mark.parametrize("raw,shown", [
    ("\x1b[2J", "\\x1b[2J"),                # clear screen
    ("\x1b]52;c;aGk=\x07", "\\x1b]52;c;aGk=\\x07"),  # write the clipboard
    ("ok\rfake", "ok\\x0dfake"),            # overwrite the line
    ("\u202egnp.exe", "\\u202egnp.exe"),    # right-to-left override
    ("\x9b31m", "\\x9b31m"),                # C1 CSI
    ("a\nb\tc", "a\\x0ab\\x09c"),
    ("café 東京 🙂", "café 東京 🙂"),          # printable text stays as it is
])
def test_escape_control(raw, shown):
    assert escape_control(raw) == shown


def test_escape_control_can_keep_lines():
    assert escape_control("a\nb\tc\r\x1b", keep_newlines=True) == "a\nb\tc\\x0d\\x1b"


# ---------------------------------------------------------------- JSON limits

def test_json_limits():
    assert jsonlimits.loads('{"text": "[[[[{{{{", "n": [1, 2.5]}') == {"text": "[[[[{{{{", "n": [1, 2.5]}
    assert jsonlimits.loads("[" * 64 + "]" * 64) is not None
    with pytest.raises(jsonlimits.JSONLimitError, match="nested more than 64"):
        jsonlimits.loads("[" * 65 + "]" * 65)
    with pytest.raises(jsonlimits.JSONLimitError, match="nested more than 64"):
        jsonlimits.loads("[" * 200_000 + "]" * 200_000)
    with pytest.raises(jsonlimits.JSONLimitError, match="100,000 characters"):
        jsonlimits.loads('{"n": ' + "9" * 100_000 + "}")
    with pytest.raises(jsonlimits.JSONLimitError):
        jsonlimits.loads("[1." + "5" * 100 + "]")
    with pytest.raises(json.JSONDecodeError):
        jsonlimits.loads('{"text": ')
    assert issubclass(jsonlimits.JSONLimitError, ValueError)


# ---------------------------------------------------------------- output paths

def test_check_output_file_refuses_what_must_not_be_replaced(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text("x\n")
    (tmp_path / "other").write_text("y")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "link").symlink_to(tmp_path / "other")
    os.link(src, tmp_path / "hard")
    cases = {"/dev/null": "character device", str(tmp_path / "fifo"): "FIFO", str(tmp_path / "link"): "symbolic link",
             str(src): "is the input file", str(tmp_path / "hard"): "is the input file", str(tmp_path): "directory",
             str(tmp_path / "no" / "o.jsonl"): "does not exist"}
    for path, needle in cases.items():
        with pytest.raises(UserError, match=needle):
            check_output_file(path, [src], option="OUT")
    assert check_output_file(tmp_path / "new.jsonl", [src]) == tmp_path / "new.jsonl"
    assert check_output_file(tmp_path / "other", [src]) == tmp_path / "other"  # a regular file is replaced
    assert (tmp_path / "other").read_text() == "y" and stat.S_ISFIFO(os.lstat(tmp_path / "fifo").st_mode)


def test_private_mode(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("")
    b.write_text("")
    a.chmod(0o644)
    b.chmod(0o400)
    assert private_mode([a]) == 0o600 and private_mode([a, b]) == 0o400 and private_mode([]) == 0o600


def test_check_fits():
    limits.check_fits("x", 10, 8, available=1000)
    with pytest.raises(UserError, match=r"x = 1,000 needs .* use at most 62"):
        limits.check_fits("x", 1000, 8, available=1000)


# ---------------------------------------------------------------- threads

def test_thread_rule(monkeypatch):
    cores = threads.cores_available()
    assert 1 <= cores <= (os.cpu_count() or 1)
    assert threads.intra_op_threads(1) == cores and threads.intra_op_threads(cores * 4) == 1
    monkeypatch.setattr(threads, "cores_available", lambda: 8)
    assert threads.intra_op_threads(3) == 2
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    import torch

    before = torch.get_num_threads()
    try:
        assert threads.use_thread_rule() == 1  # the user's OMP_NUM_THREADS wins
    finally:
        torch.set_num_threads(before)
    assert os.environ.get("OMP_WAIT_POLICY")  # conftest sets PASSIVE (unless the user chose) before torch loads


def test_workers_on_a_sequential_executor_are_refused(monkeypatch):
    from privleak.config import ExecutorConfig
    from privleak.executors import make_executor

    monkeypatch.setenv("PRIVLEAK_EXECUTOR", "sequential")
    with pytest.raises(UserError, match="--workers 2: the executor here is sequential"):
        make_executor(ExecutorConfig(workers=2))


# ---------------------------------------------------------------- crash reports

SECRET = "Alfred Hughes, SSN 394-72-1850"


def _fail(record: str) -> None:
    texts = [record] * 3  # noqa: F841  (a local that holds the record, as a real stage's would)
    raise KeyError(record)


def test_sanitise_keeps_types_and_frames_only(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVLEAK_CRASH_DIR", str(tmp_path / "crashes"))
    try:
        try:
            _fail(SECRET)
        except KeyError as inner:
            raise RuntimeError(f"stage failed on {SECRET}") from inner
    except RuntimeError as exc:
        report = crash.write_crash_report(exc, "privleak run")
        debug = crash.render(crash.sanitise(exc, full_paths=True), source=True)
    text = report.path.read_text()
    assert stat.S_IMODE(report.path.stat().st_mode) == 0o600 and report.exception == "RuntimeError"
    assert "exception: RuntimeError" in text and "raised from:" in text and "KeyError" in text
    assert "in _fail" in text and "test_core_safety.py" in text
    for leak in ("Alfred", "Hughes", "394-72-1850"):
        assert leak not in text and leak not in debug
    assert "raise KeyError(record)" in debug  # the debug view shows code lines, which are not data


def test_a_worker_traceback_keeps_only_its_frames():
    from concurrent.futures.process import _RemoteTraceback

    remote = _RemoteTraceback(f'\n"""\nTraceback (most recent call last):\n  File "/x/privleak/pipeline/train.py", '
                              f'line 12, in train_arm\n    x = 1\nValueError: bad record {SECRET}\n"""')
    exc = ValueError(SECRET)
    exc.__cause__ = remote
    text = crash.render(crash.sanitise(exc))
    assert "train_arm" in text and "train.py:12" in text and "394-72-1850" not in text
