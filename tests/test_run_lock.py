"""One process per run directory (issue 30): a second one is refused naming the holder, a dead holder's lock is
taken over, the workers write under their driver's lock and stop when it is no longer theirs, and two real runs
on one directory leave the first's results exactly those of a clean run."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import SMALL, comparable_results

from privleak.core.errors import UserError
from privleak.pipeline import runlock
from privleak.pipeline.graph import Graph, Task
from privleak.pipeline.rundir import RunDir

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PRIVLEAK_PROGRESS": "0", "COLUMNS": "200"}

# A process that holds ``argv[1]``'s lock until it is killed (it prints "held" once it does).
HOLDER = ("import sys, time\nfrom privleak.pipeline.rundir import RunDir\nRunDir.open(sys.argv[1])\n"
          "print('held', flush=True)\ntime.sleep(600)\n")


def _holder(root: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(root)], env=ENV, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_process_is_refused_naming_the_holder(tmp_path):
    proc = _holder(tmp_path)
    try:
        with pytest.raises(runlock.RunDirBusy) as ei:
            RunDir.open(tmp_path)
        msg = str(ei.value)
        assert f"PID {proc.pid} on {socket.gethostname()}" in msg and "since" in msg and "\n" not in msg
        assert isinstance(ei.value, UserError)  # one line, exit 2 at the console
    finally:
        proc.kill()
        proc.wait()


def test_a_killed_holder_is_taken_over(tmp_path):
    proc = _holder(tmp_path)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert json.loads((tmp_path / runlock.LOCK_FILE).read_text())["pid"] == proc.pid  # its name stays in the file
    with RunDir.locked(tmp_path):
        run = RunDir.open(tmp_path)
        assert json.loads((tmp_path / runlock.LOCK_FILE).read_text())["token"] == run.lock_token
    assert (tmp_path / runlock.LOCK_FILE).read_text() == ""  # released at the end of the block


def _fake_holder(root: Path, **fields) -> None:
    me = runlock.Holder.me()
    data = {"pid": me.pid, "host": me.host, "started": time.time() - 60, "token": "x" * 32,
            "proc_start": me.proc_start, **fields}
    (root / runlock.LOCK_FILE).write_text(json.dumps(data))


def test_holder_file_alone_decides_where_no_flock_holds_it(tmp_path):
    """A file naming a holder but no flock on it (a crash on a file system that does not share flocks)."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    _fake_holder(tmp_path, pid=int(dead.stdout))  # a PID that no longer runs: stale, taken over
    with RunDir.locked(tmp_path):
        RunDir.open(tmp_path)
    _fake_holder(tmp_path, pid=1, proc_start="1")  # PID 1 runs, but started at another time: a reused PID
    with RunDir.locked(tmp_path):
        RunDir.open(tmp_path)
    _fake_holder(tmp_path, pid=1, host="another-machine")  # cannot be checked from here: refused, with the way out
    with pytest.raises(runlock.RunDirBusy, match=r"another machine.*delete .*\.privleak\.lock"):
        RunDir.open(tmp_path)


def test_reentrant_in_one_process_and_released_after_the_block(tmp_path):
    with RunDir.locked(tmp_path):
        a = RunDir.open(tmp_path)
        b = RunDir.open(tmp_path)  # a library call inside the command that holds it
        assert a.lock_token == b.lock_token
        with RunDir.locked(tmp_path):
            pass
        a.check_lock()  # an inner block does not release the outer one's lock
    proc = _holder(tmp_path)  # another process can take it now
    proc.kill()
    proc.wait()


def test_a_lock_file_that_is_a_symlink_is_refused(tmp_path):
    (tmp_path / "elsewhere").write_text("")
    (tmp_path / runlock.LOCK_FILE).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UserError, match="symbolic link"):
        RunDir.open(tmp_path)


