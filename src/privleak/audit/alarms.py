""""DP guarantee violated": one decision over the whole audit, with a stated error rate.

An audit can test each DP arm's claim by several routes, each over many
attacks and thresholds. Raised per route at 95 % each, the alarm false-fires
far more often than 5 % (issue 26 measured 6–15.5 % for the ROC route alone
on exactly ε-DP mechanisms). Here every test is a p-value of one arm's claim,
and :func:`alarm_decision` splits α across them (Bonferroni), so

    P[any alarm | every arm is as private as its accountant claims] ≤ α

whatever the dependence between the tests (union bound).

Which routes may raise the alarm — only those valid for *one* trained model:

* ``one_run`` (alarm): Steinke, Nasr & Jagielski 2023 on the audit canaries,
  each inserted independently with probability ½. Their theorem bounds the
  count of correct guesses by a binomial for any (ε, δ)-DP training, however
  the model couples the canaries; the union over the fixed guess grid is paid
  inside the p-value (:func:`privleak.audit.one_run.one_run_p_value`). Each
  canary is one record and its own person, so the claim tested is the ε of
  one record (the lead passes the ε that holds for a canary's unit, e.g. the
  record ε of a federated arm or the person ε of a user-level one). It is
  also the most powerful route: random rare-word canaries are what a model
  memorises first (Panda et al. 2025).
* ``empirical_epsilon`` (diagnostic): the best membership attack's bound on a
  held-out half (:func:`privleak.audit.epsilon.empirical_epsilon`), tested
  against the ε of the units evaluated (group privacy for units of k
  records, :func:`privleak.audit.epsilon.group_privacy`, or a conversion the
  accountant supplies). Not an alarm: Clopper–Pearson counts many members of
  one model as independent trials, which DP does not give, and the data split
  is a fixed-size partition with matched strata, not independent coins, so
  Steinke et al.'s theorem does not cover it either.
* ``roc_band`` (diagnostic): the chosen attack's held-out ROC curve inside a
  simultaneous DKW band (:func:`privleak.audit.epsilon.roc_band_check`);
  same assumption, and it adds no power where the empirical ε has it.
* ``mu_gdp`` (diagnostic): Mahloujifar et al.'s μ-GDP test against the μ the
  DP-SGD run implies by the CLT — an approximation, not a claim.

Diagnostics form their own family at α (so what the report says about them
is also controlled, under their stated assumption), and never raise the alarm.
``tests/test_alarms.py`` simulates exactly ε-DP mechanisms (Laplace and
Gaussian scores, m = 1000 one-run canaries, n = 500 and 2000 members per side)
and counts every route as an audit would.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..core.stats import clopper_pearson
from .epsilon import RocBandCheck, epsilon_test_p_value, group_privacy, held_out_counts
from .one_run import gdp_p_value, one_run_p_value, steinke_epsilon

Route = Literal["one_run", "empirical_epsilon", "roc_band", "mu_gdp"]
#: The routes valid as alarms for one trained model (module docstring says why the others are not).
ALARM_ROUTES: tuple[Route, ...] = ("one_run",)
ROUTE_TITLES: dict[str, str] = {
    "one_run": "one-run canary test (Steinke et al. 2023)",
    "empirical_epsilon": "membership-attack ε bound on a held-out half",
    "roc_band": "held-out ROC curve in a DKW band",
    "mu_gdp": "μ-GDP test of the audit canaries (Mahloujifar et al. 2024)",
}


@dataclass(frozen=True)
class AlarmTest:
    """One arm's claim tested by one route: ``p_value`` of the claim (small: evidence against it).

    ``claim``: what is tested, in words; ``alarm``: whether this test may raise "DP guarantee
    violated" (only the routes of :data:`ALARM_ROUTES`); ``bound``: the route's lower bound at a
    given level, for display beside the claim (rejected at level a ⇔ bound(a) > claimed value);
    ``detail``: the counts behind it."""

    arm: str
    route: Route
    p_value: float
    claim: str
    alarm: bool
    bound: Callable[[float], float] | None = None
    detail: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0.0 <= self.p_value <= 1.0 or math.isnan(self.p_value):
            raise ValueError(f"p-value must be in [0, 1], got {self.p_value}")
        if self.alarm and self.route not in ALARM_ROUTES:
            raise ValueError(f"route {self.route!r} is not valid as an alarm (only {', '.join(ALARM_ROUTES)})")


@dataclass(frozen=True)
class AlarmOutcome:
    """A test at its allotted ``level``: ``rejected`` when p ≤ level."""

    test: AlarmTest
    level: float
    rejected: bool

    @property
    def bound_at_level(self) -> float | None:
        """The route's lower bound at the allotted level (what the report shows beside the claim;
        None when the route has none). Computed on demand: a bisection per guess count."""
        return self.test.bound(self.level) if self.test.bound else None


@dataclass(frozen=True)
class AlarmDecision:
    """The audit's alarm: ``alarms`` (the family that may raise it, family-wise ≤ ``alpha``),
    ``diagnostics`` (their own family at ``alpha``, never an alarm) and ``statement``, the one
    sentence the report prints about the error rate."""

    alpha: float
    alarms: list[AlarmOutcome]
    diagnostics: list[AlarmOutcome]
    statement: str

    @property
    def violated(self) -> list[str]:
        """Arms whose claim an alarm test rejects, in test order."""
        out: list[str] = []
        for o in self.alarms:
            if o.rejected and o.test.arm not in out:
                out.append(o.test.arm)
        return out

    def for_arm(self, arm: str) -> list[AlarmOutcome]:
        return [o for o in self.alarms + self.diagnostics if o.test.arm == arm]


def allot_alpha(tests: Sequence[AlarmTest], alpha: float) -> list[float]:
    """Per-test levels summing to ``alpha``: α split equally across the arms, then equally across
    each arm's tests (Bonferroni, weighted so an arm with more routes does not take more of α).
    Any test's own selections (guess counts, attacks, thresholds) are paid inside its p-value."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    per_arm: dict[str, int] = {}
    for t in tests:
        per_arm[t.arm] = per_arm.get(t.arm, 0) + 1
    return [alpha / len(per_arm) / per_arm[t.arm] for t in tests]


