"""From Presidio's results to Detections: trimmed spans, NER guesses checked, specificity.

spaCy's small model tags many words it should not (field labels as PERSON,
"tomorrow" as DATE, drug names as NORP): :func:`_accept` keeps an NER span
only when it can be what it claims. A detection is *specific* when a
checksum validated it or a cue for its type stands just before it; among
overlapping detections a specific one names the span (see :mod:`.overlaps`).

NHS numbers and phone numbers share ten digits. The NHS mod-11 check digit
makes an NHS detection specific only in the layout the NHS prints (3-3-4,
one separator style, no leading 0): one number in eleven passes mod 11, so
in a phone's layout ("0610025724", "041 7849974") it proves nothing and the
number stays a phone unless an NHS cue is near. A nearer phone cue or a
+country prefix still makes an NHS-shaped number a phone.
"""

from __future__ import annotations

import re
from typing import Iterable

from .context import cue_distance, licence_cue_is_only_a_unit
from .detection import NER_SOURCES, SOFT_SOURCES, Detection
from .labels import ENTITY_TO_LABEL
from .names import known_name_tokens, name_lists
from .nrp import nrp_words
from .patterns import ANY_MONTH, NOT_NAME_RE, YEAR

_MONTH_OR_DAY = re.compile(rf"\b{ANY_MONTH}\b|\d{{1,2}}[/.-]\d{{1,2}}", re.IGNORECASE)
_YEAR_RE = re.compile(rf"\b{YEAR}\b")
_TITLE_BEFORE = re.compile(r"\b(?:Mr|Mrs|Ms|Miss|Mx|Dr|Prof)\.?\s*$")
_DEMONYM = re.compile(r"(?:an|ese|ish|ic|i|ch)s?$")
# Words spaCy's small model tags NORP / ORG in business text that name no group or organisation.
_NOT_ENTITY = frozenset({"the", "inc", "inc.", "ltd", "ltd.", "llc", "plc", "gmbh", "co", "co.", "corp", "corp.",
                         "team", "board", "hr", "it", "ceo", "cfo", "cto", "vp", "dm", "pm", "asap", "fyi", "lol",
                         "omg", "btw", "pls", "thx", "cvv", "iban", "ssn", "dob", "dea", "nhs", "kyc", "ach", "vat"})

# Labels whose formats many other identifiers share (a bare 10-digit number
# is a valid phone number; a name is a word): a validated or context-
# supported detection of another type on the same characters names them better.
_GENERIC_LABELS = frozenset({"NAME", "PHONE", "ADDRESS", "DOB", "TIME", "NRP", "ORGANIZATION", "URL",
                             "BLOOD_PRESSURE", "HEIGHT", "WEIGHT"})
# An NHS number laid out as the NHS writes it (3 3 4, stored as 10 digits; dashes are
# accepted as Presidio's NHS recognizer accepts them), not starting with a trunk 0.
_NHS_FORM = re.compile(r"[1-9]\d{2}([ -]?)\d{3}\1\d{4}")
_TOKEN_RE = re.compile(r"\S+")


def to_detections(text: str, results: Iterable, wanted: set[str]) -> list[Detection]:
    """Presidio's results for ``text`` as Detections with PrivLeak's labels, those of
    ``wanted`` only: spans trimmed, impossible NER guesses dropped (:func:`_accept`),
    each marked *specific* when validated or cued (see :mod:`.overlaps`). Unsorted.
    """
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
        # Validated (score raised to 1) or supported by a context word.
        score = float(r.score)
        validated = score >= 0.999 or bool(meta.get("privleak_validated"))
        distance = cue_distance(label, text, start) if source not in SOFT_SOURCES else None
        if label == "UK_NHS" and distance is None and not _NHS_FORM.fullmatch(text[start:end]):
            # The mod-11 check digit (NHS Data Dictionary) validates an
            # NHS number in an NHS layout — 3-3-4 digits, one separator
            # style, no leading 0 (England and Wales issue none that
            # start with 0; a leading 0 is a phone's trunk prefix) — then
            # names it better than a phone format does, cue or not, as a
            # Luhn digit does a card number. In a phone's own layout
            # ("0610025724", "041 7849974") mod 11, which passes one
            # number in eleven, proves nothing without an NHS cue. A
            # nearer phone cue or an international prefix (a longer phone
            # span) makes any of them a phone (see :mod:`.overlaps`).
            validated = False
        specific = source not in SOFT_SOURCES and (label not in _GENERIC_LABELS or label == "PHONE") and (
            validated or distance is not None)
        distance = (1 << 30) if distance is None else distance
        out.append(Detection(start, end, label, round(score, 4), source, specific, distance))
    return out


def _accept(label: str, source: str, text: str, start: int, end: int) -> bool:
    """Drop output that cannot be the label it claims: NER guesses, and licence numbers backed only by a unit."""
    if label == "US_DRIVER_LICENSE" and licence_cue_is_only_a_unit(text, start):
        return False
    if source not in NER_SOURCES:
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
            return bare in known_name_tokens() or bool(_TITLE_BEFORE.search(text[max(0, start - 8):start]))
        return True
    if label == "DOB":
        # "tomorrow" or "two weeks" are dates to spaCy, not identifiers.
        return bool(_YEAR_RE.search(value)) and bool(_MONTH_OR_DAY.search(value))
    if label == "ADDRESS":
        # Towns, streets, places, and also states and countries: HIPAA Safe
        # Harbor would keep a state, but Presidio (and so every comparison
        # a user makes) reports them, and removing one costs little.
        return any(ch.isupper() for ch in value) and len(value.strip()) > 2
    if label == "NRP":
        # The small model calls drug names and invoice numbers NORP: keep
        # listed groups and words shaped like demonyms ("Moldovan", "Togolese").
        words = value.split()
        bare = re.sub(r"(?:'s|’s|s)$", "", value.strip())
        if value.strip().casefold() not in nrp_words() and value.strip().casefold() in name_lists()[0]:
            # The demonym shape is a guess; a listed given name ("Ercan",
            # "Sean") that names no listed group is a name.
            return False
        return bool(words) and not any(ch.isdigit() for ch in value) and (
            value.strip().casefold() in nrp_words() or bare.casefold() in nrp_words()
            or (value[:1].isupper() and bool(_DEMONYM.search(words[-1]))))
    if label == "ORGANIZATION":
        # "the", "Inc." or a bare number is no organisation.
        return (any(ch.isalpha() for ch in value) and len(value.strip()) > 2
                and value.strip().casefold() not in _NOT_ENTITY)
    return True


def _trim_ner_name(text: str, start: int, end: int) -> tuple[int, int]:
    """Shrink an NER PERSON span to its name-like tokens: drop edge tokens
    that are punctuation, field words ("Patient", "Discharge") or, in mixed
    case text, all-caps abbreviations ("LABS", "BP")."""
    toks = [(m.start() + start, m.end() + start, m.group(0))
            for m in _TOKEN_RE.finditer(text[start:end])]
    mixed = any(not t.isupper() for _, _, t in toks if any(ch.isalpha() for ch in t))

    def junk(tok: str) -> bool:
        bare = tok.strip(".,;:()")
        return (not any(ch.isalpha() for ch in bare) or bool(NOT_NAME_RE.match(bare))
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