def test_a_worker_does_not_mark_a_stage_under_a_lock_it_lost(tmp_path):
    with RunDir.locked(tmp_path):
        driver = RunDir.open(tmp_path)
        worker = RunDir(root=tmp_path, lock_token=driver.lock_token)
        worker.mark("a", "k", 1.0)  # the driver's lock: allowed
        assert worker.done("a", "k")
        stranger = RunDir(root=tmp_path, lock_token="not-the-driver")
        with pytest.raises(RuntimeError, match="no longer locked by the run"):
            stranger.mark("b", "k", 1.0)
        assert not (tmp_path / "stages" / "b.json").exists()


def write_marker(audit, path: str) -> None:  # a task body (module level: it pickles to a worker)
    Path(audit.run.root, path).write_text("done")


def steal_lock(audit) -> None:  # a task body: another run takes the directory over while this task runs
    lock = Path(audit.run.root, runlock.LOCK_FILE)
    lock.write_text(json.dumps({**json.loads(lock.read_text()), "token": "another-run"}))


def test_process_workers_run_under_the_drivers_lock(tmp_path):
    """Workers never take the lock (they would wait on their own driver): they check the driver's token."""
    from functools import partial

    from privleak.config import ExecutorConfig, build_config
    from privleak.executors.processes import ProcessExecutor
    from privleak.pipeline.audit import Audit

    cfg = build_config(SMALL)
    ex = ProcessExecutor(ExecutorConfig(kind="processes", workers=1))
    try:
        with RunDir.locked(tmp_path):
            audit = Audit(cfg=cfg, run=RunDir.open(tmp_path), notify=lambda s: None)
            ex.run(Graph([Task("write", "k1", partial(write_marker, path="out.txt"))]), audit)
            assert (tmp_path / "out.txt").read_text() == "done" and audit.run.done("write", "k1")
            with pytest.raises(RuntimeError, match="no longer locked"):
                ex.run(Graph([Task("steal", "k2", steal_lock)]), audit)
            assert not audit.run.done("steal", "k2")
    finally:
        ex.close()


def test_two_runs_on_one_directory(tmp_path, audits):
    """Issue 30's failure: a seed-1 run started beside a seed-0 run in the same directory. The second is refused
    (one line naming the first, exit 2) and the first's results.json equals a clean seed-0 run's (the same
    command in this process, on one thread as the processes here)."""
    cfg = {**SMALL, "arms": ["baseline"], "attacks": {**SMALL["attacks"], "select": ["membership"]},
           "executor": {"kind": "sequential"}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    cmd = [sys.executable, "-m", "privleak", "run", "--config", str(tmp_path / "c.yaml")]
    # The session's model cache (ENV was taken at import, before conftest set it): the same base model as the
    # clean run below, and nothing written to the user's own cache.
    env = {**ENV, "OMP_NUM_THREADS": "1", "PRIVLEAK_CACHE": os.environ["PRIVLEAK_CACHE"]}
    first = subprocess.Popen(cmd + ["--out", str(tmp_path / "shared"), "--seed", "0"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lock = tmp_path / "shared" / runlock.LOCK_FILE
    deadline = time.monotonic() + 300
    while not (lock.exists() and lock.read_text().strip()):
        assert first.poll() is None and time.monotonic() < deadline, first.stderr.read() if first.poll() else "slow"
        time.sleep(0.2)
    first.send_signal(signal.SIGSTOP)  # however fast the first run is, it holds the directory while the second tries
    try:
        second = subprocess.run(cmd + ["--out", str(tmp_path / "shared"), "--seed", "1"], env=env,
                                capture_output=True, text=True, timeout=120)
    finally:
        first.send_signal(signal.SIGCONT)
    lines = [ln for ln in second.stderr.splitlines() if ln.strip()]
    assert second.returncode == 2 and len(lines) == 1, second.stderr
    assert lines[0].startswith("error: ") and f"PID {first.pid}" in lines[0], lines[0]
    _, err = first.communicate(timeout=1800)
    assert first.returncode == 0, err[-2000:]
    clean = audits.get(cfg, via="cli", args=("--seed", "0"), threads=1).out
    assert comparable_results(tmp_path / "shared") == comparable_results(clean)
