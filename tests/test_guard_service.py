"""The guard's HTTP service in-process (FastAPI TestClient): verdicts, limits, errors, clean logs."""

from __future__ import annotations

import json
import logging

import pytest
from fastapi.testclient import TestClient

from privleak.defenses.guard import Guard, ScanSettings
from privleak.defenses.guard.pool import PoolLimits
from privleak.defenses.guard.service import create_app

MEMBER = ("Verification record for Ann Lee-Park: social security number 376-45-8448. "
          "Follow-up booked at the cardiology clinic for next Tuesday morning.")
SECRET = "376-45-8448"
LIMIT = 2000


@pytest.fixture(scope="module")
def client() -> TestClient:
    guard = Guard.build([MEMBER], canaries=[SECRET], inventory=[("NAME", "Ann Lee-Park")], scan=ScanSettings(ner=False))
    return TestClient(create_app(guard, max_body_bytes=LIMIT, limits=PoolLimits(workers=1)))


def test_healthz(client):
    r = client.get("/healthz")
    assert r.status_code == 200 and r.json()["status"] == "ok"
    assert r.json()["guard"]["threshold"] == 50 and SECRET not in r.text


def test_check_allowed_and_blocked(client):
    ok = client.post("/v1/check", json={"text": "The clinic opens at nine."})
    assert ok.status_code == 200 and ok.json() == {"allowed": True, "text": "The clinic opens at nine.", "findings": []}
    bad = client.post("/v1/check", json={"text": "Sure: " + MEMBER[10:90]})
    body = bad.json()
    assert bad.status_code == 200 and body["allowed"] is False
    assert {f["reason"] for f in body["findings"]} >= {"verbatim"} and MEMBER[10:90] not in body["text"]
    sec = client.post("/v1/check", json={"text": "it is 376 45 8448"}).json()
    assert not sec["allowed"] and "8448" not in sec["text"]


def test_context_field(client):
    body = client.post("/v1/check", json={"text": MEMBER[40:70] + " etc.", "context": "Go on: " + MEMBER[:40]}).json()
    assert not body["allowed"] and body["findings"][0]["start"] == 0


def test_oversized_requests_413_then_good_request_works(client):
    big = json.dumps({"text": "x" * (LIMIT + 10)})
    assert client.post("/v1/check", content=big, headers={"content-type": "application/json"}).status_code == 413

    def chunks():  # no content-length: the limit applies to what is actually streamed
        for _ in range(10):
            yield b"y" * 500

    assert client.post("/v1/check", content=chunks(), headers={"content-type": "application/json"}).status_code == 413
    assert client.post("/v1/check", json={"text": "fine"}).json()["allowed"] is True


@pytest.mark.parametrize("payload", [b"{not json", b"[]", b'{"text": 5}', b'{"txt": "a"}', b'{"text": "a", "x": 1}', b""])
def test_schema_errors_422_without_echo(client, payload):
    r = client.post("/v1/check", content=payload, headers={"content-type": "application/json"})
    assert r.status_code == 422
    assert "input" not in r.text.lower() or all("input" not in e for e in r.json()["detail"])


def test_422_never_echoes_pii(client):
    r = client.post("/v1/check", json={"text": ["Ann Lee-Park", SECRET]})
    assert r.status_code == 422 and SECRET not in r.text and "Ann" not in r.text
    assert client.post("/v1/check", json={"text": "still fine"}).status_code == 200


def test_logs_never_carry_text(client, caplog):
    caplog.set_level(logging.DEBUG)
    client.post("/v1/check", json={"text": f"Patient Ann Lee-Park, SSN {SECRET}, phone (617) 555-0142"})
    client.post("/v1/check", json={"text": ["Ann Lee-Park", SECRET]})
    client.post("/v1/check", content=json.dumps({"text": SECRET * 500}), headers={"content-type": "application/json"})
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "POST /v1/check 200" in logged and "422" in logged and "413" in logged
    for secret in (SECRET, "Ann", "Lee-Park", "555-0142", "8448"):
        assert secret not in logged
