"""Regular expressions of PrivLeak's own pattern recognizers, and the table that assembles them.

:func:`own_specs` gives, per label, the patterns (name, regex, score), the
context words Presidio boosts a match with, and an optional validator (a
checksum). Phone numbers are not here: they are candidates of one regex
validated by libphonenumber (see :mod:`.recognizers`).

The building blocks: US and international street addresses (USPS street
suffixes and AS/NZS 4819 street types from Faker's lists; the street-type-
first / -last forms of Spanish, Italian, French, Portuguese, German and
Dutch addresses with their postcode and town), calendar dates in every
numeric order and with month names in English and the EU languages, clock
times, card numbers in issuers' groupings, names next to a cue ("Patient",
"Dear", "Mr.") or directly before an identifier ("…, DOB"), and the short
forms of "account" (``ACCOUNT_SHORT``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

from .validators import luhn_ok

_STATES = (
    "AL AK AZ AR CA CO CT DE DC FL GA HI ID IL IN IA KS KY LA ME MD MA MI MN MS MO MT NE NV NH NJ "
    "NM NY NC ND OH OK OR PA RI SC SD TN TX UT VT VA WA WV WI WY PR GU VI AS MP AA AE AP"
).split()
_MONTHS = (r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
           r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)")
YEAR = r"(?:18|19|20)\d{2}"
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
ANY_MONTH = rf"(?:{_MONTHS}|{_MONTHS_INTL})"
MONTH_WORDS = frozenset(w.casefold() for w in re.findall(r"[^\W\d_]+", _MONTHS_INTL + " January February March "
                         "April May June July August September October November December"))
_DAY = r"(?:0?[1-9]|[12]\d|3[01])"


@lru_cache(maxsize=1)
def _street_suffix() -> str:
    # The USPS street-suffix names and the Australian/New Zealand street types
    # of AS/NZS 4819 (Faker ships both lists), plus their standard
    # abbreviations, optionally with a full stop; longest first so "Streets"
    # wins over "Street".
    from faker.providers.address.en_AU import Provider as Australia
    from faker.providers.address.en_US import Provider

    abbrevs = ["St", "Ave", "Av", "Rd", "Blvd", "Dr", "Ln", "Ct", "Pl", "Ter", "Terr", "Hwy", "Pkwy",
               "Cir", "Sq", "Trl", "Xing", "Expy", "Fwy", "Ste", "Mt", "Pt", "Ctr", "Cv", "Hts", "Cres", "Gr", "Pde"]
    names = (set(Provider.street_suffixes) | set(Australia.street_suffixes) | set(abbrevs)
             | {"Way", "Drive", "Lane", "Court", "Road"})
    return "(?:" + "|".join(re.escape(x) for x in sorted(names, key=lambda s: (-len(s), s))) + r")\.?"


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
    suffix = _street_suffix()
    unit_first = rf"{_UNIT},? (?:\d{{1,5}}(?:/\d{{1,4}})? )?{name} {suffix}(?![\w])"
    military = r"(?:PSC|Unit|USNS|USNV|USS|USCGC) \d{1,5}(?:, Box \d{1,5})?,? (?:APO|FPO|DPO) (?:AA|AE|AP) \d{5}"
    return rf"\b(?:{type_first}|{type_last}|{unit_first}|{military})(?:, ?{component}){{0,4}}"


@lru_cache(maxsize=1)
def _address_regexes() -> tuple[str, str, str]:
    suffix = _street_suffix()
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
# A field word, in any case ("PATIENT"), is not a name.
NOT_NAME_RE = re.compile(rf"^{_NOT_NAME}$", re.IGNORECASE)
# A word: letters, with inner apostrophes, hyphens and digits.
WORD = re.compile(r"[^\W\d_](?:[\w'’-]*[^\W\d_])?")


# Short forms of "account" on statements, cheques and forms ("A/C No.",
# "Acc#") and in chat ("act": "acct" with a c dropped, the doubled-letter
# slip). Each is also a word or another abbreviation ("A/C" air con, "the
# act"), so it names a bank account only directly before the number, joined
# by at most "#", ":", "No." — and "act" never after an article (the noun).
_ARTICLES = r"the|an?|this|that|these|those"
_ACCOUNT_SEP = r"\.?[ \t]?(?:#|no\.?|nr\.?|number)?[ \t]?[:#]?[ \t]?"
ACCOUNT_SHORT = re.compile(
    rf"(?<![\w/])(?P<article>(?:{_ARTICLES})\s{{1,3}})?(?P<cue>a/c|acc|act){_ACCOUNT_SEP}\Z", re.IGNORECASE)


@dataclass(frozen=True)
class RecognizerSpec:
    """One of PrivLeak's pattern recognizers: its label, patterns, context words and validator."""

    label: str
    patterns: tuple[tuple[str, str, float], ...]  # (name, regex, score)
    context: tuple[str, ...] = ()
    case_sensitive: bool = False
    validate: Callable[[str], bool] | None = None  # e.g. a checksum; True raises the score to 1


