"""The guard arm's block in ``results.json``: what the guard did to each attack's outputs, and what it costs on
benign output (measured by :mod:`.guard_costs`)."""

from __future__ import annotations

from typing import Any, Literal

from ..core.stats import Rate
from ..core.typed import ArmDetails, Typed


class Interventions(Typed):
    """What the guard did to one attack's outputs."""

    outputs_checked: int
    outputs_intervened: int
    outputs_blocked: int


class FalsePositives(Typed):
    """Guard interventions on benign output (continuations with no member value or window)."""

    n_generated: int
    n_benign: int
    excluded_member_pii: int = 0
    excluded_member_window: int = 0
    shared_boilerplate: dict[str, Rate] = {}
    overall: Rate
    blocked: Rate
    by_reason: dict[str, Rate]
    by_source: dict[str, Rate] = {}


class GuardExample(Typed):
    reasons: list[str]
    allowed: bool
    text: str  # masked


class GuardReport(ArmDetails):
    """The guard arm's block: interventions per attack, the cost on benign output, the guard's description."""

    kind: Literal["guard"] = "guard"
    interventions: dict[str, Interventions]
    false_positives: FalsePositives
    false_positive_examples: list[GuardExample]
    guard: dict[str, Any]  # the guard's own description (thresholds, index sizes, policy)
    settings: dict[str, Any]
