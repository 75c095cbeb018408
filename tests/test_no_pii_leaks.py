"""The tool itself must not leak: a synthetic-corpus audit run through the CLI
puts no identifying ground-truth PII value into its console output, its log
lines, results.json or report.html — unless --show-pii is asked for."""

from __future__ import annotations

import re
from pathlib import Path

from privleak.cli import main
from privleak.data.canaries import load_canaries
from privleak.data.records import read_jsonl

IDENTIFYING = {"NAME", "EMAIL", "SSN", "PHONE", "ADDRESS", "DOB", "MRN"}


def _values(run: Path) -> set[str]:
    values = set()
    for split in ("members", "non_members", "population"):
        for r in read_jsonl(run / "splits" / f"{split}.jsonl"):
            values.update(s.value(r.text) for s in r.pii if s.label in IDENTIFYING)
    for c in load_canaries(run / "splits" / "canaries.json"):
        values.add(c.secret)
    return {v for v in values if len(v) >= 6}


def test_console_results_and_report_hold_no_pii(audited):
    out = audited.out
    values = _values(out)
    assert values
    # The baseline memorised its repeated canary: there was leaked text to mask, not nothing.
    leaked = audited.results.arms["baseline"].attacks["canary_extraction"].leaked()
    assert leaked.k >= 1
    for name, text in {
        "console": audited.console,
        "results.json": (out / "results.json").read_text(),
        "report.html": (out / "report.html").read_text(),
        "stage markers": "".join(p.read_text() for p in (out / "stages").glob("*.json")),
        "stage outputs": "".join(p.read_text() for p in (out / "arms").glob("*/attacks/*.json")),
    }.items():
        found = sorted(v for v in values if v in text)
        assert not found, (name, found[:5])


def test_show_pii_reveals_with_a_warning(audited, capfd, tmp_path):
    out = audited.out
    try:
        main(["report", str(out), "--show-pii", "--out", str(tmp_path / "revealed.html")])
    except SystemExit as exc:
        assert exc.code in (0, None)
    assert "PII unmasked" in "".join(capfd.readouterr())
    html = (tmp_path / "revealed.html").read_text()
    assert "warning" in html.lower()
    secrets = [c.secret for c in load_canaries(out / "splits" / "canaries.json")]
    assert any(s in html for s in secrets)  # the canary ranked first / extracted is shown in full


def test_every_arm_kind_lands_in_results(audited):
    results = audited.results
    arms = results.arms
    assert set(arms) == {"baseline", "best", "dp-8", "scrub", "dedup", "dp-8+scrub", "guard"}
    assert arms["scrub"].defences.scrub.quality.overall.recall > 0.9
    assert arms["dedup"].defences.dedup.n_in == results.data.n_members
    for name in ("baseline", "scrub", "dp-8+scrub"):
        assert {"pii_extraction", "pii_reconstruction", "pii_inference"} <= set(arms[name].attacks)
    guard = arms["guard"]
    assert guard.kind == "guard" and guard.serves == "baseline"
    assert set(guard.attacks) == {"canary_extraction", "sampling_extraction", "phi_extraction", "pii_extraction"}
    assert not guard.membership()  # behind a text-only API, score-based attacks do not apply
    assert 0.0 <= guard.details.false_positives.overall.rate <= 1.0
    assert set(guard.details.interventions) == set(guard.attacks)
    assert any(k.startswith("extraction/guard/") for k in results.durations_s)


# --------------------------------------------------------------------------- issue 49 item 2: the run directory

DOC = Path(__file__).resolve().parents[1] / "docs" / "guide" / "run-directory.md"


def _glob(pattern: str) -> re.Pattern:
    """A run-directory glob as a regex: ``**`` anything below, ``*`` within one path segment."""
    out = ""
    for part in re.split(r"(\*\*|\*)", pattern):
        out += ".*" if part == "**" else "[^/]*" if part == "*" else re.escape(part)
    return re.compile(out + r"\Z")


def _documented() -> list[str]:
    """The paths of the doc's run-directory tree, as globs (``<arm>`` → ``*``; a folder: everything below)."""
    block = DOC.read_text().split("```\nruns/default/\n", 1)[1].split("```", 1)[0]
    out = []
    for line in block.splitlines():
        if line.startswith("  ") and not line.startswith("   "):
            path = re.sub(r"<[a-z]+>", "*", line.split()[0]).replace("…", "**")
            out.append(path + "**" if path.endswith("/") else path)
    return out


def _sensitive_in_doc() -> list[str]:
    section = DOC.read_text().split("## Sensitive files", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\* `([^`]+)`", section, flags=re.M)


def _owner_only(path: Path, root: Path) -> bool:
    """Mode 0600 or stricter — or inside a folder of the run only its owner can open (a saved model's, 0700)."""
    return any(p.stat().st_mode & 0o077 == 0 for p in (path, *path.parents) if p != root and root in p.parents)


def test_the_sensitive_files_are_the_documented_ones():
    from privleak.pipeline.rundir import SENSITIVE

    assert _sensitive_in_doc() == list(SENSITIVE)
    assert "arms/*/samples.json" in SENSITIVE


def test_raw_pii_stays_in_the_declared_files(audited):
    """Issue 49 item 2: ``arms/*/samples.json`` held raw generations with members' names, MRNs and SSNs, in no
    doc. Every file of a real run (every arm kind: baseline, best, DP, scrub, dedup, DP + scrub, guard) is in the
    doc's tree; the ones that hold training text or generations are the declared sensitive files, owner-only
    (0600); no other file holds a raw identifying value of the splits."""
    from privleak.pipeline.rundir import SENSITIVE

    out = audited.out
    values = _values(out)
    documented = [_glob(p) for p in _documented()]
    sensitive = [_glob(p) for p in SENSITIVE]
    seen_sensitive = set()
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        rel = path.relative_to(out).as_posix()
        assert any(g.match(rel) for g in documented), f"{rel}: not in docs/guide/run-directory.md"
        if any(g.match(rel) for g in sensitive):
            seen_sensitive.add(next(p for p, g in zip(SENSITIVE, sensitive) if g.match(rel)))
            assert _owner_only(path, out), f"{rel}: sensitive, yet readable by others"
            continue
        if path.suffix in (".npz", ".safetensors"):
            continue  # numbers only
        text = path.read_text(errors="replace")
        found = sorted(v for v in values if v in text)
        assert not found, (rel, found[:5])
    assert {"splits/**", "arms/*/model/**", "arms/*/samples.json", "defences/scrub/*.jsonl"} <= seen_sensitive
