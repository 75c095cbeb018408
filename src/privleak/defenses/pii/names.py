"""Person names from lists of given names and surnames, where people write them.

Beyond the NER and the cue patterns (:mod:`.patterns`), :func:`find_listed_names`
takes listed given names where people write them, because the small English
model misses names in other languages' sentences and in chat: a given name +
surname (a listed surname even when it is also a word, "Beverley Jackson");
a sentence's subject ("Tessa has exceeded …": at a sentence start every word
is capitalised, so a following verb is what tells); in a line written
without capitals, lower-case names ("liam van den berg"). A given name that
is also a common word of six languages ("friend") needs a cue or a capital
mid-sentence; one of ``_WORD_NAMES`` ("Will", "Grace") a strong cue. A name
never crosses a line break (sign-offs, a name above an address) and drops an
English possessive.

The lists (Faker's person, lorem and spaCy's stop-word lists) are loaded on
first use, never when this module is imported.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable

from .nrp import nrp_words
from .patterns import MONTH_WORDS, NOT_NAME_RE, WORD

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
_FIRST_LETTER = re.compile(r"[^\W\d_]")
_LOWER_WORD_NEXT = re.compile(r"[ \t]+[a-zà-ÿ]")
# What follows a sentence's subject: a conjunction, an auxiliary, an English
# verb in -s / -ed, a Romance reflexive pronoun, or the commonest auxiliaries
# of the EU languages above.
_VERB_NEXT = re.compile(
    r"[ \t]+(?:and|&|or|is|was|has|had|have|will|would|can|could|should|may|might|must|did|does|[a-z]{2,}(?:s|ed)|"
    r"si|se|s'|ist|hat|war|wird|est|a|ha|è|heeft|zal|tem|foi)(?![\w'])")
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


def load_name_lists() -> None:
    """Build the lists :func:`find_listed_names` uses (seconds: Faker's 86 locales), now."""
    name_lists()
    _stop_words()
    _stop_words(("en",))
    _common_words()


def find_listed_names(text: str) -> list[tuple[int, int, float]]:
    """(start, end, score) of the names in ``text`` found through a list of given names
    (see :func:`name_lists`).

    spaCy's small English model misses most names it has not seen in
    English news text, names in other languages' sentences and names in
    lower-case chat. This adds, for a word that is a known given
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

    Its detections rank with the NER's (see :func:`.overlaps.resolve_overlaps`): a
    pattern (an address, an e-mail) always wins over them.
    """
    given, family = name_lists()
    stop = _stop_words()
    english_stop = _stop_words(("en",))
    common_words = _common_words()
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
                last is None and _ORG_BEFORE.search(before)) or key in nrp_words():
            i = (last if last is not None else i) + 1
            continue
        if last is not None:
            score = 0.9 if words[last][2].casefold() in family else 0.75
            out.append((start, words[last][1], score))
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
            out.append((start, end, score))
        i += 1
    return out


@lru_cache(maxsize=1)
def name_lists() -> tuple[frozenset[str], frozenset[str]]:
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


def known_name_tokens() -> frozenset[str]:
    given, family = name_lists()
    return given | family


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


@lru_cache(maxsize=4)
def _stop_words(langs: tuple[str, ...] = ("en", "de", "fr", "es", "it", "nl", "pt")) -> frozenset[str]:
    """spaCy's stop words of English and the EU languages above ("Sie", "das",
    "con" are given names somewhere, and pronouns or articles here)."""
    words: set[str] = set()
    for lang in langs:
        words |= _stop_word_module(lang).STOP_WORDS
    return frozenset(w.casefold() for w in words)


def _stop_word_module(lang: str):
    """``spacy.lang.<lang>.stop_words`` — without importing ``spacy.lang.<lang>`` itself.

    The module is a plain word list with no imports, but importing it the usual way first runs its language
    package, whose tokenizer exceptions compile regular expressions for seconds (French: ~10 CPU-s, most of
    what building the PII analyser cost). Loading the file alone gives the same words."""
    import importlib.util
    import sys
    from pathlib import Path

    name = f"spacy.lang.{lang}.stop_words"
    if name in sys.modules:
        return sys.modules[name]
    package = importlib.util.find_spec("spacy.lang")
    path = Path(next(iter(package.submodule_search_locations)), lang, "stop_words.py")
    spec = importlib.util.spec_from_file_location(f"_privleak_stop_words_{lang}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
