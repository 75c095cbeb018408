"""The user guide's "What is scrubbed" page (docs/guide/scrubbing.md) says what the code does."""

from __future__ import annotations

import re
from pathlib import Path

from privleak.defenses.pii import DEFAULT_SCRUB_LABELS, OPTIONAL_LABELS

PAGE = Path(__file__).resolve().parents[1] / "docs" / "guide" / "scrubbing.md"


def _section() -> str:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index("## The default set")
    return text[start:text.index("\n#", start + 1)]


def test_default_table_lists_exactly_the_default_set_in_order():
    rows = re.findall(r"^\| `([A-Z_]+)` \|", _section(), re.MULTILINE)
    assert rows == list(DEFAULT_SCRUB_LABELS)


def test_optional_types_are_named_and_not_in_the_table():
    optional = _section().split("Optional", 1)[1].split("Not scrubbed", 1)[0]
    assert set(re.findall(r"`([A-Z_]+)`", optional)) == set(OPTIONAL_LABELS)
    assert not set(OPTIONAL_LABELS) & set(DEFAULT_SCRUB_LABELS)
