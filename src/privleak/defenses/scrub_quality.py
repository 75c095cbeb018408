"""How good is the scrubber? Span-level precision / recall against ground truth.

Matching rule (span level, per PII type)
----------------------------------------
* A **ground-truth span is caught** when detections of a compatible type
  (the same label) together cover at least ``min_overlap`` (default 50 %) of
  its characters. Recall = caught / ground-truth spans.
* A **detection is correct** when at least ``min_overlap`` of *its*
  characters lie inside ground-truth spans of a compatible type.
  Precision = correct / detections.
* **Exact-match** figures are reported beside them: a detection and a
  ground-truth span match exactly when start, end and label are equal.
* **Overall** figures are micro-averaged over the evaluated types.

Only records whose ground truth is known (``record.pii is not None``) are
evaluated; a record with ``pii == []`` is known to hold no PII, so every
detection in it is a false positive.

Residual PII
------------
:func:`residual_pii` lists the ground-truth values that are still in the
text after scrubbing, per type: a value survives when its normalised form
(case and whitespace folded; digits only for SSN and phone, US country code
dropped) still occurs in its own record's scrubbed text. This is value
based, not span based, so a half-masked phone number whose digits are still
all there counts as residual, and a masked one does not. It is what the
scrub arm reports as "PII that went into training despite scrubbing".
"""

from __future__ import annotations

import bisect
import re
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterable, Sequence

from privleak.core.normalise import normalise_value
from privleak.data.records import Record
from privleak.defenses.pii import Detection, PiiAnalyzer
from privleak.defenses.scrub import Scrubber

_DIGIT_RUN = re.compile(r"\d(?:[\d\s().+\-/]*\d)?")


@dataclass
class TypeQuality:
    label: str
    support: int = 0  # ground-truth spans
    n_detections: int = 0
    caught: int = 0  # ground-truth spans caught (>= min_overlap covered)
    correct: int = 0  # detections that are correct (>= min_overlap inside ground truth)
    exact: int = 0  # exact (start, end, label) matches
    n_residual: int = 0  # ground-truth values still present after masking

    @property
    def precision(self) -> float:
        return self.correct / self.n_detections if self.n_detections else float("nan")

    @property
    def recall(self) -> float:
        return self.caught / self.support if self.support else float("nan")

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        if p != p or r != r or p + r == 0:
            return float("nan") if (p != p or r != r) else 0.0
        return 2 * p * r / (p + r)

    @property
    def exact_precision(self) -> float:
        return self.exact / self.n_detections if self.n_detections else float("nan")

    @property
    def exact_recall(self) -> float:
        return self.exact / self.support if self.support else float("nan")

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(precision=self.precision, recall=self.recall, f1=self.f1,
                 exact_precision=self.exact_precision, exact_recall=self.exact_recall)
        return d


@dataclass
class ScrubQuality:
    """Per-type and overall quality, plus the residual values per type."""

    labels: tuple[str, ...]
    per_type: dict[str, TypeQuality]
    overall: TypeQuality
    n_records: int
    min_overlap: float
    residual: dict[str, list[str]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "labels": list(self.labels),
            "n_records": self.n_records,
            "min_overlap": self.min_overlap,
            "per_type": {k: v.to_dict() for k, v in self.per_type.items()},
            "overall": self.overall.to_dict(),
            "residual": {k: list(v) for k, v in self.residual.items()},
        }

    def table(self) -> str:
        """A plain-text table (one row per type, then overall)."""
        head = f"{'type':15s} {'support':>7s} {'det':>6s} {'prec':>6s} {'recall':>6s} {'f1':>6s} " \
               f"{'ex.P':>6s} {'ex.R':>6s} {'resid':>6s}"
        rows = [head]
        for q in [*self.per_type.values(), self.overall]:
            rows.append(
                f"{q.label:15s} {q.support:7d} {q.n_detections:6d} {_f(q.precision)} {_f(q.recall)} "
                f"{_f(q.f1)} {_f(q.exact_precision)} {_f(q.exact_recall)} {q.n_residual:6d}"
            )
        return "\n".join(rows)


def _f(x: float) -> str:
    return "   n/a" if x != x else f"{x:6.3f}"


def _covered(start: int, end: int, spans: Iterable[tuple[int, int]]) -> int:
    """Characters of [start, end) covered by the union of ``spans``."""
    marks = sorted((max(s, start), min(e, end)) for s, e in spans if s < end and start < e)
    total, cur = 0, start
    for s, e in marks:
        s = max(s, cur)
        if e > s:
            total += e - s
            cur = e
    return total


class _SpanIndex:
    """Spans sorted by start, for finding those that overlap [start, end)
    by binary search: a long text has thousands of spans, and scanning
    them all for each span of the other side is quadratic."""

    def __init__(self, spans: Iterable[tuple[int, int]]) -> None:
        self.spans = sorted(spans)
        self.starts = [s for s, _ in self.spans]
        self.longest = max((e - s for s, e in self.spans), default=0)

    def covered(self, start: int, end: int) -> int:
        lo = bisect.bisect_left(self.starts, start - self.longest)
        hi = bisect.bisect_left(self.starts, end)
        return _covered(start, end, self.spans[lo:hi])


