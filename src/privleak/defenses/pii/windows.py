"""Long texts as overlapping windows.

spaCy refuses texts over ``nlp.max_length`` (1,000,000 characters) with
E088, with NER or without. :meth:`PiiAnalyzer.iter_analyze
<privleak.defenses.pii.analyzer.PiiAnalyzer.iter_analyze>` splits such a
text into overlapping windows of at most ``window_chars`` characters (cut
at whitespace, :func:`split_windows`), analyses each, maps the spans back
and merges them; a value shorter than a quarter of the overlap is always
seen whole in one window.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .detection import Detection


@dataclass(frozen=True)
class Window:
    """One window of a long text."""

    start: int  # the window is text[start:end]
    end: int
    own_start: int  # it reports the detections that start in [own_start, own_end)
    own_end: int


@dataclass
class Job:
    """A text being analysed window by window, and what its windows found so far."""

    text: str
    windows: list[Window]
    done: int = 0
    dets: list[Detection] = field(default_factory=list)


def split_windows(text: str, size: int, overlap: int) -> list[Window]:
    """Overlapping windows of at most ``size`` characters covering ``text``.

    Windows end at whitespace where there is some in their last ``overlap // 2``
    characters (a cut never splits a word then), consecutive windows share
    at least ``overlap // 2`` characters, and each window owns the detections
    that start between the middles of its overlaps with its neighbours, so
    a value shorter than ``overlap // 4`` is found whole, by exactly one
    window.
    """
    n = len(text)
    size = max(int(size), 16)
    overlap = min(max(int(overlap), 8), size // 2)
    if n <= size:
        return [Window(0, n, 0, n)]
    cuts: list[tuple[int, int]] = []
    start = 0
    while True:
        end = min(n, start + size)
        if end < n:
            ws = max(text.rfind(" ", end - overlap // 2, end), text.rfind("\n", end - overlap // 2, end))
            end = ws + 1 if ws > start else end
        cuts.append((start, end))
        if end >= n:
            break
        nxt = end - overlap
        ws = text.find(" ", nxt, nxt + overlap // 4)
        start = ws + 1 if ws >= 0 else nxt
    out = []
    for i, (s, e) in enumerate(cuts):
        own_s = 0 if i == 0 else (cuts[i - 1][1] + s) // 2
        own_e = n if i == len(cuts) - 1 else (e + cuts[i + 1][0]) // 2
        out.append(Window(s, e, own_s, own_e))
    return out
