"""The guard service against its own OpenAPI document (schemathesis, in process).

schemathesis reads ``/openapi.json`` from the ASGI app (no network, no
server) and generates requests from it — valid bodies and, in its negative
mode, bodies that break the schema — and checks every response: no server
error, a status code the document lists, a body and content type matching
what it documents for that status, schema-breaking bodies rejected. The run
is bounded and reproducible (a fixed number of examples per operation,
derandomized, no example database). Bodies schemathesis cannot generate —
not UTF-8, not JSON, over the size limit — are sent by hand and validated
with the same checks.
"""

from __future__ import annotations

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from privleak.defenses.guard import Guard, ScanSettings
from privleak.defenses.guard.pool import PoolLimits
from privleak.defenses.guard.service import create_app

MEMBER = ("Verification record for Ann Lee-Park: social security number 376-45-8448. "
          "Follow-up booked at the cardiology clinic for next Tuesday morning.")
LIMIT = 4000
CONFORMANCE = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]

APP = create_app(Guard.build([MEMBER], canaries=["376-45-8448"], scan=ScanSettings(ner=False)),
                 max_body_bytes=LIMIT, limits=PoolLimits(workers=1))
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)


@schema.parametrize()
@settings(max_examples=40, derandomize=True, database=None, deadline=None,
          suppress_health_check=list(HealthCheck))
def test_every_generated_request_gets_a_documented_answer(case):
    case.call_and_validate(checks=CONFORMANCE + [negative_data_rejection])


@pytest.mark.parametrize("body", [
    b"\xff\xfe{\"text\": \"a\"}",          # not UTF-8 (FastAPI's own answer would be an undocumented 400)
    b"{\"text\": \"caf\xe9\"}",            # Latin-1 inside JSON
    b"{\"text\": \"a\"",                    # truncated JSON
    b"\x00\x01\x02",                        # binary
    b"",                                    # empty
    b"{\"text\": \"" + b"x" * LIMIT + b"\"}",  # over the limit: 413
])
def test_bodies_schemathesis_cannot_generate(body):
    """Raw bodies, validated against the document with schemathesis's own checks."""
    case = schema["/v1/check"]["POST"].Case(body={"text": "placeholder"}, media_type="application/json")
    response = TestClient(APP).post("/v1/check", content=body, headers={"content-type": "application/json"})
    case.validate_response(response, checks=CONFORMANCE)  # an undocumented status fails here
    assert response.status_code == (413 if len(body) > LIMIT else 422)


# ---------------------------------------------------------------- issue 30: every status, documented and answered

def test_the_document_lists_every_status_the_check_endpoint_answers():
    doc = TestClient(APP).get("/openapi.json").json()
    assert set(doc["paths"]["/v1/check"]["post"]["responses"]) == {"200", "408", "413", "422", "431", "500", "503",
                                                                    "504"}
    assert doc["paths"]["/v1/check"]["post"]["responses"]["503"]["headers"]["Retry-After"]["schema"]["type"] == "integer"
    assert set(doc["paths"]["/healthz"]["get"]["responses"]) == {"200", "503"}


DEEP = b"[" * 200_000 + b"]" * 200_000


@pytest.fixture(scope="module")
def large_app():
    app = create_app(Guard.build([MEMBER], scan=ScanSettings(ner=False)), max_body_bytes=1_000_000,
                     limits=PoolLimits(workers=1))
    yield app
    app.state.pool.close()


@pytest.mark.parametrize("body,needle", [
    ('{"text": "a"}'.encode("utf-16"), "not valid UTF-8"),       # valid JSON, UTF-16 (Python's json would take it)
    ('{"text": "a"}'.encode("utf-16-le"), "not valid UTF-8"),
    ('{"text": "a"}'.encode("utf-32"), "not valid UTF-8"),
    (b'{"text": "a", "context": ' + DEEP[:3000] + b"}", "nested more than 64"),  # deep nesting: the right message
    (b'{"text": ' + b"7" * 100_000 + b"}", "number of 100,000 characters"),
])
def test_bodies_past_the_limits_get_a_documented_422_that_says_why(body, needle, large_app):
    app = large_app
    case = schema["/v1/check"]["POST"].Case(body={"text": "placeholder"}, media_type="application/json")
    response = TestClient(app).post("/v1/check", content=body, headers={"content-type": "application/json"})
    case.validate_response(response, checks=CONFORMANCE)
    assert response.status_code == 422 and needle in response.json()["detail"][0]["msg"], response.text


def test_oversized_headers_get_a_documented_431():
    case = schema["/v1/check"]["POST"].Case(body={"text": "placeholder"}, media_type="application/json")
    response = TestClient(APP).post("/v1/check", json={"text": "fine"}, headers={"x-padding": "y" * 200_000})
    case.validate_response(response, checks=CONFORMANCE)
    assert response.status_code == 431


@pytest.fixture(scope="module")
def live_server():
    """The service on a real uvicorn (h11) on a free loopback port, as `privleak guard serve` runs it."""
    import threading

    import uvicorn

    from privleak.defenses.guard.service import H11_MAX_HEADER_BYTES, open_socket

    sock = open_socket("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(APP, log_level="warning", access_log=False, http="h11",
                                           h11_max_incomplete_event_size=H11_MAX_HEADER_BYTES))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        thread.join(0.05)
    yield sock.getsockname()[1]
    server.should_exit = True
    thread.join(10)


def _raw(port: int, request: bytes) -> bytes:
    """Send ``request`` as is and read the answer until the server closes the connection (5 s at most: the
    request must not be held longer)."""
    import socket

    out = b""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        try:
            s.sendall(request)
        except OSError:  # the server answered and closed before the whole request was sent
            pass
        try:
            while chunk := s.recv(65536):
                out += chunk
        except ConnectionResetError:
            pass
    return out


def test_a_content_length_larger_than_the_body_is_answered_408_not_held(live_server):
    head = (b"POST /v1/check HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n")
    answer = _raw(live_server, head + b'{"text": "only the start')  # the client then waits, the socket stays open
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]


def test_a_header_block_over_the_servers_limit_is_refused_by_the_server(live_server):
    head = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Padding: " + b"y" * 200_000 + b"\r\n\r\n"
    answer = _raw(live_server, head)
    assert answer.split(b" ")[1] in (b"400", b"431"), answer[:200]
