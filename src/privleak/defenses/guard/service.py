"""The guard as an HTTP service (FastAPI + uvicorn).

``POST /v1/check``  ``{"text": "...", "context": "<optional prompt>"}`` → ``{"allowed", "text", "findings"}``
``GET  /healthz``   ``{"status": "ok", "guard": settings and sizes}``

The contract of ``POST /v1/check``, every status it answers (all in the
OpenAPI document, ``/openapi.json``; schemathesis finds no response outside
it, ``tests/test_guard_contract.py``):

* 200 — the verdict.
* 408 — the body stopped arriving: ``Content-Length`` promised more bytes
  than came within :data:`BODY_IDLE_TIMEOUT_S` of the last ones.
* 413 — the body is over ``max_body_bytes`` (declared or actually sent),
  answered before it is parsed.
* 422 — the body is not valid UTF-8 JSON (a UTF-16 or UTF-32 body too:
  JSON on the wire is UTF-8, RFC 8259 §8.1), nests more than
  :data:`~privleak.core.jsonlimits.MAX_DEPTH` levels or holds a number over
  :data:`~privleak.core.jsonlimits.MAX_NUMBER_CHARS` characters, or is not a
  valid request; with the error locations and messages, never the submitted
  input echoed back.
* 431 — the request's headers exceed :data:`MAX_HEADER_BYTES` together.
* 503 — (a valid request) every worker is busy and the queue is full (``Retry-After``: seconds,
  an estimate), or the worker checking it died (``Retry-After`` too).
* 504 — the request's time budget (``--timeout``, queue wait included) ran
  out; its check was stopped (or never started, if it was still waiting).
* 500 — the check itself failed (the exception's type is logged, never its
  message).

Checks run on a bounded pool of worker processes (:mod:`.pool`): at most
``--workers`` at once, ``--queue`` more waiting, each stopped when its budget
runs out or its client disconnects. The event loop only reads, queues and
answers, so ``GET /healthz`` (200 with the guard's settings and the pool's
figures; 503 while no worker is running) answers at once while every worker
is busy. Beyond these, an unknown path answers 404 and a wrong
method 405 (FastAPI's own); the server (uvicorn, h11) refuses header blocks
over :data:`H11_MAX_HEADER_BYTES` with 400 before the application sees them. Logs carry method, path, status, latency and finding counts per
reason — never request or response bodies, so no PII reaches the logs
(Presidio's own DEBUG logging, which quotes the text around detections, is
capped at WARNING).
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import socket
import time
import weakref
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request  # at module level: FastAPI resolves the endpoints' annotations here

from ...core.errors import UserError
from ...core.jsonlimits import JSONLimitError, loads
from .guard import Guard
from .pool import Busy, CheckPool, Job, Outcome, PoolLimits

log = logging.getLogger("privleak.guard.service")
DEFAULT_MAX_BODY_BYTES = 64 * 1024
#: A body that stops arriving for this long is answered 408 (a client on any network sends a 64 KB body's
#: next chunk within a second; a lying Content-Length must not hold a worker).
BODY_IDLE_TIMEOUT_S = 1.0
#: All request headers together: a browser sends under 8 KB; nginx's default buffer is 8 KB (large ones 32 KB).
MAX_HEADER_BYTES = 16 * 1024
#: What the HTTP server itself buffers for one request head before it answers 400.
H11_MAX_HEADER_BYTES = 64 * 1024


class CheckRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(..., description="The model output to check.")
    context: str = Field("", description="The prompt the output continues (matched across, never redacted).")


class FindingOut(BaseModel):
    reason: str
    label: str
    start: int
    end: int
    action: str
    score: float | None = None


class CheckResponse(BaseModel):
    allowed: bool
    text: str
    findings: list[FindingOut]


class ErrorItem(BaseModel):
    loc: list[str | int]
    msg: str
    type: str


class InvalidRequest(BaseModel):
    """422: the body is not UTF-8 JSON, or not a valid request (never echoes the input)."""

    detail: list[ErrorItem]


class TooLarge(BaseModel):
    """413: the body is over the service's ``--max-bytes``."""

    detail: str


class Incomplete(BaseModel):
    """408: fewer body bytes arrived than ``Content-Length`` declared."""

    detail: str


