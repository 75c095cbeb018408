"""Number formatting shared by the console tables, the HTML report and the comparison.

One place decides how a figure reads: a rate as a percentage with its counts,
an AUC with its interval, every attack figure beside the level it has to
beat (its non-member floor, its chance level).
"""

from __future__ import annotations

import math
from typing import Any

from ..attacks.base import Figure


def finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def num(x: Any, spec: str = ".3f") -> str:
    if x is None:
        return "—"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float) and not math.isfinite(x):
        return "∞" if x > 0 else ("−∞" if x < 0 else "—")
    if isinstance(x, int) and spec in ("auto", "d"):
        return f"{x:,}"
    if spec == "auto":
        return f"{x:.3g}" if abs(x) < 1e-3 or abs(x) >= 1e5 else f"{x:.4g}"
    return format(x, spec)


def pct(x: float | None) -> str:
    return "—" if not finite(x) else f"{100 * x:.1f}%"


def interval(ci: Any, spec: str = ".3f") -> str:
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(finite(c) for c in ci):
        return f"{format(ci[0], spec)}–{format(ci[1], spec)}"
    return "—"


def value(f: Figure) -> str:
    """The figure's value alone: ``12.3% (3/25)``, ``0.951``, ``13.3``, ``3/15``."""
    if f.fmt == "rate":
        out = pct(f.value)
        if f.k is not None and f.n is not None:
            out += f" ({f.k}/{f.n})"
        return out
    if f.fmt == "count":
        return f"{f.k}/{f.n}" if f.k is not None and f.n is not None else num(f.value, "auto")
    if f.fmt == "bits":
        return num(f.value, ".1f")
    return num(f.value, ".3f")


def baselines(f: Figure) -> str:
    """What the figure has to beat: ``floor 1.0% · chance 10.0%`` (empty when neither is known)."""
    def show(x: float) -> str:
        return pct(x) if f.fmt == "rate" else num(x, ".1f" if f.fmt == "bits" else ".3f")
    parts = []
    if f.chance is not None and f.fmt != "auc":
        parts.append(f"chance {show(f.chance)}")
    if f.floor is not None:
        parts.append(f"floor {show(f.floor)}")
    return " · ".join(parts)


def figure(f: Figure, with_ci: bool = False) -> str:
    """``value [ci] (chance · floor)``: one cell of an attack table."""
    out = value(f)
    if with_ci and f.ci is not None:
        out += f" [{interval(f.ci, '.2f')}]"
    b = baselines(f)
    return f"{out} ({b})" if b else out
