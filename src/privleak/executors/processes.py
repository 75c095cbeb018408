"""Local worker processes: the graph's tasks in parallel on this machine, with nothing extra to install.

The default on a CPU machine with two or more cores (``--executor auto``).
What it buys depends on the cores: training one small model uses a second
thread well, evaluation does not, so on 2 cores it gains little over one
two-thread process; with more cores than one 128-wide model can use,
several arms train at once (measured: docs/results/2026-11-25-figures-from-code.md). Each worker is a fresh
``spawn``-ed Python that rebuilds the audit from the config and the run
directory (:mod:`.worker`), exactly as a Ray worker does, so the results
are those of a sequential run and a stopped run resumes either way.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Callable

from ..config import ExecutorConfig
from ..pipeline.audit import Audit
from ..pipeline.graph import Graph, Task
from .dynamic import run_dynamic
from .worker import execute

GIB = 1024**3
#: A worker with torch, transformers and Presidio's spaCy model loaded, plus a small model's training.
WORKER_MEMORY = 3 * GIB
#: More workers than this rarely help: the quick profile's graph runs at most a few trainings at once.
MAX_DEFAULT_WORKERS = 8


def total_memory() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0


def default_workers(cpus_per_task: int, cpus: int | None = None, memory: int | None = None) -> int:
    """Workers when none are named: one per ``cpus_per_task`` cores, at most what memory holds and 8."""
    cpus = (os.cpu_count() or 1) if cpus is None else cpus
    memory = total_memory() if memory is None else memory
    by_memory = memory // WORKER_MEMORY if memory else MAX_DEFAULT_WORKERS
    return int(max(1, min(MAX_DEFAULT_WORKERS, cpus // cpus_per_task, by_memory)))


def _init_worker(env: dict[str, str], driver: int) -> None:
    os.environ.update(env)  # before the first task imports torch: its thread pools read these once
    threading.Thread(target=_exit_with_driver, args=(driver,), daemon=True, name="privleak-driver-watch").start()


def _exit_with_driver(driver: int, every_s: float = 2.0) -> None:
    """Stop this worker once its driver is gone. A driver killed by a signal it cannot catch (SIGKILL, the
    OOM killer) never shuts its pool down, and its spawned workers would go on training for nobody, holding
    CPUs and the run's cache until they finished. Stopping mid-task loses only that task's work: the next run
    resumes from the tasks that finished."""
    while True:
        time.sleep(every_s)
        if os.getppid() != driver:
            os._exit(3)


class ProcessExecutor:
    """The graph on ``workers`` local processes (default :func:`default_workers`)."""

    name = "processes"

    def __init__(self, cfg: ExecutorConfig, notify: Callable[[str], None] = lambda s: None) -> None:
        self.cfg = cfg
        self.notify = notify
        self.workers = cfg.workers or default_workers(cfg.cpus_per_task)
        self._pool: ProcessPoolExecutor | None = None

    def pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            threads = str(self.cfg.cpus_per_task)
            # Workers print no progress bars: the driver's task board is the one view (their bars would tear it).
            env = {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "PRIVLEAK_PROGRESS": "0",
                   "TOKENIZERS_PARALLELISM": "false", "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
            self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=_init_worker, initargs=(env, os.getpid()))
            self.notify(f"executor: {self.workers} local worker process{'es' * (self.workers != 1)}")
        return self._pool

    def run(self, graph: Graph, audit: Audit) -> None:
        run_dynamic(graph, audit, _PoolBackend(self, audit), title="processes")

    def kill(self) -> None:
        """Stop every worker now (Ctrl-C, a failed task): what they ran is not marked done, so a rerun redoes it."""
        if self._pool is None:
            return
        for proc in list(getattr(self._pool, "_processes", {}).values()):  # the pool has no public way to stop a task
            proc.terminate()
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._pool = None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


class _PoolBackend:
    def __init__(self, ex: ProcessExecutor, audit: Audit) -> None:
        self.ex, self.audit = ex, audit
        self.root = str(audit.run.root.absolute())
        # One task per worker at a time, so the scheduler (not the pool's queue) picks what starts next.
        self.slots = ex.workers

    def submit(self, task: Task, wide: bool = False) -> Future:
        # A wide task (the base model, which every arm waits for) may use every worker's cores: what runs
        # beside it (the data defences, the blind baseline) is short, and the cores are idle after.
        threads = self.ex.cfg.cpus_per_task * (self.ex.workers if wide else 1)
        return self.ex.pool().submit(execute, self.audit.cfg, self.root, task, threads, self.audit.run.lock_token)

    def wait(self, handles: list[Future]) -> list[Future]:
        return list(wait(handles, timeout=0.5, return_when=FIRST_COMPLETED).done) if handles else []

    def collect(self, task: Task, handle: Future) -> list[str]:
        try:
            return handle.result()[1]
        except BrokenProcessPool:
            raise RuntimeError(f"a worker process died while running {task.name} (killed, or out of memory); "
                               "rerun the same command to resume, or use --workers 1") from None

    def cancel(self, handles: list[Future]) -> None:
        self.ex.kill()
