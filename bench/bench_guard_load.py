"""The guard's HTTP service under heavy load, on loopback (issue 49's probe, then a soak that stops by itself).

    python bench/bench_guard_load.py [--clients 50] [--kb 57] [--soak 60] [--workers N] [--queue N] [--timeout S]

Builds a guard index from a synthetic clinical corpus and starts ``privleak guard serve`` on 127.0.0.1 (a free
port) in a subprocess, from the sources on ``PYTHONPATH`` (default: this checkout's ``src``; point it at another
checkout to measure that one: the flags ``--workers``, ``--queue`` and ``--timeout`` are passed only when given,
so a server without them runs too). Then, in order:

1. **burst** (the probe's case): ``--clients`` clients each post one ``--kb`` KB PII-dense body (patient notes,
   ~19 PII values per KB) at the same moment and wait up to ``--client-timeout`` s (the probe's 120 s); a client
   refused with 503 waits ``Retry-After`` and sends it again while its time lasts (a server that never refuses
   sees the probe's case exactly); a client that times out closes its connection (abandons). Meanwhile
   ``/healthz`` is asked every 0.5 s.
2. **after the burst**: one small request (how long the next client waits), and the server's CPU seconds (its
   process and every descendant, ``/proc``) from the moment the last client returned: over the next 10 s, and
   until the server is idle (under 5 % of a core for 1 s; at most ``--idle-limit`` s): how long abandoned work
   kept running.
3. **abandon**: ``--abandon`` clients post a PII-dense body and hang up after 1 s; then the same two figures.
4. **soak** for ``--soak`` s: ``--soak-clients`` clients post PII-dense and short bodies in a loop, waiting
   ``Retry-After`` when refused; ``/healthz`` asked every 0.5 s; ends by itself, abandoning what is in flight.

Every phase prints latency percentiles of the answered checks, the answers by status, client timeouts,
``/healthz`` latency, and CPU; the last line (``RESULT``) carries the figures compared before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = os.environ.get("PYTHONPATH") or str(ROOT / "src")
sys.path.insert(0, SRC.split(os.pathsep)[0])
os.environ.setdefault("PRIVLEAK_PROGRESS", "0")

import httpx  # noqa: E402

from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus  # noqa: E402
from privleak.defenses.guard import Guard, inventory_from_records  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tree_cpu(root: int) -> float:
    """CPU seconds of ``root`` and every descendant, including reaped children (``/proc/PID/stat`` fields
    14-17: utime, stime, cutime, cstime) — a worker killed and reaped is counted in its parent's."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        times[int(entry)] = sum(int(x) for x in fields[11:15]) / TICK
    tree, frontier = {root}, [root]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parents.items() if pp == p and c not in tree]
        tree.update(kids)
        frontier += kids
    return sum(times.get(p, 0.0) for p in tree)


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def _dense_bodies(n: int, kb: int, seed: int) -> list[bytes]:
    """``n`` bodies of ``kb`` KB of patient notes (every note a PHI note), each from another offset."""
    corpus = generate_corpus(ClinicalCorpusConfig(n_public=5, n_members=5, n_non_members=600, n_population=5,
                                                  phi_fraction=1.0, seed=seed + 1))
    notes = [r.text for r in corpus.splits["non_members"]]
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        rng.shuffle(notes)
        text, i = "", 0
        while len(text) < kb * 1000:
            text += notes[i % len(notes)] + "\n"
            i += 1
        out.append(json.dumps({"text": text[: kb * 1000]}).encode())
    return out


