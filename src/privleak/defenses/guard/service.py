"""The guard as an HTTP service (FastAPI + uvicorn).

``POST /v1/check``  ``{"text": "...", "context": "<optional prompt>"}`` → ``{"allowed", "text", "findings"}``
``GET  /healthz``   ``{"status": "ok", "guard": settings and sizes}``

Limits and errors: a body over ``max_body_bytes`` (declared or actually sent)
is answered 413 before it is parsed; a body that is not UTF-8 JSON, or a
wrong schema, 422 with the error locations and messages but never the
submitted input echoed back. All three statuses are in the OpenAPI document
(``/openapi.json``), and schemathesis finds no response outside it
(``tests/test_guard_contract.py``). Logs carry method, path, status, latency and finding counts per
reason — never request or response bodies, so no PII reaches the logs
(Presidio's own DEBUG logging, which quotes the text around detections, is
capped at WARNING).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .guard import Guard

log = logging.getLogger("privleak.guard.service")
DEFAULT_MAX_BODY_BYTES = 64 * 1024


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


class _BodyLimit:
    """ASGI middleware: 413 for bodies over ``limit`` bytes, declared or streamed."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = int(limit)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await _too_large(send, self.limit)
            return
        # Read the body here (at most limit + 1 bytes are kept) and replay it to the app.
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
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
        sent = False

        async def replay() -> dict:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _too_large(send: Any, limit: int) -> None:
    payload = json.dumps({"detail": f"request body over {limit} bytes"}).encode()
    await send({"type": "http.response.start", "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": payload})
    log.info("POST 413 body over %d bytes", limit)


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
        413: {"model": TooLarge, "description": "Request body over the size limit"},
        422: {"model": InvalidRequest, "description": "Body is not UTF-8 JSON or not a valid request"},
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


def serve(guard: Guard, host: str = "127.0.0.1", port: int = 8080, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
          log_level: str = "info") -> None:
    """Run the service with uvicorn until interrupted (uvicorn's access log off: ours says enough)."""
    import uvicorn

    logging.basicConfig(level=getattr(logging, log_level.upper(), logging.INFO), format="%(asctime)s %(name)s %(message)s")
    app = create_app(guard, max_body_bytes=max_body_bytes)
    uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=False)
