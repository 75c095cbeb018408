"""The report's figures: matplotlib (Agg) → inline SVG strings.

Every function takes plain data (no results.json knowledge beyond what its
docstring says) and returns an ``<svg>`` element ready to inline in HTML: no
XML prolog, text kept as text, element ids prefixed so several figures can
share a page.
"""

from __future__ import annotations

import io
import itertools
import math
import re
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg", force=True)
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

_counter = itertools.count()
_RC = {
    "svg.fonttype": "none",
    "svg.hashsalt": "privleak",
    "font.family": "sans-serif",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "legend.fontsize": 8,
    "legend.frameon": False,
}
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"]


def arm_colors(names: Sequence[str]) -> dict[str, str]:
    return {n: COLORS[i % len(COLORS)] for i, n in enumerate(names)}


def _new(w: float = 6.4, h: float = 3.4, **kw: Any) -> tuple[Figure, Any]:
    with plt.rc_context(_RC):
        fig = Figure(figsize=(w, h))
        axes = fig.subplots(**kw)
    return fig, axes


def to_svg(fig: Figure, title: str = "", tight_bbox: bool = True) -> str:
    buf = io.StringIO()
    with plt.rc_context(_RC):
        fig.savefig(buf, format="svg", bbox_inches="tight" if tight_bbox else None, pad_inches=0.05, metadata={"Date": None, "Creator": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    prefix = f"f{next(_counter)}-"
    ids = set(re.findall(r'\bid="([^"]+)"', svg))
    if ids:
        pat = re.compile(r'(\bid="|#)(' + "|".join(re.escape(i) for i in sorted(ids, key=len, reverse=True)) + r')(?=["\)])')
        svg = pat.sub(lambda m: m.group(1) + prefix + m.group(2), svg)
    svg = re.sub(r'<svg ', f'<svg role="img" aria-label="{_esc(title)}" class="fig" ', svg, count=1)
    return svg


def _esc(s: str) -> str:
    return s.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def privacy_utility(points: list[dict[str, Any]], control: dict[str, Any] | None = None,
                    utility_label: str = "held-out perplexity") -> str:
    """Leakage and utility against ε.

    ``points``: one dict per arm: name, epsilon (None → ∞, drawn at the right),
    auc, auc_ci (pair or None), exposure (mean bits or None), utility (the
    utility gain recovered G, or held-out perplexity; ``utility_label`` says which), one_run
    (the one-run ε lower bound or None, written beside the arm's leakage point).
    ``control``: the base model's auc / exposure / utility, drawn as dotted lines.
    """
    has_exp = any(_finite(p.get("exposure")) for p in points)
    n = 3 if has_exp else 2
    fig, axes = _new(6.4, 1.9 * n + 0.4, nrows=n, ncols=1, sharex=True)
    finite = sorted({float(p["epsilon"]) for p in points if _finite(p.get("epsilon")) and p["epsilon"] > 0})
    if finite:
        lo, hi = finite[0], finite[-1]
        inf_x = hi * (4.0 if hi > lo else 8.0)
    else:
        lo, inf_x = 1.0, 10.0
    infs = [p for p in points if not (_finite(p.get("epsilon")) and p["epsilon"] > 0)]
    xs: dict[str, float] = {}
    for p in points:
        if p in infs:
            k = infs.index(p)
            xs[p["name"]] = inf_x * (1.25 ** (k - (len(infs) - 1) / 2))
        else:
            xs[p["name"]] = float(p["epsilon"])
    colors = arm_colors([p["name"] for p in points])
    rows = [("auc", "MIA AUC (best attack)"), ("exposure", "mean canary exposure (bits)"), ("utility", utility_label)]
    if not has_exp:
        rows = [rows[0], rows[2]]
    for ax, (key, label) in zip(axes, rows):
        # The line joins the central DP sweep; an arm whose ε is per another unit (a federated arm's: per client)
        # stands apart.
        dp = sorted([p for p in points if p not in infs and _finite(p.get(key)) and not p.get("own_unit")],
                    key=lambda p: p["epsilon"])
        if len(dp) > 1:
            ax.plot([xs[p["name"]] for p in dp], [p[key] for p in dp], color="#999", lw=1, zorder=1)
        for p in points:
            v = p.get(key)
            if not _finite(v):
                continue
            yerr = None
            if key == "auc" and p.get("auc_ci") and all(_finite(c) for c in p["auc_ci"]):
                yerr = [[max(v - p["auc_ci"][0], 0)], [max(p["auc_ci"][1] - v, 0)]]
            ax.errorbar([xs[p["name"]]], [v], yerr=yerr, fmt=p.get("marker", "o"), color=colors[p["name"]], capsize=3, zorder=2,
                        label=p["name"] if key == rows[0][0] else None)
            if key == rows[0][0] and _finite(p.get("one_run")):
                ax.annotate(f"ε ≥ {p['one_run']:.2f}", (xs[p["name"]], v), fontsize=7, xytext=(4, -10),
                            textcoords="offset points", color=colors[p["name"]])
        if control and _finite(control.get(key)):
            ax.axhline(control[key], color="#555", ls=":", lw=1, label="base control" if key == rows[0][0] else None)
        if key == "auc":
            ax.axhline(0.5, color="#bbb", ls="--", lw=0.8)
        ax.set_ylabel(label)
    ax = axes[-1]
    ax.set_xscale("log")
    ticks = finite + ([inf_x] if infs else [])
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{t:.3g}" for t in finite] + (["∞ (no DP)"] if infs else []))
    ax.minorticks_off()
    ax.set_xlim(lo / 2, inf_x * 2)
    ax.set_xlabel("ε (accountant); arms without DP at ∞")
    axes[0].legend(loc="best", ncol=2)
    return to_svg(fig, "Privacy–utility trade-off")


def roc_curves(models: dict[str, dict[str, tuple[Sequence[float], Sequence[float]]]]) -> str:
    """Log–log ROC of each attack, one panel per model (arm), with the chance diagonal."""
    n = len(models)
    ncols = min(3, n)
    nrows = (n + ncols - 1) // ncols
    fig, axes = _new(3.1 * ncols, 3.0 * nrows, nrows=nrows, ncols=ncols, squeeze=False)
    floor = 1e-4
    ticks = [1e-4, 1e-3, 1e-2, 1e-1, 1.0]
    labels = ["0.01%", "0.1%", "1%", "10%", "100%"]
    attack_names = list(dict.fromkeys(a for curves in models.values() for a in curves))
    for k, ax in enumerate(axes.flat):
        if k >= n:
            ax.set_visible(False)
            continue
        arm, curves = list(models.items())[k]
        for name, (fpr, tpr) in curves.items():
            pts = sorted((max(float(f), floor), max(float(t), floor)) for f, t in zip(fpr, tpr))
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], color=COLORS[attack_names.index(name) % len(COLORS)],
                        lw=1.4, label=name, drawstyle="steps-post")
        ax.plot([floor, 1], [floor, 1], color="#888", ls="--", lw=0.8, label="chance")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(floor, 1)
        ax.set_ylim(floor, 1.05)
        ax.set_xticks(ticks, labels)
        ax.set_yticks(ticks, labels)
        ax.minorticks_off()
        ax.set_title(arm, fontsize=9)
        if k % ncols == 0:
            ax.set_ylabel("true positive rate")
        if k >= n - ncols:
            ax.set_xlabel("false positive rate")
    # One legend below the panels: inside a panel it covers the low-FPR corner the log axes are there to show.
    handles: dict[str, Any] = {}
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    legend_rows = math.ceil(len(handles) / 5)
    # fixed margins (in inches, converted): tight_layout would cost a full extra draw
    w, h = fig.get_size_inches()
    bottom = 0.6 + 0.22 * legend_rows + 0.15
    fig.set_size_inches(w, h + 0.22 * legend_rows + 0.15)
    w, h = fig.get_size_inches()
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=min(5, len(handles)),
               bbox_to_anchor=(0.5, 0.0))
    fig.subplots_adjust(left=0.75 / w, right=1 - 0.3 / w, bottom=bottom / h, top=1 - 0.3 / h, wspace=0.38, hspace=0.42)
    return to_svg(fig, "ROC curves per arm", tight_bbox=False)