def _outcomes(tests: Sequence[AlarmTest], alpha: float) -> list[AlarmOutcome]:
    levels = allot_alpha(tests, alpha) if tests else []
    return [AlarmOutcome(test=t, level=a, rejected=t.p_value <= a) for t, a in zip(tests, levels)]


def alarm_decision(tests: Sequence[AlarmTest], alpha: float = 0.05) -> AlarmDecision:
    """Decide "DP guarantee violated" for every arm at once, family-wise false-alarm rate ≤ ``alpha``.

    The tests with ``alarm=True`` are one family: test i is rejected when p_i ≤ α_i
    (:func:`allot_alpha`, Σ α_i = α), so if every arm's claim holds, P[any rejection] ≤ Σ α_i = α by
    the union bound, whatever the dependence between tests. The diagnostics are a second family,
    also at α, reported but never raising the alarm.
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    alarms = _outcomes([t for t in tests if t.alarm], alpha)
    diagnostics = _outcomes([t for t in tests if not t.alarm], alpha)
    return AlarmDecision(alpha=alpha, alarms=alarms, diagnostics=diagnostics, statement=_statement(alarms, alpha))


def _statement(alarms: list[AlarmOutcome], alpha: float) -> str:
    if not alarms:
        return ("No test in this audit can raise \"DP guarantee violated\" (no DP arm has one-run audit canaries): "
                "a broken DP step would go unnoticed; the membership-based figures are diagnostics only.")
    arms = sorted({o.test.arm for o in alarms})
    routes = sorted({o.test.route for o in alarms})
    levels = sorted({round(o.level, 6) for o in alarms})
    level = f"{levels[0]:.3g}" if len(levels) == 1 else f"{levels[0]:.3g}–{levels[-1]:.3g}"
    return (f"\"DP guarantee violated\" is raised only by the {' and '.join(ROUTE_TITLES[r] for r in routes)}, at level "
            f"{level} for each of the {len(arms)} DP arm{'s' if len(arms) != 1 else ''} (α = {alpha:g} split across "
            f"them; each test pays for its own guess counts): if every arm is as private as its accountant claims, "
            f"this audit raises a false alarm with probability at most {100 * alpha:g} %.")


# ----------------------------------------------------------------------------- the routes

def one_run_alarm_test(arm: str, m: int, counts: Sequence[tuple[int, int]], epsilon: float,
                       delta: float) -> AlarmTest:
    """The alarm route: the audit canaries' (guesses, correct) per candidate of the fixed grid
    (``OneRunEpsilon.candidates``) against the claimed (ε, δ) of one canary record.

    ``epsilon``: the ε that holds for a canary (each is one record and its own person): the record ε
    (``Privacy.epsilon_per_record``) for record-level and federated arms, the person ε for a
    user-level arm. ``bound(a)``: the Steinke ε lower bound at level a (max over the grid at a/|grid|)."""
    counts = [(int(r), int(v)) for r, v in counts]
    p = one_run_p_value(m, counts, epsilon, delta)

    def bound(level: float) -> float:
        return max(steinke_epsilon(m, r, v, level / len(counts), delta) for r, v in counts)

    return AlarmTest(arm=arm, route="one_run", p_value=p, alarm=True, bound=bound,
                     claim=f"(ε = {epsilon:.3g}, δ = {delta:.2g})-DP for each audit canary",
                     detail={"m": m, "counts": counts, "epsilon": epsilon, "delta": delta})


def unit_claim(epsilon: float, delta: float, unit_records: int,
               unit_privacy: Callable[[int], tuple[float, float]] | None = None) -> tuple[float, float]:
    """The (ε, δ) that holds for a unit of ``unit_records`` records under a record-level (ε, δ) claim:
    ``unit_privacy(k)`` when the accountant supplies a conversion (e.g. person-level accounting),
    else group privacy (kε, k·e^{(k−1)ε}·δ). k = 1: the record's own claim."""
    if unit_records < 1:
        raise ValueError(f"a unit has at least one record, got {unit_records}")
    if unit_privacy is not None:
        eps_k, delta_k = unit_privacy(unit_records)
        return float(eps_k), float(min(1.0, delta_k))
    return group_privacy(epsilon, delta, unit_records)


