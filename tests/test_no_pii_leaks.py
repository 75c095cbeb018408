"""The tool itself must not leak: a synthetic-corpus audit run through the CLI
puts no identifying ground-truth PII value into its console output, its log
lines, results.json or report.html — unless --show-pii is asked for."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from test_pipeline_e2e import (
    SMALL,  # tests/ is on sys.path (pytest's default import mode)
)

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


def _run_cli(argv: list[str]) -> None:
    try:
        main(argv)
    except SystemExit as exc:
        assert exc.code in (0, None), exc.code


@pytest.fixture(scope="module")
def audited(tmp_path_factory) -> tuple[Path, str]:
    tmp = tmp_path_factory.mktemp("leakscan")
    cfg = tmp / "small.yaml"
    # Every kind of arm: each writes its own blocks (defence reports, PII attacks, guard).
    cfg.write_text(yaml.safe_dump({**SMALL, "arms": ["baseline", "dp-8", "scrub", "dedup", "dp-8+scrub", "guard"]}))
    return tmp / "run", str(cfg)


def test_console_results_and_report_hold_no_pii(audited, capfd):
    out, cfg = audited
    _run_cli(["run", "--config", cfg, "--out", str(out)])
    console = "".join(capfd.readouterr())
    values = _values(out)
    assert values
    for name, text in {
        "console": console,
        "results.json": (out / "results.json").read_text(),
        "report.html": (out / "report.html").read_text(),
        "stage markers": "".join(p.read_text() for p in (out / "stages").glob("*.json")),
    }.items():
        found = sorted(v for v in values if v in text)
        assert not found, (name, found[:5])


def test_show_pii_reveals_with_a_warning(audited, capfd):
    out, _ = audited
    _run_cli(["report", str(out), "--show-pii", "--out", str(out / "revealed.html")])
    assert "PII unmasked" in "".join(capfd.readouterr())
    html = (out / "revealed.html").read_text()
    assert "warning" in html.lower()


def test_every_arm_kind_lands_in_results(audited):
    """Runs after the audit above: each arm kind wrote its own blocks."""
    import json

    out, _ = audited
    results = json.loads((out / "results.json").read_text())
    arms = results["arms"]
    assert set(arms) == {"baseline", "dp-8", "scrub", "dedup", "dp-8+scrub", "guard"}
    assert arms["scrub"]["defences"]["scrub"]["quality"]["overall"]["recall"] > 0.9
    assert arms["dedup"]["defences"]["dedup"]["n_in"] == results["data"]["n_members"]
    for name in ("baseline", "scrub", "dp-8+scrub"):
        assert {"extraction", "reconstruction", "inference"} <= set(arms[name]["pii_attacks"])
    guard = arms["guard"]
    assert guard["kind"] == "guard" and guard["serves"] == "baseline" and guard["attacks"] == {}
    assert {"canaries", "phi_prompts", "sampling", "pii_extraction"} <= set(guard["guard"]["attacks"])
    assert 0.0 <= guard["guard"]["false_positives"]["overall"]["rate"] <= 1.0
    assert any(k.startswith("guard/guard/") for k in results["durations_s"])
