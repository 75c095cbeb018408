"""The report's last sections: the statistical tests between arms, the examples of leaked text (masked unless
``--show-pii``), and what a reader needs to reproduce the run (its config, versions, seed and durations)."""

from __future__ import annotations

import json
import re
from typing import Any

from ..core.present import finite, interval, n as _n, t as _t
from ..results import AuditResults
from .blocks import Block, Section, note, table


def section_tests(results: AuditResults) -> Section | None:
    if not results.statistical_tests:
        return None
    rows = [[k, _t(f"{c.k1}/{c.n1}"), _t(f"{c.k2}/{c.n2}"), _n(c.diff), _t(interval(c.diff_ci95)), _n(c.cohens_h),
             _n(c.fisher_p, ".3g"), _n(c.chi2_p, ".3g")] for k, c in results.statistical_tests.items()]
    return {"id": "tests", "title": "Statistical tests", "blocks": [table(
        ["comparison", "arm 1", "arm 2", "difference", "95% CI (Newcombe)", "Cohen's h", "Fisher p", "χ² p (Yates)"], rows)]}


def section_examples(results: AuditResults, ctx: Any, show_pii: bool) -> Section | None:
    blocks: list[Block] = []
    for name, m in results.arms.items():
        rows: list[list[Any]] = []
        for r in m.attacks.values():
            rows += [[e.source, {"text": e.text, "cls": "example"}, _n(e.copies, "d") if e.copies is not None else "—",
                      e.how] for e in r.quotes(ctx)]
        if rows:
            blocks.append({"kind": "h3", "text": f"{name} ({len(rows)})"})
            blocks.append(table(["source", "leaked text", "copies in training", "how"], rows[:50]))
            if len(rows) > 50:
                blocks.append(note(f"First 50 of {len(rows)} shown."))
    if not blocks:
        return None
    head = ("PII is shown UNMASKED (--show-pii)." if show_pii else
            "PII is masked: every ground-truth PII value of the run's splits and canaries, and anything shaped like an SSN, "
            "e-mail, phone number or MRN. Rerun `privleak report RUN_DIR --show-pii` to reveal it.")
    return {"id": "examples", "title": "Examples of leaked text", "blocks": [note(head), *blocks]}


def _compact_json(obj: Any) -> str:
    """Indented JSON with lists of scalars kept on one line."""
    text = json.dumps(obj, indent=2, ensure_ascii=False)
    return re.sub(r"\[\s*([^\[\]{}]*?)\s*\]",
                  lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]" if m.group(1) else "[]", text)


def section_repro(results: AuditResults, source: str, digest: str | None) -> Section:
    cfg = results.config
    facts = [["schema version", results.schema_version], ["tool", f"{results.tool.name} {results.tool.version}"],
             ["seed", str(cfg.get("seed", "—"))], ["profile", str(cfg.get("profile", "—"))], ["results file", source]]
    if digest:
        facts.append(["results sha256", digest])
    blocks: list[Block] = [table(["", ""], facts)]
    if results.warnings:
        blocks += [{"kind": "h3", "text": "Warnings"}, {"kind": "list", "cls": "warnings", "items": list(results.warnings)}]
    if results.versions:
        blocks.append(table(["package", "version"], [[k, v] for k, v in results.versions.items()], caption="Package versions"))
    if results.durations_s:
        dur = results.durations_s
        stages = [[k, _n(v, ".1f")] for k, v in dur.items() if k.count("/") <= 1]
        total = sum(v for k, v in dur.items() if finite(v) and k.count("/") <= 1)
        blocks.append(table(["stage", "seconds"], stages + [["total", _n(total, ".1f")]],
                            caption="Durations per stage (not reproducible; per-attack splits are in results.json)"))
    blocks += [{"kind": "h3", "text": "Configuration"}, {"kind": "pre", "text": _compact_json(cfg)},
               note("Everything in results.json except durations is identical for the same config and seed.")]
    return {"id": "reproducibility", "title": "Reproducibility", "blocks": blocks}
