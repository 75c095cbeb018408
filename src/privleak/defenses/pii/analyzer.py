"""The analyser: :class:`PiiAnalyzer` and the process-wide shared one, :func:`get_analyzer`.

Batches: :meth:`PiiAnalyzer.iter_analyze` / :meth:`PiiAnalyzer.analyze_batch`
run spaCy over the texts with ``nlp.pipe`` (Presidio's ``process_batch``)
and hand each text's precomputed NLP artefacts to ``AnalyzerEngine.analyze``,
which is what Presidio's ``BatchAnalyzerEngine`` does, plus progress and
streaming. A text longer than :attr:`PiiAnalyzer.window_chars` is analysed
in overlapping windows (:mod:`.windows`).

Presidio and spaCy are imported when an analyser is built, not with this
module: a bad argument is refused first.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import replace
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from privleak.core.errors import UserError

from .detection import Detection
from .labels import (
    DEFAULT_BATCH_CHARS,
    DEFAULT_SCORE_THRESHOLD,
    DEFAULT_SPACY_MODEL,
    DEFAULT_WINDOW_CHARS,
    DEFAULT_WINDOW_OVERLAP,
    ENTITY_TO_LABEL,
    NER_ENTITIES,
    parse_labels,
)
from .overlaps import resolve_overlaps
from .postprocess import to_detections
from .windows import Job, split_windows


class PiiAnalyzer:
    """Find PII spans, labelled with PrivLeak's labels.

    ``labels``: the PII types to look for (default :data:`DEFAULT_SCRUB_LABELS`;
    Presidio names such as PERSON are accepted too). Only the recognizers
    those types need are built.
    ``ner``: run spaCy's NER (``model``); ``False`` gives the regex-only
    analyser (spaCy's tokenizer, no model): faster, names only by cue.
    ``terms``: extra deny-lists, e.g. ``{"CONDITION": ["asthma", ...]}``,
    which also make CONDITION / MEDICATION / PROCEDURE usable.
    ``score_threshold``: Presidio confidence below which a detection is
    dropped (context words such as "SSN" add 0.35).
    """

    def __init__(
        self,
        labels: Iterable[str] | str | None = None,
        *,
        ner: bool = True,
        model: str = DEFAULT_SPACY_MODEL,
        score_threshold: float = DEFAULT_SCORE_THRESHOLD,
        terms: Mapping[str, Iterable[str]] | None = None,
        batch_size: int = 32,
    ) -> None:
        terms = {str(k).strip().upper(): [str(t) for t in v if str(t).strip()] for k, v in (terms or {}).items()}
        self.labels: tuple[str, ...] = parse_labels(labels, terms)
        self.terms: dict[str, list[str]] = terms
        if not 0.0 <= float(score_threshold) <= 1.0:
            raise UserError(f"score threshold must be in [0, 1], got {score_threshold}")
        self.score_threshold = float(score_threshold)
        self.batch_size = max(1, int(batch_size))
        #: Texts longer than this are analysed in overlapping windows (spaCy
        #: refuses more than 1,000,000 characters, and its NER needs about
        #: 1 GB of memory per 100,000); values shorter than a quarter of the
        #: overlap are always seen whole in one window (see :func:`.windows.split_windows`).
        self.window_chars = DEFAULT_WINDOW_CHARS
        self.overlap_chars = DEFAULT_WINDOW_OVERLAP
        #: At most this many characters go to spaCy in one ``nlp.pipe`` batch (besides at most
        #: ``batch_size`` pieces): a count-only batch of 32 long windows held 3.2 M characters of docs
        #: at once (a 1.2 MB text peaked at 2.85 GB); short notes still batch 32 at a time.
        self.batch_chars = DEFAULT_BATCH_CHARS
        ner_labels = set(NER_ENTITIES) & set(self.labels)
        self.ner = bool(ner) and bool(ner_labels)
        self.model = model if self.ner else None
        # Presidio and spaCy take seconds to import: only once the arguments are known good.
        from .engine import build_analyzer_engine, build_nlp_engine
        from .recognizers import build_recognizers

        self._nlp_engine = build_nlp_engine(self.model)
        recognizers = build_recognizers(self.labels, terms, self.ner)
        self._entities = sorted({entity for r in recognizers for entity in r.supported_entities})
        self._engine = build_analyzer_engine(recognizers, self._nlp_engine, self.score_threshold)
        self._lock = threading.RLock()

    # -- analysis ----------------------------------------------------------

    def check_labels(self, labels: Iterable[str] | str | None) -> tuple[str, ...]:
        """``labels`` parsed (Presidio names accepted), in this analyser's order;
        a UserError if the analyser was not built for one of them."""
        if labels is None:
            return self.labels
        wanted = parse_labels(labels, {lab: [] for lab in self.labels})
        missing = [lab for lab in wanted if lab not in self.labels]
        if missing:
            raise UserError(
                f"the PII analyser was built for {', '.join(self.labels)}, not {', '.join(missing)}; "
                f"build it with those types too"
            )
        return tuple(lab for lab in self.labels if lab in wanted)

    def _wanted(self, labels: Iterable[str] | str | None) -> set[str]:
        return set(self.check_labels(labels))

    def analyze(self, text: str, labels: Iterable[str] | None = None, *, resolve: bool = True) -> list[Detection]:
        """Detections in ``text``; disjoint and sorted when ``resolve`` (default)."""
        return self.analyze_batch([text], labels, resolve=resolve)[0]

    def iter_analyze(
        self, texts: Iterable[str], labels: Iterable[str] | None = None, *, resolve: bool = True,
        on_chars: Callable[[int], None] | None = None,
    ) -> Iterator[list[Detection]]:
        """Detections per text, lazily, running spaCy over batches (``nlp.pipe``).

        ``on_chars(n)``: after each piece, the number of characters of its text that piece finished (a long
        text's windows report their own parts as they go, so progress moves inside a 10 MB record too)."""
        wanted = self._wanted(labels)
        entities = [e for e in self._entities if ENTITY_TO_LABEL.get(e, e) in wanted]
        engine = self._engine
        jobs: deque[Job] = deque()

        def pieces() -> Iterator[str]:
            # Each text as one piece, or a long one as overlapping windows
            # (spaCy refuses more than nlp.max_length characters).
            for t in texts:
                text = t if isinstance(t, str) else str(t)
                job = Job(text, split_windows(text, self.window_chars, self.overlap_chars))
                jobs.append(job)
                for w in job.windows:
                    yield text[w.start:w.end]

        def batches() -> Iterator[tuple[str, Any]]:
            # nlp.pipe batches by count; cut the stream by characters too, so long windows are
            # parsed a few at a time (the lock is held throughout, as before).
            chunk: list[str] = []
            size = 0
            for piece in pieces():
                if chunk and (len(chunk) >= self.batch_size or size + len(piece) > self.batch_chars):
                    yield from self._nlp_engine.process_batch(chunk, language="en", batch_size=len(chunk))
                    chunk, size = [], 0
                chunk.append(piece)
                size += len(piece)
            if chunk:
                yield from self._nlp_engine.process_batch(chunk, language="en", batch_size=len(chunk))

        with self._lock:  # spaCy pipelines are not thread-safe
            for piece, artifacts in batches():
                job = jobs[0]
                w = job.windows[job.done]
                job.done += 1
                if on_chars is not None:
                    on_chars(w.own_end - w.own_start)
                if piece.strip():
                    results = engine.analyze(text=piece, language="en", entities=entities,
                                             nlp_artifacts=artifacts, score_threshold=self.score_threshold)
                    dets = sorted(to_detections(piece, results, wanted))
                    if len(job.windows) == 1:
                        job.dets = dets
                    else:  # back to the text's offsets; each window keeps what starts in its own part
                        job.dets += [replace(d, start=d.start + w.start, end=d.end + w.start)
                                     for d in dets if w.own_start <= d.start + w.start < w.own_end]
                if job.done == len(job.windows):
                    jobs.popleft()
                    yield resolve_overlaps(job.dets) if resolve else sorted(job.dets)

    def analyze_batch(
        self,
        texts: Sequence[str],
        labels: Iterable[str] | None = None,
        *,
        resolve: bool = True,
        on_progress: Callable[[int], None] | None = None,
    ) -> list[list[Detection]]:
        """Detections for every text (``on_progress(1)`` after each)."""
        out = []
        for dets in self.iter_analyze(texts, labels, resolve=resolve):
            out.append(dets)
            if on_progress is not None:
                on_progress(1)
        return out


_CACHE: dict[tuple, PiiAnalyzer] = {}
_CACHE_LOCK = threading.Lock()


def get_analyzer(
    labels: Iterable[str] | str | None = None,
    *,
    ner: bool = True,
    model: str = DEFAULT_SPACY_MODEL,
    score_threshold: float = DEFAULT_SCORE_THRESHOLD,
) -> PiiAnalyzer:
    """A process-wide shared :class:`PiiAnalyzer` for these settings (loading
    spaCy takes seconds; scrubbing, evaluation and the output guard share one)."""
    key = (parse_labels(labels, {}), bool(ner), model, float(score_threshold))
    with _CACHE_LOCK:
        analyzer = _CACHE.get(key)
        if analyzer is None:
            analyzer = PiiAnalyzer(key[0], ner=ner, model=model, score_threshold=score_threshold)
            _CACHE[key] = analyzer
        return analyzer
