"""The HTML report and the comparison, rendered from a real small audit (``audited`` in conftest).

Every section is read from typed fields; PII is masked unless asked for;
a truncated, hand-edited or older results.json is one line naming the field.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import markupsafe
import pytest

from privleak.core.errors import UserError
from privleak.core.masking import PiiMasker, mask_pii, mask_text_values
from privleak.report.compare import render_compare, write_compare
from privleak.report.html import render_report, write_report
from privleak.report.schema import load_results, validate_results
from privleak.results import json_schema

SECTIONS = ("summary", "arms", "membership", "canaries", "extraction", "pii", "defences", "guard",
            "empirical-epsilon", "tests", "examples", "reproducibility")


def _section_ids(page: str) -> list[str]:
    return re.findall(r'<section id="([^"]+)"', page)


def _ground_truth_pii(run: Path) -> set[str]:
    """Every PII value of the run, read independently of the masking module."""
    vals: set[str] = set()
    for p in (run / "splits").glob("*.jsonl"):
        for line in p.read_text().splitlines():
            rec = json.loads(line)
            for s, e, _ in rec["pii"] or []:
                vals.add(rec["text"][s:e])
    for c in json.loads((run / "splits" / "canaries.json").read_text())["canaries"]:
        vals.add(c["secret"])
        m = re.search(r"for (.+?): ", c["prefix"])
        if m:
            vals.add(m.group(1))
    return {v for v in vals if len(v.strip()) >= 3}


def _leaked(values: set[str], page: str) -> set[str]:
    """The values that occur in ``page`` as whole tokens, raw or HTML-escaped (one regex pass)."""
    forms: dict[str, str] = {}
    for v in values:
        for f in (v, html.escape(v), html.escape(v, quote=False)):
            forms.setdefault(f, v)
    pat = re.compile(r"(?<![\w])(" + "|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True)) + r")(?![\w])")
    found: set[str] = set()
    pos = 0
    while (m := pat.search(page, pos)) is not None:
        found.add(forms[m.group(1)])
        pos = m.start() + 1
    return found


def test_report_renders_every_section_from_the_typed_results(audited) -> None:
    page = (audited.out / "report.html").read_text()
    ids = _section_ids(page)
    for s in SECTIONS:
        assert s in ids, f"section {s} missing: {ids}"
    assert page.count("<svg") >= 5  # trade-off, ROC panels, canaries, PHI bars, ε
    rec = audited.results.recommendation
    assert rec is not None and rec.text.startswith(rec.requirement_text)
    # The requirement is the summary's first line, the choice after it (as Jinja escapes them).
    assert str(markupsafe.escape(rec.requirement_text)) in page
    assert str(markupsafe.escape(rec.text[len(rec.requirement_text):].strip())) in page
    assert page.index(str(markupsafe.escape(rec.requirement_text))) < page.index('id="scorecard"')
    for name, arm in audited.results.arms.items():
        assert arm.verdict.label in page, name
    assert "default-src 'none'; img-src data:; style-src 'unsafe-inline'" in page
    # Designed tables only: no flattened field | value dumps of result blocks.
    assert "<th>field</th>" not in page and "by_category." not in page


def test_every_attack_has_a_table_with_its_baselines(audited) -> None:
    """Each attack renders itself from its result model: a table of its headline figures per model."""
    from privleak.attacks.registry import ATTACKS

    page = (audited.out / "report.html").read_text()
    present = {a for _, m in audited.results.models() for a in m.attacks}
    for name in present:
        assert html.escape(ATTACKS[name].title, quote=False) in page, name
    pii = page[page.index('id="pii"'):page.index('id="defences"')]
    assert "floor" in pii and "chance" in pii


def test_report_is_self_contained(audited) -> None:
    page = render_report(audited.results, audited.out)
    assert "<script" not in page.lower()
    assert "<link" not in page.lower() and "@import" not in page and "url(http" not in page
    for attr, target in re.findall(r'\b(src|href)\s*=\s*"([^"]*)"', page):
        assert target.startswith("#") or target.startswith("data:"), (attr, target)


def test_no_ground_truth_pii_in_report_unless_show_pii(audited, tmp_path: Path) -> None:
    truth = _ground_truth_pii(audited.out)
    assert len(truth) > 50
    page = write_report(audited.out, out=tmp_path / "masked.html").read_text()
    leaked = sorted(_leaked(truth, page))
    assert not leaked, f"PII values in the masked report: {leaked[:10]}"
    assert 'id="pii-warning"' not in page
    shown = write_report(audited.out, show_pii=True, out=tmp_path / "report-pii.html").read_text()
    assert 'id="pii-warning"' in shown and "UNMASKED" in shown


def test_without_the_run_directory_only_patterns_are_masked_and_sections_still_render(audited) -> None:
    results = audited.results.model_copy(deep=True)
    for name in ("dedup", "scrub", "dp-8+scrub", "guard"):
        results.arms.pop(name)
    page = render_report(results)  # no run directory: no splits to mask from, no canary texts
    ids = _section_ids(page)
    assert "guard" not in ids and "defences" not in ids
    for s in ("summary", "arms", "membership", "canaries", "reproducibility"):
        assert s in ids


@pytest.mark.parametrize("value,label,expected", [
    ("Alfred Hughes", "NAME", "Al**** H*****"),
    ("123-45-1850", "SSN", "***-**-1850"),
    ("607-574-4450", "PHONE", "***-***-4450"),
    ("MRN-997039", "MRN", "MRN-****39"),
    ("09/25/1969", "DOB", "**/**/****"),
    ("gmoreno204@example.com", "EMAIL", "g*********@*******.com"),
])
def test_mask_pii(value: str, label: str, expected: str) -> None:
    assert mask_pii(value, label) == expected


@pytest.mark.parametrize("label", ["NAME", "SSN", "PHONE", "EMAIL", "ADDRESS", "DOB", "MRN", "CONDITION", "MEDICATION",
                                   "PROCEDURE", "BLOOD_PRESSURE", "HEIGHT", "WEIGHT", "UNKNOWN"])
@pytest.mark.parametrize("value", ["Jo", "Ann Lee", "72 kg", "6'2\"", "171/76", "1974-01-26", "x@y.io", "tonsillectomy", "+1 546-629-3232", "--"])
def test_mask_pii_never_reveals(value: str, label: str) -> None:
    m = mask_pii(value, label)
    assert len(m) == len(value)
    assert m != value and value not in m


def test_text_masker_masks_known_values_and_patterns() -> None:
    text = "Ann Lee (MRN-123456) called 555-123-4567 about SSN 987-65-4321, mail ann.lee@example.org; Annabel is fine."
    out = mask_text_values(text, {"Ann Lee": "NAME"})
    for v in ("Ann Lee", "MRN-123456", "555-123-4567", "987-65-4321", "ann.lee@example.org"):
        assert v not in out
    assert "Annabel is fine" in out and out.startswith("A** L**")
    assert PiiMasker({}, patterns=False).mask(text) == text


def test_known_values_include_canary_names_and_secrets(audited) -> None:
    from privleak.data.canaries import known_pii, load_canaries

    canaries = load_canaries(audited.out / "splits" / "canaries.json")
    vals = known_pii([], canaries)
    assert {c.secret for c in canaries} <= set(vals) and "NAME" in vals.values()


def test_truncated_results_is_one_line_user_error(tmp_path: Path, audited) -> None:
    text = (audited.out / "results.json").read_text()
    (tmp_path / "results.json").write_text(text[: len(text) // 2])
    with pytest.raises(UserError) as ei:
        write_report(tmp_path)
    msg = str(ei.value)
    assert "\n" not in msg and "truncated" in msg and "results.json" in msg
    (tmp_path / "results.json").write_text("")
    with pytest.raises(UserError, match="empty"):
        write_report(tmp_path)
    with pytest.raises(UserError, match="no such file"):
        write_report(tmp_path / "missing")


def test_older_schema_version_is_refused_in_one_line(tmp_path: Path, audited) -> None:
    data = json.loads((audited.out / "results.json").read_text())
    data["schema_version"] = "1"
    (tmp_path / "results.json").write_text(json.dumps(data))
    with pytest.raises(UserError) as ei:
        write_report(tmp_path)
    msg = str(ei.value)
    assert "\n" not in msg and "schema version '1'" in msg and "rerun `privleak run`" in msg


@pytest.mark.parametrize("edit,field", [
    (lambda r: r["arms"]["baseline"]["attacks"]["loss"].__setitem__("auc", "high"), "arms.baseline.attacks.loss.auc"),
    (lambda r: r["arms"]["dp-8"].pop("utility"), "arms.dp-8.utility"),
    (lambda r: r["arms"]["dp-8"]["attacks"]["exposure"]["canaries"][0].__setitem__("repeats", "two"),
     "arms.dp-8.attacks.exposure.canaries[0].repeats"),
    (lambda r: r.__setitem__("arms", []), "arms"),
    (lambda r: r["base_model"]["attacks"]["loss"].__setitem__("auc_ci95", [0.5]), "base_model.attacks.loss.auc_ci95[1]"),
    (lambda r: r["arms"]["baseline"]["attacks"]["loss"].__setitem__("made_up", 1), "arms.baseline.attacks.loss.made_up"),
    (lambda r: r.pop("base_model"), "base_model"),
])
def test_hand_edited_results_name_the_field(tmp_path: Path, audited, edit: Any, field: str) -> None:
    data = json.loads((audited.out / "results.json").read_text())
    edit(data)
    (tmp_path / "results.json").write_text(json.dumps(data))
    with pytest.raises(UserError) as ei:
        write_report(tmp_path)
    msg = str(ei.value)
    assert "\n" not in msg and f"field {field}:" in msg, msg
    assert ei.value.exit_code == 2


def test_results_validate_against_the_generated_json_schema(audited) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(json.loads((audited.out / "results.json").read_text()), schema)


def test_round_trip_is_exact(audited) -> None:
    data = json.loads((audited.out / "results.json").read_text())
    assert validate_results(data).to_json() == data


def test_compare_side_by_side(tmp_path: Path, audited) -> None:
    a, b = tmp_path / "run-a", tmp_path / "run-b"
    a.mkdir()
    b.mkdir()
    data = json.loads((audited.out / "results.json").read_text())
    (a / "results.json").write_text(json.dumps(data))
    data["config"]["seed"] = 8
    data["arms"].pop("dedup")  # and wherever the file names it (validation.py refuses a file naming a missing arm)
    rec = data["recommendation"]
    rec["standings"] = [s for s in rec["standings"] if s["arm"] != "dedup"]
    for field in ("eligible", "contenders", "tied", "needs_seeds"):
        rec[field] = [a for a in rec[field] if a != "dedup"]
    if rec["arm"] == "dedup":
        rec["arm"] = None
    (b / "results.json").write_text(json.dumps(data))
    page = write_compare([a, b, audited.out], tmp_path / "compare.html").read_text()
    assert "run-a" in page and "run-b" in page and "<svg" in page
    assert re.search(r"<td>seed</td><td>7</td><td>8</td>", page)
    assert 'id="compare-table"' in page
    (b / "results.json").write_text("{")
    with pytest.raises(UserError, match="run-b"):
        write_compare([a, b], tmp_path / "c2.html")
    assert "<html" in render_compare([load_results(a)])


def test_compare_disambiguates_equal_directory_names(tmp_path: Path, audited) -> None:
    (tmp_path / "x" / "run").mkdir(parents=True)
    (tmp_path / "x" / "run" / "results.json").write_text((audited.out / "results.json").read_text())
    page = write_compare([audited.out, tmp_path / "x" / "run"], tmp_path / "c.html").read_text()
    assert "run (1)" in page and "run (2)" in page


def test_cli_report_and_compare(tmp_path: Path, audited, capsys: pytest.CaptureFixture[str]) -> None:
    """`privleak report` / `privleak compare`: files written, a bad results.json is one line and exit 2."""
    import privleak.cli as cli

    cli.main(["report", str(audited.out), "--out", str(tmp_path / "r.html")])
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    other = tmp_path / "other"
    other.mkdir()
    (other / "results.json").write_text((audited.out / "results.json").read_text())
    cli.main(["compare", str(audited.out), str(other), "--out", str(tmp_path / "c.html")])
    assert "compare-table" in (tmp_path / "c.html").read_text()
    bad = tmp_path / "bad"
    bad.mkdir()
    data = json.loads((audited.out / "results.json").read_text())
    data["arms"]["dp-8"]["attacks"]["loss"]["auc"] = "high"
    (bad / "results.json").write_text(json.dumps(data))
    capsys.readouterr()
    with pytest.raises(SystemExit) as ei:
        cli.main(["report", str(bad)])
    assert ei.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "arms.dp-8.attacks.loss.auc" in err


def test_one_run_section_renders_when_no_arm_has_a_bound(audited) -> None:
    # Regression (50592d3): with every bound unavailable (e.g. fewer audit canaries than the bound needs)
    # the section crashed with StopIteration; it must render the rows that say why.
    from privleak.report.html import section_one_run
    from privleak.results import OneRunEpsilon

    r = audited.results.model_copy(deep=True)
    for _, model in r.models():
        if model.one_run_epsilon is not None:
            model.one_run_epsilon = OneRunEpsilon(available=False, reason="needs at least 50 audit canaries")
    section = section_one_run(r)
    assert section is not None and section["id"] == "one-run"
    assert "needs at least 50 audit canaries" in render_report(r)  # the rows say why
