"""The output guard: check a model's output before anyone sees it.

:class:`Guard` is built once from the training corpus (plus canaries and,
optionally, the members' PII inventory) and then checks outputs:

* **verbatim** — every span of the output of at least ``threshold``
  characters (default 50) that occurs verbatim in the training corpus
  (whitespace-normalised, optionally case-folded) is found through the
  hashed-window :class:`VerbatimIndex`: lookup cost depends on the output's
  length, not the corpus's (a binary search per window);
* **canary** — the :class:`Tripwire`: canary secrets (and inventory values)
  anywhere in the output, separators and case changed, digits-only for
  numbers;
* **pii** — the project's shared Presidio analyser
  (:func:`privleak.defenses.pii.get_analyzer`): configurable types and score
  threshold.

What it guarantees: a verbatim training substring of ≥ ``threshold``
characters is always found (up to 64-bit hash collisions, ~N/2^64 per
window), and so is every keyed secret in the forms above. What it does NOT
guarantee: paraphrased or reordered training text, verbatim runs shorter than
``threshold``, PII the analyser misses (its recall is that of the scrubber),
secrets re-encoded (digits spelled out), or several outputs that each leak a
harmless piece. It checks one output at a time and keeps no state between
calls.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...core.errors import UserError
from ...core.verbatim_index import VerbatimIndex
from ...data.canaries import Canary
from ...data.records import Record
from ..pii import (
    DEFAULT_SCORE_THRESHOLD,
    DEFAULT_SCRUB_LABELS,
    PiiAnalyzer,
    get_analyzer,
)
from .index_store import load_index, save_index
from .tripwire import DEFAULT_INVENTORY_LABELS, Tripwire
from .verdict import Finding, GuardPolicy, Verdict, apply_findings

_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class ScanSettings:
    """How the PII scanner runs (not stored in the index: chosen when the guard is used)."""

    pii_labels: tuple[str, ...] = DEFAULT_SCRUB_LABELS
    score_threshold: float = DEFAULT_SCORE_THRESHOLD
    ner: bool = True


def inventory_from_records(records: Iterable[Record], labels: Sequence[str] = DEFAULT_INVENTORY_LABELS) -> list[tuple[str, str]]:
    """Distinct ``(label, value)`` pairs of the records' ground-truth PII spans of ``labels``."""
    seen: dict[tuple[str, str], None] = {}
    for r in records:
        for s in r.pii or []:
            if s.label in labels:
                seen.setdefault((s.label, s.value(r.text)), None)
    return list(seen)


def _secret(c: Canary | str) -> str:
    return c.secret if isinstance(c, Canary) else str(c)


