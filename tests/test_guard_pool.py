"""The guard service under load (issue 49): a bounded pool, a full queue answered 503 with Retry-After, a time
budget whose check is stopped, a disconnected client's check stopped, /healthz answered while every worker is
busy.

The workload is a stand-in PII analyser (the guard's own verbatim index and tripwire are real) that computes
until a gate file appears, appending a byte to a heartbeat file every few milliseconds: the tests can then hold
a worker busy as long as they need, and see whether its work stopped, without timing anything.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from privleak.core.errors import UserError
from privleak.defenses.guard import Guard, ScanSettings
from privleak.defenses.guard.pool import PoolLimits, admission
from privleak.defenses.guard.service import create_app

MEMBER = ("Verification record for Ann Lee-Park: social security number 376-45-8448. "
          "Follow-up booked at the cardiology clinic for next Tuesday morning.")


class GatedAnalyzer:
    """Finds nothing; a text holding SLOW keeps a core busy until ``gate`` exists (STUBBORN: and ignores being
    stopped), writing the worker's pid and then one byte per ~5 ms of work to ``beat``."""

    def __init__(self, gate: Path, beat: Path) -> None:
        self.gate, self.beat = str(gate), str(beat)

    def _spin(self) -> None:
        with open(self.beat, "a") as fh:
            fh.write(f"{os.getpid()}\n")
        while not os.path.exists(self.gate):
            end = time.perf_counter() + 0.005
            while time.perf_counter() < end:  # CPU work in Python: a signal handler runs between its bytecodes
                pass
            with open(self.beat, "a") as fh:
                fh.write(".")

    def analyze_batch(self, texts, labels=None, **_):
        for t in texts:
            if "STUBBORN" in t:
                while not os.path.exists(self.gate):
                    try:
                        self._spin()
                    except BaseException:  # noqa: BLE001 - what a worker that cannot be stopped looks like
                        pass
            elif "SLOW" in t:
                self._spin()
        return [[] for _ in texts]


class PacedAnalyzer(GatedAnalyzer):
    """As :class:`GatedAnalyzer`, and every other text takes 0.2 ms per character (a sleep: no CPU), so the
    worker's measured speed, and the pool's predictions, are known."""

    def analyze_batch(self, texts, labels=None, **_):
        for t in texts:
            if "SLOW" not in t:
                time.sleep(2e-4 * len(t))
        return super().analyze_batch(texts, labels)


def _app(tmp_path: Path, analyzer=GatedAnalyzer, max_body_bytes=4096, **limits):
    guard = Guard.build([MEMBER], canaries=["376-45-8448"], scan=ScanSettings(ner=False),
                        analyzer=analyzer(tmp_path / "gate", tmp_path / "beat"))
    return create_app(guard, max_body_bytes=max_body_bytes, limits=PoolLimits(**limits))


def _beats(tmp_path: Path) -> int:
    p = tmp_path / "beat"
    return p.stat().st_size if p.exists() else 0


def _wait_for(predicate, what: str, limit_s: float = 120.0) -> None:
    # A bound on how long a broken build may hang the suite, not a speed assertion.
    end = time.monotonic() + limit_s
    while not predicate():
        assert time.monotonic() < end, f"gave up waiting for {what}"
        time.sleep(0.02)


def _stopped(tmp_path: Path) -> bool:
    """The heartbeat has not moved for 0.3 s (the work stopped)."""
    before = _beats(tmp_path)
    time.sleep(0.3)
    return _beats(tmp_path) == before


def _pids(tmp_path: Path) -> list[int]:
    return [int(x.strip(".")) for x in (tmp_path / "beat").read_text().splitlines() if x.strip(".")]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[-1][0] != "Z"
    except FileNotFoundError:
        return False


def test_full_queue_503_with_retry_after_healthz_and_413_while_saturated(tmp_path):
    app = _app(tmp_path, workers=1, queue=1, timeout_s=300)
    client = TestClient(app)
    pool = app.state.pool
    results: dict[str, int] = {}

    def post(name: str, text: str) -> None:
        results[name] = client.post("/v1/check", json={"text": text}).status_code

    first = threading.Thread(target=post, args=("first", "SLOW one"))
    first.start()
    _wait_for(lambda: pool.stats()["checking"] == 1, "the first request to reach the worker")
    second = threading.Thread(target=post, args=("second", "SLOW two"))
    second.start()
    _wait_for(lambda: pool.stats()["waiting"] == 1, "the second request to queue")
    # The worker is busy and the queue full: refused at once, with a whole number of seconds to wait.
    r = client.post("/v1/check", json={"text": "a third"})
    assert r.status_code == 503 and int(r.headers["retry-after"]) >= 1 and "queue is full" in r.json()["detail"]
    # While the worker computes: /healthz answers from the event loop, an oversized body is still 413.
    h = client.get("/healthz")
    assert h.status_code == 200 and h.json()["workers"]["checking"] == 1 and h.json()["workers"]["waiting"] == 1
    assert h.json()["workers"]["refused"] == 1
    assert client.post("/v1/check", content=b'{"text": "' + b"x" * 5000 + b'"}',
                       headers={"content-type": "application/json"}).status_code == 413
    assert "first" not in results  # all of that happened while the first check was still running
    (tmp_path / "gate").touch()
    first.join(60)
    second.join(60)
    assert results == {"first": 200, "second": 200}
    assert client.post("/v1/check", json={"text": "after the load"}).status_code == 200
    pool.close()


