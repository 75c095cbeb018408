"""The training data of a data-defence arm: the members, scrubbed and/or deduplicated.

Each function returns the transformed members and a JSON-able report of what
the defence did, measured against the ground truth where there is one:
scrubbing reports the scrubber's span-level precision/recall per PII type
and how much ground-truth PII still went into training; deduplication
reports what it removed and, for planted canaries, how many copies of each
survived (repeats are exactly what dedup is meant to catch).

Reports hold counts only, never PII values: they end up in ``results.json``.
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any, Iterable, Sequence

from ..core.io import finite
from ..core.progress import progress_bar
from ..core.typed import Typed
from ..data.records import Record
from .dedup import dedup
from .pii import ENTITY_TO_LABEL, get_analyzer
from .scrub import Scrubber
from .scrub_quality import evaluate_detections, residual_pii


class TypeQualityReport(Typed):
    """Span-level detection quality of one PII type (see :mod:`.scrub_quality`)."""

    label: str
    support: int
    n_detections: int
    caught: int
    correct: int
    exact: int
    n_residual: int
    precision: float | None
    recall: float | None
    f1: float | None
    exact_precision: float | None
    exact_recall: float | None


class ScrubQualityReport(Typed):
    labels: list[str]
    n_records: int
    min_overlap: float
    per_type: dict[str, TypeQualityReport]
    overall: TypeQualityReport
    residual: dict[str, int]  # ground-truth values still present after scrubbing, per type (counts only)


class LeftInTraining(Typed):
    ground_truth_spans: int
    values_left: int


class ScrubArmReport(Typed):
    """What scrubbing did to the members, measured against the ground truth where there is one."""

    mode: str
    labels: list[str]
    n_records: int
    n_records_changed: int
    replaced_by_type: dict[str, int]
    quality: ScrubQualityReport | None = None
    pii_in_training: dict[str, LeftInTraining] | None = None  # every ground-truth type, scrubbed or not
    canary_copies_scrubbed: int | None = None
    canary_copies: int | None = None

    def left_in_training(self) -> tuple[int, int] | None:
        """(values left, ground-truth spans) over the types the scrubber targets."""
        left = {k: v for k, v in (self.pii_in_training or {}).items() if k in self.labels}
        if not left:
            return None
        return sum(v.values_left for v in left.values()), sum(v.ground_truth_spans for v in left.values())


class DedupPass(Typed):
    method: str
    n_in: int
    n_kept: int
    n_removed: int
    n_clusters: int
    params: dict[str, Any]


class CopyCount(Typed):
    before: int
    after: int


class DedupArmReport(Typed):
    method: str
    threshold: float
    n_in: int
    n_kept: int
    n_removed: int
    passes: list[DedupPass]
    canary_copies: dict[str, CopyCount] | None = None  # planted canaries: copies before / after


def scrub_members(
    records: Sequence[Record], *, mode: str, entities: Sequence[str] | None, seed: int, desc: str = "scrub members",
    reserve: Iterable[Record] = (),
) -> tuple[list[Record], ScrubArmReport]:
    """Scrub every record (one analyser pass, reused for the quality figures).

    Pseudonyms: every real value — found by the analyser, or labelled and missed — is kept out of the fakes
    before the first draw, and so are the labelled values of ``reserve`` (the audit's other splits): a fake
    equal to a member's value would be trained on and counted as that person's leak; one equal to a
    non-member's would lift the floor the attacks compare with."""
    analyzer = get_analyzer(entities)
    labels = analyzer.labels
    with progress_bar(desc, total=len(records)) as advance:
        dets = analyzer.analyze_batch([r.text for r in records], labels, on_progress=advance)
    scrubber = Scrubber(analyzer, mode=mode, labels=labels, seed=seed)
    if scrubber.mode == "pseudonym":
        for r, d in zip(records, dets):
            scrubber.reserve(r.text, d)
        for r in itertools.chain(records, reserve):
            for sp in r.pii or ():
                label = ENTITY_TO_LABEL.get(sp.label, sp.label)  # a corpus may label its spans Presidio's way
                if label in labels:
                    scrubber.pseudonyms.reserve(label, r.text[sp.start:sp.end])
    scrubbed = [scrubber.scrubbed_record(r, scrubber.apply(r.text, d)) for r, d in zip(records, dets)]

    report: dict[str, Any] = {
        "mode": mode,
        "labels": list(labels),
        "n_records": len(records),
        "n_records_changed": sum(s.text != r.text for s, r in zip(scrubbed, records)),
        "replaced_by_type": dict(sorted(Counter(d.label for ds in dets for d in ds).items())),
    }
    known = [i for i, r in enumerate(records) if r.pii is not None]
    if known:
        truth = [records[i] for i in known]
        quality = evaluate_detections(truth, [dets[i] for i in known], labels,
                                      scrubbed_texts=[scrubbed[i].text for i in known])
        q = quality.to_dict()
        q["residual"] = {k: len(v) for k, v in q["residual"].items()}  # counts: the values are PII
        report["quality"] = q
        # Every ground-truth type, scrubbed or not: what the model was trained on regardless.
        left = residual_pii(truth, [scrubbed[i].text for i in known])
        total = Counter(s.label for r in truth for s in (r.pii or ()))
        report["pii_in_training"] = {
            lab: {"ground_truth_spans": total[lab], "values_left": len(left.get(lab, []))} for lab in sorted(total)
        }
    canaries = [(r, s) for r, s in zip(records, scrubbed) if r.kind == "canary"]
    if canaries:
        report["canary_copies_scrubbed"] = sum(r.text != s.text for r, s in canaries)
        report["canary_copies"] = len(canaries)
    return scrubbed, ScrubArmReport.model_validate(finite(report))


def dedup_members(
    records: Sequence[Record], *, method: str, threshold: float, num_perm: int, seed: int, desc: str = "dedup members"
) -> tuple[list[Record], DedupArmReport]:
    """Drop exact / near duplicates (first occurrence kept)."""
    with progress_bar(desc, total=len(records)) as advance:
        kept, reports = dedup(records, method=method, threshold=threshold, num_perm=num_perm, seed=seed,
                              on_progress=advance)
    report: dict[str, Any] = {
        "method": method,
        "threshold": threshold,
        "n_in": len(records),
        "n_kept": len(kept),
        "n_removed": len(records) - len(kept),
        "passes": [r.counts() for r in reports],
    }
    before = Counter(r.meta.get("canary_id") for r in records if r.kind == "canary")
    if before:
        after = Counter(r.meta.get("canary_id") for r in kept if r.kind == "canary")
        report["canary_copies"] = {cid: {"before": n, "after": after.get(cid, 0)} for cid, n in sorted(before.items())}
    return kept, DedupArmReport.model_validate(report)
