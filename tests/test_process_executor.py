"""The local worker-process executor (``--executor processes``, what ``auto`` picks on a multi-core CPU
machine): the same results.json as a sequential run, a stopped driver resumes, a dead worker is one line;
and which executor ``auto`` stands for."""

from __future__ import annotations

import json
import os
import signal

import pytest
from conftest import SMALL, Lines, comparable_results, interrupted_after_training

from privleak import pipeline
from privleak.config import ExecutorConfig, build_config
from privleak.core.errors import UserError
from privleak.executors import board, make_executor, resolve_kind
from privleak.executors.processes import WORKER_MEMORY, ProcessExecutor, default_workers
from privleak.pipeline.graph import Sequential

PROCS = {"kind": "processes", "workers": 2}


@pytest.fixture(scope="module")
def process_run(tmp_path_factory):
    """SMALL on 2 worker processes, stopped twice on its way to the end: Ctrl-C once the baseline trained, then
    a rerun whose first task's worker is SIGKILLed (one error), then the rerun that finishes. The finished run
    is then held to the sequential run's results: resuming must not change a figure."""
    out = tmp_path_factory.mktemp("procs")
    cfg = build_config({**SMALL, "executor": PROCS})
    interrupted_after_training(cfg, out)
    finished = {json.loads(p.read_text())["key"] for p in (out / "stages").glob("*.json")}

    killed: list[int] = []

    def kill_worker(line: str) -> None:  # the first task this rerun starts: its worker dies
        if line.startswith("▶ ") and not killed:
            info = board.read_claim(out, line.removeprefix("▶ ").split(" (")[0])
            if info:  # gone: the task finished between the line and here; the next one is killed
                os.kill(int(info["pid"]), signal.SIGKILL)
                killed.append(int(info["pid"]))

    with pytest.raises(RuntimeError, match=r"a worker process died while running .*rerun the same command") as died:
        pipeline.run_audit(cfg, out, notify=kill_worker, executor=make_executor(cfg.executor, notify=kill_worker))
    lines = Lines()
    pipeline.run_audit(cfg, out, notify=lines, executor=make_executor(cfg.executor, notify=lines))
    return out, lines, finished, str(died.value)


def test_process_run_writes_the_sequential_results(sequential_1thread_run, process_run):
    out, lines, _, _ = process_run
    assert any("2 local worker processes" in ln for ln in lines)
    # the board's lines: each task reported as it finishes (the tasks left for the last rerun)
    assert any("✓ " in ln and "(cached)" not in ln for ln in lines)
    assert comparable_results(out) == comparable_results(sequential_1thread_run)
    seq = {p.name: json.loads(p.read_text())["key"] for p in (sequential_1thread_run / "stages").glob("*.json")}
    assert {p.name: json.loads(p.read_text())["key"] for p in (out / "stages").glob("*.json")} == seq
    order = lambda d: list(json.loads((d / "results.json").read_text())["durations_s"])  # noqa: E731
    assert order(out) == order(sequential_1thread_run)


def test_stopped_driver_resumes_and_dead_worker_is_one_error(process_run):
    """Ctrl-C once the arm trained: the workers are stopped, the reruns redo nothing that finished. A worker
    killed mid-task: one error naming the task and the fix (the fixture checks its wording); the rerun finishes
    the audit."""
    out, lines, finished, died = process_run
    assert "\n" not in died.strip()
    cached = {ln for ln in lines if "(cached)" in ln}
    assert len(cached) >= len(finished)
    assert any("train/baseline (cached)" in ln for ln in lines)
    assert not any(ln.startswith("▶ train/baseline") for ln in lines)
    assert (out / "results.json").exists()


def test_auto_is_processes_on_a_multicore_cpu_only(monkeypatch):
    import torch

    auto = ExecutorConfig()
    monkeypatch.delenv("PRIVLEAK_EXECUTOR", raising=False)
    assert auto.kind == "auto"
    assert resolve_kind(auto, torch.device("cpu"), cpus=2) == "processes"
    assert resolve_kind(auto, torch.device("cpu"), cpus=1) == "sequential"
    assert resolve_kind(auto, torch.device("cuda", 0), cpus=16) == "sequential"  # one GPU, one process on it
    assert resolve_kind(ExecutorConfig(kind="sequential"), torch.device("cpu"), cpus=16) == "sequential"
    monkeypatch.setenv("PRIVLEAK_EXECUTOR", "sequential")
    assert resolve_kind(auto, torch.device("cpu"), cpus=16) == "sequential"
    assert isinstance(make_executor(auto), Sequential)
    monkeypatch.setenv("PRIVLEAK_EXECUTOR", "threads")
    with pytest.raises(UserError, match="PRIVLEAK_EXECUTOR=threads: unknown executor"):
        resolve_kind(auto, torch.device("cpu"), cpus=16)
    ex = make_executor(ExecutorConfig(kind="processes", workers=3))
    assert isinstance(ex, ProcessExecutor) and ex.workers == 3
    ex.close()  # never started: nothing to stop


def test_default_workers_follow_cores_and_memory():
    assert default_workers(1, cpus=2, memory=24 * 2**30) == 2
    assert default_workers(2, cpus=2, memory=24 * 2**30) == 1
    assert default_workers(1, cpus=64, memory=2**40) == 8
    assert default_workers(1, cpus=16, memory=2 * WORKER_MEMORY) == 2
    assert default_workers(1, cpus=4, memory=0) == 4  # memory unknown: cores decide
    assert default_workers(1, cpus=4, memory=WORKER_MEMORY // 2) == 1


def test_process_settings_stay_out_of_the_audit():
    a, b = build_config(SMALL), build_config({**SMALL, "executor": PROCS})
    assert a.fingerprint() == b.fingerprint()
    with pytest.raises(UserError, match="workers applies to --executor processes or ray"):
        build_config({**SMALL, "executor": {"kind": "sequential", "workers": 2}})