def unit_privacy(privacy: Any) -> Callable[[int], tuple[float, float]] | None:
    """For a record-level DP-SGD arm, the (ε, δ) its accountant gives a unit of k records directly
    (:func:`privleak.accountants.group_epsilon`, the mixture-of-Gaussians PLD, at the arm's own δ: not
    bounded by kε, which group privacy gives only at δ·k·e^{(k−1)ε} — the smoke run's dp-8 holds 8 records
    to ε ≈ 117); None when the privacy block has no DP-SGD parameters (e.g. client-level: group privacy then)."""
    get = privacy.get if isinstance(privacy, dict) else lambda k, d=None: getattr(privacy, k, d)
    if get("unit", "record") != "record" or not get("sigma") or not get("sample_rate") or not get("steps"):
        return None
    from ..accountants import group_epsilon

    q, sigma, steps, delta = float(get("sample_rate")), float(get("sigma")), int(get("steps")), float(get("delta"))

    def convert(k: int) -> tuple[float, float]:
        return group_epsilon(sample_rate=q, noise_multiplier=sigma, steps=steps, delta=delta, group_size=k).epsilon, delta
    return convert


def largest_unit(strata: dict[str, int]) -> int:
    """The most records a unit of a membership design can hold: the upper end of its largest
    non-empty stratum (``MembershipDesign.strata``, keys "1-1", "2-2", "3-4", …). Near-duplicate
    clusters merged into one evaluated unit hold more: pass their size instead when larger."""
    ends = [int(key.split("-")[-1]) for key, count in strata.items() if count > 0]
    if not ends:
        raise ValueError("no evaluated units in the design")
    return max(ends)


