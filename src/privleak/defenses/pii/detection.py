"""One PII span found in a text, and the recognizers whose detections are guesses."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Detection:
    """One PII span found in a text: ``text[start:end]`` is the value."""

    start: int
    end: int
    label: str
    score: float
    source: str = ""
    # True when a checksum validated the value or a context word ("passport",
    # "account", "NHS") supported it: such a detection names its type more
    # reliably than a generic format (a phone-shaped NHS number is an NHS number).
    specific: bool = False
    # Characters between the supporting context word and the value (when
    # two types claim the same characters, the nearer cue wins: "SSN …; DL
    # No. 499489113" is a licence number).
    cue_distance: int = 1 << 30

    def value(self, text: str) -> str:
        return text[self.start : self.end]

    def __len__(self) -> int:
        return self.end - self.start


#: Recognizer names (a detection's ``source``) of the name and NRP lists.
NAME_LIST_SOURCE = "privleak_name_list"
NRP_LIST_SOURCE = "privleak_nrp_list"
NER_SOURCES = frozenset({"SpacyRecognizer"})
# Detections whose boundaries and labels are guesses (the NER's, the name
# list's): they give way to any pattern detection they overlap.
SOFT_SOURCES = NER_SOURCES | {NAME_LIST_SOURCE, NRP_LIST_SOURCE}
