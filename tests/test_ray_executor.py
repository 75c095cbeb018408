"""The Ray executor on a local cluster (loopback, 2 workers): the same results.json as the sequential
run, a killed worker's task retried, a stopped driver's run resumed; the graph's declared inputs; Ray
missing is one line and exit 2."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import SMALL, Lines, comparable_results

from privleak import pipeline
from privleak.config import build_config
from privleak.pipeline.audit import Audit
from privleak.pipeline.graph import DATA, Graph, Sequential, Task, audit_graph, data_task
from privleak.pipeline.rundir import RunDir

ray = pytest.importorskip("ray")

from privleak.executors import board, make_executor  # noqa: E402
from privleak.executors.ray_executor import RayExecutor, memory_bytes, resources  # noqa: E402

RAY = {"kind": "ray", "workers": 2}
KILLED = "train/dp-4"  # the longest task of SMALL: the test kills its worker mid-training


def _kill_first_attempt(root: Path, name: str, killed: list[int], stop: threading.Event) -> None:
    """Wait until ``name`` runs (its worker's claim file), let it train a moment, SIGKILL that worker."""
    while not stop.is_set():
        info = board.read_claim(root, name)
        if info and info.get("attempt") == 1:
            time.sleep(0.5)
            if not (root / "stages" / (name.replace("/", "_") + ".json")).exists():  # still mid-task
                os.kill(int(info["pid"]), signal.SIGKILL)
                killed.append(int(info["pid"]))
            return
        time.sleep(0.05)


@pytest.fixture(scope="module")
def ray_run(tmp_path_factory):
    """SMALL on a local Ray with 2 workers: one of them SIGKILLed while it trains dp-4, Ctrl-C in the driver
    (raised from its progress callback) once both arms have trained, then the rerun that finishes the audit."""
    out = tmp_path_factory.mktemp("ray")
    cfg = build_config({**SMALL, "executor": RAY})
    first, killed, stop = Lines(), [], threading.Event()

    def stop_after_dp4(line: str) -> None:
        first(line)
        # Both arms trained (finished, not cached): Ray promises no order between the baseline and dp-4's retry.
        if all(any(f"✓ {name}[" in ln for ln in first) for name in ("train/baseline", KILLED)):
            raise KeyboardInterrupt

    killer = threading.Thread(target=_kill_first_attempt, args=(out, KILLED, killed, stop), daemon=True)
    killer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            pipeline.run_audit(cfg, out, notify=stop_after_dp4, executor=make_executor(cfg.executor, notify=stop_after_dp4))
    finally:
        stop.set()
        killer.join()
    assert not ray.is_initialized()  # the executor started Ray, so it shut it down, interrupted too
    assert not (out / "results.json").exists()
    finished = {json.loads(p.read_text())["key"] for p in (out / "stages").glob("*.json")}
    lines = Lines()
    pipeline.run_audit(cfg, out, notify=lines, executor=make_executor(cfg.executor, notify=lines))
    assert not ray.is_initialized()
    return out, first, lines, killed, finished


def test_ray_run_writes_the_sequential_results(sequential_1thread_run, ray_run):
    out, _, lines, _, _ = ray_run
    assert any("local Ray, 2 workers" in ln for ln in lines)
    assert comparable_results(out) == comparable_results(sequential_1thread_run)
    # every stage marked with the same key, and the durations listed in the same (graph) order
    seq_markers = {p.name: json.loads(p.read_text())["key"] for p in (sequential_1thread_run / "stages").glob("*.json")}
    ray_markers = {p.name: json.loads(p.read_text())["key"] for p in (out / "stages").glob("*.json")}
    assert ray_markers == seq_markers
    seq_d = json.loads((sequential_1thread_run / "results.json").read_text())["durations_s"]
    ray_d = json.loads((out / "results.json").read_text())["durations_s"]
    assert list(ray_d) == list(seq_d)
    assert not (out / "stages" / board.RUNNING_DIR).exists()


def test_killed_worker_task_is_retried(ray_run):
    out, first, _, killed, _ = ray_run
    assert killed, "the killer never saw train/dp-4 running mid-task"
    assert any(f"↻ {KILLED}" in ln and "attempt 2" in ln for ln in first), first
    assert any(f"✓ {KILLED}" in ln and "attempt 2" in ln for ln in first)
    assert (out / "arms" / "dp-4" / "train.json").exists()


def test_stopped_driver_resumes_from_finished_tasks(ray_run):
    """Ctrl-C in the driver cancels what runs; the rerun redoes nothing that finished, on either executor, and
    gives the sequential figures (the test above)."""
    out, _, lines, _, finished = ray_run
    cached = [ln for ln in lines if "(cached)" in ln]
    assert any("train/baseline (cached)" in ln for ln in cached) and any(f"{KILLED} (cached)" in ln for ln in cached)
    assert len(cached) == len(finished)
    assert not any(ln.startswith("▶ train/") for ln in lines)
    # the sequential executor reads the same markers: nothing left to do
    seq = Lines()
    pipeline.run_audit(build_config(SMALL), out, notify=seq)
    assert not any(ln.startswith("▶") for ln in seq)


# ---------------------------------------------------------------- the graph and the requests (no Ray run)

@pytest.fixture(scope="module")
def small_audit(tmp_path_factory):
    """SMALL's data stage only: enough to build its graph."""
    root = tmp_path_factory.mktemp("graph")
    cfg = build_config({**SMALL, "arms": ["baseline", "dp-4", "guard"],
                        "shadows": {"enabled": True, "n_shadows": 2, "arms": ["dp-4"]}})
    audit = Audit(cfg=cfg, run=RunDir.open(root), notify=lambda s: None)
    Sequential().run(Graph([data_task(cfg)]), audit)
    return audit


def test_graph_declares_what_each_task_reads(small_audit):
    g = audit_graph(small_audit)
    names = [t.name for t in g.tasks]
    pos = {n: i for i, n in enumerate(names)}
    for t in g.tasks:
        assert all(i == DATA or pos[i] < pos[t.name] for i in t.inputs), t.name
        assert t.outputs, t.name
    shadows = [n for n in names if n.startswith("shadow/dp-4/")]
    assert shadows == ["shadow/dp-4/1", "shadow/dp-4/2"]
    assert set(shadows) <= set(g["membership/dp-4"].inputs)  # LiRA reads the shadows
    assert not set(shadows) & set(g["membership/baseline"].inputs)
    assert "train/dp-4" in g["pii/dp-4"].inputs and "base-model" in g["pii/dp-4"].inputs
    assert "train/baseline" in g["guard-cost/guard"].inputs  # the guard serves the baseline's model
    assert "train/baseline" in g["extraction/guard"].inputs
    assert {t.kind for t in g.tasks} == {"light", "train", "eval"}


def test_graph_refuses_an_input_not_yet_added():
    g = Graph()
    g.add(Task("a", "k", print))
    with pytest.raises(ValueError, match="not .yet. in the graph"):
        g.add(Task("b", "k", print, inputs=("c",)))
    with pytest.raises(ValueError, match="twice"):
        g.add(Task("a", "k", print))


def test_resource_requests_follow_the_model_and_config(small_audit):
    g = audit_graph(small_audit)
    root = small_audit.run.root
    light, train, ev = (resources(g[n], small_audit.cfg, root) for n in ("blind-baseline", "train/dp-4", "utility/dp-4"))
    assert light.memory < ev.memory < train.memory
    assert light.num_gpus == train.num_gpus == 0.0
    big = build_config({**SMALL, "executor": {"kind": "ray", "cpus_per_task": 2, "gpus_per_task": 1}})
    r = resources(g["train/dp-4"], big, root)
    assert (r.num_cpus, r.num_gpus) == (2, 1.0)
    assert resources(g["blind-baseline"], big, root).num_gpus == 0.0
    # GPT-2 small: 124 M parameters → several GiB to train, told to Ray in bytes
    assert memory_bytes("train", 124_000_000, big.executor) > 4 * 1024**3
    fixed = build_config({**SMALL, "executor": {"kind": "ray", "memory_gib": 3}}).executor
    assert memory_bytes("eval", 10**9, fixed) == 3 * 1024**3


# ---------------------------------------------------------------- the command line

def _cli(args: list[str]) -> tuple[int, str]:
    from privleak.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        try:
            main(args)
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, buf.getvalue()


def test_ray_not_installed_is_one_line_and_exit_2(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError, as when it is absent
    code, text = _cli(["run", "--executor", "ray", "--out", str(tmp_path / "run")])
    assert code == 2
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert len(lines) == 1 and "pip install 'privleak[ray]'" in lines[0], text
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("args, needle", [
    (["--executor", "sequential", "--workers", "2"], "drop it or name one"),
    (["--executor", "processes", "--ray-address", "auto"], "add --executor ray"),
    (["--executor", "dask"], "executor.kind"),
    (["--executor", "ray", "--ray-address", "nowhere"], "not a Ray address"),
    (["--executor", "ray", "--ray-address", "auto", "--workers", "2"], "drop workers"),
])
def test_executor_usage_errors(tmp_path, args, needle):
    code, text = _cli(["run", "--out", str(tmp_path / "run"), *args])
    assert code == 2 and needle in text, text
    assert len([ln for ln in text.splitlines() if ln.strip()]) == 1


def test_executor_settings_stay_out_of_the_audit():
    a, b = build_config(SMALL), build_config({**SMALL, "executor": {"kind": "ray", "workers": 3}})
    assert a.model_dump(mode="json") == b.model_dump(mode="json") and a.fingerprint() == b.fingerprint()
    assert isinstance(make_executor(b.executor), RayExecutor) and isinstance(make_executor(a.executor), Sequential)


def test_board_shows_where_tasks_run_and_counts_retries(tmp_path):
    """The driver's view from the workers' claim files: queued → running (host:pid) → retried → done."""
    from rich.console import Console

    lines = Lines()
    view = board.TaskBoard(tmp_path, ["train/a", "eval/a"], title="ray", notify=lines, live=False)
    view.submitted("train/a")
    view.poll()
    assert view.states["train/a"].status == "queued" and view.states["eval/a"].status == "waiting"
    assert board.claim(tmp_path, "train/a") == 1
    view.poll()
    assert view.states["train/a"].status == "running" and str(os.getpid()) in view.states["train/a"].where
    assert board.claim(tmp_path, "train/a") == 2  # the worker died; Ray's retry claims it again
    view.poll()
    assert view.retries == 1 and any(ln.startswith("[yellow]↻ train/a") for ln in lines)
    console = Console(width=120, record=True)
    console.print(view.render())
    text = console.export_text()
    assert "train/a" in text and "running" in text and "1 retried" in text and "1 waiting" in text
    board.release(tmp_path, "train/a")
    view.finished("train/a", 1.25)
    assert "1/2 done" in view.summary() and lines[-1].startswith("[green]✓ train/a")
