"""``privleak guard build / check`` end to end on a small generated corpus."""

from __future__ import annotations

import io
import json

import pytest

from privleak.cli import main
from privleak.data.records import read_jsonl


def _run(argv: list[str]) -> int:
    try:
        main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("guard-cli")
    assert _run(["data", "generate", "--out", str(d / "c"), "--n-public", "20", "--n-members", "30",
                 "--n-non-members", "10", "--n-population", "10", "--phi-fraction", "0.5"]) == 0
    assert _run(["guard", "build", "--train", str(d / "c" / "members.jsonl"), "--out", str(d / "idx"),
                 "--canaries", str(d / "c" / "canaries.json"), "--pii-inventory",
                 "--allow", str(d / "c" / "public.jsonl")]) == 0
    return d


def test_check_exit_codes(built, capsys, monkeypatch):
    member = read_jsonl(built / "c" / "members.jsonl")[0].text
    (built / "out.txt").write_text("Here: " + member, encoding="utf-8")
    capsys.readouterr()
    assert _run(["guard", "check", "--index", str(built / "idx"), "--no-ner", str(built / "out.txt")]) == 1
    cap = capsys.readouterr()
    assert "BLOCKED" in cap.err and member not in cap.out
    monkeypatch.setattr("sys.stdin", io.StringIO("The weather is mild today."))
    assert _run(["guard", "check", "--index", str(built / "idx"), "--no-ner", "-"]) == 0
    assert capsys.readouterr().out.strip() == "The weather is mild today."


def test_check_json(built, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("Call (617) 555-0142 now"))
    assert _run(["guard", "check", "--index", str(built / "idx"), "--no-ner", "--json", "-"]) == 0
    v = json.loads(capsys.readouterr().out)
    assert v["allowed"] and v["text"] == "Call <PHONE> now" and v["findings"][0]["label"] == "PHONE"


def test_user_errors_exit_2(built, tmp_path, capsys):
    assert _run(["guard", "check", "--index", str(tmp_path / "missing"), "-"]) == 2
    assert "guard build" in capsys.readouterr().err
    assert _run(["guard", "check", "--index", str(built / "idx"), "--policy", "pii=maybe", "-"]) == 2
    assert _run(["guard", "build", "--train", str(tmp_path / "none.jsonl"), "--out", str(tmp_path / "i")]) == 2
    (tmp_path / "plain.txt").write_text("one line of text that is long enough\n")
    assert _run(["guard", "build", "--train", str(tmp_path / "plain.txt"), "--out", str(tmp_path / "i"),
                 "--pii-inventory"]) == 2
    assert _run(["guard", "build", "--train", str(tmp_path / "plain.txt"), "--out", str(tmp_path / "i"),
                 "--threshold", "2"]) == 2
