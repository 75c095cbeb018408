"""Texts as lists of segments, so ground-truth offsets are exact by construction.

A document is built as a list of ``(text, label)`` segments: ``label`` is a
Presidio entity name for a PII value and ``None`` for the words around it.
Offsets are only computed at the very end (:func:`assemble`), after every
rewrite (lower-casing, typos, quoting a previous e-mail) has been applied to
the segments themselves, so a span can never drift from its value.

Templates are plain strings with ``{slot}`` fields; a resolver maps each slot
name to ``(value, label or None)``.
"""

from __future__ import annotations

import functools
import json
import os
import re
from pathlib import Path
from typing import Any, Callable, Iterable

from .formats import Rng

Seg = tuple[str, "str | None"]

# Presidio's entity names (presidio-analyzer 2.2), the only labels used.
PRESIDIO_LABELS: tuple[str, ...] = (
    "PERSON", "EMAIL_ADDRESS", "PHONE_NUMBER", "LOCATION", "DATE_TIME", "CREDIT_CARD",
    "IBAN_CODE", "IP_ADDRESS", "US_SSN", "US_BANK_NUMBER", "US_DRIVER_LICENSE",
    "US_PASSPORT", "UK_NHS", "URL", "NRP", "ORGANIZATION", "MEDICAL_LICENSE", "CRYPTO",
)

_SLOT = re.compile(r"\{([A-Za-z0-9_.]+)\}")


class Template:
    """A parsed template: alternating literal strings and slot names."""

    __slots__ = ("parts", "source", "name")

    def __init__(self, source: str, name: str = "") -> None:
        self.source = source
        self.name = name
        self.parts: list[tuple[bool, str]] = []  # (is_slot, text)
        pos = 0
        for m in _SLOT.finditer(source):
            if m.start() > pos:
                self.parts.append((False, source[pos : m.start()]))
            self.parts.append((True, m.group(1)))
            pos = m.end()
        if pos < len(source):
            self.parts.append((False, source[pos:]))

    def slots(self) -> list[str]:
        return [t for is_slot, t in self.parts if is_slot]

    def render(self, resolve: Callable[[str], tuple[str, "str | None"]]) -> list[Seg]:
        segs: list[Seg] = []
        for is_slot, text in self.parts:
            if is_slot:
                value, label = resolve(text)
                segs.append((value, label))
            else:
                # "... at Acme Inc." + "." would print two full stops.
                if text.startswith(".") and segs and segs[-1][1] and segs[-1][0].endswith("."):
                    text = text[1:]
                segs.append((text, None))
        return segs


@functools.lru_cache(maxsize=None)
def tpl(source: str) -> Template:
    """The parsed template of ``source`` (parsed once, then cached)."""
    return Template(source)


def assemble(segs: Iterable[Seg]) -> tuple[str, list[list[Any]]]:
    """``(text, spans)`` of the segments, with surrounding whitespace trimmed
    (the corpus loader strips texts; offsets must survive that)."""
    parts: list[str] = []
    spans: list[list[Any]] = []
    pos = 0
    for text, label in segs:
        if not text:
            continue
        if label is not None:
            assert text == text.strip(), f"entity value with outer whitespace: {text!r}"
            spans.append([pos, pos + len(text), label])
        parts.append(text)
        pos += len(text)
    full = "".join(parts)
    lead = len(full) - len(full.lstrip())
    text = full.strip()
    spans = [[s - lead, e - lead, lab] for s, e, lab in spans]
    assert all(0 <= s < e <= len(text) for s, e, _ in spans)
    return text, spans


def lit(text: str) -> Seg:
    return (text, None)


# ------------------------------------------------------------ casual rewrites

_EMOJI = ["😂", "🙏", "👍", "😅", "🎉", "❤️", "🙈", "😬", "🤞", "😭", "🔥", "👀", "🥲", "✌️"]
_ABBREV = [(re.compile(pat), rep) for pat, rep in [
    (r"\bplease\b", "pls"), (r"\bthanks\b", "thx"), (r"\byou\b", "u"), (r"\bare\b", "r"),
    (r"\bbecause\b", "bc"), (r"\bto be honest\b", "tbh"), (r"\bokay\b", "ok"), (r"\bpeople\b", "ppl")]]
