"""The guard's HTTP service under a bounded load on loopback.

    python bench/bench_guard_http.py [--duration 10] [--concurrency 16] [--records 20000] [--no-ner] [--workers N]

Builds a guard index from a synthetic clinical corpus, starts
``privleak guard serve`` (uvicorn) on 127.0.0.1 on a free port in a
subprocess, then for ``--duration`` seconds ``--concurrency`` clients post
good requests (non-member notes of 200–1000 characters, a quarter of them
with a member span inside) while one more client keeps sending bad ones:
invalid JSON, wrong schema, oversized bodies (declared and streamed), raw
garbage bytes and connections dropped mid-request. Reports requests/s and
p50/p99 latency of the good requests, errors among them (must be zero), bad
requests answered as expected (413/422/400), and a final good request after
the load. The server's queue holds every client (``--queue`` = ``--concurrency``), so no good request is
refused; a 503 would be counted apart from the errors all the same. The heavy-load case (a full queue, time
budgets, abandoned requests) is bench/bench_guard_load.py. The last line carries the figures as ratios
measured in this run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
os.environ.setdefault("PRIVLEAK_PROGRESS", "0")

import httpx

from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus
from privleak.defenses.guard import Guard, inventory_from_records

MAX_BYTES = 65536


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _payloads(rng: random.Random, members: list[str], others: list[str], n: int) -> list[bytes]:
    out = []
    for _ in range(n):
        text = " ".join(rng.choice(others) for _ in range(4))[: rng.randint(200, 1000)]
        if rng.random() < 0.25:  # a member span inside
            doc = rng.choice(members)
            s = rng.randint(0, max(0, len(doc) - 80))
            text = text[:100] + " " + doc[s : s + 80] + " " + text[100:]
        out.append(json.dumps({"text": text}).encode())
    return out


async def _good_worker(client: httpx.AsyncClient, url: str, payloads: list[bytes], deadline: float,
                       lat: list[float], errors: list[str], rng: random.Random) -> None:
    while time.perf_counter() < deadline:
        body = rng.choice(payloads)
        t = time.perf_counter()
        try:
            r = await client.post(url, content=body, headers={"content-type": "application/json"})
            if r.status_code == 503:  # refused with Retry-After: the service's documented answer to a full queue
                errors.append("refused 503")
                await asyncio.sleep(float(r.headers.get("retry-after", "1")))
            elif r.status_code != 200 or "allowed" not in r.json():
                errors.append(f"status {r.status_code}")
            else:
                lat.append(time.perf_counter() - t)
        except Exception as exc:  # noqa: BLE001 - any failure of a good request is an error to count
            errors.append(type(exc).__name__)


def _raw(port: int, data: bytes, close_early: bool) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(data)
        if close_early:
            return b""
        try:
            return s.recv(200)
        except OSError:
            return b""


async def _bad_worker(client: httpx.AsyncClient, url: str, port: int, deadline: float, tally: dict[str, int]) -> None:
    big = json.dumps({"text": "z" * (MAX_BYTES + 100)}).encode()

    async def streamed():  # no content-length: chunked, the limit applies to what arrives
        for _ in range(MAX_BYTES // 4096 + 2):
            yield b"a" * 4096

    cases = [
        ("invalid json", lambda: client.post(url, content=b'{"text": "unterminated', headers={"content-type": "application/json"}), {422}),
        ("wrong schema", lambda: client.post(url, json={"text": 12, "extra": True}), {422}),
        ("missing field", lambda: client.post(url, json={}), {422}),
        ("oversized", lambda: client.post(url, content=big, headers={"content-type": "application/json"}), {413}),
        ("oversized streamed", lambda: client.post(url, content=streamed(), headers={"content-type": "application/json"}), {413}),
    ]
    i = 0
    while time.perf_counter() < deadline:
        name, call, ok = cases[i % len(cases)]
        i += 1
        try:
            r = await call()
            tally["bad_ok" if r.status_code in ok else "bad_wrong"] += 1
        except Exception as exc:  # noqa: BLE001
            tally["bad_wrong"] += 1
            tally.setdefault("wrong", []).append(f"{name}: {type(exc).__name__}")
        # raw garbage and a connection dropped mid-request: the server must shrug both off
        loop = asyncio.get_running_loop()
        reply = await loop.run_in_executor(None, _raw, port, b"GARBAGE \x00\xff\r\n\r\n", False)
        tally["raw_400" if reply.startswith(b"HTTP/1.1 400") or reply == b"" else "bad_wrong"] += 1
        await loop.run_in_executor(None, _raw, port, b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{\"te", True)
        tally["dropped"] += 1
        await asyncio.sleep(0.05)


async def _load(port: int, payloads: list[bytes], duration: float, concurrency: int, seed: int) -> dict:
    url = f"http://127.0.0.1:{port}/v1/check"
    lat: list[float] = []
    errors: list[str] = []
    tally = {"bad_ok": 0, "bad_wrong": 0, "raw_400": 0, "dropped": 0}
    limits = httpx.Limits(max_connections=concurrency + 4, max_keepalive_connections=concurrency + 4)
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:
        t0 = time.perf_counter()
        deadline = t0 + duration
        rngs = [random.Random(seed + i) for i in range(concurrency)]
        await asyncio.gather(*(_good_worker(client, url, payloads, deadline, lat, errors, rngs[i]) for i in range(concurrency)),
                             _bad_worker(client, url, port, deadline, tally))
        wall = time.perf_counter() - t0
        after = await client.post(url, json={"text": "A final good request after the load."})
    return {"lat": lat, "errors": errors, "tally": tally, "wall": wall, "after": after.status_code}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--no-ner", action="store_true", help="regex-only PII scanner in the service")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, help="the server's --workers (default: its own)")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    corpus = generate_corpus(ClinicalCorpusConfig(n_public=10, n_members=args.records, n_non_members=1000,
                                                  n_population=10, seed=args.seed))
    members = corpus.splits["members"]
    with tempfile.TemporaryDirectory() as tmp:
        idx = Path(tmp) / "idx"
        Guard.build([r.text for r in members], canaries=corpus.canaries,
                    inventory=inventory_from_records(members)).save(idx)
        port = _free_port()
        cmd = [sys.executable, "-m", "privleak", "guard", "serve", "--index", str(idx), "--host", "127.0.0.1",
               "--port", str(port), "--max-bytes", str(MAX_BYTES), "--queue", str(args.concurrency)] \
            + (["--workers", str(args.workers)] if args.workers else []) + (["--no-ner"] if args.no_ner else [])
        log_path = Path(tmp) / "server.log"
        with open(log_path, "w") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")})
        try:
            t0 = time.perf_counter()
            while True:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if proc.poll() is not None or time.perf_counter() - t0 > 120:
                    raise SystemExit(f"server did not start:\n{log_path.read_text()}")
                time.sleep(0.2)
            print(f"server up in {time.perf_counter() - t0:.1f} s on 127.0.0.1:{port} "
                  f"({len(members)} member records indexed, NER {'off' if args.no_ner else 'on'})")
            payloads = _payloads(rng, [r.text for r in members], [r.text for r in corpus.splits["non_members"]], 400)
            res = asyncio.run(_load(port, payloads, args.duration, args.concurrency, args.seed))
            alive = proc.poll() is None
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        server_log = log_path.read_text()
    lat = sorted(res["lat"])
    refused = sum(e == "refused 503" for e in res["errors"])
    res["errors"] = [e for e in res["errors"] if e != "refused 503"]
    n_ok, n_err = len(lat), len(res["errors"])
    p50 = 1e3 * statistics.median(lat) if lat else float("nan")
    p99 = 1e3 * lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else float("nan")
    t = res["tally"]
    n_bad = t["bad_ok"] + t["bad_wrong"]
    if t.get("wrong"):
        print("unexpected answers to bad requests:", ", ".join(sorted(set(t["wrong"]))))
    leaked = any(r.decode()[10:90] in server_log for r in payloads[:50])
    print(f"{args.duration:.0f} s, concurrency {args.concurrency}: {n_ok} good requests answered, {n_err} errors "
          f"({', '.join(sorted(set(res['errors']))) or 'none'}), {refused} refused 503; {n_ok / res['wall']:.1f} requests/s; "
          f"p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    print(f"bad requests: {t['bad_ok']}/{n_bad} answered 413/422 as expected, {t['raw_400']} raw garbage answered 400/closed, "
          f"{t['dropped']} connections dropped mid-request; final good request: {res['after']}; server alive: {alive}; "
          f"request text in server log: {leaked}")
    good_ratio = n_ok / (n_ok + n_err) if n_ok + n_err else 0.0
    print(f"RESULT good_ok={good_ratio:.3f} ({n_ok}/{n_ok + n_err}) bad_handled={t['bad_ok'] / max(1, n_bad):.3f} "
          f"rps={n_ok / res['wall']:.1f} p50={p50:.1f}ms p99={p99:.1f}ms after_load={res['after']} alive={alive}")


if __name__ == "__main__":
    main()
