"""The record type every stage passes around, and its JSONL form.

A record is one training/evaluation text. ``pii`` holds exact ground-truth
spans ``(start, end, label)`` over ``text`` when they are known (synthetic
data), an empty list when the record is known to carry none, and ``None``
when nothing is known (user data before any tagging).

On disk (the run directory's ``splits/*.jsonl``) each line is::

    {"text": "...", "pii": [[start, end, "LABEL"], ...], "meta": {...}}

with ``pii`` null when unknown.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Iterable

from ..core.io import atomic_open
from ..core.jsonlimits import loads

# The 13 PHI fields of the synthetic clinical corpus.
PHI_LABELS: tuple[str, ...] = (
    "NAME",
    "EMAIL",
    "SSN",
    "PHONE",
    "ADDRESS",
    "DOB",
    "MRN",
    "CONDITION",
    "MEDICATION",
    "PROCEDURE",
    "BLOOD_PRESSURE",
    "HEIGHT",
    "WEIGHT",
)


@dataclass(frozen=True)
class PiiSpan:
    start: int
    end: int
    label: str

    def value(self, text: str) -> str:
        return text[self.start : self.end]


@dataclass
class Record:
    text: str
    pii: list[PiiSpan] | None = None
    # kind: "phi" (note about a synthetic patient), "generic" (no PHI),
    # "canary" (a planted secret), "user" (user data); plus free-form keys
    # such as person_id / canary_id.
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return str(self.meta.get("kind", "user"))

    @property
    def has_pii(self) -> bool:
        return bool(self.pii)

    def to_json(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "pii": None if self.pii is None else [[s.start, s.end, s.label] for s in self.pii],
            "meta": self.meta,
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> "Record":
        pii = obj.get("pii")
        spans = None if pii is None else [PiiSpan(int(s), int(e), str(lab)) for s, e, lab in pii]
        return cls(text=obj["text"], pii=spans, meta=dict(obj.get("meta") or {}))


def write_jsonl(path: str | os.PathLike[str], records: Iterable[Record]) -> None:
    """Write records atomically: a crash never leaves a half-written split."""
    with atomic_open(path) as fh:
        for rec in records:
            fh.write(json.dumps(rec.to_json(), ensure_ascii=False))
            fh.write("\n")


def read_jsonl(path: str | os.PathLike[str]) -> list[Record]:
    """Read records written by :func:`write_jsonl` (trusted, our own format)."""
    with open(path, encoding="utf-8") as fh:
        return [Record.from_json(loads(line)) for line in fh if line.strip()]