_PUNCT = re.compile(r"[.,;!?']")
_WORD = re.compile(r"[A-Za-zÀ-ÿ]+")


def _typo(word: str, rng: Rng) -> str:
    if len(word) < 4 or not word.isalpha():
        return word
    i = rng.int(1, len(word) - 2)
    kind = rng.int(0, 2)
    if kind == 0:  # swap two neighbours
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    if kind == 1:  # drop a letter
        return word[:i] + word[i + 1 :]
    return word[:i] + word[i] + word[i:]  # double a letter


def casualize(segs: list[Seg], rng: Rng, *, typo_rate: float = 0.04, lower_names: float = 0.5,
              emoji_rate: float = 0.5, strip_punct: float = 0.7) -> list[Seg]:
    """Instant-message style: lower case, abbreviations, typos, no
    punctuation, emoji.  Only the words *around* entities get typos and lose
    punctuation; entity values are at most lower-cased (people type names
    in lower case; they do not mistype a number they copy)."""
    drop_punct = rng.chance(strip_punct)
    out: list[Seg] = []
    for text, label in segs:
        if label is None:
            t = text.lower()
            for pat, rep in _ABBREV:
                if rng.chance(0.5):
                    t = pat.sub(rep, t)
            if drop_punct:
                t = _PUNCT.sub("", t)
            # About typo_rate typos per word, drawn per segment (one rng draw
            # per segment instead of one per word; at most one typo each).
            words = list(_WORD.finditer(t))
            if words and rng.chance(1 - (1 - typo_rate) ** len(words)):
                m = rng.pick(words)
                t = t[: m.start()] + _typo(m.group(0), rng) + t[m.end() :]
            out.append((t, None))
        elif label in ("PERSON", "LOCATION", "ORGANIZATION", "NRP") and rng.chance(lower_names):
            low = text.lower()
            # str.lower() may change the length of a few characters (e.g. U+0130);
            # keep the original then, so offsets stay exact.
            out.append((low if len(low) == len(text) else text, label))
        else:
            out.append((text, label))
    if rng.chance(emoji_rate):
        out.append((" " + rng.pick(_EMOJI) * rng.int(1, 3), None))
    if rng.chance(emoji_rate / 3) and out and out[0][1] is None:
        out.insert(0, (rng.pick(_EMOJI) + " ", None))
    return out


def quote(segs: list[Seg], prefix: str = "> ") -> list[Seg]:
    """The segments as an e-mail quote: every line prefixed with ``prefix``."""
    out: list[Seg] = [(prefix, None)]
    for text, label in segs:
        if label is None:
            out.append((text.replace("\n", "\n" + prefix), None))
        else:
            assert "\n" not in text
            out.append((text, label))
    return out


# -------------------------------------------------------------------- output


def make_record(segs: list[Seg], meta: dict[str, Any], max_entities: int | None = None) -> dict[str, Any]:
    text, spans = assemble(segs)
    if max_entities is not None:
        assert len(spans) <= max_entities, (len(spans), text)
    return {"text": text, "pii": spans, "meta": meta}


def write_jsonl(records: Iterable[dict[str, Any]], path: str | os.PathLike[str],
                top_level: tuple[str, ...] = ()) -> Path:
    """Write records as JSON lines (the format ``privleak`` reads).

    ``top_level`` names meta keys copied to the top level of each line as
    well (e.g. ``author`` for ``--group-field author``).  Keys are written in
    a fixed order and without ASCII escaping, so the same records always give
    the same bytes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        for rec in records:
            obj: dict[str, Any] = {"text": rec["text"]}
            for key in top_level:
                obj[key] = rec["meta"].get(key)
            obj["pii"] = rec["pii"]
            obj["meta"] = rec["meta"]
            fh.write(json.dumps(obj, ensure_ascii=False))
            fh.write("\n")
    return path