class Probe:
    """``/healthz`` every 0.5 s while it runs: latencies (a timeout counts as its limit)."""

    def __init__(self, url: str) -> None:
        self.url, self.lat, self.failed, self._stop = url, [], 0, asyncio.Event()
        self.answers: Counter[str] = Counter()
        self.last: dict = {}

    async def run(self) -> None:
        async with httpx.AsyncClient(timeout=60) as c:
            while not self._stop.is_set():
                t = time.perf_counter()
                try:
                    r = await c.get(self.url)
                    self.lat.append(time.perf_counter() - t)
                    self.failed += r.status_code != 200
                    self.answers[str(r.status_code)] += 1
                    if r.status_code == 200:
                        self.last = r.json().get("workers", {})
                except httpx.HTTPError as exc:
                    self.lat.append(time.perf_counter() - t)
                    self.failed += 1
                    self.answers[type(exc).__name__] += 1
                try:
                    await asyncio.wait_for(self._stop.wait(), 0.5)
                except asyncio.TimeoutError:
                    pass

    def stop(self) -> None:
        self._stop.set()

    def line(self) -> str:
        pool = ", ".join(f"{k} {self.last[k]}" for k in ("checked", "refused", "timeout", "gone", "lost", "stopped",
                                                          "killed") if k in self.last)
        return (f"/healthz: {len(self.lat)} asked, p50 {1e3 * _pct(self.lat, 0.5):.0f} ms, "
                f"max {1e3 * max(self.lat, default=float('nan')):.0f} ms, answers "
                + ", ".join(f"{k} × {v}" for k, v in sorted(self.answers.items()))
                + (f"; the pool's counts at the last answer: {pool}" if pool else ""))


async def _post(client: httpx.AsyncClient, url: str, body: bytes, timeout: float) -> tuple[str, float, str]:
    """(outcome, seconds, Retry-After): outcome is the status code or 'client timeout' / an error name."""
    t = time.perf_counter()
    try:
        r = await client.post(url, content=body, headers={"content-type": "application/json"}, timeout=timeout)
        return str(r.status_code), time.perf_counter() - t, r.headers.get("retry-after", "")
    except httpx.TimeoutException:
        return "client timeout", time.perf_counter() - t, ""
    except httpx.HTTPError as exc:
        return type(exc).__name__, time.perf_counter() - t, ""


def _summary(name: str, results: list[tuple[str, float, str]]) -> dict:
    ok = [s for o, s, _ in results if o == "200"]
    by = Counter(o for o, _, _ in results)
    retry = sorted({int(r) for _, _, r in results if r.isdigit()})
    print(f"{name}: {len(results)} requests: " + ", ".join(f"{k} × {v}" for k, v in sorted(by.items()))
          + (f" (Retry-After {retry[0]}–{retry[-1]} s)" if retry else ""))
    if ok:
        print(f"  answered 200: p50 {_pct(ok, 0.5):.1f} s, p90 {_pct(ok, 0.9):.1f} s, p99 {_pct(ok, 0.99):.1f} s, "
              f"max {max(ok):.1f} s")
    return {"n": len(results), "ok": len(ok), "by": dict(by), "p50": _pct(ok, 0.5), "p99": _pct(ok, 0.99),
            "max": max(ok, default=float("nan"))}


async def _after(url: str, pid: int, idle_limit: float) -> dict:
    """The next small request's wait, CPU over the next 10 s, and seconds until the server is idle."""
    c0, t0 = _tree_cpu(pid), time.perf_counter()

    async def watch() -> tuple[float, float]:
        last_c, last_t, cpu10, busy_until, idle_run = c0, t0, None, 0.0, 0
        while True:
            await asyncio.sleep(1.0)
            c, t = _tree_cpu(pid), time.perf_counter()
            if cpu10 is None and t - t0 >= 10:
                cpu10 = c - c0
            if (c - last_c) / (t - last_t) >= 0.05:
                busy_until, idle_run = t - t0, 0
            else:
                idle_run += 1
            if cpu10 is not None and idle_run >= 2:
                return cpu10, busy_until
            if t - t0 > idle_limit:
                return cpu10 if cpu10 is not None else c - c0, float("inf")
            last_c, last_t = c, t

    async with httpx.AsyncClient() as client:
        watcher = asyncio.ensure_future(watch())
        outcome, wait, _ = await _post(client, url, json.dumps({"text": "The next request after the load."}).encode(),
                                       timeout=idle_limit)
        cpu10, busy_for = await watcher
    print(f"  next small request: {outcome} after {wait:.2f} s; server CPU in the 10 s after: {cpu10:.1f} s; "
          f"busy for {busy_for:.0f} s after the clients left")
    return {"next": outcome, "next_s": wait, "cpu10": cpu10, "busy_s": busy_for}


