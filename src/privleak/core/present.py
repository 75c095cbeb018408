"""How a figure reads, and the blocks a report is made of.

Attacks and arm kinds say what they show in these terms — a table of
cells, a note, a plot by name — and the console and the HTML report render
them; neither renderer knows any attack or arm by name. One place decides
how a figure reads: a rate as a percentage with its counts, an AUC with its
interval, every attack figure beside the level it has to beat (its
non-member floor, its chance level).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Union

# --------------------------------------------------------------------------- one figure


@dataclass(frozen=True)
class Figure:
    """One headline number as tables print it, beside what it has to beat.

    ``fmt``: "rate" (a fraction printed as a percentage), "auc", "bits",
    "count", "number". ``k``/``n``: the counts behind a rate. ``floor``: the
    same attack on values or texts never trained on; ``chance``: random
    guessing; ``ci``: its 95 % interval.
    """

    label: str
    value: float | None
    fmt: str = "number"
    ci: tuple[float, float] | None = None
    k: int | None = None
    n: int | None = None
    floor: float | None = None
    chance: float | None = None


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


def baseline_kinds(f: Figure) -> tuple[str, ...]:
    """Which of "chance" and "floor" a figure's cell shows beside it (an AUC's chance, 0.5, goes without saying)."""
    return tuple(k for k, v in (("chance", f.chance if f.fmt != "auc" else None), ("floor", f.floor)) if v is not None)


def baselines(f: Figure) -> str:
    """What the figure has to beat: ``chance 10.0% · floor 1.0%`` (empty when neither is known)."""
    def show(x: float) -> str:
        return pct(x) if f.fmt == "rate" else num(x, ".1f" if f.fmt == "bits" else ".3f")
    return " · ".join(f"{k} {show(f.chance if k == 'chance' else f.floor)}" for k in baseline_kinds(f))


def figure_text(f: Figure, with_ci: bool = False) -> str:
    """``value [ci] (chance · floor)``: one cell of an attack table."""
    out = value(f)
    if with_ci and f.ci is not None:
        out += f" [{interval(f.ci, '.2f')}]"
    b = baselines(f)
    return f"{out} ({b})" if b else out


# --------------------------------------------------------------------------- blocks


@dataclass(frozen=True)
class Cell:
    """One table cell: its text, a CSS class (``num`` right-aligns; ``example`` is quoted text) and a tooltip."""

    text: str
    cls: str = "num"
    title: str | None = None


def n(x: Any, spec: str = ".3f", title: str | None = None) -> Cell:
    """A number cell."""
    return Cell(num(x, spec), "num", title)


def t(text: str, title: str | None = None) -> Cell:
    """A text cell aligned as a number (the tables' figure columns)."""
    return Cell(text, "num", title)


@dataclass(frozen=True)
class Table:
    columns: list[str]
    rows: list[list[Cell | str]]
    caption: str | None = None
    id: str | None = None
    #: The console's title for this table (None: the console skips it).
    console_title: str | None = None
    #: Lines the console prints under it (a recommendation and its reason, what a figure does not say).
    console_caption: str | None = None


@dataclass(frozen=True)
class Note:
    text: str


@dataclass(frozen=True)
class Heading:
    text: str


@dataclass(frozen=True)
class Plot:
    """A figure drawn by the report's plotting module: ``name`` is one of its functions, called with ``args``."""

    name: str
    args: tuple[Any, ...]
    caption: str
    kwargs: dict[str, Any] = field(default_factory=dict)


Block = Union[Table, Note, Heading, Plot]


@dataclass(frozen=True)
class Section:
    """A titled part of the report (``id``: its anchor)."""

    id: str
    title: str
    blocks: list[Block]


def headline_table(rows: list[tuple[str, list[Figure]]], caption: str) -> Table:
    """Any attack's table from its result model: one row per model, one column per headline figure."""
    cols: list[str] = []
    by_model: list[tuple[str, dict[str, str]]] = []
    for model, figures in rows:
        cells = {}
        for f in figures:
            if f.label not in cols:
                cols.append(f.label)
            cells[f.label] = figure_text(f, with_ci=True)
        by_model.append((model, cells))
    return Table(["model", *cols], [[model, *[t(c.get(label, "—")) for label in cols]] for model, c in by_model],
                 caption=caption)


@dataclass(frozen=True)
class Example:
    """One leaked item the report quotes (already masked unless the user asked to see PII)."""

    source: str
    text: str
    copies: int | None
    how: str
