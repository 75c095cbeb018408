"""The console table comparing arms (the short form of ``results.json``)."""

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


def arms_table(results: dict[str, Any]) -> Table:
    rows = [("base (control)", results["base_model"], None)]
    rows += [(name, arm, arm["privacy"]) for name, arm in results["arms"].items()]
    repeats = sorted({int(c["repeats"]) for _, arm, _ in rows for c in arm.get("canaries", [])})
    max_exp = next((c["max_exposure"] for _, a, _ in rows for c in a.get("canaries", [])), None)
    chance = results["data"].get("canary_chance_exposure")
    title = "PrivLeak audit"
    if max_exp is not None:
        title += f" — canary exposure in bits (max {max_exp:.1f}, chance ≈ {chance:.1f})"
    t = Table(title=title)
    for col in ("arm", "ε target", "ε spent", "σ", "ppl members", "ppl held-out", "LOSS AUC", "TPR@1%", "TPR@0.1%"):
        t.add_column(col, justify="right" if col != "arm" else "left")
    for r in repeats:
        t.add_column(f"exp {r}×", justify="right")
    for name, arm, priv in rows:
        loss = arm["attacks"]["loss"]
        exp = exposure_by_repeats(arm.get("canaries", []))
        t.add_row(
            name,
            _fmt(priv.get("target_epsilon") if priv else None, "g"),
            _fmt(priv.get("epsilon") if priv else None, ".2f"),
            _fmt(priv.get("sigma") if priv else None, ".3f"),
            _fmt(arm["utility"]["ppl_members"], ".2f"),
            _fmt(arm["utility"]["ppl_non_members"], ".2f"),
            _fmt(loss["auc"], ".3f"),
            _fmt(loss["tpr_at_1pct_fpr"], ".3f"),
            _fmt(loss["tpr_at_0_1pct_fpr"], ".3f"),
            *[_fmt(exp.get(r), ".1f") for r in repeats],
        )
    return t