def canary_exposure(series: dict[str, list[tuple[int, float]]], max_exposure: float | None,
                    chance: float | None) -> str:
    """Exposure (bits) against repetition count: each canary as a dot, the mean per count as a line."""
    fig, ax = _new(6.4, 3.4)
    colors = arm_colors(list(series))
    reps_all: set[int] = set()
    for k, (name, pts) in enumerate(series.items()):
        pts = [(r, e) for r, e in pts if _finite(e)]
        if not pts:
            continue
        by: dict[int, list[float]] = {}
        for r, e in pts:
            by.setdefault(int(r), []).append(float(e))
        reps = sorted(by)
        reps_all.update(reps)
        jitter = 1.0 + 0.03 * (k - (len(series) - 1) / 2)
        ax.scatter([r * jitter for r, _ in pts], [e for _, e in pts], s=10, alpha=0.45, color=colors[name])
        ax.plot([r * jitter for r in reps], [sum(by[r]) / len(by[r]) for r in reps], "-o", ms=4, color=colors[name], label=name)
    if _finite(max_exposure):
        ax.axhline(max_exposure, color="#d62728", ls="--", lw=0.9, label=f"max ({max_exposure:.1f} bits: secret ranked first)")
    if _finite(chance):
        ax.axhline(chance, color="#555", ls=":", lw=0.9, label=f"chance ({chance:.2f} bits)")
    if reps_all:
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(reps_all))
        ax.set_xticklabels([str(r) for r in sorted(reps_all)])
        ax.minorticks_off()
    ax.set_xlabel("times the canary was repeated in the training set")
    ax.set_ylabel("exposure (bits)")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
    return to_svg(fig, "Canary exposure against repetitions")


