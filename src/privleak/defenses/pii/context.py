"""Context words: the words before a value that name its type.

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
:data:`.patterns.ACCOUNT_SHORT`), where they are no other word.

Two uses: :func:`supporting_cue` is the whole-word test of Presidio's
context enhancer (it raises a match's score), and :func:`cue_distance`
finds the nearest cue for a type before a value (it makes a detection
*specific*, see :mod:`.overlaps`).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable

from .patterns import ACCOUNT_SHORT

_LETTER_RUN = re.compile(r"[^\W\d_]+")
_INFLECTIONS = ("s", "es", "ed", "d", "ing", "'s", "’s")


def supporting_cue(tokens: Iterable[str], cues: Iterable[str]) -> str:
    """The first of ``cues`` that one of ``tokens`` (the lower-cased words
    near a match) stands for, as a whole word, an inflection, a letter run
    of a token glued to its value or with one typo (see
    :func:`context_word_forms`); "" when none does."""
    words = set()
    for token in tokens:
        token = token.lower()
        words.add(token)
        words.update(_LETTER_RUN.findall(token))
    for cue in cues:
        if not words.isdisjoint(context_word_forms(cue.lower())):
            return cue
    return ""


@lru_cache(maxsize=4096)
def context_word_forms(cue: str) -> frozenset[str]:
    """The tokens that stand for context word ``cue``.

    Presidio's lemmatizer turned "accounts" into "account"; our engine's
    lemmas are the lower-cased tokens, so English inflections are added
    back. A cue glued to its value ("Acct#12345678", "konto:…") counts by
    its letters (see :func:`supporting_cue`). Chat and hurried notes carry typos:
    single-error forms (Damerau 1964: most misspellings are one insertion,
    deletion, substitution or transposition) of the kinds that do not turn
    one word into another — a letter typed twice, two neighbours swapped
    (cues of 4+ letters), and an inner letter dropped (6+: "acount"; shorter
    words, first and last letters give other words: "acct" → "act",
    "routing" → "outing", "driver" → "drive"; "act" counts as a short form
    of "account" directly before a number, see ``ACCOUNT_SHORT``).
    """
    if " " in cue or not cue.isalpha():
        return frozenset({cue})
    forms = {cue, *(cue + s for s in _INFLECTIONS), *_typo_forms(cue)}
    if cue.endswith("e"):
        forms.add(cue[:-1] + "ing")
    return frozenset(forms)


def _typo_forms(word: str) -> set[str]:
    """``word`` with one typo of the kinds :func:`context_word_forms` accepts."""
    forms: set[str] = set()
    if len(word) >= 4:
        forms.update(word[:i + 1] + word[i:] for i in range(len(word)))
        forms.update(word[:i] + word[i + 1] + word[i] + word[i + 2:] for i in range(len(word) - 1))
    if len(word) >= 6:
        forms.update(word[:i] + word[i + 1:] for i in range(1, len(word) - 1))
    forms.discard(word)
    return forms


# Words that name an identifier's type when they come just before it (within
# CUE_WINDOW characters), matched at word starts. Presidio's own context
# boost matches its words as substrings ("us" in "puedes") and skips stop
# words ("call"), so it raises scores but cannot tell two types apart.
_CUE_WORDS: dict[str, str] = {
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
}


def _with_typos(rx: str) -> re.Pattern[str]:
    # Each plain-word cue also with one typo (see context_word_forms):
    # "accct 1357343759" still names a bank account. Cues match as word
    # prefixes; a typo form only as a whole word (+ inflection): as a
    # prefix "clel" (cell) would be "Clelia".
    alts = rx[len(r"\b(?:"):-1].split("|")
    typos = {t for a in alts if a.isalpha() for t in _typo_forms(a)} - set(alts)
    typo_rx = "|".join(sorted(typos, key=lambda t: (-len(t), t)))
    return re.compile(r"\b(?:" + "|".join(alts) + (rf"|(?:{typo_rx})(?:s|es|ed|ing)?\b" if typos else "") + ")",
                      re.IGNORECASE)


_CUES = {lab: _with_typos(rx) for lab, rx in _CUE_WORDS.items()}
CUE_WINDOW = 80


def cue_distance(label: str, text: str, start: int) -> int | None:
    """Characters from the nearest cue for ``label`` before ``start`` to ``start`` (None: no cue)."""
    rx = _CUES.get(label)
    if rx is None:
        return None
    lo = max(0, start - CUE_WINDOW)
    last = None
    for m in rx.finditer(text, lo, start):
        last = m
    if label == "US_BANK_NUMBER":
        short = ACCOUNT_SHORT.search(text, max(0, start - 40), start)
        if short and not (short["article"] and short["cue"].lower() == "act"):
            return start - short.end("cue")
    return None if last is None else start - last.end()


# "dL" after a unit ("mg/dL", "g/dL") is the decilitre, not "DL" for driver's licence: the abbreviation
# is written in capitals, and Presidio's context step lower-cases words, so it cannot tell them apart.
_LICENCE_CUE = re.compile(r"\b(?:driver|licen[cs]e|driving|permit)|\bDL\b", re.IGNORECASE)


def licence_cue_is_only_a_unit(text: str, start: int) -> bool:
    """True when the licence cues before ``start`` are all a non-capital "dl" (a unit such as mg/dL)."""
    window = text[max(0, start - CUE_WINDOW):start]
    cues = [m.group(0) for m in _LICENCE_CUE.finditer(window)]
    return bool(cues) and all(c.lower() == "dl" and c != "DL" for c in cues)
