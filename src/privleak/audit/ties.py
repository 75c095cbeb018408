"""Which arm to release when arms cannot be told apart: a stated tie rule that survives training noise.

The recommendation used to be "the highest utility recovered G among the arms near chance". With G
estimated on a few hundred held-out texts, and each arm trained once, two arms a few hundredths apart
swap places under a reseed, and so did the recommendation (dp-1 at G = 0.34 in one run, dp-8 at G = 0.61
in the next, issue 26). :func:`pick_release` makes the choice stable:

1. **eligible**: the arms shown near chance (every attack within its margin of the control by two
   one-sided tests, :mod:`privleak.audit.verdicts`) — one rule, on confidence bounds: a leakage figure whose
   interval reaches past its margin makes an arm ineligible, whether or not a test found it leaking;
2. **within noise of the best**: the eligible arm with the highest G is the best; an eligible arm is tied
   with it when its G is within ``utility_margin`` of the best's (a larger ε must buy more utility than
   that), or when the best is not shown better: G_best − G ≤ z_{1−α} · √(se_best² + se²). Each se holds the
   held-out texts' variance (G's paired-bootstrap interval) and the training variance: the spread of G over
   the extra training seeds the audit ran for the arm (``recommendation.seeds``; G is then their mean), else a
   stated seed standard deviation (:attr:`~privleak.attacks.base.Policy.g_seed_sd`), else none — and the
   choice says which;
3. **tie rule**: among those, the smallest ε on *one* unit — per person (at its δ) when every tied arm
   with a DP guarantee states one, else per record, and the text names it (a record-level ε of 8, a
   person-level ε of 8 and a client-level ε of 8 are three different promises); an arm without a DP
   guarantee counts as ε = ∞; then the name — never the third decimal of G.

Pure: everything it needs is passed in; ``Policy.describe`` states the rule.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy.stats import norm

RULE = ("only arms shown near chance are eligible; those whose utility recovered G is within the utility margin of "
        "the best's, or not shown below it (held-out texts and training seeds), are tied; among them the smallest "
        "ε on one unit — per person where every tied DP arm states one, else per record — is recommended (no DP "
        "guarantee counts as ε = ∞), then the first by name")

#: z of a 95 % two-sided interval: G's held-out interval is read back into a standard error with it.
Z95 = 1.959963984540054


@dataclass(frozen=True)
class ReleaseCandidate:
    """One arm as the rule sees it.

    ``utility``: G (higher is better) — the mean over the training seeds measured when there are several;
    ``utility_ci``: the audited model's 95 % held-out interval (None: no held-out spread known);
    ``epsilon``: the ε on the comparison unit (None: no DP guarantee); ``near_chance``: shown near chance;
    ``seed_sd``: the standard deviation of G over training seeds (measured or assumed; None: not known);
    ``seeds``: how many trained models ``utility`` averages; ``shown``: how the utility reads in the text
    (default "G = …"; an audit without a best reference ranks by held-out perplexity, negated into
    ``utility``, and must say so — never print it as G)."""

    name: str
    utility: float
    utility_ci: tuple[float, float] | None
    epsilon: float | None
    near_chance: bool
    seed_sd: float | None = None
    seeds: int = 1
    shown: str | None = None

    def reads(self) -> str:
        return self.shown if self.shown is not None else f"G = {self.utility:.2f}"

    def __post_init__(self) -> None:
        if not math.isfinite(self.utility):
            raise ValueError(f"{self.name}: utility must be finite, got {self.utility}")
        if self.utility_ci is not None:
            lo, hi = self.utility_ci
            if self.seeds == 1 and not lo <= self.utility <= hi:
                raise ValueError(f"{self.name}: interval {self.utility_ci} does not contain {self.utility}")
        if self.epsilon is not None and self.epsilon < 0:
            raise ValueError(f"{self.name}: ε must be ≥ 0, got {self.epsilon}")
        if self.seed_sd is not None and not self.seed_sd >= 0:
            raise ValueError(f"{self.name}: seed sd must be ≥ 0, got {self.seed_sd}")
        if self.seeds < 1:
            raise ValueError(f"{self.name}: at least one trained model, got {self.seeds}")

    @property
    def se(self) -> float | None:
        """G's standard error: held-out (the 95 % interval's half-width / 1.96) and training seeds (sd/√seeds)
        combined; None when neither is known."""
        parts = []
        if self.utility_ci is not None:
            parts.append((self.utility_ci[1] - self.utility_ci[0]) / (2 * Z95))
        if self.seed_sd is not None:
            parts.append(self.seed_sd / math.sqrt(self.seeds))
        return math.sqrt(sum(x * x for x in parts)) if parts else None


@dataclass(frozen=True)
class ReleaseChoice:
    """:func:`pick_release`'s answer. ``chosen``: the arm to release (None: no arm is eligible);
    ``best_utility``: the eligible arm with the highest G; ``tied``: the eligible arms within noise
    of it (``best_utility`` included), in the rule's order; ``leaking_better``: arms with a higher
    G than the chosen one that are not eligible; ``text``: the choice in one or two sentences."""

    chosen: str | None
    best_utility: str | None
    tied: list[str]
    leaking_better: list[str]
    rule: str = RULE
    text: str = ""


def within_noise(a: ReleaseCandidate, best: ReleaseCandidate, utility_margin: float = 0.0,
                 alpha: float = 0.05) -> bool:
    """Whether ``a`` cannot be told from ``best`` on utility: G_best − G_a ≤ ``utility_margin``, or the best is
    not shown better at level α, one-sided: G_best − G_a ≤ z_{1−α} · √(se_best² + se_a²). Without standard
    errors only the margin (or exact equality) ties."""
    gap = best.utility - a.utility
    if gap <= utility_margin:
        return True
    se_a, se_b = a.se, best.se
    if se_a is None or se_b is None:
        return False
    return gap <= float(norm.isf(alpha)) * math.hypot(se_a, se_b)


def _eps_key(c: ReleaseCandidate) -> float:
    return math.inf if c.epsilon is None else c.epsilon


def _eps_text(c: ReleaseCandidate, unit: str) -> str:
    return "no DP guarantee" if c.epsilon is None else f"ε = {c.epsilon:.3g}{unit}"


def pick_release(candidates: Sequence[ReleaseCandidate], utility_margin: float = 0.0, alpha: float = 0.05,
                 unit: str = "") -> ReleaseChoice:
    """The arm to release by the stated rule (module docstring). The choice never looks at how far
    apart tied arms' G are; "best by utility" (exact ties: smaller ε, then name) only anchors the
    comparison. ``unit``: the words after each ε in the text (" per person at δ = 1e-05")."""
    names = [c.name for c in candidates]
    if len(set(names)) != len(names):
        raise ValueError(f"arm names must be unique, got {names}")
    eligible = [c for c in candidates if c.near_chance]
    if not eligible:
        return ReleaseChoice(chosen=None, best_utility=None, tied=[], leaking_better=[],
                             text="No arm is shown near chance on every leakage test; none is recommended for release.")
    best = min(eligible, key=lambda c: (-c.utility, _eps_key(c), c.name))
    tied = sorted((c for c in eligible if within_noise(c, best, utility_margin, alpha)),
                  key=lambda c: (_eps_key(c), c.name))
    chosen = tied[0]
    leaking = sorted((c for c in candidates if not c.near_chance and c.utility > chosen.utility),
                     key=lambda c: -c.utility)
    if len(tied) == 1:
        text = f"{chosen.name} has the highest utility ({chosen.reads()}) among the arms shown near chance."
    else:
        others = ", ".join(c.name for c in tied[1:])
        text = (f"{chosen.name} ({_eps_text(chosen, unit)}, {chosen.reads()}) and {others} are shown near chance "
                f"and within noise of the best utility ({best.name}, {best.reads()}): their G is within "
                f"{utility_margin:g} of it or not shown below it, so the tie rule chose {chosen.name} — the smallest ε"
                f"{unit.split(' at ')[0]} among them, then the name.")
    return ReleaseChoice(chosen=chosen.name, best_utility=best.name, tied=[c.name for c in tied],
                         leaking_better=[c.name for c in leaking], text=text)
