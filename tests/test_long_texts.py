"""Texts over spaCy's 1,000,000-character limit, through every door that takes one.

spaCy refuses a longer text (E088), NER or not; the analyser splits it into
overlapping windows and merges the spans (``PiiAnalyzer.iter_analyze``).
Each test here sends one long record through a real entry point —
``privleak scrub`` and ``privleak guard check`` (the console script, in a
subprocess), the guard's HTTP service (in process) and the scrub arm's
code — and checks that every planted value is found wherever it falls,
including where windows meet, and that nothing else changed.

The 10 MB records go through the regex-only path (``--no-ner``, or PII
types that need no NER) and two PII types, so each test takes seconds;
the NER path is exercised on a 1.2 MB text (12 windows). What a 10 MB
record costs with every type is measured in ``bench/bench_scrub.py``, not
here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from privleak.data.records import PiiSpan, Record
from privleak.defenses.pii import DEFAULT_WINDOW_CHARS, PiiAnalyzer
from privleak.defenses.pii.windows import split_windows

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path(sys.executable).with_name("privleak")
TEN_MB = 10_000_000

_FILLER = ("The quarterly review ran long and the committee agreed to revisit the budget in spring. ",
           "Minutes were circulated to every department head before the end of the week. ",
           "Nobody objected to moving the archive to the new building on the east campus. ")


def _ssn(i: int) -> str:
    # Distinct, valid-looking SSNs (area 100-665, group 10-99, serial 1000-9999);
    # every fourth written with spaces, so a window may be cut inside one.
    sep = " " if i % 4 == 1 else "-"
    return sep.join((f"{100 + i % 566:03d}", f"{10 + i % 90:02d}", f"{1000 + i % 9000:04d}"))


def long_text(size: int, every: int = 2_500) -> tuple[str, list[tuple[int, int, str]]]:
    """About ``size`` characters of prose with an SSN every ``every`` characters
    and an e-mail address every 10th time; (text, [(start, end, label)])."""
    parts: list[str] = []
    spans: list[tuple[int, int, str]] = []
    n, i = 0, 0
    while n < size:
        chunk = "".join(_FILLER[(i + k) % 3] for k in range(every // 80))
        value, label = (f"j.doe{i}@example.org", "EMAIL") if i % 10 == 9 else (_ssn(i), "SSN")
        lead = f"{chunk}Reference for the file: {'e-mail' if label == 'EMAIL' else 'SSN'} "
        spans.append((n + len(lead), n + len(lead) + len(value), label))
        piece = f"{lead}{value}. "
        parts.append(piece)
        n += len(piece)
        i += 1
    return "".join(parts), spans


def masked(text: str, spans: list[tuple[int, int, str]]) -> str:
    """``text`` with every span replaced by ``<LABEL>``: what ``--mode mask`` must give."""
    out, pos = [], 0
    for s, e, lab in sorted(spans):
        out += [text[pos:s], f"<{lab}>"]
        pos = e
    out.append(text[pos:])
    return "".join(out)


def _cli(args: list[str], **kw) -> subprocess.CompletedProcess:
    cmd = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "privleak"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PRIVLEAK_PROGRESS": "0", "OMP_NUM_THREADS": "1"}
    return subprocess.run(cmd + args, capture_output=True, text=True, env=env, timeout=600, **kw)


@pytest.fixture(scope="module")
def ten_mb() -> tuple[str, list[tuple[int, int, str]]]:
    text, spans = long_text(TEN_MB)
    assert len(text) >= TEN_MB and len(split_windows(text, DEFAULT_WINDOW_CHARS, 2_000)) >= 100
    return text, spans


def test_windows_give_the_whole_text_answer():
    """Small windows (so the test is fast): the same detections as one pass,
    for values on, just before and just after every cut."""
    text, spans = long_text(40_000, every=200)
    analyzer = PiiAnalyzer(["SSN", "EMAIL"], ner=False)
    a = analyzer.analyze(text)
    analyzer.window_chars, analyzer.overlap_chars = 800, 160
    b = analyzer.analyze(text)
    cuts = split_windows(text, 800, 160)
    assert len(cuts) > 40
    # Some value is cut by a window's end (only the next window sees it
    # whole), some straddles the line between two windows' own parts.
    assert any(s < w.end < e for w in cuts[:-1] for s, e, _ in spans)
    assert any(s < w.own_end < e for w in cuts[:-1] for s, e, _ in spans)
    assert [(d.start, d.end, d.label) for d in b] == [(d.start, d.end, d.label) for d in a]
    assert [(d.start, d.end, d.label) for d in b] == spans


def test_spacy_batches_are_bounded_by_characters():
    """Long windows reach nlp.pipe a few at a time (a count-only batch held 32 windows, 3.2 M characters,
    at once); short texts still batch together; and the detections do not depend on the batching."""
    text, spans = long_text(40_000, every=200)
    analyzer = PiiAnalyzer(["SSN", "EMAIL"], ner=False)
    analyzer.window_chars, analyzer.overlap_chars = 800, 160
    whole = analyzer.analyze_batch([text, "SSN 123-45-6789", "no pii here"])
    engine, calls = analyzer._nlp_engine, []
    real = engine.process_batch

    def spy(texts, language, batch_size=1, **kw):  # the real engine, watched
        texts = list(texts)
        calls.append((len(texts), sum(map(len, texts))))
        return real(texts, language, batch_size=batch_size, **kw)

    engine.process_batch = spy
    analyzer.batch_chars = 2_000
    bounded = analyzer.analyze_batch([text, "SSN 123-45-6789", "no pii here"])
    assert bounded == whole
    assert len(calls) > 20 and all(n == 1 or chars <= 2_000 for n, chars in calls)
    assert all(n <= analyzer.batch_size for n, _ in calls)
    calls.clear()
    analyzer.analyze_batch(["a short note about SSN 123-45-6789"] * 40)
    assert [n for n, _ in calls] == [32, 8]


def test_scrub_cli_10mb_record(tmp_path, ten_mb):
    text, spans = ten_mb
    src, dst = tmp_path / "big.jsonl", tmp_path / "big.scrubbed.jsonl"
    src.write_text(json.dumps({"id": 1, "text": text}) + "\n", encoding="utf-8")
    r = _cli(["scrub", str(src), str(dst), "--no-ner", "--types", "SSN,EMAIL", "--json",
              "--max-record-chars", str(len(text))])  # over the default bound, which is refused (test_scrub_bounds)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    rows = [json.loads(line) for line in dst.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 1 and rows[0]["id"] == 1
    assert rows[0]["text"] == masked(text, spans)
    report = json.loads(r.stdout)
    assert report["n_changed"] == 1
    assert report["counts"] == {"EMAIL": sum(lab == "EMAIL" for *_, lab in spans),
                                "SSN": sum(lab == "SSN" for *_, lab in spans)}


def test_guard_check_cli_10mb_output(tmp_path, ten_mb):
    text, spans = ten_mb
    member = "Verification record for the Lindqvist account, held at the northern branch since last May."
    (tmp_path / "train.txt").write_text(member + "\n", encoding="utf-8")
    r = _cli(["guard", "build", "--train", str(tmp_path / "train.txt"), "--out", str(tmp_path / "idx")])
    assert r.returncode == 0, r.stderr[-2000:]
    # PII all through the text, and a training sentence 7 MB in: redacted, and blocked.
    at = text.index(". ", 7_000_000) + 2
    shift = len(member) + 1
    (tmp_path / "out.txt").write_text(text[:at] + member + " " + text[at:], encoding="utf-8")
    r = _cli(["guard", "check", "--index", str(tmp_path / "idx"), "--no-ner", "--types", "SSN,EMAIL", "--json",
              str(tmp_path / "out.txt")])
    assert r.returncode == 1 and "BLOCKED" in r.stderr and "Traceback" not in r.stderr
    verdict = json.loads(r.stdout)
    assert not verdict["allowed"] and member not in verdict["text"]
    assert [f["start"] for f in verdict["findings"] if f["reason"] == "verbatim"] == [at]
    pii = [(f["start"], f["end"]) for f in verdict["findings"] if f["reason"] == "pii"]
    assert pii == [(s, e) if s < at else (s + shift, e + shift) for s, e, _ in spans]
    assert not any(text[s:e] in verdict["text"] for s, e, _ in spans[::50])


def test_guard_service_10mb_body(ten_mb):
    from fastapi.testclient import TestClient

    from privleak.defenses.guard import Guard, ScanSettings
    from privleak.defenses.guard.service import create_app

    text, spans = ten_mb
    guard = Guard.build(["An unrelated training sentence that is long enough to be indexed by the guard."],
                        scan=ScanSettings(pii_labels=("SSN", "EMAIL"), ner=False))
    client = TestClient(create_app(guard, max_body_bytes=12_000_000))
    r = client.post("/v1/check", content=json.dumps({"text": text}), headers={"content-type": "application/json"})
    assert r.status_code == 200
    body = r.json()
    assert body["allowed"] and body["text"] == masked(text, spans)
    assert [(f["start"], f["end"]) for f in body["findings"]] == [(s, e) for s, e, _ in spans]
    assert client.get("/healthz").status_code == 200  # the service is still up


def test_scrub_arm_10mb_record(ten_mb):
    from privleak.defenses.arm_data import scrub_members

    text, spans = ten_mb
    rec = Record(text, [PiiSpan(s, e, lab) for s, e, lab in spans], {"kind": "user"})
    short = Record("Call Dana on 617-555-0142 about SSN 376-45-8448.", None, {"kind": "user"})
    scrubbed, report = scrub_members([rec, short], mode="mask", entities=["SSN", "EMAIL"], seed=0)
    assert scrubbed[0].text == masked(text, spans)
    assert scrubbed[1].text == "Call Dana on 617-555-0142 about SSN <SSN>."
    assert report.quality.per_type["SSN"].recall == 1.0 and report.quality.per_type["EMAIL"].recall == 1.0
    assert report.pii_in_training["SSN"].values_left == 0


def test_ner_path_over_one_million_characters():
    """NER on (names from spaCy's model need no cue) in 12+ windows of a 1.2 MB text."""
    from privleak.defenses.arm_data import scrub_members

    people = ["Maria Gonzalez", "Henrik Johansson", "Aisha Mensah", "Tomasz Kowalski"]
    parts, n, names = [], 0, []
    while n < 1_200_000:
        who = people[len(names) % len(people)]
        lead = "".join(_FILLER) * 8 + "On Tuesday "
        names.append((n + len(lead), n + len(lead) + len(who)))
        piece = f"{lead}{who} signed the lease for the flat. "
        parts.append(piece)
        n += len(piece)
    text = "".join(parts)
    assert len(text) > 1_000_000
    scrubbed, report = scrub_members([Record(text, [PiiSpan(s, e, "NAME") for s, e in names], {})],
                                     mode="mask", entities=["NAME"], seed=0)
    out = scrubbed[0].text
    assert report.quality.per_type["NAME"].recall >= 0.95
    left = sum(out.count(p) for p in people)
    assert left <= 0.05 * len(names), f"{left} of {len(names)} names left"
    assert re.sub(r"<NAME>", "", out).count("signed the lease") == len(names)