@dataclass
class Guard:
    """Verbatim blocker + canary tripwire + PII scanner with a per-reason policy."""

    index: VerbatimIndex
    tripwire: Tripwire
    policy: GuardPolicy = field(default_factory=GuardPolicy)
    scan: ScanSettings = field(default_factory=ScanSettings)
    meta: dict[str, Any] = field(default_factory=dict)
    analyzer: PiiAnalyzer | None = None  # default: the shared analyser for ``scan``, loaded on first use

    # ------------------------------------------------------------- build
    @classmethod
    def build(
        cls,
        texts: Iterable[str],
        *,
        canaries: Iterable[Canary | str] = (),
        inventory: Iterable[tuple[str, str]] = (),
        threshold: int = 50,
        normalise_ws: bool = True,
        casefold: bool = False,
        policy: GuardPolicy | None = None,
        scan: ScanSettings | None = None,
        analyzer: PiiAnalyzer | None = None,
        allow_texts: Iterable[str] = (),
    ) -> Guard:
        """Index ``texts`` (the training corpus) and key ``canaries`` / ``inventory`` values.

        ``allow_texts``: public text (what the base model was trained on,
        shared boilerplate) whose windows are removed from the index, so
        quoting it is never blocked; a training span that also occurs there is
        then not caught by the verbatim blocker (the tripwire still applies).
        """
        if isinstance(threshold, bool) or int(threshold) < 8:
            raise UserError(f"--threshold {threshold}: must be at least 8 characters (default 50); "
                            "shorter spans match ordinary phrases")
        texts = list(texts)
        secrets = [_secret(c) for c in canaries]
        inventory = list(inventory)
        index = VerbatimIndex.build(texts, window=int(threshold), normalise=normalise_ws, casefold=casefold)
        allow = list(allow_texts)
        n_allowed = 0
        if allow and len(index):
            public = VerbatimIndex.build(allow, window=int(threshold), normalise=normalise_ws, casefold=casefold)
            kept = np.setdiff1d(index.hashes, public.hashes, assume_unique=True)
            n_allowed = len(index) - len(kept)
            index = VerbatimIndex(kept, index.window, index.normalise, index.casefold)
        tripwire = Tripwire.build(secrets, inventory)
        meta = {"threshold": int(threshold), "normalise_ws": bool(normalise_ws), "casefold": bool(casefold),
                "n_texts": len(texts), "n_windows": len(index), "n_allow_texts": len(allow),
                "n_windows_allowed": n_allowed, "n_canaries": len(secrets),
                "n_inventory_values": len(inventory), "n_tripwire_keys": len(tripwire)}
        return cls(index, tripwire, policy or GuardPolicy(), scan or ScanSettings(), meta, analyzer)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the index directory (see :mod:`privleak.guard.index_store`)."""
        return save_index(path, self.index, self.tripwire, self.meta)

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, policy: GuardPolicy | None = None, scan: ScanSettings | None = None,
             mmap: bool = True, analyzer: PiiAnalyzer | None = None) -> Guard:
        """Open an index directory; the verbatim hashes are memory-mapped by default."""
        stored = load_index(path, mmap=mmap)
        return cls(stored.verbatim, stored.tripwire, policy or GuardPolicy(), scan or ScanSettings(), stored.meta, analyzer)

    @property
    def threshold(self) -> int:
        return self.index.window

    def _analyzer(self) -> PiiAnalyzer:
        if self.analyzer is None:
            self.analyzer = get_analyzer(self.scan.pii_labels, ner=self.scan.ner, score_threshold=self.scan.score_threshold)
        return self.analyzer

    def warm_up(self) -> None:
        """Load the PII analyser now (seconds) instead of on the first check."""
        if self.policy.pii != "off":
            self.check("warm-up")

    # ------------------------------------------------------------- check
    def check(self, text: str, context: str = "") -> Verdict:
        """The verdict on one output (see the module docstring for what is guaranteed).

        ``context``: the text the output continues (the prompt). Its last
        ``threshold - 1`` characters take part in the verbatim and tripwire
        matching — a reader sees prompt and output together, so a training
        span that starts in the prompt and ends in the output is caught — but
        only the output's part of a span is flagged and redacted.
        """
        return self.check_batch([text], [context])[0]

    def check_batch(self, texts: Sequence[str], contexts: Sequence[str] | None = None) -> list[Verdict]:
        """Verdicts for many outputs (``contexts[i]``: what ``texts[i]`` continues, see :meth:`check`);
        the PII scanner runs over them as one batch (spaCy ``pipe``)."""
        if isinstance(texts, str):
            raise TypeError("check_batch takes a list of texts; use check() for one")
        if contexts is not None and len(contexts) != len(texts):
            raise ValueError(f"{len(contexts)} contexts for {len(texts)} texts")
        # Lone surrogates (legal in JSON strings) become U+FFFD, one for one, so spans stay aligned.
        safe = [_SURROGATE.sub("\ufffd", t if isinstance(t, str) else str(t)) for t in texts]
        tails = [""] * len(safe) if contexts is None else \
            [_SURROGATE.sub("\ufffd", str(c))[-(self.threshold - 1):] if self.threshold > 1 and c else "" for c in contexts]
        pol = self.policy
        pii = [[] for _ in safe]
        if pol.pii != "off":
            pii = self._analyzer().analyze_batch(safe)
        out = []
        for text, tail, dets in zip(safe, tails, pii):
            findings: list[Finding] = []
            joined, off = tail + text, len(tail)
            if pol.verbatim != "off" and len(self.index):
                findings += [Finding("verbatim", "VERBATIM", max(0, s - off), e - off, pol.verbatim)
                             for s, e in self.index.spans(joined) if e > off]
            if pol.canary != "off":
                findings += [Finding("canary", h.label, max(0, h.start - off), h.end - off, pol.canary)
                             for h in self.tripwire.scan(joined) if h.end > off]
            findings += [Finding("pii", d.label, d.start, d.end, pol.pii, d.score) for d in dets]
            out.append(apply_findings(text, findings))
        return out

    def describe(self) -> dict[str, Any]:
        """Settings and sizes (no values): for logs, ``/healthz`` and reports."""
        return {**self.meta, "threshold": self.threshold, "policy": self.policy.to_json(),
                "pii_labels": list(self.scan.pii_labels), "score_threshold": self.scan.score_threshold,
                "ner": self.scan.ner}