def match_spans(
    truth: Sequence[tuple[int, int, str]],
    detections: Sequence[tuple[int, int, str]],
    label: str,
    min_overlap: float = 0.5,
) -> tuple[int, int, int]:
    """(caught ground-truth spans, correct detections, exact matches) of one
    label in one text, by the rule in the module docstring."""
    gt = [(s, e) for s, e, lab in truth if lab == label and e > s]
    det = [(s, e) for s, e, lab in detections if lab == label and e > s]
    det_index, gt_index = _SpanIndex(det), _SpanIndex(gt)
    caught = sum(1 for s, e in gt if det_index.covered(s, e) >= min_overlap * (e - s))
    correct = sum(1 for s, e in det if gt_index.covered(s, e) >= min_overlap * (e - s))
    exact = len(set(gt) & set(det))
    return caught, correct, exact


class _Normalised:
    """A scrubbed text in the two forms values are looked up in, each built
    once (not once per value: a 10 MB record has thousands of values)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._digits: str | None = None
        self._words: str | None = None

    @property
    def digits(self) -> str:
        # The digit runs, separated by a non-digit: a key never spans two runs.
        if self._digits is None:
            self._digits = "|".join(re.sub(r"\D", "", m.group(0)) for m in _DIGIT_RUN.finditer(self.text))
        return self._digits

    @property
    def words(self) -> str:
        if self._words is None:
            self._words = " ".join(self.text.casefold().split())
        return self._words


def value_survives(label: str, value: str, scrubbed_text: str | _Normalised) -> bool:
    """Whether ``value`` (normalised as in leak counting) is still in ``scrubbed_text``."""
    key = normalise_value(label, value)
    if not key:
        return False
    norm = scrubbed_text if isinstance(scrubbed_text, _Normalised) else _Normalised(scrubbed_text)
    if label in ("SSN", "PHONE"):
        return key in norm.digits
    return key in norm.words


def residual_pii(
    records: Sequence[Record],
    scrubbed: Sequence[Record | str],
    labels: Iterable[str] | None = None,
) -> dict[str, list[str]]:
    """Ground-truth values (per label) that survive scrubbing.

    ``records`` are the originals (with ``pii``), ``scrubbed`` the scrubbed
    records or texts in the same order. ``labels`` limits the types (default:
    every label in the ground truth). Each surviving occurrence is listed once
    per record; records without ground truth are skipped.
    """
    if len(records) != len(scrubbed):
        raise ValueError(f"{len(records)} records but {len(scrubbed)} scrubbed texts")
    wanted = None if labels is None else set(labels)
    out: dict[str, list[str]] = {} if wanted is None else {lab: [] for lab in sorted(wanted)}
    for rec, scr in zip(records, scrubbed):
        if not rec.pii:
            continue
        text = _Normalised(scr.text if isinstance(scr, Record) else str(scr))
        seen: set[tuple[str, str]] = set()
        for sp in rec.pii:
            if wanted is not None and sp.label not in wanted:
                continue
            value = sp.value(rec.text)
            key = (sp.label, normalise_value(sp.label, value))
            if key in seen:
                continue
            seen.add(key)
            if value_survives(sp.label, value, text):
                out.setdefault(sp.label, []).append(value)
    return out


def evaluate_detections(
    records: Sequence[Record],
    detections: Sequence[Sequence[Detection]],
    labels: Iterable[str],
    *,
    min_overlap: float = 0.5,
    scrubbed_texts: Sequence[str] | None = None,
) -> ScrubQuality:
    """Quality of precomputed ``detections`` (one list per record)."""
    labels = tuple(labels)
    per = {lab: TypeQuality(lab) for lab in labels}
    n = 0
    for i, (rec, dets) in enumerate(zip(records, detections)):
        if rec.pii is None:
            continue
        n += 1
        truth = [(s.start, s.end, s.label) for s in rec.pii]
        found = [(d.start, d.end, d.label) for d in dets]
        for lab in labels:
            q = per[lab]
            q.support += sum(1 for t in truth if t[2] == lab)
            q.n_detections += sum(1 for f in found if f[2] == lab)
            c, k, x = match_spans(truth, found, lab, min_overlap)
            q.caught += c
            q.correct += k
            q.exact += x
    residual: dict[str, list[str]] = {}
    if scrubbed_texts is not None:
        residual = residual_pii(records, scrubbed_texts, labels)
        for lab in labels:
            per[lab].n_residual = len(residual.get(lab, []))
    overall = TypeQuality("overall")
    for q in per.values():
        for name in ("support", "n_detections", "caught", "correct", "exact", "n_residual"):
            setattr(overall, name, getattr(overall, name) + getattr(q, name))
    return ScrubQuality(labels=labels, per_type=per, overall=overall, n_records=n,
                        min_overlap=min_overlap, residual=residual)


def evaluate_scrubber(
    records: Sequence[Record],
    analyzer: PiiAnalyzer,
    labels: Iterable[str] | str | None = None,
    *,
    min_overlap: float = 0.5,
    on_progress: Callable[[int], None] | None = None,
) -> ScrubQuality:
    """Run ``analyzer`` over ``records`` (those with known ``pii``) and score it.

    ``labels``: the types to evaluate (default: the analyser's). Residual PII
    is measured after masking with the same detections.
    """
    labels = analyzer.check_labels(labels)
    known = [r for r in records if r.pii is not None]
    dets = analyzer.analyze_batch([r.text for r in known], labels, on_progress=on_progress)
    masker = Scrubber(analyzer, mode="mask", labels=labels)
    scrubbed = [masker.apply(r.text, d).text for r, d in zip(known, dets)]
    return evaluate_detections(known, dets, labels, min_overlap=min_overlap, scrubbed_texts=scrubbed)


__all__ = [
    "ScrubQuality",
    "TypeQuality",
    "evaluate_detections",
    "evaluate_scrubber",
    "match_spans",
    "residual_pii",
    "value_survives",
]
