"""Scrubbing: replace the PII the analyser finds, in one of three modes.

* ``mask``: every value becomes its type in angle brackets, ``<NAME>``,
  ``<EMAIL>``, ``<SSN>`` … This is Presidio's ``replace`` operator with its
  default ``<ENTITY_TYPE>`` convention (``<PERSON>``, ``<EMAIL_ADDRESS>``),
  spelled with PrivLeak's labels (PERSON → NAME, EMAIL_ADDRESS → EMAIL, …;
  see :data:`privleak.defenses.pii.ENTITY_TO_LABEL`).
* ``tag``: type plus an index, ``<NAME_1>``, ``<NAME_2>``; the same value
  gets the same index everywhere in the corpus, so co-reference survives.
* ``pseudonym``: consistent, fluent fake values, so the text still reads
  like the original for training (:mod:`.pseudonyms`: the same real value
  always gets the same fake, a fake never equals a real value of the
  corpus, and the fakes are keyed by the seed, which must stay secret).

Scrubbing a corpus in memory reserves every value the analyser finds before
the first pseudonym is drawn; :meth:`Scrubber.apply` alone reserves its own
text's.

Scrubbing replaces the entity types it is given and nothing else: a secret
that is no PII type (a passphrase, an account's security answer) is left in
the text as it is.

Use one :class:`Scrubber` per corpus (tags and pseudonyms are consistent
within it). The text splicing is done by Presidio's ``AnonymizerEngine`` on
the analyser's disjoint spans.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Iterator, Sequence

from privleak.core.errors import UserError
from privleak.core.normalise import normalise_value
from privleak.data.records import PiiSpan, Record
from privleak.defenses.pii import Detection, PiiAnalyzer, get_analyzer
from privleak.defenses.pseudonyms import Pseudonymizer

MODES: tuple[str, ...] = ("mask", "tag", "pseudonym")


@dataclass
class ScrubbedText:
    """One scrubbed text and what was replaced: ``replacements`` holds
    ``(detection, new_start, new_end, new_value)`` in text order."""

    text: str
    original: str
    replacements: list[tuple[Detection, int, int, str]] = field(default_factory=list)

    def map_span(self, start: int, end: int) -> tuple[int, int] | None:
        """Where ``original[start:end]`` sits in the scrubbed text, or None
        when any part of it was replaced."""
        shift = 0
        for det, new_start, new_end, _ in self.replacements:
            if det.start < end and start < det.end:
                return None
            if det.end <= start:
                shift += (new_end - new_start) - (det.end - det.start)
        return start + shift, end + shift


class Scrubber:
    """Scrub texts with one analyser, in one mode; one instance per corpus.

    ``labels``: the PII types to replace (default: those of the analyser,
    itself defaulting to NAME, EMAIL, SSN, PHONE, ADDRESS, DOB, MRN).
    ``analyzer``: a :class:`PiiAnalyzer`; default the shared one for
    ``labels`` (see :func:`privleak.defenses.pii.get_analyzer`).
    """

    def __init__(
        self,
        analyzer: PiiAnalyzer | None = None,
        *,
        mode: str = "mask",
        labels: Iterable[str] | str | None = None,
        seed: int = 0,
    ) -> None:
        mode = str(mode).strip().lower()
        if mode not in MODES:
            raise UserError(f"unknown scrub mode {mode!r}; use one of: {', '.join(MODES)}")
        self.mode = mode
        if analyzer is None:
            analyzer = get_analyzer(labels)
        self.analyzer = analyzer
        self.labels: tuple[str, ...] = (
            analyzer.labels if labels is None else analyzer.check_labels(labels)
        )
        self.seed = int(seed)
        self.pseudonyms = Pseudonymizer(seed=self.seed, terms=getattr(analyzer, "terms", None))
        self._tags: dict[str, dict[str, int]] = {}
        self.counts: Counter[str] = Counter()
        self._anonymizer = None
        self._operators = None

    # -- replacement values --------------------------------------------------

    def replacement(self, label: str, value: str) -> str:
        """What ``value`` (of type ``label``) becomes in this scrubber's mode."""
        if self.mode == "mask":
            return f"<{label}>"
        if self.mode == "tag":
            table = self._tags.setdefault(label, {})
            key = normalise_value(label, value)
            if key not in table:
                table[key] = len(table) + 1
            return f"<{label}_{table[key]}>"
        return self.pseudonyms(label, value)

    def _engine(self):
        if self._anonymizer is None:
            from presidio_anonymizer import AnonymizerEngine
            from presidio_anonymizer.entities import OperatorConfig

            self._anonymizer = AnonymizerEngine()
            self._operators = {}
            for label in self.labels:
                if self.mode == "mask":
                    self._operators[label] = OperatorConfig("replace", {"new_value": f"<{label}>"})
                else:
                    # Values are assigned in reading order before the engine
                    # runs (it splices from the end); the lambda looks them up.
                    self._operators[label] = OperatorConfig(
                        "custom", {"lambda": (lambda v, _l=label: self.replacement(_l, v))}
                    )
        return self._anonymizer

    def apply(self, text: str, detections: Sequence[Detection]) -> ScrubbedText:
        """Replace ``detections`` (disjoint, e.g. from the analyser) in ``text``."""
        dets = sorted((d for d in detections if d.label in self.labels), key=lambda d: d.start)
        if not dets:
            return ScrubbedText(text=text, original=text)
        for a, b in zip(dets, dets[1:]):
            if b.start < a.end:
                raise ValueError("detections overlap; pass them through resolve_overlaps first")
        if self.mode == "pseudonym":
            self.reserve(text, dets)
        for d in dets:  # reading order fixes tag indices and pseudonym draws
            self.replacement(d.label, text[d.start : d.end])
            self.counts[d.label] += 1
        # Presidio's anonymizer rebuilds the whole string for every
        # replacement; a long text with many values goes through it in
        # pieces of about _SPLICE_CHARS characters, cut between values.
        pieces, out_text, reps, shift = _splice_groups(text, dets), [], [], 0
        for lo, hi, group in pieces:
            new_text, items = self._anonymize(text[lo:hi], group, lo)
            out_text.append(new_text)
            base = lo + shift
            reps += [(d, base + it.start, base + it.end, it.text) for d, it in zip(group, items)]
            shift += len(new_text) - (hi - lo)
        return ScrubbedText(text="".join(out_text), original=text, replacements=reps)

    def _anonymize(self, text: str, dets: Sequence[Detection], offset: int):
        """``text`` (a piece of the original starting at ``offset``) with
        ``dets`` replaced; (new text, Presidio's items in text order)."""
        if not dets:
            return text, []
        from presidio_anonymizer.entities import RecognizerResult

        engine = self._engine()
        result = engine.anonymize(
            text=text,
            analyzer_results=[RecognizerResult(d.label, d.start - offset, d.end - offset, d.score) for d in dets],
            operators=self._operators,
            merge_entities_with_spaces=False,
        )
        items = sorted(result.items, key=lambda i: i.start)
        if len(items) != len(dets):  # pragma: no cover - disjoint input never merges
            raise RuntimeError("presidio-anonymizer changed the span set")
        return result.text, items

    def reserve(self, text: str, detections: Iterable[Detection]) -> None:
        """Keep the values ``detections`` find in ``text`` out of the pseudonyms (no-op in other modes)."""
        for d in detections:
            if d.label in self.labels:
                self.pseudonyms.reserve(d.label, text[d.start : d.end])

    def iter_scrub(
        self, texts: Iterable[str], on_analysed: Callable[[int], None] | None = None,
        on_chars: Callable[[int], None] | None = None,
    ) -> Iterator[ScrubbedText]:
        """Scrubbed texts, streaming; pseudonyms analyse every text first (``on_analysed(1)`` after each),
        so that no fake equals a value found anywhere in ``texts``. ``on_chars(n)``: ``n`` more characters
        analysed (see :meth:`~privleak.defenses.pii.PiiAnalyzer.iter_analyze`)."""
        pairs: Iterable[tuple[str, list[Detection]]] = _zip_lazy(texts, self.analyzer, self.labels, on_chars)
        if self.mode == "pseudonym":
            found = []
            for text, dets in pairs:
                self.reserve(text, dets)
                found.append((text, dets))
                if on_analysed is not None:
                    on_analysed(1)
            pairs = found
        for text, dets in pairs:
            yield self.apply(text, dets)

    def scrub_text(self, text: str) -> str:
        return next(self.iter_scrub([text])).text

    def scrub_texts(self, texts: Iterable[str], on_progress: Callable[[int], None] | None = None) -> list[str]:
        out = []
        for s in self.iter_scrub(texts):
            out.append(s.text)
            if on_progress is not None:
                on_progress(1)
        return out

    def scrub_records(
        self, records: Sequence[Record], on_progress: Callable[[int], None] | None = None
    ) -> list[Record]:
        """New records with scrubbed text. ``pii`` keeps exactly the
        ground-truth spans that survived (re-positioned), i.e. the PII still in
        the text; spans that were (partly) replaced are dropped. ``meta``
        gains ``scrub_mode`` and ``n_scrubbed``."""
        out = []
        for rec, s in zip(records, self.iter_scrub(r.text for r in records)):
            out.append(self.scrubbed_record(rec, s))
            if on_progress is not None:
                on_progress(1)
        return out

    def scrubbed_record(self, rec: Record, s: ScrubbedText) -> Record:
        """``rec`` with the text of ``s`` (its scrubbed form) and its surviving spans."""
        pii = None
        if rec.pii is not None:
            pii = []
            for sp in rec.pii:
                moved = s.map_span(sp.start, sp.end)
                if moved is not None:
                    pii.append(PiiSpan(moved[0], moved[1], sp.label))
        meta = dict(rec.meta)
        meta["scrub_mode"] = self.mode
        meta["n_scrubbed"] = len(s.replacements)
        return replace(rec, text=s.text, pii=pii, meta=meta)


