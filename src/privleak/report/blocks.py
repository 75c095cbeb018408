"""The report's blocks as the Jinja template renders them: tables, notes, inline-SVG figures, sections.

:mod:`privleak.core.present` describes what to show; this turns its blocks
into the dicts ``templates/report.html.j2`` reads.
"""

from __future__ import annotations

from typing import Any, Callable

from markupsafe import Markup

from ..core import present as pr
from . import plots

Masker = Callable[[str], str]
Block = dict[str, Any]
Section = dict[str, Any]


def _cell(c: Any) -> Any:
    if isinstance(c, pr.Cell):
        return {"text": c.text, "cls": c.cls, "title": c.title}
    return c


def table(columns: list[str], rows: list[list[Any]], caption: str | None = None, id: str | None = None) -> Block:
    return {"kind": "table", "columns": columns, "rows": [[_cell(c) for c in r] for r in rows], "caption": caption,
            "id": id}


def note(text: str) -> Block:
    return {"kind": "p", "cls": "note", "text": text}


def figure(svg: str, caption: str) -> Block:
    return {"kind": "figure", "svg": Markup(svg), "caption": caption}


def block(b: pr.Block) -> Block:
    """A presentation block (:mod:`privleak.core.present`) as the template renders it."""
    if isinstance(b, pr.Table):
        return table(b.columns, b.rows, b.caption, b.id)
    if isinstance(b, pr.Note):
        return note(b.text)
    if isinstance(b, pr.Heading):
        return {"kind": "h3", "text": b.text}
    if isinstance(b, pr.Plot):
        return figure(getattr(plots, b.name)(*b.args, **b.kwargs), b.caption)
    raise TypeError(f"not a report block: {b!r}")


def section(s: pr.Section) -> Section:
    return {"id": s.id, "title": s.title, "blocks": [block(b) for b in s.blocks]}