def test_time_budget_504_and_the_check_stops_in_its_worker(tmp_path):
    app = _app(tmp_path, workers=1, queue=0, timeout_s=1.0)
    client = TestClient(app)
    r = client.post("/v1/check", json={"text": "SLOW forever"})  # never ends by itself: only the budget stops it
    assert r.status_code == 504 and "time budget of 1 s" in r.json()["detail"]
    assert "its check was stopped" in r.json()["detail"]
    _wait_for(lambda: app.state.pool.stats()["stopped"] == 1, "the worker to report the check stopped")
    assert _stopped(tmp_path)
    # Stopped inside the worker, which stays: the next request is answered by the same process.
    pid = _pids(tmp_path)[0]
    assert client.post("/v1/check", json={"text": "fine"}).status_code == 200
    assert _alive(pid) and app.state.pool.stats()["killed"] == 0
    app.state.pool.close()


def test_a_worker_that_ignores_the_stop_is_killed_and_replaced(tmp_path):
    app = _app(tmp_path, workers=1, queue=0, timeout_s=1.0, grace_s=0.5)
    client = TestClient(app)
    assert client.post("/v1/check", json={"text": "STUBBORN"}).status_code == 504
    _wait_for(lambda: app.state.pool.stats()["killed"] == 1, "the stubborn worker to be killed")
    assert _stopped(tmp_path) and not _alive(_pids(tmp_path)[0])
    # Its slot takes requests again once the replacement has loaded its guard.
    assert client.get("/healthz").status_code in (200, 503)  # 503 while its only worker restarts
    _wait_for(lambda: app.state.pool.stats()["ready"] == 1, "the replacement worker")
    assert client.post("/v1/check", json={"text": "fine"}).status_code == 200
    app.state.pool.close()


def test_a_disconnected_clients_check_stops(tmp_path):
    import uvicorn

    app = _app(tmp_path, workers=1, queue=0, timeout_s=300)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", http="h11", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        _wait_for(lambda: server.started, "the server to start")
        with pytest.raises(httpx.ReadTimeout):  # the client gives up and closes the connection
            httpx.post(f"http://127.0.0.1:{port}/v1/check", json={"text": "SLOW abandoned"}, timeout=1.0)
        _wait_for(lambda: app.state.pool.stats()["gone"] == 1, "the server to see the client gone")
        _wait_for(lambda: app.state.pool.stats()["stopped"] == 1, "the abandoned check to stop")
        assert _stopped(tmp_path)
        assert httpx.post(f"http://127.0.0.1:{port}/v1/check", json={"text": "next"}, timeout=60).status_code == 200
    finally:
        server.should_exit = True
        thread.join(30)
        app.state.pool.close()


def test_admission_by_predicted_work():
    assert admission(backlog_s=1e6, cost_s=1e6, workers=2, busy=1, timeout_s=30) == 0  # a worker is free
    assert admission(backlog_s=40, cost_s=5, workers=2, busy=6, timeout_s=30) == 0  # 20 + 5 ≤ 30
    assert admission(backlog_s=60, cost_s=5, workers=2, busy=6, timeout_s=30) == pytest.approx(5)  # 30 + 5 - 30


def test_a_request_that_cannot_end_in_its_budget_is_refused_at_once_and_small_ones_still_wait(tmp_path):
    """One worker, measured at 0.2 ms a character, held by a SLOW check: a 20,000-character text (4 s of work)
    cannot end within a 2 s budget, so it is refused now with a Retry-After, not queued to time out; a
    2,000-character one (0.4 s) waits."""
    app = _app(tmp_path, analyzer=PacedAnalyzer, max_body_bytes=65536, workers=1, timeout_s=2.0)
    client = TestClient(app)
    pool = app.state.pool
    assert 150 <= pool.stats()["ms_per_kchar"] <= 2000  # its calibration: 200 ms per 1,000 characters and more
    held = threading.Thread(target=client.post, args=("/v1/check",), kwargs={"json": {"text": "SLOW"}})
    held.start()
    _wait_for(lambda: pool.stats()["checking"] == 1, "the worker to be held")
    r = client.post("/v1/check", json={"text": "a" * 20_000})
    assert r.status_code == 503 and int(r.headers["retry-after"]) >= 2 and pool.stats()["waiting"] == 0
    small = {}
    waiter = threading.Thread(target=lambda: small.update(r=client.post("/v1/check", json={"text": "b" * 2000})))
    waiter.start()
    _wait_for(lambda: pool.stats()["waiting"] == 1, "the small request to queue")
    (tmp_path / "gate").touch()
    held.join(60)
    waiter.join(60)
    assert small["r"].status_code in (200, 504)  # admitted (whether it ends in time is the machine's load)
    pool.close()


def test_a_burst_of_small_requests_is_all_answered(tmp_path):
    """The probe's 200 concurrent small requests were answered; a queue bound by count alone would refuse them."""
    app = _app(tmp_path, workers=1, timeout_s=300)
    client = TestClient(app)
    codes: list[int] = []
    threads = [threading.Thread(target=lambda: codes.append(client.post("/v1/check", json={"text": "hi"}).status_code))
               for _ in range(100)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert codes == [200] * 100
    app.state.pool.close()


@pytest.mark.parametrize("limits, flag", [({"workers": 0}, "--workers 0"), ({"workers": 65}, "--workers 65"),
                                          ({"queue": -1}, "--queue -1"), ({"timeout_s": 0}, "--timeout 0"),
                                          ({"timeout_s": float("nan")}, "--timeout nan"), ({"workers": True}, "--workers")])
def test_limits_refused_before_any_worker_starts(limits, flag):
    with pytest.raises(UserError, match=flag):
        PoolLimits(**limits)