def own_specs() -> dict[str, RecognizerSpec]:
    """PrivLeak's pattern recognizers by label (built on each call: Faker's street lists are read lazily)."""
    full, city_state_zip, po_box = _address_regexes()
    return {
        "MRN": RecognizerSpec("MRN", (
            ("mrn", r"\bMRN\s*(?:#|no\.?|number|:|-)?\s*[:#-]?\s*[A-Z]{0,3}\d{4,10}\b", 0.9),
            ("medical record", r"\bmedical\s+record\s*(?:number|no\.?|#)?\s*[:#-]?\s*[A-Z]{0,3}\d{4,10}\b", 0.9),
        ), ("mrn", "medical", "record", "chart")),
        "SSN": RecognizerSpec("SSN", (
            ("ssn dashed", r"(?<![\d-])\d{3}-\d{2}-\d{4}(?![\d-])", 0.6),
            ("ssn spaced/dotted", r"(?<![\d.])\d{3}([ .])\d{2}\1\d{4}(?![\d.])", 0.35),
            ("ssn bare", r"(?<![\d-])\d{9}(?![\d-])", 0.1),
        ), ("ssn", "social", "security", "ss#", "ssa")),
        "PHONE": RecognizerSpec("PHONE", (
            ("us phone",
             r"(?<![\w+])(?:\+?1[\s.-]?)?(?:\(\d{3}\)\s?|\d{3}[\s.-])\d{3}[\s.-]\d{4}"
             r"(?:\s*(?:,\s*)?(?:x|ext\.?|extension)\s*\d{1,6})?(?!\d)", 0.7),
            ("us phone compact", r"(?<![\w+-])(?:\+1)?\d{10}(?!\d)", 0.1),
        ), ("phone", "mobile", "cell", "fax", "contact", "pager", "call")),
        "ADDRESS": RecognizerSpec("ADDRESS", (
            ("street address", full, 0.7),
            ("city state zip", city_state_zip, 0.6),
            ("po box", po_box, 0.6),
            ("international street address", _intl_address_regex(), 0.6),
        ), ("address", "live", "reside", "home", "street", "deliver"), case_sensitive=True),
        # Calendar dates, the HIPAA Safe Harbor "elements of dates": every
        # numeric order (ISO 8601; US M/D/Y; European D/M/Y, D.M.Y, D-M-Y),
        # month names in English and the EU languages above, and card
        # expiry dates (MM/YY, only next to "exp"/"valid").
        "DOB": RecognizerSpec("DOB", (
            ("iso date", rf"\b{YEAR}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])\b", 0.6),
            ("year first", rf"\b{YEAR}([/.])(?:0?[1-9]|1[0-2])\1{_DAY}\b", 0.6),
            ("numeric date", rf"(?<![\d/.-]){_DAY}([/.-]){_DAY}\1{YEAR}(?![\d/])", 0.6),
            ("numeric date 2-digit year", rf"(?<![\w/.:-]){_DAY}([/.]){_DAY}\1\d{{2}}(?![\d/.:-]|\.\d)", 0.45),
            ("month day year", rf"\b{ANY_MONTH}\.?\s+{_DAY}(?:st|nd|rd|th)?,?\s+{YEAR}\b", 0.6),
            ("day month year",
             rf"\b{_DAY}(?:st|nd|rd|th|er|\.)?\s+(?:de\s+)?{ANY_MONTH}\.?,?\s+(?:de\s+|del\s+)?{YEAR}\b", 0.6),
            ("day month", rf"\b{_DAY}(?:st|nd|rd|th|er|\.)?\s+(?:de\s+|of\s+)?(?-i:{ANY_MONTH})\b(?!\.?\s*\d)", 0.45),
            ("month day", rf"(?-i:\b{_MONTHS})\.?\s+{_DAY}(?:st|nd|rd|th)?\b(?![\d,:.]|,?\s+{YEAR})", 0.45),
            ("card expiry", r"(?<![\d/.])(?:0[1-9]|1[0-2])/\d{2}(?![\d/])", 0.05),
        ), ("dob", "birth", "born", "d.o.b", "exp", "expiry", "expires", "valid", "geboren", "né", "née", "nacido",
            "nato", "nata")),
        # Clock times: 14:30, 7h45, 3 p.m., 9.30am, 14 Uhr. A time pins an
        # event (a visit, a call, a login) to a person as a date does;
        # durations and relative dates ("two weeks", "tomorrow") are not
        # looked for.
        "TIME": RecognizerSpec("TIME", (
            ("clock", r"(?<![\d:.,/])(?:[01]?\d|2[0-3])[:h][0-5]\d(?::[0-5]\d)?(?:\s?[ap]\.?\s?m\.?(?!\w))?(?![\d:])",
             0.5),
            ("am pm", r"(?<![\d:.,/])(?:1[0-2]|0?[1-9])(?:[.:][0-5]\d)?\s?[ap]\.?\s?m\.?(?!\w)", 0.5),
            ("uhr", r"(?<![\d:.,/])(?:[01]?\d|2[0-3])(?:[:.][0-5]\d)?\s?Uhr\b", 0.5),
        )),
        # Card numbers the way issuers print them (4-4-4-4, Amex 4-6-5,
        # Diners 4-6-4; ISO/IEC 7812 lengths 13-19), any IIN from 2 to 6 —
        # Presidio's own pattern misses the Mastercard 2-series (2221-2720) —
        # kept only when the Luhn check digit is right.
        "CREDIT_CARD": RecognizerSpec("CREDIT_CARD", (
            ("card 4-4-4-4", r"(?<![\d-])[2-6]\d{3}([ -]?)\d{4}\1\d{4}\1\d{4}(?:\1?\d{1,3})?(?![\d-])", 0.3),
            ("card 4-6-5/4", r"(?<![\d-])3\d{3}([ -]?)\d{6}\1\d{4,5}(?![\d-])", 0.3),
        ), ("card", "credit", "visa", "mastercard", "amex", "cc", "kreditkarte", "carte", "tarjeta", "carta"),
            validate=luhn_ok),
        # US driver's licence numbers: each state has its own format (1-3
        # letters and 4-14 digits, digit groups, Washington's WDL + 9), too
        # varied to tell from other numbers, so only next to a licence cue.
        "US_DRIVER_LICENSE": RecognizerSpec("US_DRIVER_LICENSE", (
            ("licence number",
             r"(?<![\w-])(?:WDL[A-Z0-9*]{9}|(?=(?:[A-Z0-9][ -]?){6})(?=[A-Z0-9]{0,14}\d)[A-Z]{0,3}\d[A-Z0-9]{2,13}"
             r"(?:[ -]\d{1,6}){0,4}"
             r"|\d{1,3}(?:[ -]\d{3}){2,3})(?![\w-])", 0.05),
        ), ("driver", "license", "licence", "dl", "driving", "permit")),
        # Presidio's bank recognizer takes 8-17 digits with a context word
        # within five words; a short form of "account" counts only directly
        # before the number (see ACCOUNT_SHORT), where it is no other word.
        "US_BANK_NUMBER": RecognizerSpec("US_BANK_NUMBER", (
            ("account short form",
             rf"(?<=(?<![\w/])(?:a/c|acc|(?<!\b(?:{_ARTICLES})\s{{1,3}})act){_ACCOUNT_SEP})\d{{8,17}}\b", 0.5),
        )),
        "BLOOD_PRESSURE": RecognizerSpec("BLOOD_PRESSURE", (
            ("bp", r"(?<![\d/.])(?:[5-9]\d|1\d\d|2[0-4]\d)/(?:[2-9]\d|1[0-4]\d)(?![\d/])", 0.3),
        ), ("bp", "blood", "pressure", "mmhg")),
        "HEIGHT": RecognizerSpec("HEIGHT", (
            ("feet inches", r"(?<![\d'])[3-7]'\s?(?:1[01]|\d)(?:\"|''|\s?(?:in|inches)\b)?", 0.6),
            ("ft in", r"\b[3-7]\s?(?:ft|feet)\.?\s?(?:1[01]|\d)\s?(?:in|inches)\b\.?", 0.6),
            ("cm", r"\b(?:1\d{2}|2[0-2]\d)\s?cm\b", 0.3),
            ("metres", r"\b[12]\.\d{1,2}\s?m\b", 0.2),
        ), ("height", "ht", "tall")),
        "WEIGHT": RecognizerSpec("WEIGHT", (
            ("weight", r"\b\d{2,3}(?:\.\d)?\s?(?:lbs?|pounds|kgs?|kilograms)\b", 0.5),
        ), ("weight", "wt", "weigh")),
        "NAME": RecognizerSpec("NAME", (
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
