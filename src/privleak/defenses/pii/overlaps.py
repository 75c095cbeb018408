"""Overlapping detections become disjoint spans, deterministically.

Pattern detections beat "soft" ones (the NER's and the name and NRP lists':
their boundaries and labels are guesses); overlapping pattern detections
merge into their union (so no character a recognizer flagged survives),
labelled like the best member — first one whose type is *specific* (a
checksum validated it, or a cue word for its type stands just before it,
nearest cue first: "account number 123456789" is a bank account, not a
phone number), then the longest, then highest-scoring; soft detections that
overlap no pattern are clustered the same way.
"""

from __future__ import annotations

import bisect
from typing import Iterable

from .detection import SOFT_SOURCES, Detection


def _priority(d: Detection) -> tuple:  # smaller is better
    return (not d.specific, d.cue_distance, -(d.end - d.start), -d.score, d.start, d.label, d.source)


def resolve_overlaps(detections: Iterable[Detection]) -> list[Detection]:
    """Disjoint spans, sorted by start.

    1. Pattern detections (regexes, checksums, deny-lists: precise about
       where a value starts and ends) that overlap, transitively, form a
       cluster that becomes one span covering their union, labelled like its
       best member: specific first (nearest cue first), then longest, then
       highest score, then earliest, then label.
    2. A soft detection (NER, name or NRP list) that overlaps any pattern
       span is dropped: the small model's spans are fuzzy ("LABS - Amy
       Nelson", "2005-11-10, MRN-379578") where the pattern's are exact.
    3. The remaining soft detections are clustered the same way.
    """
    ds = [d for d in detections if d.end > d.start]
    patterns = _union_clusters([d for d in ds if d.source not in SOFT_SOURCES])
    starts = [p.start for p in patterns]
    ner = [d for d in ds if d.source in SOFT_SOURCES and not _overlaps_any(d, patterns, starts)]
    return sorted(patterns + _union_clusters(ner), key=lambda d: (d.start, d.end))


def _overlaps_any(d: Detection, spans: list[Detection], starts: list[int] | None = None) -> bool:
    """Whether ``d`` overlaps one of ``spans`` (disjoint, sorted by start,
    ``starts`` their starts): only the last span starting before ``d.end``
    can, so a binary search replaces a scan (a long text has many spans)."""
    if starts is None:
        starts = [s.start for s in spans]
    i = bisect.bisect_left(starts, d.end) - 1
    return i >= 0 and spans[i].end > d.start


def _union_clusters(detections: list[Detection]) -> list[Detection]:
    ds = sorted(detections, key=lambda d: (d.start, d.end))
    out: list[Detection] = []
    cluster: list[Detection] = []
    end = -1
    for d in ds:
        if cluster and d.start >= end:
            out.append(_merge(cluster))
            cluster = []
        cluster.append(d)
        end = max(end, d.end) if len(cluster) > 1 else d.end
    if cluster:
        out.append(_merge(cluster))
    return out


def _merge(cluster: list[Detection]) -> Detection:
    if len(cluster) == 1:
        return cluster[0]
    best = min(cluster, key=_priority)
    return Detection(min(d.start for d in cluster), max(d.end for d in cluster), best.label,
                     max(d.score for d in cluster), best.source, best.specific, best.cue_distance)
