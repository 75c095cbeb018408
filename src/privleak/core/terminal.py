"""User text made safe to print: control characters shown, never obeyed.

Arm names, file names, field names and record text end up in error lines,
console tables, progress lines and the HTML report. A terminal obeys the
control characters in them: ``ESC [ 2 J`` clears the screen, ``ESC ] 52``
writes the clipboard, a carriage return overwrites what was printed before
it, a bidirectional override (U+202E) reverses what follows ("Trojan
Source", Boucher & Anderson 2021). :func:`escape_control` is the one place
that turns them into visible escapes (``\\x1b``, ``\\u202e``), as Python's
``repr`` would, and leaves every other character — accents, CJK, emoji —
as it is.
"""

from __future__ import annotations

import re

__all__ = ["escape_control"]

# C0 (U+0000-U+001F), DEL, C1 (U+0080-U+009F): Unicode category Cc. Then the format characters that
# reorder or hide text: the bidirectional embeddings, overrides and isolates, the line and paragraph
# separators (some terminals and editors break lines there) and the BOM / zero-width no-break space.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]")
_CONTROL_KEEP_LINES = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]")


def _escape(m: re.Match[str]) -> str:
    ch = m.group(0)
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_control(text: object, keep_newlines: bool = False) -> str:
    """``str(text)`` with every control character written as a visible escape.

    ``keep_newlines`` keeps line feeds and tabs (multi-line text such as a
    checked model output); otherwise they are escaped too, so one message is
    one line. A carriage return is always escaped: it would let the text
    overwrite what came before it on the same line.
    """
    s = str(text)
    pattern = _CONTROL_KEEP_LINES if keep_newlines else _CONTROL
    return pattern.sub(_escape, s) if pattern.search(s) else s
