"""Which arm to release when arms cannot be told apart: a stated tie rule.

The recommendation used to be "the highest utility recovered G among the arms
near chance". With G estimated on a few hundred held-out texts, two arms a
few hundredths apart swap places under a reseed, and so did the
recommendation (dp-1 at G = 0.34 in one run, dp-8 at G = 0.61 in the next,
issue 26). :func:`pick_release` makes the choice stable:

1. **eligible**: the arms whose leakage tests all find nothing (near chance);
   an arm whose verdict rests on a test at level α can still flip, and the
   report says which leak findings decided;
2. **within noise of the best**: the eligible arm with the highest G is the
   best; every eligible arm whose G interval overlaps the best's interval
   (hi ≥ best's lo) cannot be told apart from it. Overlapping 95 % intervals
   is a conservative criterion (two arms can differ significantly and still
   overlap a little): it errs towards calling arms tied, which is the safe
   side for a rule that then picks the more private one;
3. **tie rule**: among those, the smallest accountant ε (an arm without a DP
   guarantee counts as ε = ∞), then the name — never the third decimal of G.

Pure: everything it needs is passed in; ``Policy.describe`` states the rule.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

RULE = ("arms whose utility intervals overlap the best's are within noise of it; among them the smallest "
        "accountant ε is recommended (no DP guarantee counts as ε = ∞), then the first by name")


@dataclass(frozen=True)
class ReleaseCandidate:
    """One arm as the rule sees it. ``utility``: G (higher is better); ``utility_ci``: its 95 %
    interval (None: only exactly equal G ties); ``epsilon``: the accountant's ε (None: no DP
    guarantee); ``near_chance``: every leakage test found nothing; ``shown``: how the utility reads in the
    text (default "G = …"; an audit without a best reference ranks by held-out perplexity, negated into
    ``utility``, and must say so — never print it as G)."""

    name: str
    utility: float
    utility_ci: tuple[float, float] | None
    epsilon: float | None
    near_chance: bool
    shown: str | None = None
    unit: str | None = None  # of ``epsilon``: record, person or client (the text names it)

    def reads(self) -> str:
        return self.shown if self.shown is not None else f"G = {self.utility:.2f}"

    def __post_init__(self) -> None:
        if not math.isfinite(self.utility):
            raise ValueError(f"{self.name}: utility must be finite, got {self.utility}")
        if self.utility_ci is not None:
            lo, hi = self.utility_ci
            if not lo <= self.utility <= hi:
                raise ValueError(f"{self.name}: interval {self.utility_ci} does not contain {self.utility}")
        if self.epsilon is not None and self.epsilon < 0:
            raise ValueError(f"{self.name}: ε must be ≥ 0, got {self.epsilon}")


@dataclass(frozen=True)
class ReleaseChoice:
    """:func:`pick_release`'s answer. ``chosen``: the arm to release (None: no arm is near chance);
    ``best_utility``: the eligible arm with the highest G; ``tied``: the eligible arms within noise
    of it (``best_utility`` included), in the rule's order; ``leaking_better``: arms with a higher
    G than the chosen one that are not near chance; ``text``: the choice in one or two sentences."""

    chosen: str | None
    best_utility: str | None
    tied: list[str]
    leaking_better: list[str]
    rule: str = RULE
    text: str = ""


def _overlaps(a: ReleaseCandidate, best: ReleaseCandidate) -> bool:
    if a.utility_ci is None or best.utility_ci is None:
        return a.utility == best.utility
    return a.utility_ci[1] >= best.utility_ci[0] and best.utility_ci[1] >= a.utility_ci[0]


def _eps_key(c: ReleaseCandidate) -> float:
    return math.inf if c.epsilon is None else c.epsilon


def pick_release(candidates: Sequence[ReleaseCandidate]) -> ReleaseChoice:
    """The arm to release by the stated rule (module docstring). The choice never looks at how far
    apart tied arms' G are; "best by utility" (exact ties: smaller ε, then name) only anchors the
    interval it is compared with."""
    names = [c.name for c in candidates]
    if len(set(names)) != len(names):
        raise ValueError(f"arm names must be unique, got {names}")
    eligible = [c for c in candidates if c.near_chance]
    if not eligible:
        return ReleaseChoice(chosen=None, best_utility=None, tied=[], leaking_better=[],
                             text="No arm is near chance on every leakage test; none is recommended for release.")
    best = min(eligible, key=lambda c: (-c.utility, _eps_key(c), c.name))
    tied = sorted((c for c in eligible if _overlaps(c, best)), key=lambda c: (_eps_key(c), c.name))
    chosen = tied[0]
    leaking = sorted((c for c in candidates if not c.near_chance and c.utility > chosen.utility),
                     key=lambda c: -c.utility)
    if len(tied) == 1:
        text = f"{chosen.name} has the highest utility ({chosen.reads()}) among the arms near chance."
    else:
        others = ", ".join(c.name for c in tied[1:])
        eps = ("no DP guarantee" if chosen.epsilon is None
               else f"ε = {chosen.epsilon:g}" + (f" per {chosen.unit}" if chosen.unit else ""))
        text = (f"{chosen.name} ({eps}, {chosen.reads()}) and {others} are near chance and within noise of "
                f"the best utility ({best.name}, {best.reads()}): their utility intervals overlap, so the tie rule "
                f"chose {chosen.name} — the smallest ε among them, then the name.")
    return ReleaseChoice(chosen=chosen.name, best_utility=best.name, tied=[c.name for c in tied],
                         leaking_better=[c.name for c in leaking], text=text)