class HeadersTooLarge(BaseModel):
    """431: the request's headers are over the service's limit."""

    detail: str


class Unavailable(BaseModel):
    """503: every worker busy and the queue full, or the worker died; retry after ``Retry-After`` seconds."""

    detail: str


class TimedOut(BaseModel):
    """504: the request's time budget ran out (its check was stopped)."""

    detail: str


class CheckFailed(BaseModel):
    """500: the check raised (a bug; the exception's type is in the server's log)."""

    detail: str


class _BodyLimit:
    """ASGI middleware: 431 for oversized headers; 413 for bodies over ``limit`` bytes, declared or streamed;
    408 for a body that stops arriving; 422 for a check body that is not UTF-8 or past the JSON limits."""

    def __init__(self, app: Any, limit: int, idle_timeout: float = BODY_IDLE_TIMEOUT_S) -> None:
        self.app = app
        self.limit = int(limit)
        self.idle_timeout = float(idle_timeout)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = scope.get("headers") or []
        if sum(len(k) + len(v) + 4 for k, v in headers) > MAX_HEADER_BYTES:
            await _answer(send, 431, f"request headers over {MAX_HEADER_BYTES} bytes")
            return
        if scope.get("method") not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        declared = dict(headers).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await _too_large(send, self.limit)
            return
        # Read the body here (at most limit + 1 bytes are kept) and replay it to the app.
        chunks, size, more = [], 0, True
        while more:
            try:
                message = await asyncio.wait_for(receive(), timeout=self.idle_timeout)
            except asyncio.TimeoutError:
                await _answer(send, 408, f"request body incomplete: {size} bytes arrived, then nothing for "
                                         f"{self.idle_timeout:g} s" + (f" (Content-Length: {int(declared)})"
                                                                        if declared is not None else ""))
                return
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await _too_large(send, self.limit)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        if scope.get("path") == "/v1/check":
            problem = _body_problem(body)
            if problem is not None:
                log.info("POST /v1/check 422 (%s)", problem[1])
                await _answer(send, 422, [{"loc": ["body"], "msg": problem[0], "type": problem[1]}])
                return
        sent = False

        async def replay() -> dict:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def _body_problem(body: bytes) -> tuple[str, str] | None:
    """(message, type) when a check body is not UTF-8 or past the JSON limits; None otherwise (FastAPI then
    parses it and answers malformed JSON and schema errors itself)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        # Python's json.loads would auto-detect UTF-16/32; JSON on the wire is UTF-8 (RFC 8259 §8.1).
        return "the body is not valid UTF-8 JSON", "json_invalid"
    try:
        loads(text)
    except JSONLimitError as exc:
        return f"the body is {exc}", "json_too_complex"
    except ValueError as exc:  # malformed, or UTF-16 without a BOM (valid UTF-8 bytes, but not JSON as UTF-8)
        where = f" ({exc.msg} at line {exc.lineno} column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        return f"the body is not valid UTF-8 JSON{where}", "json_invalid"
    return None


async def _answer(send: Any, status: int, detail: Any) -> None:
    payload = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": payload})
    if status != 422:
        log.info("%d %s", status, detail if isinstance(detail, str) else "")


def _busy_detail(exc: Busy) -> str:
    return (f"busy: {exc.checking} requests being checked and {exc.waiting} waiting (the queue is full); "
            f"retry after {exc.retry_after} s")


async def _client_gone(receive: Any) -> None:
    """Returns when the client disconnects (the ASGI server answers ``receive`` with ``http.disconnect``)."""
    while True:
        message = await receive()
        if message.get("type") == "http.disconnect":
            return


async def _outcome(pool: CheckPool, job: Job, receive: Any) -> Outcome:
    """The job's outcome, or ``timeout`` / ``gone`` (the job then cancelled) when its budget runs out or its
    client disconnects first."""
    result = asyncio.wrap_future(job.future)
    gone = asyncio.ensure_future(_client_gone(receive))
    try:
        done, _ = await asyncio.wait({result, gone}, timeout=max(0.0, job.remaining()),
                                     return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if result in done:
        return result.result()
    reason = "gone" if gone in done else "timeout"
    pool.cancel(job, reason)
    return Outcome(reason)


async def _too_large(send: Any, limit: int) -> None:
    await _answer(send, 413, f"request body over {limit} bytes")


def create_app(guard: Guard, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, limits: PoolLimits | None = None,
               source: Callable[[], Guard] | None = None):
    """The FastAPI app serving ``guard``; its checks run on a :class:`~.pool.CheckPool` started now (every
    worker's analyser loaded before this returns), ``app.state.pool``: close it when done (it is closed when
    the app is collected, and its workers end with this process).

    ``source``: what builds the guard inside each worker (e.g. ``functools.partial(Guard.load, path, ...)``);
    default ``guard`` itself, pickled into each worker. ``guard`` here only answers ``/healthz``.
    """
    from fastapi import FastAPI
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException as StarletteHTTPException

    # Presidio logs the words around each detection at DEBUG ("Context list is: ...") — raw
    # PII. The service never lets that through, whatever the root log level (the workers cap it too).
    logging.getLogger("presidio-analyzer").setLevel(logging.WARNING)
    limits = limits or PoolLimits()
    pool = CheckPool(source if source is not None else guard, limits)
    app = FastAPI(title="PrivLeak output guard", version="1", docs_url=None, redoc_url=None)
    app.state.pool = pool
    weakref.finalize(app, pool.close)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        # Pydantic's error objects include the offending input: drop it, it may be PII.
        errors = [{"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
                  for e in exc.errors()]
        log.info("%s %s 422 (%d schema errors)", request.method, request.url.path, len(errors))
        return JSONResponse(status_code=422, content={"detail": errors})

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # FastAPI answers a body it cannot decode (not UTF-8: UnicodeDecodeError,
        # which is no JSONDecodeError) with a bare 400 that the OpenAPI document
        # does not list. It is a malformed request like any other: 422, in the
        # same shape as the schema errors.
        if exc.status_code == 400 and request.url.path == "/v1/check":
            log.info("%s %s 422 (body is not UTF-8 JSON)", request.method, request.url.path)
            return JSONResponse(status_code=422, content={"detail": [
                {"loc": ["body"], "msg": "the body is not valid UTF-8 JSON", "type": "json_invalid"}]})
        return JSONResponse(status_code=exc.status_code, content={"detail": exc.detail},
                            headers=getattr(exc, "headers", None))

    # async: answered on the event loop, which never runs a check.
    @app.get("/healthz", responses={503: {"model": Unavailable, "description": "No worker is running"}})
    async def healthz() -> Any:
        workers = pool.stats()
        if not workers["ready"]:
            return JSONResponse(status_code=503, content={"detail": "no guard worker is running (starting again)"})
        return {"status": "ok", "guard": guard.describe(), "workers": workers}

    # Every status the endpoint answers is in the OpenAPI document (413 comes
    # from the body-size middleware, 422 from validation and the handler above).
    @app.post("/v1/check", response_model=CheckResponse, responses={
        408: {"model": Incomplete, "description": "The body stopped arriving before Content-Length bytes"},
        413: {"model": TooLarge, "description": "Request body over the size limit"},
        422: {"model": InvalidRequest, "description": "Body is not UTF-8 JSON, nests or numbers past the limits, "
                                                      "or is not a valid request"},
        431: {"model": HeadersTooLarge, "description": "Request headers over the size limit"},
        500: {"model": CheckFailed, "description": "The check failed (a bug)"},
        503: {"model": Unavailable, "description": "Every worker busy and the queue full, or the worker died; "
                                                   "retry after Retry-After seconds",
              "headers": {"Retry-After": {"schema": {"type": "integer"}, "description": "Seconds"}}},
        504: {"model": TimedOut, "description": "The request's time budget ran out; its check was stopped"},
    })
    async def check(req: CheckRequest, request: Request) -> Any:
        t0 = time.perf_counter()
        try:
            job = pool.submit(req.text, req.context)
        except Busy as exc:
            log.info("POST /v1/check 503 (busy: %d checking, %d waiting)", exc.checking, exc.waiting)
            return JSONResponse(status_code=503, content={"detail": _busy_detail(exc)},
                                headers={"Retry-After": str(exc.retry_after)})
        outcome = await _outcome(pool, job, request.receive)
        ms = 1000 * (time.perf_counter() - t0)
        if outcome.kind == "ok" and outcome.verdict is not None:
            v = outcome.verdict
            counts: dict[str, int] = {}
            for f in v["findings"]:
                counts[f["reason"]] = counts.get(f["reason"], 0) + 1
            log.info("POST /v1/check 200 allowed=%s findings=%s chars=%d %.1f ms", v["allowed"],
                     ",".join(f"{k}:{n}" for k, n in sorted(counts.items())) or "none", len(req.text), ms)
            return CheckResponse(allowed=v["allowed"], text=v["text"],
                                 findings=[FindingOut(**f) for f in v["findings"]])
        if outcome.kind == "timeout":
            log.info("POST /v1/check 504 (over the %g s budget; stopped) chars=%d %.1f ms", limits.timeout_s,
                     len(req.text), ms)
            return JSONResponse(status_code=504, content={"detail": (
                f"the request ran past this service's time budget of {limits.timeout_s:g} s (queue wait included); "
                + ("its check was stopped" if job.started else "it waited that long for a worker and was never "
                   "checked") + "; send a shorter text, retry when the service is less busy, or ask for a larger "
                "--timeout")})
        if outcome.kind == "gone":
            log.info("POST /v1/check client disconnected: check stopped chars=%d %.1f ms", len(req.text), ms)
            return JSONResponse(status_code=503, content={"detail": "the client disconnected"})
        if outcome.kind == "lost":
            log.warning("POST /v1/check 503 (the worker died during the check) chars=%d", len(req.text))
            return JSONResponse(status_code=503, headers={"Retry-After": "5"}, content={
                "detail": "the worker checking this request stopped unexpectedly; retry after 5 s"})
        log.error("POST /v1/check 500 (the check raised %s)", outcome.detail)
        return JSONResponse(status_code=500, content={"detail": f"the check failed ({outcome.detail}); this is a "
                                                                 "bug in privleak"})

    app.add_middleware(_BodyLimit, limit=max_body_bytes)
    return app


def open_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port``, or one line saying why not (a bad host, the port in use, a port
    that needs privileges) — checked before the guard and its models load, and handed to the server as is."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError, OSError) as exc:
        reason = getattr(exc, "strerror", None) or exc
        raise UserError(f"--host {host}: not an address or host name of this machine ({reason}); use 127.0.0.1 "
                        "(this machine only) or 0.0.0.0 (every interface)") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise UserError(f"--port {port}: already in use on {host} (another process listens there); choose another "
                            "port or stop that process") from None
        if exc.errno in (errno.EACCES, errno.EPERM):
            raise UserError(f"--port {port}: binding it needs privileges; use a port from 1024 to 65535") from None
        if exc.errno == errno.EADDRNOTAVAIL:
            raise UserError(f"--host {host}: not an address of this machine; use 127.0.0.1 or 0.0.0.0") from None
        raise UserError(f"--host {host} --port {port}: cannot listen there ({exc.strerror or exc})") from None
    return sock


def serve(guard: Guard, host: str = "127.0.0.1", port: int = 8080, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
          log_level: str = "info", sock: socket.socket | None = None, limits: PoolLimits | None = None,
          source: Callable[[], Guard] | None = None) -> None:
    """Run the service with uvicorn until interrupted (uvicorn's access log off: ours says enough); the
    workers are stopped on the way out.

    ``sock``: an already listening socket (:func:`open_socket`), so start-up errors come before the models load.
    ``limits``, ``source``: see :func:`create_app`.
    """
    import uvicorn

    logging.basicConfig(level=getattr(logging, log_level.upper(), logging.INFO), format="%(asctime)s %(name)s %(message)s")
    sock = sock or open_socket(host, port)
    app = create_app(guard, max_body_bytes=max_body_bytes, limits=limits, source=source)
    # h11, not httptools: h11 bounds the request head it buffers (httptools accepts any header size).
    config = uvicorn.Config(app, log_level=log_level, access_log=False, http="h11",
                            h11_max_incomplete_event_size=H11_MAX_HEADER_BYTES)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        app.state.pool.close()
