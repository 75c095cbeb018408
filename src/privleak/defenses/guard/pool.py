"""The guard service's checks on a bounded pool of worker processes, each check with a time budget.

Why processes: one check of a 57 KB PII-dense body takes seconds of CPU (spaCy's NER and Presidio's
recognizers, under the analyser's lock: spaCy pipelines are not thread-safe), so threads add no throughput,
and a thread cannot be stopped. Each worker is a process holding its own guard; the server's event loop only
reads, queues and answers, so ``/healthz`` is answered at once while every worker is busy (issue 49's probe:
50 concurrent 57 KB requests on one unbounded thread pool left ``/healthz`` unanswered for ≥ 30 s, and requests
whose clients had gone ran 140 s more).

The bounds (:class:`PoolLimits`):

* ``workers``: checks at once, one per process.
* ``timeout_s``: a request's whole budget from admission, queue wait included. Past it the request is
  answered (504) and its check stopped.
* The queue is bounded by work, not only by count: while every worker is busy, a request is admitted only if
  the work ahead of it and its own, predicted from its length (:func:`admission`), end within ``timeout_s``;
  otherwise it is refused at once (:class:`Busy`, the service's 503) with a ``Retry-After`` of the seconds
  until it would be admitted — rather than queued to time out. A check's cost is linear in the text's length
  (bench/bench_scrub_long.py); the seconds per character are measured by each worker on a PII-dense sample
  when it starts and then follow the checks actually done (a moving mean), so the prediction follows the
  machine's load. ``queue`` caps the count besides (each waiting request holds its body in memory): 200
  concurrent one-line requests are all admitted, 50 concurrent 57 KB PII-dense ones are not.

Stopping a check (time budget spent, or the client gone): the worker is sent ``SIGUSR1``, whose handler raises
:class:`Stop` inside the check — Python runs signal handlers between bytecodes, so within milliseconds, or once
the C call under way (a spaCy parse of one window) returns — and the worker takes the next request. A worker
that has not stopped within ``grace_s`` is killed and replaced (the replacement loads the analyser: seconds).
"""

from __future__ import annotations

import concurrent.futures as cf
import itertools
import logging
import math
import multiprocessing
import os
import queue
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ...core import limits as L
from ...core.errors import UserError
from .guard import Guard

log = logging.getLogger("privleak.guard.service")

#: A worker must say it is ready (analyser loaded, warmed up) within this long.
START_TIMEOUT_S = 600.0
#: How often a busy slot looks at its request's deadline and cancellation while the worker computes.
POLL_S = 0.05
#: Requests that may wait by default: each holds its body (at most --max-bytes, 64 KB by default: 16 MB in
#: all); the time budget, through :func:`admission`, usually refuses long before.
DEFAULT_QUEUE = 256
#: What a worker checks when it starts, to measure its seconds per character: PII-dense (a value every ~25
#: characters), 3.7 KB. With spaCy's NER it measures 220 ms per 1,000 characters where 57 KB of the probe's
#: patient notes take 190 (the same machine and load): a slightly pessimistic start, which the moving mean
#: of the checks done then corrects.
CALIBRATION = ("Patient Maria Lopez (DOB 03/14/1962, MRN 4471902) called from (617) 555-0142 about the letter "
               "sent to 12 Elm Street, Boston, MA 02118; SSN 123-45-6789 on file, e-mail maria.lopez@example.org, "
               "seen by Dr. James Chen on 2024-05-02. ") * 16
#: A check's fixed cost besides its length (parsing, the verdict, the pipe), in seconds.
OVERHEAD_S = 0.005


def admission(backlog_s: float, cost_s: float, workers: int, busy: int, timeout_s: float) -> float:
    """0 when a request predicted to take ``cost_s`` seconds may be admitted, else the seconds after which it
    would be (its Retry-After). ``busy``: requests admitted and not done (waiting or checked); ``backlog_s``:
    their predicted seconds still to go. A free worker always takes it; otherwise it waits for the backlog
    spread over the workers, and is admitted when that and its own check fit in ``timeout_s``."""
    if busy < workers:
        return 0.0
    late = backlog_s / workers + cost_s - timeout_s
    return 0.0 if late <= 0 else late


