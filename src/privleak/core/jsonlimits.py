"""JSON from users, parsed within limits.

Python's ``json`` recurses once per nesting level and converts every integer
literal to an ``int``: a line nested 200,000 brackets deep raises
``RecursionError`` and a 100,000-digit number raises ``ValueError`` (or, in
older Pythons, takes quadratic time) — crashes, not messages (issue 30). No
record, config or results file PrivLeak reads comes near these limits:

* :data:`MAX_DEPTH` — 64 levels of ``[``/``{``; ``results.json`` is at most
  about 8 deep, a corpus record 2-3.
* :data:`MAX_NUMBER_CHARS` — 64 characters per number literal; a float64
  needs at most 25, and the largest integer PrivLeak stores (a seed, 2³²) 10.

:func:`loads` checks both before building anything and raises
:class:`JSONLimitError` (a ``ValueError``) with a message each reader turns
into its one-line error (file, line, fix).
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["JSONLimitError", "MAX_DEPTH", "MAX_NUMBER_CHARS", "loads", "nesting_depth"]

MAX_DEPTH = 64
MAX_NUMBER_CHARS = 64

# A JSON string literal (escapes included): brackets inside one are text, not nesting.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_BRACKETS = re.compile(r"[\[\]{}]")


class JSONLimitError(ValueError):
    """JSON that parses but exceeds :data:`MAX_DEPTH` or :data:`MAX_NUMBER_CHARS`."""


def nesting_depth(text: str, stop_at: int | None = None) -> int:
    """The deepest ``[``/``{`` nesting of a JSON text (brackets inside strings do not count);
    stops counting above ``stop_at``."""
    depth = deepest = 0
    for m in _BRACKETS.finditer(_STRING.sub('""', text)):
        if m.group(0) in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if stop_at is not None and deepest > stop_at:
                    return deepest
        else:
            depth -= 1
    return deepest


def _number(limit: int, convert: type) -> Any:
    def parse(literal: str) -> Any:
        if len(literal) > limit:
            raise JSONLimitError(f"a number of {len(literal):,} characters (at most {limit} allowed)")
        return convert(literal)

    return parse


def loads(text: str | bytes, *, max_depth: int = MAX_DEPTH, max_number_chars: int = MAX_NUMBER_CHARS) -> Any:
    """``json.loads(text)``, refusing nesting deeper than ``max_depth`` and number literals longer than
    ``max_number_chars`` (:class:`JSONLimitError`); malformed JSON raises ``json.JSONDecodeError`` as usual."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8")
    # Only a text with more opening brackets than the limit can be too deep: the exact count is for those.
    if text.count("[") + text.count("{") > max_depth:
        depth = nesting_depth(text, stop_at=max_depth)
        if depth > max_depth:
            raise JSONLimitError(f"nested more than {max_depth} levels deep (at most {max_depth} allowed)")
    try:
        return json.loads(text, parse_int=_number(max_number_chars, int),
                          parse_float=_number(max_number_chars, float))
    except RecursionError:  # unreachable after the depth check; kept so no input can make it a crash
        raise JSONLimitError(f"nested too deeply (at most {max_depth} levels allowed)") from None
