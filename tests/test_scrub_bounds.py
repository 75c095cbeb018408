"""``privleak scrub`` bounds its work (issue 49): a record over ``--max-record-chars`` refused before any work,
progress inside one long record, no temporary file left on SIGTERM or Ctrl-C, a 128-bit pseudonym key, enum
values in any case, and the reach of scrubbing said where it is used (a secret of no PII type stays)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from cli_harness import run_cli

from privleak.core.errors import UserError
from privleak.defenses.commands import scrub_file
from privleak.defenses.pii import PiiAnalyzer, get_analyzer
from privleak.defenses.pseudonyms import parse_key

ROOT = Path(__file__).resolve().parents[1]
NOTE = "Patient John Smith, SSN 123-45-6789, phone (617) 555-0142, seen for a follow-up."
KEY = "0123456789abcdef0123456789ABCDEF"


@pytest.fixture(scope="module")
def analyzer():
    return get_analyzer(None, ner=False)


def test_a_record_over_the_bound_is_refused_before_the_analyser_is_built(tmp_path, monkeypatch):
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"text": NOTE}) + "\n" + json.dumps({"text": NOTE * 3}) + "\n")

    def no_analyser(*a, **k):
        raise AssertionError("the analyser was built before the refusal")

    monkeypatch.setattr(PiiAnalyzer, "__init__", no_analyser)
    with pytest.raises(UserError) as err:
        scrub_file(src, tmp_path / "out.jsonl", max_record_chars=len(NOTE) + 1)
    msg = str(err.value)
    assert "line 2" in msg and f"{3 * len(NOTE):,} characters" in msg and f"--max-record-chars {3 * len(NOTE)}" in msg
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]  # nothing written, no temporary file


def test_the_cli_names_the_flag_and_raising_it_scrubs(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text(NOTE + "\n")
    refused = run_cli(["scrub", str(src), str(tmp_path / "o.txt"), "--no-ner", "--max-record-chars", "20"])
    assert refused.returncode == 2 and "--max-record-chars 20" in refused.stderr and "line 1" in refused.stderr
    done = run_cli(["scrub", str(src), str(tmp_path / "o.txt"), "--no-ner", "--max-record-chars", str(len(NOTE))])
    assert done.returncode == 0 and "123-45-6789" not in (tmp_path / "o.txt").read_text()


def test_progress_moves_inside_one_long_record(analyzer):
    """The analyser reports each window's own characters: a 20,000-character text in 2,000-character windows
    moves the bar ten or more times, and the counts add up to the text's length exactly."""
    text = " ".join([NOTE] * 250)
    a = PiiAnalyzer(None, ner=False)
    a.window_chars, a.overlap_chars = 2000, 200
    seen: list[int] = []
    dets = next(a.iter_analyze([text], on_chars=seen.append))
    assert len(seen) >= 10 and sum(seen) == len(text)
    assert sum(d.label == "SSN" for d in dets) == 250  # every value found once, windows or not


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)])
def test_a_signal_leaves_no_temporary_file(tmp_path, monkeypatch, sig, code):
    """The probe: SIGTERM during a long scrub left an empty hidden ``.tmp`` beside OUT. Here the signal arrives
    while the analyser works (the temporary file exists then), in this process, as the console script runs."""
    src = tmp_path / "in.txt"
    src.write_text(NOTE + "\n")
    out = tmp_path / "out.txt"
    analyse = PiiAnalyzer.iter_analyze
    seen: list[list[str]] = []

    def signalled(self, texts, *a, **k):
        for dets in analyse(self, texts, *a, **k):
            seen.append(sorted(p.name for p in tmp_path.iterdir()))
            os.kill(os.getpid(), sig)
            time.sleep(1)  # the handler runs here, between two bytecodes
            yield dets

    monkeypatch.setattr(PiiAnalyzer, "iter_analyze", signalled)
    # The console script starts with Python's own Ctrl-C handler. A test run earlier in this worker may have left
    # another one behind (a worker pool's or Ray's, which only note the signal): then SIGINT did nothing here and
    # the scrub finished (make test, twice in two sessions). Give this run what a fresh process has.
    prior_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        # What was installed before (SIG_DFL, or Ray's handler when a Ray test ran first in this worker).
        before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
        proc = run_cli(["scrub", str(src), str(out), "--no-ner"])
        after = {s: signal.getsignal(s) for s in before}
    finally:
        signal.signal(signal.SIGINT, prior_int)
    assert proc.returncode == code, proc.stderr
    assert any(name.startswith(".out.txt.") for name in seen[0])  # the temporary file was there …
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]  # … and is gone, OUT never written
    assert "was not written" in proc.stderr and "Traceback" not in proc.stderr
    assert after == before  # the handlers are put back


