"""``privleak compare``: several runs side by side in one self-contained page."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..core.errors import UserError
from ..core.io import write_text
from ..core.terminal import escape_control
from ..results import CONTROL, ArmResult, AuditResults
from ..core import present as fmt
from . import plots
from ..core.present import n as _n
from .blocks import figure, table
from .html import template
from .schema import load_results
from .views import short


def _flat(obj: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: obj}


def _metrics(m: ArmResult | None, name: str) -> list[Any]:
    if m is None:
        return [None] * 6
    attack, best = m.best_membership()
    exp = m.attacks.get("exposure")
    p = m.privacy
    # ε with its unit and δ, as every other table shows it (issue 39): dp-8 and dp-user-8 are not the same 8.
    eps = (fmt.t(f"{p.epsilon:.3f} per {p.unit} (δ = {p.delta:.1e})") if p is not None
           else None if name == CONTROL else math.inf)
    # The AUC with the attack that reached it (the strongest of the arm's membership attacks), as in the report.
    auc = fmt.t(f"{best.auc:.3f} ({short(attack)})") if best is not None and attack is not None else None
    return [eps, auc, best.tpr_at_1pct_fpr if best else None,
            getattr(exp, "mean_exposure", None), m.utility.ppl_non_members, m.utility.gain_recovered]


def render_compare(runs: Sequence[AuditResults], names: Sequence[str] | None = None) -> str:
    """Side-by-side comparison of several runs (typed results)."""
    if len(runs) < 1:
        raise UserError("compare: give at least one run directory (two or more to compare)")
    names = list(names) if names else [f"run {i + 1}" for i in range(len(runs))]
    summary = []
    for n, r in zip(names, runs):
        rec = r.recommendation
        total = sum(v for v in r.durations_s.values() if fmt.finite(v))
        summary.append([n, (rec.arm if rec else None) or "none", ", ".join(r.arms), str(r.config.get("seed", "—")),
                        str(r.config.get("profile", "—")), r.data.source, _n(total, ".0f"), str(len(r.warnings))])
    sections: list[dict[str, Any]] = [{"id": "summary", "title": "Summary", "blocks": [
        table(["run", "recommended arm", "arms", "seed", "profile", "data", "total s", "warnings"], summary),
        *[{"kind": "p", "text": f"{n}: {r.recommendation.text}"} for n, r in zip(names, runs) if r.recommendation]]}]
    labels = [("ε (unit, δ)", ".2f"), ("strongest MIA: AUC (attack)", ".3f"), ("its TPR@1%FPR", ".3f"),
              ("canary exposure (bits)", ".2f"), ("ppl held-out", ".2f"), ("G", ".2f")]
    arm_names = list(dict.fromkeys([CONTROL] + [a for r in runs for a in r.arms]))
    rows = []
    for a in arm_names:
        row: list[Any] = [a]
        for r in runs:
            models = dict(r.models())
            row += [v if isinstance(v, fmt.Cell) else _n(v, spec)
                    for v, (_, spec) in zip(_metrics(models.get(a), a), labels)]
        rows.append(row)
    points = []
    for n, r in zip(names, runs):
        for a, m in r.models():
            _, best = m.best_membership()
            points.append((n, a, best.auc if best else None, m.utility.ppl_non_members))
    sections.append({"id": "arms", "title": "Arms side by side", "blocks": [
        table(["arm"] + [f"{n}: {label}" for n in names for label, _ in labels], rows, id="compare-table"),
        figure(plots.compare_scatter(points), "Each marker is one arm of one run: lower and further left is better.")]})
    flats = [_flat(r.config) for r in runs]
    keys = list(dict.fromkeys(k for f in flats for k in f))
    diff = [[k] + [json.dumps(f[k], ensure_ascii=False) if k in f else "—" for f in flats]
            for k in keys if len({json.dumps(f.get(k), sort_keys=True) for f in flats}) > 1]
    sections.append({"id": "config-diff", "title": "Configuration differences", "blocks": [
        table(["setting"] + names, diff) if diff else {"kind": "p", "text": "The runs have the same configuration."}]})
    vers = [r.versions for r in runs]
    vkeys = list(dict.fromkeys(k for v in vers for k in v))
    vdiff = [[k] + [str(v.get(k, "—")) for v in vers] for k in vkeys if len({v.get(k) for v in vers}) > 1]
    sections.append({"id": "versions", "title": "Version differences", "blocks": [
        table(["package"] + names, vdiff) if vdiff else {"kind": "p", "text": "Same package versions."}]})
    warn = [f"{n}: {w}" for n, r in zip(names, runs) for w in r.warnings]
    if warn:
        sections.append({"id": "warnings", "title": "Warnings", "blocks": [{"kind": "list", "cls": "warnings", "items": warn}]})
    return template().render(title="PrivLeak comparison — " + " vs ".join(names), meta=[f"{len(runs)} runs"],
                             sections=sections, show_pii=False, tool_version=runs[0].tool.version, source=", ".join(names))


def write_compare(run_dirs: Iterable[str | Path], out: str | Path) -> Path:
    """Load, validate and compare run directories (or results.json files); write the HTML to ``out``."""
    paths = [Path(p).expanduser() for p in run_dirs]
    runs = [load_results(p) for p in paths]
    names = [p.name if p.is_dir() else p.parent.name or p.name for p in paths]
    counts = {n: names.count(n) for n in names}
    seen: dict[str, int] = {}
    for i, n in enumerate(list(names)):  # disambiguate equal directory names
        if counts[n] > 1:
            seen[n] = seen.get(n, 0) + 1
            names[i] = f"{n} ({seen[n]})"
    target = Path(out)
    try:
        write_text(target, escape_control(render_compare(runs, names), keep_newlines=True))  # control chars shown
    except OSError as exc:
        raise UserError(f"{target}: cannot write the comparison ({exc.strerror or exc}); choose a writable path with --out") from None
    return target