def default_workers() -> int:
    """The CPUs this process may run on, at most 4 (each worker holds an analyser: ~0.3 GB with spaCy's model)."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        n = os.cpu_count() or 1
    return max(1, min(4, n))


@dataclass(frozen=True)
class PoolLimits:
    """How much the service takes on (see the module docstring); ``queue`` None is :data:`DEFAULT_QUEUE`."""

    workers: int = field(default_factory=default_workers)
    queue: int | None = None
    timeout_s: float = 30.0
    grace_s: float = 3.0

    def __post_init__(self) -> None:
        for name, value, lo, hi in (("--workers", self.workers, 1, L.MAX_GUARD_WORKERS),
                                    ("--queue", self.queue_limit, 0, L.MAX_GUARD_QUEUE)):
            if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
                raise UserError(f"{name} {value}: must be a whole number from {lo} to {hi:,}")
        for name, value in (("--timeout", self.timeout_s), ("grace_s", self.grace_s)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= L.MAX_GUARD_TIMEOUT_S:
                raise UserError(f"{name} {value}: must be more than 0 and at most {L.MAX_GUARD_TIMEOUT_S:g} seconds; "
                                "try 30")

    @property
    def queue_limit(self) -> int:
        return DEFAULT_QUEUE if self.queue is None else self.queue


class Busy(Exception):
    """Every worker is busy and the queue is full: retry after ``retry_after`` seconds."""

    def __init__(self, retry_after: int, checking: int, waiting: int) -> None:
        super().__init__(f"{checking} requests being checked and {waiting} waiting")
        self.retry_after, self.checking, self.waiting = retry_after, checking, waiting


class Stop(BaseException):
    """Raised inside a worker's check when the server stops it (a BaseException: libraries' ``except
    Exception`` does not swallow it)."""


@dataclass(frozen=True)
class Outcome:
    """How a request ended: ``ok`` (``verdict`` holds the verdict's JSON), ``timeout`` (over its budget),
    ``gone`` (its client left), ``lost`` (the worker died under it) or ``error`` (the check raised; ``detail``
    holds the exception's type name, never its message: it may quote the text)."""

    kind: str
    verdict: dict[str, Any] | None = None
    detail: str = ""


class Job:
    """One admitted request."""

    def __init__(self, job_id: int, text: str, context: str, deadline: float) -> None:
        self.id, self.text, self.context, self.deadline = job_id, text, context, deadline
        self.future: cf.Future[Outcome] = cf.Future()
        self.state = "queued"  # queued → running → done (under the pool's lock)
        self.started = False  # a worker took it
        self.reason = ""  # why it is being stopped: "timeout" or "gone"
        self.stop = threading.Event()
        self.cost = 0.0  # predicted seconds

    def remaining(self) -> float:
        return self.deadline - time.monotonic()


def _resolve(job: Job, outcome: Outcome) -> None:
    try:
        job.future.set_result(outcome)
    except cf.InvalidStateError:  # already resolved
        pass


# --------------------------------------------------------------------------------------------- the worker


def _worker_main(conn: Any, source: Guard | Callable[[], Guard]) -> None:
    """A worker process: build the guard, warm it up, then check what arrives until the pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the server's: it stops the workers itself
    active = [False]

    def stop(signum: int, frame: Any) -> None:
        if active[0]:  # only a check is stopped, never the reply on its way back
            active[0] = False
            raise Stop

    if hasattr(signal, "SIGUSR1"):
        signal.signal(signal.SIGUSR1, stop)
    logging.getLogger("presidio-analyzer").setLevel(logging.WARNING)  # it quotes text around detections at DEBUG
    try:
        guard = source if isinstance(source, Guard) else source()
        guard.warm_up()
    except BaseException as exc:  # noqa: BLE001 - the server reports it and exits
        conn.send(("error", 0, str(exc) if isinstance(exc, UserError) else type(exc).__name__))
        return
    # Twice, the faster counted: the first check after the warm-up runs cold (3× the steady rate, measured).
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        guard.check(CALIBRATION)
        times.append(time.perf_counter() - t0)
    conn.send(("ready", 0, (os.getpid(), min(times) / len(CALIBRATION))))
    while True:
        try:
            job_id, text, context = conn.recv()
        except (EOFError, OSError):  # the server is gone
            return
        try:
            active[0] = True
            verdict = guard.check(text, context)
            active[0] = False
            reply: tuple = ("ok", job_id, verdict.to_json())
        except Stop:
            reply = ("stopped", job_id, None)
        except Exception as exc:  # noqa: BLE001 - one request's failure, reported by type only
            active[0] = False
            reply = ("error", job_id, type(exc).__name__)
        try:
            conn.send(reply)
        except (EOFError, OSError):
            return


def _context() -> Any:
    """forkserver where there is one (workers fork from a clean process that imported the heavy libraries
    once; forking this one, which runs threads, is unsafe), spawn elsewhere."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["privleak.defenses.guard.pool", "presidio_analyzer", "spacy"])
        return ctx
    return multiprocessing.get_context("spawn")


class _Worker:
    """The server's end of one worker process."""

    def __init__(self, ctx: Any, source: Guard | Callable[[], Guard], slot: int) -> None:
        self.conn, child = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(target=_worker_main, args=(child, source), name=f"privleak-guard-{slot}", daemon=True)
        self.proc.start()
        child.close()
        self.pid: int | None = None
        self.s_per_char = 0.0  # measured on CALIBRATION when it started

    def wait_ready(self, timeout: float) -> None:
        try:
            ready = self.conn.poll(timeout)
            kind, _, info = self.conn.recv() if ready else (f"not ready after {timeout:g} s", 0, None)
        except (EOFError, OSError):
            kind, info = "died", None
        if kind == "ready":
            self.pid, self.s_per_char = int(info[0]), float(info[1])
            return
        self.kill()
        if kind == "error":
            raise UserError(f"guard worker could not start: {info}")
        raise RuntimeError(f"guard worker did not start ({kind}; exit code {self.proc.exitcode})")

    def interrupt(self) -> None:
        if self.pid is not None and hasattr(signal, "SIGUSR1"):
            try:
                os.kill(self.pid, signal.SIGUSR1)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)
        self.conn.close()


# --------------------------------------------------------------------------------------------- the pool


class CheckPool:
    """``limits.workers`` worker processes checking texts with the guard ``source`` builds (or ``source``
    itself, pickled into each), at most ``limits.queue_limit`` requests waiting; blocks until every worker
    is ready. Thread-safe; :meth:`close` stops the workers."""

    def __init__(self, source: Guard | Callable[[], Guard], limits: PoolLimits | None = None) -> None:
        self.limits = limits or PoolLimits()
        self._source = source
        self._ctx = _context()
        self._jobs: queue.Queue[Job | None] = queue.Queue()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._waiting = 0
        self._checking = 0
        self._waiting_s = 0.0  # predicted seconds of the waiting requests
        self._running: dict[int, tuple[float, float]] = {}  # slot → (start, predicted seconds) of its check
        self._closed = False
        # Requests by how they ended, and checks stopped in their worker (``stopped``) or by killing it.
        self.counts = {"checked": 0, "refused": 0, "timeout": 0, "gone": 0, "lost": 0, "error": 0,
                       "stopped": 0, "killed": 0}
        workers = [_Worker(self._ctx, source, i) for i in range(self.limits.workers)]  # they start side by side
        try:
            for w in workers:
                w.wait_ready(START_TIMEOUT_S)
        except BaseException:
            for w in workers:
                w.kill()
            raise
        self._workers: list[_Worker | None] = list(workers)
        self._s_per_char = max(w.s_per_char for w in workers)  # then a moving mean of the checks done
        self._threads = [threading.Thread(target=self._slot, args=(i,), name=f"privleak-guard-slot-{i}", daemon=True)
                         for i in range(self.limits.workers)]
        for t in self._threads:
            t.start()

    # -- admission --------------------------------------------------------------------------------------

    def _cost(self, chars: int) -> float:
        return OVERHEAD_S + chars * self._s_per_char

    def _backlog_s(self, now: float) -> float:
        # Under the lock: the waiting requests' predicted seconds and what the running checks have left.
        return self._waiting_s + sum(max(0.0, cost - (now - start)) for start, cost in self._running.values())

    def submit(self, text: str, context: str = "") -> Job:
        """Admit a check (its budget starts now), or raise :class:`Busy` (see :func:`admission`)."""
        with self._lock:
            now = time.monotonic()
            busy = self._waiting + self._checking
            cost = self._cost(len(text) + len(context))
            late = admission(self._backlog_s(now), cost, self.limits.workers, busy, self.limits.timeout_s)
            if self._closed or late > 0 or busy >= self.limits.workers + self.limits.queue_limit:
                self.counts["refused"] += 1
                # Full by count: a slot frees when the earliest of the running checks ends.
                wait = late if late > 0 else self._backlog_s(now) / self.limits.workers
                raise Busy(max(1, math.ceil(wait)), self._checking, self._waiting)
            job = Job(next(self._ids), text, context, now + self.limits.timeout_s)
            job.cost = cost
            self._waiting += 1
            self._waiting_s += cost
        self._jobs.put(job)
        return job

    def cancel(self, job: Job, reason: str) -> None:
        """Stop ``job`` (``reason``: ``timeout`` or ``gone``): a waiting one leaves the queue at once, a
        running one's worker is told to stop."""
        with self._lock:
            if job.state == "done":
                return
            if job.state == "queued":  # no work done: resolved here (its slot skips it)
                job.state = "done"
                self._waiting -= 1
                self._waiting_s -= job.cost
                self.counts[reason] += 1
                _resolve(job, Outcome(reason))
                return
            job.reason = job.reason or reason
        job.stop.set()

    def check(self, text: str, context: str = "") -> Outcome:
        """Submit and wait (for library use; the service waits asynchronously)."""
        job = self.submit(text, context)
        try:
            return job.future.result(timeout=max(0.0, job.remaining()))
        except cf.TimeoutError:
            self.cancel(job, "timeout")
            return Outcome("timeout")

    def stats(self) -> dict[str, Any]:
        """What ``/healthz`` reports: sizes, limits and counts (no text)."""
        with self._lock:
            ready = sum(w is not None and w.proc.is_alive() for w in self._workers)
            return {"workers": self.limits.workers, "ready": ready, "checking": self._checking,
                    "waiting": self._waiting, "queue_limit": self.limits.queue_limit,
                    "timeout_s": self.limits.timeout_s, "backlog_s": round(self._backlog_s(time.monotonic()), 2),
                    "ms_per_kchar": round(1e6 * self._s_per_char, 2), **self.counts}

    # -- the slots ---------------------------------------------------------------------------------------

    def _slot(self, i: int) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            with self._lock:
                if job.state != "queued":  # cancelled while it waited
                    continue
                job.state = "running"
                job.started = True
                self._waiting -= 1
                self._waiting_s -= job.cost
                self._checking += 1
                self._running[i] = (time.monotonic(), job.cost)
            broken: list[str] = []  # why the worker must be replaced, once the request is answered
            try:
                outcome = self._run(i, job, broken)
            except Exception as exc:  # noqa: BLE001 - a slot must outlive one request
                log.warning("guard worker %d: %s", i, type(exc).__name__)
                outcome, broken = Outcome("lost"), ["failed"]
            with self._lock:
                self._checking -= 1
                self._running.pop(i, None)
                job.state = "done"
                self.counts["checked" if outcome.kind == "ok" else outcome.kind] += 1
            _resolve(job, outcome)
            if broken:
                self._replace(i, broken[0])

    def _replace(self, i: int, why: str) -> None:
        old = self._workers[i]
        self._workers[i] = None
        if old is not None:
            old.kill()
        if self._closed:
            return
        log.warning("guard worker %d %s: starting a new one", i, why)
        try:
            w = _Worker(self._ctx, self._source, i)
            w.wait_ready(START_TIMEOUT_S)
            self._workers[i] = w
        except Exception as exc:  # noqa: BLE001 - tried again with the slot's next request
            log.error("guard worker %d could not be restarted (%s)", i, exc)

    def _run(self, i: int, job: Job, broken: list[str]) -> Outcome:
        """Check ``job`` on worker ``i``; a worker that died or would not stop is named in ``broken``."""
        if job.remaining() <= 0:
            return Outcome("timeout")
        w = self._workers[i]
        if w is None or not w.proc.is_alive():  # its last replacement failed, or it died while idle
            self._replace(i, "is not running")
            w = self._workers[i]
            if w is None:
                return Outcome("lost")
        t0 = time.monotonic()
        try:
            w.conn.send((job.id, job.text, job.context))
        except (OSError, EOFError, ValueError):
            broken.append("stopped taking requests")
            return Outcome("lost")
        asked: float | None = None
        while True:
            now = time.monotonic()
            if asked is None and (job.stop.is_set() or now >= job.deadline):
                if not job.stop.is_set():
                    self.cancel(job, "timeout")
                w.interrupt()
                asked = now
            wait = min(POLL_S, max(0.0, job.deadline - now)) if asked is None else max(0.0, asked + self.limits.grace_s - now)
            try:
                message = w.conn.recv() if w.conn.poll(wait) else None
            except (EOFError, OSError):
                broken.append("died during a check")
                return Outcome("lost")
            if message is not None:
                kind, job_id, payload = message
                if job_id != job.id:  # pragma: no cover - one request at a time per worker
                    continue
                if kind == "ok":
                    chars = len(job.text) + len(job.context)
                    if chars >= 1000:  # shorter ones measure the fixed cost more than the rate
                        rate = max(0.0, time.monotonic() - t0 - OVERHEAD_S) / chars
                        with self._lock:
                            self._s_per_char = 0.7 * self._s_per_char + 0.3 * rate
                    return Outcome("ok", payload) if asked is None else Outcome(job.reason or "timeout")
                if kind == "stopped":
                    with self._lock:
                        self.counts["stopped"] += 1
                    return Outcome(job.reason or "timeout")
                return Outcome("error", detail=str(payload))
            if asked is not None and time.monotonic() >= asked + self.limits.grace_s:
                with self._lock:
                    self.counts["killed"] += 1
                w.kill()  # now: it must not compute a moment longer than the grace
                broken.append(f"did not stop within {self.limits.grace_s:g} s")
                return Outcome(job.reason or "timeout")

    def close(self) -> None:
        """Stop the workers (requests still waiting are answered ``lost``)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for _ in self._threads:
            self._jobs.put(None)
        for w in self._workers:
            if w is not None:
                w.interrupt()
                w.kill()
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                _resolve(job, Outcome("lost"))


__all__ = ["Busy", "CheckPool", "Outcome", "PoolLimits", "Stop", "admission", "default_workers"]
