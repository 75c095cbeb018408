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
from privleak.defenses.guard.service import create_app

MEMBER = ("Verification record for Ann Lee-Park: social security number 376-45-8448. "
          "Follow-up booked at the cardiology clinic for next Tuesday morning.")
LIMIT = 4000
CONFORMANCE = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]

APP = create_app(Guard.build([MEMBER], canaries=["376-45-8448"], scan=ScanSettings(ner=False)),
                 max_body_bytes=LIMIT)
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)


@schema.parametrize()
@settings(max_examples=40, derandomize=True, database=None, deadline=None,
          suppress_health_check=list(HealthCheck))
def test_every_generated_request_gets_a_documented_answer(case):
    case.call_and_validate(checks=CONFORMANCE + [negative_data_rejection])


def test_the_document_lists_every_status_the_check_endpoint_answers():
    doc = TestClient(APP).get("/openapi.json").json()
    assert set(doc["paths"]["/v1/check"]["post"]["responses"]) == {"200", "413", "422"}


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
