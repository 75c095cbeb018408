"""The canary tripwire: known secrets never leave, whatever their separators.

Each protected value becomes a *key*:

* numbers (canary secrets with digits, SSN / PHONE / MRN values, or any
  value that is mostly digits) are keyed by their digits only, and found
  anywhere inside a run of digit groups of the output joined by short
  separators (``376-45-8448``, ``376 45 8448``, ``(376) 458.448``,
  ``x376458448y`` all match; a run broken by a letter or a long gap does not);
* other values are keyed by their case-folded words (letters/digits runs),
  and found as the same word sequence in the output with any punctuation or
  spacing between the words (``Ann Lee`` matches ``ann-lee``, ``ANN  LEE``;
  not ``Annlee``).

Only keyed hashes are stored (8-byte BLAKE2b with a random per-index salt),
never the values, so the index file does not list the secrets in plain
text. It is NOT a protection against an attacker who holds the file: a
9-digit SSN space can be searched exhaustively. Treat the index as
sensitive.

What it does not catch: values the model rewrites (digits spelled out as
words, a name in a different order), or inventory values below the minimum
length (single-word names, short numbers), which would match ordinary text
too often to block on.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ...core.normalise import is_digit_label
from ...core.verbatim_index import fold_case

_DIGIT_RUN = re.compile(r"[0-9]+")
_WORD = re.compile(r"[^\W_]+")
_SEP = re.compile(r"[\s\-.()+/_:]{1,3}")  # what may join the digit groups of one number
#: Inventory labels guarded by default (DOB alone matches too many ordinary dates to block on).
DEFAULT_INVENTORY_LABELS: tuple[str, ...] = ("NAME", "EMAIL", "SSN", "PHONE", "ADDRESS", "MRN")


@dataclass(frozen=True)
class TripHit:
    start: int
    end: int
    label: str  # CANARY for canary secrets, else the inventory value's PII label


def _is_numeric(label: str, value: str) -> bool:
    digits = sum("0" <= ch <= "9" for ch in value)
    alnum = sum(ch.isalnum() for ch in value)
    return digits >= 4 and (is_digit_label(label) or digits * 2 >= alnum)


class Tripwire:
    """Hashed keys of protected values; :meth:`scan` finds them in an output."""

    def __init__(self, salt: bytes, digits: dict[int, dict[int, str]], words: dict[int, dict[int, str]],
                 firsts: set[int] | None = None) -> None:
        self.salt = bytes(salt)
        self.digits = digits  # number of digits -> {hash: label}
        self.words = words  # number of words -> {hash: label}
        # Hashes of the first word of every word key: only windows starting with
        # one are hashed in full (one hash per output word instead of one per word and length).
        self.firsts: set[int] = set(firsts or ())

    def _h(self, kind: str, key: str) -> int:
        d = hashlib.blake2b(f"{kind}:{key}".encode("utf-8", "surrogatepass"), digest_size=8, key=self.salt)
        return int.from_bytes(d.digest(), "big")

    # ------------------------------------------------------------- build
    @classmethod
    def build(cls, canary_secrets: Iterable[str] = (), inventory: Iterable[tuple[str, str]] = (),
              min_digits: int = 6, min_words: int = 2, salt: bytes | None = None) -> Tripwire:
        """Key every canary secret (any length ≥ 1 word or ≥ 4 digits) and every
        inventory ``(label, value)`` with at least ``min_digits`` digits (numbers)
        or ``min_words`` words (text)."""
        tw = cls(salt if salt is not None else os.urandom(16), {}, {})
        for secret in canary_secrets:
            tw._add("CANARY", secret, 4, 1)
        for label, value in inventory:
            tw._add(str(label), value, min_digits, min_words)
        return tw

    def _add(self, label: str, value: str, min_digits: int, min_words: int) -> None:
        if _is_numeric(label, value):
            key = "".join(ch for ch in value if "0" <= ch <= "9")
            if len(key) >= min_digits:
                self.digits.setdefault(len(key), {}).setdefault(self._h("d", key), label)
                return
            if label != "CANARY":
                return
        words = _WORD.findall(fold_case(value))
        if len(words) >= min_words:
            self.words.setdefault(len(words), {}).setdefault(self._h("w", " ".join(words)), label)
            self.firsts.add(self._h("f", words[0]))

    def __len__(self) -> int:
        return sum(map(len, self.digits.values())) + sum(map(len, self.words.values()))

    # -------------------------------------------------------------- scan
    def scan(self, text: str) -> list[TripHit]:
        """Every occurrence of a protected value in ``text`` (spans may overlap)."""
        hits: list[TripHit] = []
        if self.digits:
            for chain, pos in _digit_chains(text):
                for n, table in self.digits.items():
                    for i in range(len(chain) - n + 1):
                        label = table.get(self._h("d", chain[i : i + n]))
                        if label is not None:
                            hits.append(TripHit(pos[i], pos[i + n - 1] + 1, label))
        if self.words:
            toks = [(m.start(), m.end(), m.group()) for m in _WORD.finditer(fold_case(text))]
            cache: dict[str, bool] = {}
            for i, tok in enumerate(toks):
                first = cache.get(tok[2])
                if first is None:
                    first = cache[tok[2]] = self._h("f", tok[2]) in self.firsts
                if not first:
                    continue
                for n, table in self.words.items():
                    if i + n <= len(toks):
                        label = table.get(self._h("w", " ".join(t[2] for t in toks[i : i + n])))
                        if label is not None:
                            hits.append(TripHit(tok[0], toks[i + n - 1][1], label))
        return hits

    # ----------------------------------------------------------- storage
    def to_json(self) -> dict[str, Any]:
        def table(t: dict[int, dict[int, str]]) -> dict[str, dict[str, str]]:
            return {str(n): {f"{h:016x}": lab for h, lab in sorted(d.items())} for n, d in sorted(t.items())}

        return {"salt": self.salt.hex(), "digits": table(self.digits), "words": table(self.words),
                "firsts": sorted(f"{h:016x}" for h in self.firsts)}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Tripwire:
        def table(t: dict[str, dict[str, str]]) -> dict[int, dict[int, str]]:
            return {int(n): {int(h, 16): str(lab) for h, lab in d.items()} for n, d in t.items()}

        return cls(bytes.fromhex(obj["salt"]), table(obj.get("digits", {})), table(obj.get("words", {})),
                   {int(h, 16) for h in obj.get("firsts", [])})


def _digit_chains(text: str) -> list[tuple[str, list[int]]]:
    """Digit runs joined across short separators: (digits, position in ``text`` of each digit)."""
    chains: list[tuple[str, list[int]]] = []
    digits: list[str] = []
    pos: list[int] = []
    prev_end = -1
    for m in _DIGIT_RUN.finditer(text):
        if digits and not _SEP.fullmatch(text, prev_end, m.start()):
            chains.append(("".join(digits), pos))
            digits, pos = [], []
        digits.append(m.group())
        pos.extend(range(m.start(), m.end()))
        prev_end = m.end()
    if digits:
        chains.append(("".join(digits), pos))
    return chains