def test_the_pseudonym_key_is_128_bits(tmp_path, analyzer):
    for short in ("42", "4294967295", "0x" + KEY[:30], KEY[:31], KEY + "0", "g" * 32, ""):
        with pytest.raises(UserError, match="32 hexadecimal digits"):
            parse_key(short)
    assert parse_key(KEY) == parse_key(KEY.lower()) == int(KEY, 16)
    src = tmp_path / "in.txt"
    src.write_text(NOTE + "\n")

    def fakes(name: str, key: str) -> str:
        scrub_file(src, tmp_path / name, mode="pseudonym", seed=key, analyzer=analyzer)
        return (tmp_path / name).read_text()

    assert fakes("a.txt", KEY) == fakes("b.txt", KEY.lower())  # reproducible
    assert fakes("c.txt", KEY) != fakes("d.txt", "f" * 32)
    refused = run_cli(["scrub", str(src), str(tmp_path / "e.txt"), "--mode", "pseudonym", "--seed", "42"])
    assert refused.returncode == 2 and "--seed 42" in refused.stderr and "32 hexadecimal digits" in refused.stderr
    assert not (tmp_path / "e.txt").exists()


def test_enum_values_in_any_case_printed_in_lower_case(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"text": NOTE}) + "\n" + json.dumps({"text": NOTE}) + "\n")
    scrubbed = run_cli(["scrub", str(src), str(tmp_path / "o.jsonl"), "--mode", "PSEUDONYM", "--format", "JSONL",
                        "--no-ner", "--seed", KEY, "--json"])
    assert scrubbed.returncode == 0, scrubbed.stderr
    assert json.loads(scrubbed.stdout)["mode"] == "pseudonym"
    deduped = run_cli(["dedup", str(src), str(tmp_path / "d.jsonl"), "--method", "Exact"])
    assert deduped.returncode == 0, deduped.stderr
    assert len((tmp_path / "d.jsonl").read_text().splitlines()) == 1


def test_a_secret_of_no_pii_type_stays_and_the_command_says_so(tmp_path):
    """Scrubbing replaces the types it lists: a telephone-banking passphrase is none of them."""
    src = tmp_path / "chat.txt"
    src.write_text("Caller Maria Lopez, phone (617) 555-0142. Telephone banking passphrase: purple otter "
                   "lantern 42.\n")
    done = run_cli(["scrub", str(src), str(tmp_path / "o.txt"), "--no-ner"])
    text = (tmp_path / "o.txt").read_text()
    assert done.returncode == 0 and "555-0142" not in text and "purple otter lantern 42" in text
    assert "a secret of no PII type scrubbed" in done.stderr
    assert "stays in the text" in " ".join(run_cli(["scrub", "--help"]).stdout.split())
    guide = (ROOT / "docs" / "guide" / "scrubbing.md").read_text()
    assert "passphrase" in guide and "only the entity types" in guide


def test_an_audit_with_a_scrub_arm_refuses_a_huge_record_before_any_work(tmp_path):
    """The scrub arm analyses each member whole: a 1.2 MB record would be ~2 minutes with no progress inside."""
    src = tmp_path / "corpus.txt"
    huge = "words " * 200_000 + "end"
    # Too few records to split besides: were the bound missing, the run would stop there, never train.
    src.write_text("\n".join([NOTE] * 3 + [huge]) + "\n")
    refused = run_cli(["run", "--data", str(src), "--arms", "baseline,scrub", "--out", str(tmp_path / "run")])
    assert refused.returncode == 2, refused.stderr
    assert f"line 4: a record of {len(huge):,} characters" in refused.stderr and "scrub arm" in refused.stderr
    assert not (tmp_path / "run").exists()