async def _patient(client: httpx.AsyncClient, url: str, body: bytes, timeout: float) -> tuple[str, float, str, int]:
    """One client that sends ``body`` and, refused with 503, waits Retry-After and sends it again, while its
    ``timeout`` lasts: (last outcome, seconds from the first send, Retry-After seen, refusals)."""
    start, refused, retry = time.perf_counter(), 0, ""
    while True:
        left = timeout - (time.perf_counter() - start)
        outcome, _, after = await _post(client, url, body, left)
        if outcome == "503" and after.isdigit():
            refused, retry = refused + 1, after
            if time.perf_counter() - start + int(after) < timeout:
                await asyncio.sleep(int(after))
                continue
        return outcome, time.perf_counter() - start, retry, refused


async def _burst(url: str, health: str, bodies: list[bytes], timeout: float) -> dict:
    probe = Probe(health)
    prober = asyncio.ensure_future(probe.run())
    limits = httpx.Limits(max_connections=len(bodies) + 4, max_keepalive_connections=0)
    async with httpx.AsyncClient(limits=limits) as client:
        results = await asyncio.gather(*(_patient(client, url, b, timeout) for b in bodies))
    probe.stop()
    await prober
    out = _summary(f"burst of {len(bodies)} × {len(bodies[0]) // 1000} KB (each client retries after Retry-After "
                   f"while its {timeout:.0f} s last; last answers)", [r[:3] for r in results])
    out["refusals"] = sum(r[3] for r in results)
    print(f"  503 answers on the way: {out['refusals']}; " + probe.line())
    out["health_max"] = max(probe.lat, default=float("nan"))
    return out


async def _abandon(url: str, bodies: list[bytes]) -> dict:
    limits = httpx.Limits(max_connections=len(bodies) + 4, max_keepalive_connections=0)
    async with httpx.AsyncClient(limits=limits) as client:
        results = await asyncio.gather(*(_post(client, url, b, 1.0) for b in bodies))
    return _summary(f"abandon: {len(bodies)} clients hang up after 1 s", list(results))


