"""The console tables comparing arms (the short form of ``results.json``)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from rich.table import Table


def _fmt(x: Any, spec: str = ".3f") -> str:
    return "—" if x is None else format(x, spec)


def exposure_by_repeats(canaries: list[dict[str, Any]]) -> dict[int, float]:
    """Mean exposure per repetition count."""
    groups: dict[int, list[float]] = defaultdict(list)
    for c in canaries:
        groups[int(c["repeats"])].append(float(c["exposure"]))
    return {r: sum(v) / len(v) for r, v in sorted(groups.items())}


def _rows(results: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [("base (control)", results["base_model"])] + list(results["arms"].items())


def privacy_table(results: dict[str, Any]) -> Table:
    t = Table(title="Privacy parameters and utility")
    for col in ("arm", "ε target", "ε spent", "ε PLD", "ε RDP", "σ", "q", "steps", "δ", "ppl members", "ppl held-out"):
        t.add_column(col, justify="left" if col == "arm" else "right")
    for name, arm in _rows(results):
        p = arm.get("privacy") or {}
        t.add_row(
            name,
            _fmt(p.get("target_epsilon"), "g"),
            _fmt(p.get("epsilon"), ".3f"),
            _fmt(p.get("epsilon_pld"), ".3f"),
            _fmt(p.get("epsilon_rdp"), ".3f"),
            _fmt(p.get("sigma"), ".3f"),
            _fmt(p.get("sample_rate"), ".4f"),
            _fmt(p.get("steps"), "d") if p.get("steps") is not None else "—",
            _fmt(p.get("delta"), ".1e"),
            _fmt(arm["utility"]["ppl_members"], ".2f"),
            _fmt(arm["utility"]["ppl_non_members"], ".2f"),
        )
    return t


def attack_table(results: dict[str, Any]) -> Table:
    rows = _rows(results)
    repeats = sorted({int(c["repeats"]) for _, arm in rows for c in arm.get("canaries", [])})
    data = results["data"]
    title = f"Attacks — LOSS membership inference on {data['mia_records_per_side']} members vs as many non-members"
    if repeats:
        max_exp = rows[1][1]["canaries"][0]["max_exposure"] if len(rows) > 1 and rows[1][1].get("canaries") else None
        title += f"; canary exposure in bits (max {_fmt(max_exp, '.1f')}, chance ≈ {_fmt(data.get('canary_chance_exposure'), '.1f')})"
    t = Table(title=title)
    for col in ("arm", "AUC", "AUC 95% CI", "TPR@1%FPR", "TPR@0.1%FPR"):
        t.add_column(col, justify="left" if col == "arm" else "right")
    for r in repeats:
        t.add_column(f"exposure {r}×", justify="right")
    for name, arm in rows:
        loss = arm["attacks"]["loss"]
        ci = loss.get("auc_ci95")
        exp = exposure_by_repeats(arm.get("canaries", []))
        t.add_row(
            name,
            _fmt(loss["auc"], ".3f"),
            "—" if not ci else f"{ci[0]:.2f}–{ci[1]:.2f}",
            _fmt(loss["tpr_at_1pct_fpr"], ".3f"),
            _fmt(loss["tpr_at_0_1pct_fpr"], ".3f"),
            *[_fmt(exp.get(r), ".1f") for r in repeats],
        )
    return t
