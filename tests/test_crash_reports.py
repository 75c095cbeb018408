"""A bug inside a stage that holds PII must not print or write that PII (issue 30: a traceback with locals
printed whole records and 22 SSN-shaped strings).

The failure is injected into the real console script in a subprocess: a stage (and, separately, the scrubber)
raises an exception whose message quotes record text and whose frames hold the records in local variables.
Everything the process printed (stdout, stderr) and every file it wrote — the run directory outside
``splits/`` (the members themselves, by design), the crash report — is scanned for every PII value of the
corpus: none may appear. The one line on stderr names the crash report; the report names the exception type and
the frames, nothing else; ``PRIVLEAK_DEBUG=1`` adds the frames with their source lines, still no PII.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import SMALL

ROOT = Path(__file__).resolve().parents[1]

# Replaces the base-model stage's body (which runs after the data stage has written the splits) with one that holds the
# members in locals and fails quoting them.
RUN_WITH_A_BUG = """
import sys
import privleak.pipeline.data as data

def resolve_base(cfg, run, public):
    from privleak.pipeline.data import read_splits
    members = read_splits(run)["members"]
    texts = [r.text for r in members]
    secrets = {r.text: r.pii for r in members}
    raise ValueError("could not process: " + " | ".join(texts))

data.resolve_base = resolve_base
from privleak.cli import main
main(sys.argv[1:])
"""

SCRUB_WITH_A_BUG = """
import sys
from privleak.defenses.scrub import Scrubber

def apply(self, text, detections):
    record = text
    raise KeyError(record)

Scrubber.apply = apply
from privleak.cli import main
main(sys.argv[1:])
"""


def _pii_values(*jsonl: Path) -> set[str]:
    values = set()
    for path in jsonl:
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            for s, e, _ in rec.get("pii") or []:
                value = rec["text"][s:e]
                if len(value.strip()) >= 5:  # shorter values (initials, "Lee") match ordinary words and code
                    values.add(value)
    return values


def _written(root: Path, skip: str | None = None) -> dict[str, str]:
    out = {}
    for p in root.rglob("*"):
        if p.is_file() and not p.is_symlink() and (skip is None or skip not in p.relative_to(root).parts):
            out[str(p)] = p.read_bytes().decode("utf-8", "replace")
    return out


def _leaks(values: set[str], texts: dict[str, str]) -> list[tuple[str, str]]:
    return [(where, v) for where, text in texts.items() for v in values if v in text]


def _run(script: str, argv: list[str], tmp: Path, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PRIVLEAK_PROGRESS": "0", "OMP_NUM_THREADS": "1",
            "PRIVLEAK_CRASH_DIR": str(tmp / "crashes"), "PRIVLEAK_CACHE": str(tmp / "cache"), "COLUMNS": "200", **env}
    return subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True, env=full,
                          timeout=900, cwd=tmp)


def _check_one_line_and_report(proc: subprocess.CompletedProcess, tmp: Path, exc_type: str, frame: str,
                               debug: bool = False) -> Path:
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith(("PrivLeak audit", "▶", "✓"))]
    if debug:  # the sanitised stack first (frames and their code lines), then the same one line
        assert lines[0].startswith("exception: ") and frame in proc.stderr, proc.stderr[-3000:]
        lines = lines[-1:]
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr + proc.stdout
    assert len(lines) == 1 and lines[0].startswith(f"error: internal error ({exc_type})"), proc.stderr[-3000:]
    reports = list((tmp / "crashes").glob("crash-*.txt"))
    assert len(reports) == 1 and str(reports[0]) in lines[0]
    assert stat.S_IMODE(reports[0].stat().st_mode) == 0o600
    text = reports[0].read_text()
    assert f"exception: {exc_type}" in text and frame in text  # the type and where: enough to find the bug
    return reports[0]


@pytest.mark.parametrize("debug", ["", "1"])
def test_a_failing_stage_leaks_no_pii(tmp_path, debug):
    cfg = {**SMALL, "arms": ["baseline"], "executor": {"kind": "sequential"}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    proc = _run(RUN_WITH_A_BUG, ["run", "--config", str(tmp_path / "c.yaml"), "--out", str(tmp_path / "run")],
                tmp_path, PRIVLEAK_DEBUG=debug)
    _check_one_line_and_report(proc, tmp_path, "ValueError", "in resolve_base", debug=bool(debug))
    if debug:
        assert "\n      body()\n" in proc.stderr  # a frame's code line (audit.py's stage runner), never the message
    splits = tmp_path / "run" / "splits"
    values = _pii_values(*splits.glob("*.jsonl"))
    assert len(values) > 100  # the scan has something to find: the members' names, SSNs, phones, e-mails, …
    printed = {"stdout": proc.stdout, "stderr": proc.stderr}
    written = _written(tmp_path, skip="splits")  # the run directory (splits/ holds the members by design), the report
    assert written and any("crash-" in w for w in written)
    assert _leaks(values, printed) == [] and _leaks(values, written) == []


def test_a_failing_scrub_leaks_no_pii(tmp_path):
    from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus, write_corpus

    corpus = generate_corpus(ClinicalCorpusConfig(n_public=0, n_members=60, n_non_members=10, n_population=10,
                                                  n_public_heldout=0, phi_fraction=1.0, seed=5))
    write_corpus(corpus, tmp_path / "data")
    members = tmp_path / "data" / "members.jsonl"
    proc = _run(SCRUB_WITH_A_BUG, ["scrub", str(members), str(tmp_path / "out.jsonl"), "--no-ner"], tmp_path)
    _check_one_line_and_report(proc, tmp_path, "KeyError", "in apply")
    values = _pii_values(members)
    assert len(values) > 50
    assert not (tmp_path / "out.jsonl").exists()
    written = _written(tmp_path, skip="data")
    assert _leaks(values, {"stdout": proc.stdout, "stderr": proc.stderr}) == [] and _leaks(values, written) == []