_SPLICE_CHARS = 65_536


def _splice_groups(text: str, dets: Sequence[Detection]) -> list[tuple[int, int, list[Detection]]]:
    """``text`` cut into consecutive pieces ``(start, end, detections inside)``
    of about ``_SPLICE_CHARS`` characters, never inside a detection."""
    if len(text) <= _SPLICE_CHARS:
        return [(0, len(text), list(dets))]
    out, lo, group = [], 0, []
    for d in dets:
        if group and d.start - lo > _SPLICE_CHARS:
            out.append((lo, d.start, group))
            lo, group = d.start, []
        group.append(d)
    out.append((lo, len(text), group))
    return out


def _zip_lazy(texts: Iterable[str], analyzer: PiiAnalyzer, labels: Sequence[str],
              on_chars: Callable[[int], None] | None = None):
    """(text, detections) pairs while the analyser streams through ``texts``."""
    buffer: deque[str] = deque()

    def feed():
        for t in texts:
            buffer.append(t)
            yield t

    extra = {} if on_chars is None else {"on_chars": on_chars}
    for dets in analyzer.iter_analyze(feed(), labels, **extra):
        yield buffer.popleft(), dets


def scrub_corpus(
    records: Sequence[Record],
    *,
    mode: str = "mask",
    labels: Iterable[str] | str | None = None,
    seed: int = 0,
    analyzer: PiiAnalyzer | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> list[Record]:
    """Scrub a whole corpus with one fresh :class:`Scrubber` (the scrub arm's entry point)."""
    return Scrubber(analyzer, mode=mode, labels=labels, seed=seed).scrub_records(records, on_progress)


__all__ = ["MODES", "Pseudonymizer", "ScrubbedText", "Scrubber", "scrub_corpus"]  # Pseudonymizer: re-exported
