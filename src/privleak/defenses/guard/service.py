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

Beyond these, ``GET /healthz`` answers 200, an unknown path 404 and a wrong
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
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ...core.errors import UserError
from ...core.jsonlimits import JSONLimitError, loads
from .guard import Guard

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


async def _too_large(send: Any, limit: int) -> None:
    await _answer(send, 413, f"request body over {limit} bytes")


def create_app(guard: Guard, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES):
    """The FastAPI app serving ``guard`` (the PII analyser is loaded now, not on the first request)."""
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException as StarletteHTTPException

    # Presidio logs the words around each detection at DEBUG ("Context list is: ...") — raw
    # PII. The service never lets that through, whatever the root log level.
    logging.getLogger("presidio-analyzer").setLevel(logging.WARNING)
    guard.warm_up()
    app = FastAPI(title="PrivLeak output guard", version="1", docs_url=None, redoc_url=None)

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

    @app.get("/healthz")
    def healthz() -> dict[str, Any]:
        return {"status": "ok", "guard": guard.describe()}

    # Every status the endpoint answers is in the OpenAPI document (413 comes
    # from the body-size middleware, 422 from validation and the handler above).
    @app.post("/v1/check", response_model=CheckResponse, responses={
        408: {"model": Incomplete, "description": "The body stopped arriving before Content-Length bytes"},
        413: {"model": TooLarge, "description": "Request body over the size limit"},
        422: {"model": InvalidRequest, "description": "Body is not UTF-8 JSON, nests or numbers past the limits, "
                                                      "or is not a valid request"},
        431: {"model": HeadersTooLarge, "description": "Request headers over the size limit"},
    })
    def check(req: CheckRequest) -> CheckResponse:
        t0 = time.perf_counter()
        v = guard.check(req.text, req.context)
        counts: dict[str, int] = {}
        for f in v.findings:
            counts[f.reason] = counts.get(f.reason, 0) + 1
        log.info("POST /v1/check 200 allowed=%s findings=%s chars=%d %.1f ms", v.allowed,
                 ",".join(f"{k}:{n}" for k, n in sorted(counts.items())) or "none", len(req.text),
                 1000 * (time.perf_counter() - t0))
        return CheckResponse(allowed=v.allowed, text=v.text,
                             findings=[FindingOut(**f.to_json()) for f in v.findings])

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
          log_level: str = "info", sock: socket.socket | None = None) -> None:
    """Run the service with uvicorn until interrupted (uvicorn's access log off: ours says enough).

    ``sock``: an already listening socket (:func:`open_socket`), so start-up errors come before the models load.
    """
    import uvicorn

    logging.basicConfig(level=getattr(logging, log_level.upper(), logging.INFO), format="%(asctime)s %(name)s %(message)s")
    app = create_app(guard, max_body_bytes=max_body_bytes)
    sock = sock or open_socket(host, port)
    # h11, not httptools: h11 bounds the request head it buffers (httptools accepts any header size).
    config = uvicorn.Config(app, log_level=log_level, access_log=False, http="h11",
                            h11_max_incomplete_event_size=H11_MAX_HEADER_BYTES)
    uvicorn.Server(config).run(sockets=[sock])
