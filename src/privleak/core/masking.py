"""Masking PII for the report: known values from the run, plus common patterns.

``mask_pii(value, label)`` masks one value of a known category, keeping just
enough to recognise the kind of value (``Al**** H***``, ``***-**-1850``);
:class:`PiiMasker` masks every known PII value of a run (value → label,
:func:`privleak.data.canaries.known_pii`) wherever it occurs in a text,
then masks SSN-, e-mail-, phone- and MRN-shaped strings it did not know.
Masking never lengthens or shortens a value, and a masked value never
contains the original.
"""

from __future__ import annotations

import re
from typing import Mapping

MASK = "*"

_KEEP_LAST4 = {"SSN", "PHONE", "CREDIT_CARD", "IBAN"}
_ALL_DIGITS = {"DOB", "BLOOD_PRESSURE", "HEIGHT", "WEIGHT", "IP_ADDRESS"}


def _mask_word(word: str, keep: int) -> str:
    """Keep the first ``keep`` letters of each hyphen/apostrophe part, mask the rest."""
    parts = re.split(r"([-'’])", word)
    out = []
    for p in parts:
        if p in ("-", "'", "’") or not p:
            out.append(p)
            continue
        k = keep if len(p) > keep + 1 else (1 if len(p) > 1 else 0)
        out.append(p[:k] + re.sub(r"[^\W_]", MASK, p[k:]))
    return "".join(out)


def _mask_digits(value: str, keep_last: int = 0) -> str:
    n_digits = sum(ch.isdigit() for ch in value)
    keep_from = n_digits - keep_last if n_digits > keep_last * 2 else n_digits
    out, seen = [], 0
    for ch in value:
        if ch.isdigit():
            out.append(ch if seen >= keep_from else MASK)
            seen += 1
        else:
            out.append(ch)
    return "".join(out)


def mask_pii(value: str, label: str) -> str:
    """One PII value masked by category: ``mask_pii('Alfred Hughes', 'NAME') == 'Al**** H*****'``.

    SSN, phone and card numbers keep their last four digits (``***-**-1850``);
    dates and measurements lose every digit; names, addresses, e-mails and
    medical terms keep the first letter(s) of each word. The result has the
    same length as ``value`` and never contains it.
    """
    label = (label or "").upper()
    if not value:
        return value
    if label in _KEEP_LAST4:
        masked = _mask_digits(value, 4)
    elif label in _ALL_DIGITS:
        masked = _mask_digits(value, 0)
        if masked == value:  # no digits (e.g. "six feet")
            masked = re.sub(r"[^\W_]", MASK, value)
    elif label == "MRN":
        masked = _mask_digits(value, 2)
    elif label == "EMAIL" and "@" in value:
        local, _, domain = value.partition("@")
        host, dot, tld = domain.rpartition(".")
        masked = _mask_word(local, 1) + "@" + (re.sub(r"[^\W_]", MASK, host) + dot + tld if dot else re.sub(r"[^\W_]", MASK, domain))
    elif label == "NAME":
        words = value.split(" ")
        masked = " ".join(_mask_word(w, 2 if i == 0 else 1) for i, w in enumerate(words))
    else:  # ADDRESS, CONDITION, MEDICATION, PROCEDURE, URL, unknown labels
        masked = re.sub(r"\S+", lambda m: _mask_word(m.group(0), 1), value)
        masked = _mask_digits(masked, 0)
    if value in masked or masked == value:
        masked = re.sub(r"[^\W_]", MASK, value)
    if value in masked:  # only punctuation: nothing identifying to hide
        masked = MASK * len(value)
    return masked


# Patterns for PII the run did not know about (extraction output, user data).
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("EMAIL", re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")),
    ("SSN", re.compile(r"\b\d{3}-\d{2}-\d{4}\b")),
    ("MRN", re.compile(r"\bMRN-?\d{4,}\b")),
    ("PHONE", re.compile(r"(?<![\w-])(?:\+1[ .-]?)?\(?\d{3}\)?[ .-]\d{3}[ .-]\d{4}\b")),
]


class PiiMasker:
    """Masks every known PII value (longest first) and pattern-shaped PII in a text."""

    def __init__(self, values: Mapping[str, str] | None = None, patterns: bool = True) -> None:
        # Values of one or two characters would mask every such letter/number anywhere.
        self.values = {v: lab for v, lab in (values or {}).items() if v and len(v.strip()) >= 3}
        self.patterns = patterns
        if self.values:
            alts = sorted(self.values, key=len, reverse=True)
            self._re: re.Pattern[str] | None = re.compile("|".join(re.escape(v) for v in alts))
        else:
            self._re = None

    def __len__(self) -> int:
        return len(self.values)

    def mask(self, text: str) -> str:
        if not isinstance(text, str) or not text:
            return text
        if self._re is not None:
            text = self._re.sub(lambda m: mask_pii(m.group(0), self.values[m.group(0)]), text)
        if self.patterns:
            for label, pat in _PATTERNS:
                text = pat.sub(lambda m, lab=label: mask_pii(m.group(0), lab) if MASK not in m.group(0) else m.group(0), text)
        return text

    __call__ = mask


def mask_text_values(text: str, values: Mapping[str, str], patterns: bool = True) -> str:
    """``text`` with every occurrence of a known PII value (value → label) masked."""
    return PiiMasker(values, patterns=patterns).mask(text)
