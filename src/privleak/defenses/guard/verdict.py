"""What the guard returns: findings, the per-reason policy, and the verdict.

A :class:`Finding` names a span of the checked text, why it was flagged
(``pii``, ``verbatim`` or ``canary``), its label and the action the policy
gave it. It never carries the flagged value itself, so findings can be
logged, returned over HTTP and written to reports without leaking what they
point at.

Redaction uses the scrubber's mask format (``<LABEL>``, as
:class:`privleak.defenses.scrub.Scrubber` in ``mask`` mode writes it), so
guarded output and scrubbed training text look alike.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ...core.errors import UserError

Reason = Literal["pii", "verbatim", "canary"]
Action = Literal["block", "redact", "log", "off"]
REASONS: tuple[str, ...] = ("pii", "verbatim", "canary")
ACTIONS: tuple[str, ...] = ("block", "redact", "log", "off")
# When redaction spans overlap, the merged span is labelled like its longest
# member, ties going to the strongest reason.
_STRENGTH = {"canary": 0, "verbatim": 1, "pii": 2}


@dataclass(frozen=True)
class GuardPolicy:
    """What to do with each kind of finding.

    * ``block``: the output is refused (``Verdict.allowed`` is False); its
      redacted text still masks the span, for callers that show something;
    * ``redact``: the span is replaced by ``<LABEL>``, the output allowed;
    * ``log``: reported in the findings only, text unchanged;
    * ``off``: not checked at all (saves the PII scanner's time).
    """

    pii: str = "redact"
    verbatim: str = "block"
    canary: str = "block"

    def __post_init__(self) -> None:
        for reason in REASONS:
            action = getattr(self, reason)
            if action not in ACTIONS:
                raise UserError(f"guard policy {reason}={action!r}: use one of {', '.join(ACTIONS)}")

    def action(self, reason: str) -> str:
        return str(getattr(self, reason))

    @classmethod
    def parse(cls, text: str | None) -> GuardPolicy:
        """``"pii=redact,verbatim=block,canary=block"`` (any subset; the rest default)."""
        if not text:
            return cls()
        values: dict[str, str] = {}
        for part in text.split(","):
            if not part.strip():
                continue
            key, sep, val = part.partition("=")
            key, val = key.strip().lower(), val.strip().lower()
            if not sep or key not in REASONS:
                raise UserError(f"--policy {text}: '{part.strip()}' is not REASON=ACTION with REASON one of "
                                f"{', '.join(REASONS)}; e.g. pii=redact,verbatim=block,canary=block")
            values[key] = val
        return cls(**values)

    def to_json(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class Finding:
    """One flagged span ``[start, end)`` of the checked text (the value itself is never stored)."""

    reason: str  # pii | verbatim | canary
    label: str  # PII type (NAME, SSN, ...), VERBATIM, or CANARY
    start: int
    end: int
    action: str  # block | redact | log
    score: float | None = None  # PII detector confidence; None for exact matches

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Verdict:
    """The guard's decision on one output.

    ``allowed``: no finding had the ``block`` action. ``text``: the output
    with every ``redact`` and ``block`` span replaced by ``<LABEL>``.
    """

    allowed: bool
    text: str
    findings: tuple[Finding, ...] = field(default_factory=tuple)

    @property
    def intervened(self) -> bool:
        """Blocked or changed the text (``log``-only findings do not count)."""
        return any(f.action in ("block", "redact") for f in self.findings)

    def reasons(self, actions: tuple[str, ...] = ("block", "redact")) -> set[str]:
        """Reasons of the findings with one of ``actions``."""
        return {f.reason for f in self.findings if f.action in actions}

    def to_json(self) -> dict[str, Any]:
        return {"allowed": self.allowed, "text": self.text, "findings": [f.to_json() for f in self.findings]}


def mask_token(label: str) -> str:
    """The replacement for a redacted span: ``<LABEL>``, the scrubber's mask format."""
    return f"<{label}>"


def apply_findings(text: str, findings: list[Finding]) -> Verdict:
    """The verdict for ``text``: overlapping redact/block spans are merged, then replaced."""
    act = sorted((f for f in findings if f.action in ("block", "redact") and f.end > f.start),
                 key=lambda f: (f.start, -f.end))
    merged: list[list[Any]] = []  # [start, end, best finding]
    for f in act:
        if merged and f.start < merged[-1][1]:
            m = merged[-1]
            m[1] = max(m[1], f.end)
            if (m[2].start - m[2].end, _STRENGTH[m[2].reason]) > (f.start - f.end, _STRENGTH[f.reason]):
                m[2] = f
        else:
            merged.append([f.start, f.end, f])
    out, pos = [], 0
    for start, end, f in merged:
        out.append(text[pos:start])
        out.append(mask_token(f.label))
        pos = end
    out.append(text[pos:])
    allowed = not any(f.action == "block" for f in findings)
    ordered = tuple(sorted(findings, key=lambda f: (f.start, f.end, f.reason, f.label)))
    return Verdict(allowed=allowed, text="".join(out), findings=ordered)
