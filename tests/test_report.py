"""The HTML report and the comparison: sections, PII masking, schema errors, speed.

No model is trained here: a run directory is faked from a small synthetic
corpus (real PII spans and canaries) and a results.json of the shape
``privleak run`` writes, optionally with the later, optional keys (ROC points,
empirical ε, extraction / PII / guard blocks, statistical tests).
"""

from __future__ import annotations

import copy
import html
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from privleak.core.errors import UserError
from privleak.core.masking import (
    PiiMasker,
    known_pii_values,
    mask_pii,
    mask_text_values,
)
from privleak.report.html import (
    render_compare,
    render_report,
    write_compare,
    write_report,
)
from privleak.report.schema import load_results, results_schema, validate_results

REPEATS = (1, 2, 4)


def _canaries(exposed: bool, ids: list[str]) -> list[dict[str, Any]]:
    out = []
    for i, cid in enumerate(ids):
        r = REPEATS[i % len(REPEATS)]
        exp = 13.29 if exposed else 0.5 + 0.3 * i
        out.append({"canary_id": cid, "repeats": r, "exposure": exp, "max_exposure": 13.29,
                    "rank": 1.0 if exposed else 5000.0 - 100 * i, "n_candidates": 10000, "exposure_extrapolated": exp})
    return out


def _attack(auc: float, ci: float, tpr: float, roc: bool) -> dict[str, Any]:
    e: dict[str, Any] = {"auc": auc, "tpr_at_1pct_fpr": tpr, "tpr_at_0_1pct_fpr": tpr / 2, "n_members": 60,
                         "n_non_members": 60, "auc_ci95": [auc - ci, auc + ci]}
    if roc:
        fpr = [0.0, 0.001, 0.01, 0.05, 0.1, 0.3, 0.6, 1.0]
        e["roc"] = {"fpr": fpr, "tpr": [min(1.0, f + (auc - 0.5) * 2 * (1 - f) ** 0.5) if f > 0 else 0.0 for f in fpr],
                    "threshold": [None] + [1.0 - f for f in fpr[1:]]}
    return e