def grouped_bars(groups: dict[str, dict[str, float]], ylabel: str, title: str) -> str:
    """Bars per category (x) for each series (arm): groups = series → category → value."""
    cats: list[str] = []
    for d in groups.values():
        for c in d:
            if c not in cats:
                cats.append(c)
    fig, ax = _new(max(4.0, min(10.0, 1.0 + 0.55 * len(cats) * max(1, len(groups)) ** 0.5)), 3.2)
    colors = arm_colors(list(groups))
    w = 0.8 / max(1, len(groups))
    for k, (name, d) in enumerate(groups.items()):
        ax.bar([i + (k - (len(groups) - 1) / 2) * w for i in range(len(cats))],
               [float(d.get(c, 0) or 0) for c in cats], width=w, color=colors[name], label=name)
    ax.set_xticks(range(len(cats)))
    ax.set_xticklabels(cats, rotation=30, ha="right")
    ax.set_ylabel(ylabel)
    ax.legend(loc="best")
    return to_svg(fig, title)


def epsilon_compare(rows: list[tuple[str, float | None, float | None, tuple[float, float] | None]]) -> str:
    """Accountant ε (upper bound) against the empirical lower bound per DP arm."""
    fig, ax = _new(max(4.0, 1.2 * len(rows) + 1.5), 3.2)
    xs = range(len(rows))
    ax.bar([x - 0.2 for x in xs], [r[1] or 0 for r in rows], width=0.4, color="#1f77b4", label="accountant ε (upper bound)")
    emp = [r[2] or 0 for r in rows]
    yerr = None
    if any(r[3] for r in rows):
        yerr = [[max(e - (r[3][0] if r[3] else e), 0) for e, r in zip(emp, rows)],
                [max((r[3][1] if r[3] else e) - e, 0) for e, r in zip(emp, rows)]]
    ax.bar([x + 0.2 for x in xs], emp, width=0.4, color="#ff7f0e", yerr=yerr, capsize=3, label="empirical ε (lower bound)")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([r[0] for r in rows])
    ax.set_ylabel("ε")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return to_svg(fig, "Empirical against accountant ε")


def compare_scatter(points: list[tuple[str, str, float, float]]) -> str:
    """Best MIA AUC against held-out perplexity, one marker per (run, arm)."""
    fig, ax = _new(6.4, 3.6)
    runs = list(dict.fromkeys(p[0] for p in points))
    colors = arm_colors(runs)
    for run, arm, auc, ppl in points:
        if _finite(auc) and _finite(ppl):
            ax.scatter([ppl], [auc], color=colors[run], s=22, label=run)
            ax.annotate(arm, (ppl, auc), fontsize=7, xytext=(3, 3), textcoords="offset points")
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles))
    ax.legend(uniq.values(), uniq.keys(), loc="best")
    ax.axhline(0.5, color="#bbb", ls="--", lw=0.8)
    ax.set_xlabel("held-out perplexity (lower is better)")
    ax.set_ylabel("best MIA AUC (0.5 = chance)")
    return to_svg(fig, "Runs compared: leakage against utility")