async def _soak(url: str, health: str, dense: list[bytes], short: list[bytes], clients: int, seconds: float,
                timeout: float, seed: int) -> dict:
    probe = Probe(health)
    prober = asyncio.ensure_future(probe.run())
    results: list[tuple[str, float, str]] = []
    deadline = time.perf_counter() + seconds

    async def client_loop(i: int, client: httpx.AsyncClient) -> None:
        rng = random.Random(seed + i)
        while time.perf_counter() < deadline:
            body = rng.choice(dense) if rng.random() < 0.25 else rng.choice(short)
            res = await _post(client, url, body, timeout)
            results.append(res)
            if res[0] == "503":
                await asyncio.sleep(min(float(res[2] or 1), max(0.0, deadline - time.perf_counter())))

    limits = httpx.Limits(max_connections=clients + 4, max_keepalive_connections=clients + 4)
    async with httpx.AsyncClient(limits=limits) as client:
        tasks = [asyncio.ensure_future(client_loop(i, client)) for i in range(clients)]
        await asyncio.wait(tasks, timeout=seconds)
        for t in tasks:  # stops by itself: what is still in flight is abandoned
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    probe.stop()
    await prober
    out = _summary(f"soak: {clients} clients for {seconds:.0f} s (a quarter PII-dense)", results)
    print("  " + probe.line())
    out["health_max"] = max(probe.lat, default=float("nan"))
    out["rps"] = out["ok"] / seconds
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--kb", type=int, default=57)
    ap.add_argument("--client-timeout", type=float, default=120.0)
    ap.add_argument("--idle-limit", type=float, default=300.0)
    ap.add_argument("--abandon", type=int, default=8)
    ap.add_argument("--soak", type=float, default=60.0)
    ap.add_argument("--soak-clients", type=int, default=8)
    ap.add_argument("--records", type=int, default=2000)
    ap.add_argument("--workers", type=int)
    ap.add_argument("--queue", type=int)
    ap.add_argument("--timeout", type=float)
    ap.add_argument("--no-ner", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    corpus = generate_corpus(ClinicalCorpusConfig(n_public=10, n_members=args.records, n_non_members=200,
                                                  n_population=10, seed=args.seed))
    members = corpus.splits["members"]
    dense = _dense_bodies(max(args.clients, 4), args.kb, args.seed)
    short = [json.dumps({"text": r.text[:600]}).encode() for r in corpus.splits["non_members"]]
    with tempfile.TemporaryDirectory() as tmp:
        idx = Path(tmp) / "idx"
        Guard.build([r.text for r in members], canaries=corpus.canaries,
                    inventory=inventory_from_records(members)).save(idx)
        port = _free_port()
        extra = [f"--{k}={v}" for k, v in (("workers", args.workers), ("queue", args.queue), ("timeout", args.timeout))
                 if v is not None]
        cmd = [sys.executable, "-m", "privleak", "guard", "serve", "--index", str(idx), "--host", "127.0.0.1",
               "--port", str(port)] + extra + (["--no-ner"] if args.no_ner else [])
        log_path = Path(tmp) / "server.log"
        with open(log_path, "w") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": SRC})
        url, health = f"http://127.0.0.1:{port}/v1/check", f"http://127.0.0.1:{port}/healthz"
        try:
            t0 = time.perf_counter()
            while True:
                try:
                    if httpx.get(health, timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if proc.poll() is not None or time.perf_counter() - t0 > 600:
                    raise SystemExit(f"server did not start:\n{log_path.read_text()}")
                time.sleep(0.2)
            print(f"server ({SRC}) up in {time.perf_counter() - t0:.1f} s on 127.0.0.1:{port}: {' '.join(extra) or 'its defaults'}"
                  f"; NER {'off' if args.no_ner else 'on'}; {len(members)} member records indexed")
            burst = asyncio.run(_burst(url, health, dense[: args.clients], args.client_timeout))
            burst.update(asyncio.run(_after(url, proc.pid, args.idle_limit)))
            aband = asyncio.run(_abandon(url, dense[: args.abandon]))
            aband.update(asyncio.run(_after(url, proc.pid, args.idle_limit)))
            soak = asyncio.run(_soak(url, health, dense, short, args.soak_clients, args.soak, args.client_timeout,
                                     args.seed)) if args.soak > 0 else {}
            alive = proc.poll() is None
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        leaked = any(b.decode()[20:90] in log_path.read_text() for b in dense[:5])
    print(f"server alive at the end: {alive}; request text in the server log: {leaked}")
    s = soak or {"ok": 0, "p99": float("nan"), "health_max": float("nan"), "rps": 0.0, "by": {}}
    print(f"RESULT burst_ok={burst['ok']}/{burst['n']} burst_503_seen={burst['refusals']} "
          f"burst_503_last={burst['by'].get('503', 0)} "
          f"burst_504={burst['by'].get('504', 0)} burst_client_timeouts={burst['by'].get('client timeout', 0)} "
          f"burst_p50={burst['p50']:.1f}s burst_max={burst['max']:.1f}s healthz_max={burst['health_max']:.2f}s "
          f"next_after_burst={burst['next_s']:.2f}s busy_after_burst={burst['busy_s']:.0f}s "
          f"cpu10_after_burst={burst['cpu10']:.1f}s next_after_abandon={aband['next_s']:.2f}s "
          f"cpu10_after_abandon={aband['cpu10']:.1f}s busy_after_abandon={aband['busy_s']:.0f}s "
          f"soak_ok={s['ok']} soak_rps={s['rps']:.2f} soak_p99={s['p99']:.1f}s soak_503={s['by'].get('503', 0)} "
          f"soak_healthz_max={s['health_max']:.2f}s alive={alive} leaked={leaked}")


if __name__ == "__main__":
    main()