def make_results(canary_ids: list[str], rich: bool = False, leaked_texts: list[str] | None = None) -> dict[str, Any]:
    """A results.json of the pipeline's shape; ``rich`` adds the optional, later keys."""
    def dp(eps: float, sigma: float, ppl: float, auc: float) -> dict[str, Any]:
        return {"kind": "dp",
                "training": {"steps": 33, "epoch_losses": [1.9, 1.8], "settings": {"kind": "dp", "target_epsilon": eps}},
                "privacy": {"target_epsilon": eps, "epsilon": eps * 0.9996, "accountant": "prv", "delta": 7.7e-05, "sigma": sigma,
                            "sample_rate": 0.0909, "steps": 33, "max_grad_norm": 1.0, "epsilon_rdp": eps * 1.15,
                            "epsilon_pld": eps * 0.999, "epsilon_prv": eps * 0.9996},
                "utility": {"ppl_members": ppl - 0.05, "ppl_non_members": ppl},
                "attacks": {"loss": _attack(auc, 0.05, 0.0, rich)},
                "canaries": _canaries(False, canary_ids)}

    res: dict[str, Any] = {
        "schema_version": "1",
        "tool": {"name": "privleak", "version": "0.1.0"},
        "config": {"seed": 0, "profile": "quick", "dp": {"epsilons": [1.0, 8.0], "delta": None}, "train": {"epochs": 10.0}},
        "data": {"source": "synthetic-clinical", "n_members": 60, "n_non_members": 60, "mia_records_per_side": 60,
                 "n_canaries": len(canary_ids), "canary_chance_exposure": 1.44},
        "base_model": {"kind": "embedded", "path": "/x", "utility": {"ppl_members": 5.84, "ppl_non_members": 5.89},
                       "attacks": {"loss": _attack(0.529, 0.05, 0.0, rich)}, "canaries": _canaries(False, canary_ids)},
        "arms": {
            "baseline": {"kind": "baseline", "training": {"steps": 810, "epoch_losses": [1.7, 0.8], "settings": {}},
                         "privacy": {"epsilon": None, "delta": None, "sigma": None, "sample_rate": None, "steps": 810,
                                     "max_grad_norm": None, "epsilon_rdp": None, "epsilon_pld": None},
                         "utility": {"ppl_members": 2.81, "ppl_non_members": 4.30},
                         "attacks": {"loss": _attack(0.906, 0.03, 0.272, rich)},
                         "canaries": _canaries(True, canary_ids)},
            "dp-1": dp(1.0, 2.04, 5.93, 0.533),
            "dp-8": dp(8.0, 0.66, 5.40, 0.536),
        },
        "warnings": ["a test warning"],
        "durations_s": {"data": 1.0, "train/baseline": 33.5},
        "versions": {"python": "3.11.7", "torch": "2.13.0+cpu"},
    }
    if rich:
        texts = leaked_texts or []
        res["arms"]["baseline"]["attacks"]["loss"]["empirical_epsilon"] = {"lower_bound": 2.1, "ci95": [1.5, 2.6]}
        res["arms"]["dp-8"]["attacks"]["loss"]["empirical_epsilon"] = {"epsilon_lb": 0.4, "threshold": 1.2, "test": "clopper-pearson"}
        # the pipeline's arm-level summary (attack chosen on a selection half) wins over per-attack bounds
        res["arms"]["dp-8"]["empirical_epsilon"] = {"epsilon_lb": 0.35, "attack": "loss", "alpha": 0.05, "delta": 7.7e-05,
                                                    "procedure": "attack and threshold chosen on a random half",
                                                    "dp_bound": {"attack": "loss", "ok": True, "max_excess": -0.1, "violations": []},
                                                    "exceeds_accountant": False}
        res["arms"]["baseline"]["attacks"]["zlib"] = _attack(0.85, 0.04, 0.2, True)
        res["arms"]["baseline"]["extraction"] = {"n_prompts": 50, "n_extracted": len(texts),
                                                 "examples": [{"text": t, "member_index": i} for i, t in enumerate(texts)]}
        res["arms"]["baseline"]["pii"] = {"n_leaked": 5, "by_category": {"NAME": 3, "SSN": 1, "EMAIL": 1},
                                          "examples": texts[:2]}
        res["arms"]["dp-8"]["pii"] = {"n_leaked": 0, "by_category": {"NAME": 0, "SSN": 0, "EMAIL": 0}}
        res["arms"]["baseline"]["guard"] = {"blocked": 4, "passed": 46, "note": "regex guard"}
        res["statistical_tests"] = {"baseline vs dp-8 AUC": {"test": "DeLong", "statistic": 7.9, "p_value": 1e-6},
                                    "dp-8 vs control AUC": {"test": "DeLong", "statistic": 0.2, "p_value": 0.84}}
        res["future_top_level"] = {"something": 1, "nested": {"deep": "value"}}
        res["arms"]["dp-1"]["new_arm_block"] = {"x": 1.5}
    return res


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run directory: splits/*.jsonl + canaries.json of a small synthetic corpus and a rich results.json."""
    from privleak.data.clinical import (
        ClinicalCorpusConfig,
        generate_corpus,
        write_corpus,
    )

    root = tmp_path_factory.mktemp("run")
    corpus = generate_corpus(ClinicalCorpusConfig(n_public=30, n_members=40, n_non_members=30, n_population=20,
                                                  phi_fraction=0.6, public_phi_fraction=0.5, canary_repeats=REPEATS,
                                                  canaries_per_repeat=2, seed=3))
    write_corpus(corpus, root / "splits")
    phi = [r.text for r in corpus.splits["members"] if r.kind == "phi"][:4]
    assert phi, "the fixture corpus should have notes with PII"
    results = make_results([c.canary_id for c in corpus.canaries], rich=True, leaked_texts=phi)
    (root / "results.json").write_text(json.dumps(results, indent=2))
    return root


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
    while (m := pat.search(page, pos)) is not None:  # overlapping-safe enough: restart one char later
        found.add(forms[m.group(1)])
        pos = m.start() + 1
    return found


SECTIONS_ALWAYS = ("summary", "arms", "tradeoff", "canaries", "examples", "reproducibility")
SECTIONS_RICH = ("roc", "pii", "empirical-epsilon", "tests", "extraction", "guard", "other")


def _section_ids(page: str) -> list[str]:
    return re.findall(r'<section id="([^"]+)"', page)


def test_report_renders_every_section_of_a_rich_run(run_dir: Path) -> None:
    out = write_report(run_dir)
    page = out.read_text()
    ids = _section_ids(page)
    for s in SECTIONS_ALWAYS + SECTIONS_RICH:
        assert s in ids, f"section {s} missing: {ids}"
    assert page.count("<svg") >= 5  # trade-off, ROC panels, canaries, PII bars, ε
    assert "DeLong" in page and "regex guard" in page and "future_top_level" in page and "new_arm_block" in page
    assert "Recommended arm: dp-8" in page
    emp = page[page.index('id="empirical-epsilon"'):page.index('id="tests"')]
    assert "0.350" in emp and "0.400" not in emp and "2.100" in emp  # arm-level bound preferred
    assert "Content-Security-Policy" in page and "default-src &#39;none&#39;" not in page
    assert "default-src 'none'; img-src data:; style-src 'unsafe-inline'" in page


def test_minimal_run_skips_absent_sections_and_recommends(tmp_path: Path) -> None:
    results = make_results(["canary-000", "canary-001", "canary-002"])
    page = render_report(results)  # no run directory: no splits to mask from
    ids = _section_ids(page)
    for s in SECTIONS_ALWAYS:
        assert s in ids
    for s in SECTIONS_RICH:
        assert s not in ids
    assert "LEAKS" in page and "NEAR CHANCE" in page
    # best utility among the near-chance arms, baseline excluded because it leaks
    assert "Recommended arm: dp-8" in page and "baseline has better perplexity but leaks" in page
    assert "canary text not available" in page


def test_no_arm_near_chance_recommends_none() -> None:
    results = make_results(["canary-000"])
    for arm in ("dp-1", "dp-8"):
        results["arms"][arm]["attacks"]["loss"] = _attack(0.8, 0.02, 0.1, False)
    page = render_report(results)
    assert "No arm meets the near-chance thresholds" in page


def test_report_is_self_contained(run_dir: Path) -> None:
    page = render_report(load_results(run_dir), run_dir)
    assert "<script" not in page.lower()
    assert "<link" not in page.lower() and "@import" not in page and "url(http" not in page
    for attr, target in re.findall(r'\b(src|href)\s*=\s*"([^"]*)"', page):
        assert target.startswith("#") or target.startswith("data:"), (attr, target)


def test_no_ground_truth_pii_in_report_unless_show_pii(run_dir: Path) -> None:
    truth = _ground_truth_pii(run_dir)
    assert len(truth) > 50
    page = write_report(run_dir).read_text()
    leaked = sorted(_leaked(truth, page))
    assert not leaked, f"PII values in the masked report: {leaked[:10]}"
    assert 'id="pii-warning"' not in page

    shown = write_report(run_dir, show_pii=True, out=run_dir / "report-pii.html").read_text()
    assert 'id="pii-warning"' in shown and "UNMASKED" in shown
    assert _leaked(truth, shown), "--show-pii should reveal the leaked values"


def test_masked_examples_keep_their_shape(run_dir: Path) -> None:
    page = write_report(run_dir).read_text()
    assert re.search(r"\*\*\*-\*\*-\d{4}", page), "canary SSNs should show as ***-**-NNNN"
    assert "Verification record for " in page


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


def test_known_values_from_run_dir(run_dir: Path) -> None:
    vals = known_pii_values(run_dir)
    assert {"NAME", "SSN"} <= set(vals.values())
    assert known_pii_values(run_dir / "nope") == {}


def test_truncated_results_is_one_line_user_error(tmp_path: Path, run_dir: Path) -> None:
    text = (run_dir / "results.json").read_text()
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


@pytest.mark.parametrize("edit,field", [
    (lambda r: r["arms"]["baseline"]["attacks"]["loss"].__setitem__("auc", "high"), "arms.baseline.attacks.loss.auc"),
    (lambda r: r["arms"]["dp-1"].pop("utility"), "arms.dp-1.utility"),
    (lambda r: r["arms"]["dp-8"]["canaries"][0].__setitem__("repeats", "two"), "arms.dp-8.canaries[0].repeats"),
    (lambda r: r.__setitem__("arms", []), "arms"),
    (lambda r: r.__setitem__("schema_version", "9"), "schema_version"),
    (lambda r: r["base_model"]["attacks"]["loss"].__setitem__("auc_ci95", [0.5]), "base_model.attacks.loss.auc_ci95"),
    (lambda r: r["arms"]["baseline"]["attacks"]["loss"].__setitem__("roc", {"fpr": [0, 1], "tpr": [1]}), "arms.baseline.attacks.loss.roc"),
    (lambda r: r.pop("base_model"), "base_model"),
])
def test_hand_edited_results_name_the_field(tmp_path: Path, edit: Any, field: str) -> None:
    results = make_results(["canary-000"])
    edit(results)
    (tmp_path / "results.json").write_text(json.dumps(results))
    with pytest.raises(UserError) as ei:
        write_report(tmp_path)
    msg = str(ei.value)
    assert "\n" not in msg and f"field {field}:" in msg, msg
    assert ei.value.exit_code == 2


def test_schema_is_valid_json_schema_and_accepts_results(run_dir: Path) -> None:
    schema = results_schema()
    validate_results(make_results(["canary-000"]))
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema not installed: the built-in validator is used")
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(json.loads((run_dir / "results.json").read_text()), schema)


def test_render_time_under_5s(run_dir: Path) -> None:
    results = load_results(run_dir)
    render_report(results, run_dir)  # warm imports
    t0 = time.perf_counter()
    write_report(run_dir)
    assert time.perf_counter() - t0 < 5.0


def test_compare_side_by_side(tmp_path: Path, run_dir: Path) -> None:
    a = tmp_path / "run-a"
    b = tmp_path / "run-b"
    a.mkdir()
    b.mkdir()
    ra = make_results(["canary-000"])
    rb = copy.deepcopy(ra)
    rb["config"]["seed"] = 7
    rb["arms"].pop("dp-1")
    (a / "results.json").write_text(json.dumps(ra))
    (b / "results.json").write_text(json.dumps(rb))
    out = write_compare([a, b, run_dir], tmp_path / "compare.html")
    page = out.read_text()
    assert "run-a" in page and "run-b" in page and "<svg" in page
    assert re.search(r"<td>seed</td><td>0</td><td>7</td>", page)
    assert 'id="compare-table"' in page
    (b / "results.json").write_text("{")
    with pytest.raises(UserError, match="run-b"):
        write_compare([a, b], tmp_path / "c2.html")
    assert "<html" in render_compare([ra])


def _cli_has(command: str) -> bool:
    import privleak.cli as cli

    return any((c.name or c.callback.__name__) == command for c in cli.app.registered_commands)


def test_cli_report_and_compare(tmp_path: Path, run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`privleak report` / `privleak compare`: files written, a bad results.json is one line and exit 2."""
    import privleak.cli as cli

    if not (_cli_has("report") and _cli_has("compare")):
        pytest.skip("the report/compare commands are not registered in privleak.cli yet")
    cli.main(["report", str(run_dir), "--out", str(tmp_path / "r.html")])
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    cli.main(["compare", str(run_dir), str(run_dir), "--out", str(tmp_path / "c.html")])
    assert "compare-table" in (tmp_path / "c.html").read_text()
    bad = tmp_path / "bad"
    bad.mkdir()
    results = make_results(["canary-000"])
    results["arms"]["dp-1"]["attacks"]["loss"]["auc"] = 1.7
    (bad / "results.json").write_text(json.dumps(results))
    capsys.readouterr()
    with pytest.raises(SystemExit) as ei:
        cli.main(["report", str(bad)])
    assert ei.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "arms.dp-1.attacks.loss.auc" in err


def test_empirical_epsilon_above_accountant_is_flagged() -> None:
    results = make_results(["canary-000"])
    results["arms"]["dp-8"]["empirical_epsilon"] = {"epsilon_lb": 9.5, "attack": "loss", "alpha": 0.05, "delta": 1e-5,
                                                    "exceeds_accountant": True}
    page = render_report(results)
    assert "the DP guarantee does not hold" in page and "VIOLATION" in page
    assert "Recommended arm: dp-1" in page  # dp-8 no longer qualifies


def test_guard_arm_gets_its_own_verdict_and_is_never_recommended():
    from privleak.report.html import arm_verdict, recommend

    res = make_results(["c1"])
    base = res["arms"]["baseline"]
    res["arms"]["guard"] = {
        "kind": "guard", "serves": "baseline", "privacy": base["privacy"], "utility": base["utility"], "attacks": {},
        "guard": {"attacks": {"canaries": {"without_guard": 9, "with_guard": 0, "fraction_stopped": 1.0},
                              "sampling": {"without_guard": 40, "with_guard": 1, "fraction_stopped": 0.975}},
                  "false_positives": {"overall": {"rate": 0.25, "k": 5, "n": 20}, "blocked": {"rate": 0.0, "k": 0, "n": 20}}},
    }
    v = arm_verdict("guard", res["arms"]["guard"], res)
    assert v["label"] == "GUARDED" and not v["near_chance"]
    assert "48 of 49 leaks" in v["text"] and "25%" in v["text"] and "scores or weights" in v["text"]
    verdicts = {n: arm_verdict(n, a, res) for n, a in res["arms"].items()}
    rec = recommend(res, verdicts)
    assert rec["arm"] != "guard" and "guard" not in rec["text"]  # not "recommended", not "leaks" either


def test_pii_attack_and_defence_sections_render():
    from privleak.report.html import render_report

    res = make_results(["c1"])
    res["arms"]["baseline"]["pii_attacks"] = {"inference": {"sizes": [{"size": 10, "total": {
        "accuracy": 0.5, "chance": 0.1, "non_member_accuracy": 0.05, "n_members": 20}}]}}
    res["arms"]["scrub"] = {**res["arms"]["baseline"], "defences": {"scrub": {
        "labels": ["SSN"], "quality": {"overall": {"recall": 0.99, "precision": 0.9}},
        "pii_in_training": {"SSN": {"ground_truth_spans": 10, "values_left": 1}, "HEIGHT": {"ground_truth_spans": 5, "values_left": 5}}}},
        "n_train_records": 100}
    html = render_report(res)
    assert "PII attacks (Lukas et al. 2023)" in html and "inference |C|=10" in html
    assert "Data defences" in html and "1 of 10" in html  # only the types the scrubber targets