def empirical_epsilon_diagnostic(arm: str, bound, epsilon: float, delta: float, unit_records: int = 1,
                                 unit_privacy: Callable[[int], tuple[float, float]] | None = None,
                                 unit_name: str | None = None) -> AlarmTest:
    """The membership route, as a diagnostic: the chosen attack's (t, S) on its held-out half
    (``bound``: an :class:`~privleak.audit.epsilon.HeldOutBound` or its serialised form)
    tested against the (ε, δ) of the units evaluated.

    ``unit_records``: the most records any evaluated unit holds (its stratum's upper end, and the
    merged near-duplicate cluster sizes), all of them trained on when the unit is a member; the
    claim is :func:`unit_claim` of it. Pass 1 only when every evaluated unit is a single record.
    ``unit_name``: the unit ``epsilon`` is already accounted for (an arm accounted per person: "person", with
    ``unit_records`` 1), named in the claim so it reads as the arm's own guarantee, not a record's."""
    eps_u, delta_u = unit_claim(epsilon, delta, unit_records, unit_privacy)
    k_p, n_p, k_q, n_q = held_out_counts(bound)
    vacuous = delta_u >= 1.0
    p = 1.0 if vacuous else epsilon_test_p_value(k_p, n_p, k_q, n_q, eps_u, delta_u)

    def lower(level: float) -> float:
        p_lo = clopper_pearson(k_p, n_p, level / 2, "lower")[0]
        q_hi = clopper_pearson(k_q, n_q, level / 2, "upper")[1]
        return math.log((p_lo - delta_u) / q_hi) if p_lo > delta_u and q_hi > 0 else 0.0

    unit = unit_name or ("record" if unit_records == 1 else f"unit of up to {unit_records} records")
    return AlarmTest(arm=arm, route="empirical_epsilon", p_value=p, alarm=False, bound=lower,
                     claim=f"(ε = {eps_u:.3g}, δ = {delta_u:.2g})-DP for a {unit}",
                     detail={"counts": [k_p, n_p, k_q, n_q], "unit_records": unit_records, "epsilon_unit": eps_u,
                             "delta_unit": delta_u, "vacuous": vacuous, "test": bound.test})


def roc_band_diagnostic(arm: str, check: RocBandCheck, unit_records: int = 1) -> AlarmTest:
    """The ROC route, as a diagnostic: a :func:`~privleak.audit.epsilon.roc_band_check` already run on
    the chosen attack's held-out half against the units' (ε, δ) (see :func:`unit_claim`)."""
    return AlarmTest(arm=arm, route="roc_band", p_value=check.p_value, alarm=False,
                     claim=f"held-out ROC inside the (ε = {check.epsilon:.3g}, δ = {check.delta:.2g}) region",
                     detail={"unit_records": unit_records, "worst_inequality": check.worst_inequality,
                             "worst_fpr": check.worst_fpr, "worst_tpr": check.worst_tpr})


def mu_gdp_diagnostic(arm: str, m: int, counts: Sequence[tuple[int, int]], mu_claimed: float) -> AlarmTest:
    """The μ-GDP route, as a diagnostic: the audit canaries against the μ the DP-SGD run implies
    (:func:`~privleak.audit.one_run.dpsgd_mu_clt`, a CLT approximation)."""
    counts = [(int(r), int(v)) for r, v in counts]
    return AlarmTest(arm=arm, route="mu_gdp", p_value=gdp_p_value(m, counts, mu_claimed), alarm=False,
                     claim=f"μ-GDP with μ = {mu_claimed:.3g} (CLT approximation of DP-SGD)",
                     detail={"m": m, "counts": counts, "mu": mu_claimed})
