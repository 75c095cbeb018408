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
  record ε of a federated arm or the person ε of a user-level one). Random
  rare-word canaries are what a model memorises first (Panda et al. 2025),
  but at m = 1,000 this test cannot pass ε ≈ 5 even with every guess right.
* ``one_run_fdp`` (alarm): the same guesses read by Mahloujifar, Melis &
  Chaudhuri's f-DP recursion (:mod:`.fdp`) against the accountant's own
  trade-off curve of the DP-SGD it analysed (σ, q, T: :func:`canary_curves`),
  a far tighter claim than its one (ε, δ) point and one the accountant's ε
  rests on: "this training is that DP-SGD", for each canary's unit.
* ``one_run_kary`` (alarm): the same recursion in its k-ary form on the
  reconstruction game — the secret each included canary carries after its
  query words, decoded from the model, one of k = |pool|^w values — against
  the accountant's replace-one curve. The route with the power to refute
  ε = 8 at the default audit's size (docs/definitions.md says why).
* ``whitebox`` (alarm): the white-box gradient canaries PrivLeak's own DP
  steps carry (:mod:`privleak.models.gradient_canaries`), read through every
  step's clipping and noise; an exact noncentral-t test of "the step's
  effective noise multiplier is at least σ" (:func:`~privleak.audit.whitebox.whitebox_alarm_test`).
  The route with the power to catch a step broken at any claimed ε — a
  clipping bound above C or noise below σC — but blind to an error in the
  per-sample norms of the model's own layers (the routes above see those).
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
and counts every route as an audit would; ``tests/test_fdp.py`` does the same
for the f-DP routes on mechanisms at their claimed curves, and
``tests/test_fdp_seeds.py`` on real DP-SGD runs, broken and correct.

The alarm's power (:func:`alarm_power`) is a reported figure: each DP arm's
alarm tests re-run on the guesses of the audit's non-private arm, at the
levels the arm's own tests got — whether an implementation broken that badly
would have been caught at this audit's size.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

import numpy as np

from ..accountants import GridTooLarge
from ..accountants.analysis.profile import PrivacyProfile, privacy_profile
from ..core.stats import clopper_pearson
from .epsilon import RocBandCheck, epsilon_test_p_value, group_privacy, held_out_counts
from .fdp import ProfileCurve, TradeOff, fdp_grid_p_value, fdp_min_correct, fdp_refutes
from .one_run import gdp_p_value, one_run_p_value, steinke_epsilon, steinke_p_value

Route = Literal["one_run", "one_run_fdp", "one_run_kary", "whitebox", "empirical_epsilon", "roc_band", "mu_gdp"]
#: The routes valid as alarms for one trained model (module docstring says why the others are not).
ALARM_ROUTES: tuple[Route, ...] = ("one_run", "one_run_fdp", "one_run_kary", "whitebox")
ROUTE_TITLES: dict[str, str] = {
    "one_run": "one-run canary test (Steinke et al. 2023)",
    "one_run_fdp": "one-run f-DP test of the accountant's trade-off curve (Mahloujifar et al. 2025)",
    "one_run_kary": "one-run reconstruction test of the accountant's replace-one curve (Mahloujifar et al. 2025)",
    "whitebox": "white-box gradient-canary test of the DP step's clipping and noise (Steinke et al. 2023, §6)",
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
    #: (guesses, fewest right that reject at level a) for each candidate of the route's grid (None: not even
    #: every guess right would): the smallest violation the route can show at its size.
    needed: Callable[[float], list[tuple[int, int | None]]] | None = None
    #: The white-box route's power at level a: (r, ε) — a step whose effective noise multiplier is σ/r or less
    #: (ε or more at the arm's q and T) is caught with probability ≥ ½.
    detectable: Callable[[float], tuple[float, float]] | None = None

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
    titles = [ROUTE_TITLES[r] for r in routes]
    named = titles[0] if len(titles) == 1 else ", ".join(titles[:-1]) + " and " + titles[-1]
    return (f"\"DP guarantee violated\" is raised only by the {named}, each test at level {level} (α = {alpha:g} "
            f"split across the {len(arms)} DP arm{'s' if len(arms) != 1 else ''} and each arm's tests; each test pays "
            f"for its own guess counts): if every arm is as private as its accountant claims, this audit raises a "
            f"false alarm with probability at most {100 * alpha:g} %.")


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

    def needed(level: float) -> list[tuple[int, int | None]]:
        out: list[tuple[int, int | None]] = []
        for r, _ in counts:
            rejects = lambda v: len(counts) * steinke_p_value(m, r, v, epsilon, delta) <= level  # noqa: E731
            if not rejects(r):
                out.append((r, None))
                continue
            lo, hi = -1, r  # rejection only gets easier with more right guesses
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if rejects(mid) else (mid, hi)
            out.append((r, hi))
        return out

    return AlarmTest(arm=arm, route="one_run", p_value=p, alarm=True, bound=bound, needed=needed,
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


# ----------------------------------------------------------------------------- the f-DP routes

@dataclass(frozen=True)
class CanaryCurves:
    """What a DP arm's accountant promises one audit canary, as trade-off curves (:mod:`.fdp`): ``inclusion``
    (the canary added or removed: the in/out game) and ``secret`` (its secret changed for another: the
    reconstruction game); ``mechanism``: what they are the curves of, in words. Both are the accountant's own
    analysis of the mechanism (σ, q, T of the Poisson-subsampled Gaussian), below its true curves
    (:mod:`privleak.accountants.analysis.profile`), so a correct implementation is refuted at most at the
    test's level."""

    inclusion: TradeOff
    secret: TradeOff
    mechanism: str
    sample_rate: float
    sigma: float
    steps: int
    relations: tuple[str, str]
    #: The relation of the ε a canary is held to (:func:`one_run_alarm_test`'s claim): add/remove of a record or
    #: person; replace-one for a record inside a federated client (``Privacy.epsilon_record``).
    claim_relation: str = "add_remove"


def _merged(a: PrivacyProfile, b: PrivacyProfile) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The pointwise larger δ of two profiles on their common 0.01 grid (the shorter one extended by its last δ,
    an upper bound beyond its end, where δ only falls)."""
    n = max(len(a.epsilons), len(b.epsilons))
    long_eps = a.epsilons if len(a.epsilons) == n else b.epsilons
    pad = lambda d: np.concatenate([d, np.full(n - len(d), d[-1])])  # noqa: E731
    return tuple(long_eps), tuple(np.maximum(pad(np.asarray(a.deltas)), pad(np.asarray(b.deltas))).tolist())


@lru_cache(maxsize=64)
def _curve(q: float, sigma: float, steps: int, relation: str, vdi: float | None = None) -> ProfileCurve:
    """The ProfileCurve of DP-SGD under ``relation`` ("add_remove", "replace", or "both": the larger δ of the
    two at every ε, valid whichever relation holds)."""
    if relation == "both":
        a = privacy_profile(sample_rate=q, noise_multiplier=sigma, steps=steps, relation="add_remove",
                            value_discretization_interval=vdi)
        b = privacy_profile(sample_rate=q, noise_multiplier=sigma, steps=steps, relation="replace",
                            value_discretization_interval=vdi)
        eps, deltas = _merged(a, b)
    else:
        p = privacy_profile(sample_rate=q, noise_multiplier=sigma, steps=steps, relation=relation,  # type: ignore[arg-type]
                            value_discretization_interval=vdi)
        eps, deltas = p.epsilons, p.deltas
    return ProfileCurve(eps, deltas, label=f"DP-SGD (q = {q:.3g}, σ = {sigma:.3g}, T = {steps}, {relation})")


def canary_curves(privacy: Any) -> CanaryCurves | None:
    """A DP arm's promise to one audit canary (each is one record and its own person), from its privacy block
    (a :class:`~privleak.results.Privacy` or its dict): None when the block has no DP-SGD parameters (the
    arm's (ε, δ) claim is then tested by the Steinke route alone).

    * unit "record" (``dp``, ``dp+lora``, ``dp+scrub``, ``dp-user`` ELS) and "person" (``dp-user`` ULS, whose
      q is the people's and whose canary is a one-record person): a canary added or removed is one unit added
      or removed (add/remove); its secret changed is the unit's clipped contribution replaced (replace-one);
    * unit "client" (``fed-dp``): a canary is a record inside a client, so adding it replaces that client's
      clipped update (replace-one), unless it is its client's only record (add/remove): the inclusion curve
      takes the larger δ of the two; its secret changed is replace-one.

    Also None when the composed PLD does not fit the accountant's grid limits even coarsened.

    Scrubbing and deduplication never touch the canaries (they are added after the data defences), and a
    public gradient is outside the noised sum, so neither changes the curves."""
    get = privacy.get if isinstance(privacy, dict) else lambda k, d=None: getattr(privacy, k, d)
    sigma, q, steps, unit = get("sigma"), get("sample_rate"), get("steps"), get("unit", "record")
    if not sigma or not q or not steps or float(sigma) <= 0 or unit not in ("record", "person", "client"):
        return None
    q, sigma, steps = float(q), float(sigma), int(steps)
    inclusion = "both" if unit == "client" else "add_remove"
    what = {"record": "one record", "person": "one person", "client": "one client"}[unit]
    try:
        curves = _curve(q, sigma, steps, inclusion), _curve(q, sigma, steps, "replace")
    except GridTooLarge:  # a PLD too large to hold even coarsened: the (ε, δ) claim alone is tested (Steinke)
        return None
    return CanaryCurves(inclusion=curves[0], secret=curves[1],
                        mechanism=f"DP-SGD's Poisson-subsampled Gaussian (q = {q:.3g} per {what.split()[1]}, "
                                  f"σ = {sigma:.3g}, T = {steps})",
                        sample_rate=q, sigma=sigma, steps=steps, relations=(inclusion, "replace"),
                        claim_relation="replace" if unit == "client" else "add_remove")


#: The loss-grid width of the curves the displayed ε bounds are searched over (coarser than the test's own:
#: still upper bounds on δ, so the bound stays valid; ~1 % of ε looser, and 10× cheaper).
#: The PLD grid of the searches for refuted noise multipliers (coarser than the display's: many are computed).
SEARCH_VDI = 0.02


def _family_bound(m: int, counts: Sequence[tuple[int, int]], k: float, curves: CanaryCurves, which: int,
                  delta: float, level: float) -> float:
    """The displayed bound of an f-DP route: the largest ε (at the arm's δ) of DP-SGD with the arm's q and T —
    σ varied — whose curve the guesses refute at ``level`` (the union over the grid: each candidate at
    level/|grid|); 0 when even σ = 16× the arm's is not refuted, and at most the ε of σ/64 (a display, not a
    search to the end). A statement about that family of curves, not an ε lower bound for every mechanism."""
    relation = curves.relations[which]
    a = level / len(counts)

    def refuted(sigma: float) -> bool:
        c = _curve(curves.sample_rate, sigma, curves.steps, relation, SEARCH_VDI)
        return any(fdp_refutes(m, r, v, a, c, k) for r, v in counts if v > 0)

    def eps_of(sigma: float) -> float:  # in the units of the ε the canary is held to (the claim's)
        return dpsgd_epsilon(curves.sample_rate, sigma, curves.steps, curves.claim_relation, delta)

    def safe(sigma: float) -> bool:
        try:
            return refuted(sigma)
        except GridTooLarge:  # σ so small the PLD grid does not fit: count it as not refuted (conservative)
            return False

    # More noise is a stronger promise, easier to refute: refuted(σ) holds for every σ above some σ*, and the
    # bound is ε(σ*). Keep ``ref`` refuted and ``non`` not, and return ε(ref): valid however far the search got.
    s0 = curves.sigma
    if safe(s0):
        ref, non = s0, s0 / 4
        for _ in range(3):  # down to σ/64; past that the PLD grids grow too large for a display
            if not safe(non):
                break
            ref, non = non, non / 4
        else:
            return eps_of(ref)
    else:
        ref, non = 16 * s0, s0
        if not safe(ref):
            return 0.0
    for _ in range(7):
        mid = math.sqrt(ref * non)
        if safe(mid):
            ref = mid
        else:
            non = mid
    return eps_of(ref)


def fdp_alarm_test(arm: str, m: int, counts: Sequence[tuple[int, int]], curves: CanaryCurves,
                   delta: float) -> AlarmTest:
    """The f-DP route: the same in/out guesses as the Steinke route (``OneRunEpsilon.candidates``) against the
    accountant's add/remove trade-off curve for one canary (:func:`canary_curves`), by Mahloujifar et al.'s
    recursion (:func:`privleak.audit.fdp.fdp_grid_p_value`, the union over the grid inside).
    ``bound(a)``: :func:`_family_bound`."""
    counts = [(int(r), int(v)) for r, v in counts]
    p = fdp_grid_p_value(m, counts, curves.inclusion, k=2)
    return AlarmTest(arm=arm, route="one_run_fdp", p_value=p, alarm=True,
                     bound=lambda level: _family_bound(m, counts, 2, curves, 0, delta, level),
                     needed=lambda level: [(r, fdp_min_correct(m, r, level / len(counts), curves.inclusion, 2))
                                           for r, _ in counts],
                     claim=f"the trade-off curve of {curves.mechanism} for each audit canary added or removed",
                     detail={"m": m, "counts": counts, "k": 2, "relation": curves.relations[0]})


def reconstruction_alarm_test(arm: str, m: int, k: float, counts: Sequence[tuple[int, int]], curves: CanaryCurves,
                              delta: float) -> AlarmTest:
    """The reconstruction route: of the m included canaries, the most confident decoded secrets right
    (``OneRunReconstruction.candidates``, each secret one of k values) against the accountant's replace-one
    curve for one canary's secret, by Mahloujifar et al.'s k-ary recursion. ``bound(a)``: :func:`_family_bound`."""
    counts = [(int(r), int(v)) for r, v in counts]
    p = fdp_grid_p_value(m, counts, curves.secret, k=k)
    return AlarmTest(arm=arm, route="one_run_kary", p_value=p, alarm=True,
                     bound=lambda level: _family_bound(m, counts, k, curves, 1, delta, level),
                     needed=lambda level: [(r, fdp_min_correct(m, r, level / len(counts), curves.secret, k))
                                           for r, _ in counts],
                     claim=f"the replace-one trade-off curve of {curves.mechanism} for each audit canary's secret "
                           f"(one of k = {k:.3g})",
                     detail={"m": m, "counts": counts, "k": k, "relation": "replace"})


def dpsgd_epsilon(q: float, sigma: float, steps: int, relation: str, delta: float) -> float:
    """ε at ``delta`` of DP-SGD's Poisson-subsampled Gaussian (q, σ, T) under ``relation``, on the display grid."""
    p = privacy_profile(sample_rate=q, noise_multiplier=sigma, steps=steps, relation=relation,  # type: ignore[arg-type]
                        value_discretization_interval=SEARCH_VDI)
    return p.epsilon(delta)


# ----------------------------------------------------------------------------- the alarm's power

ROUTE_SHORT = {"one_run": "Steinke test", "one_run_fdp": "f-DP test", "one_run_kary": "reconstruction test",
               "whitebox": "white-box check"}


@dataclass(frozen=True)
class PowerCheck:
    """Whether one DP arm's alarm would have caught it broken as badly as ``reference`` (see :func:`alarm_power`)."""

    arm: str
    verified: bool
    reference: str
    route: str | None
    p_value: float | None
    level: float | None
    needed: list[tuple[str, int, int | None]]
    text: str


def _counts_text(test: AlarmTest) -> str:
    counts = test.detail.get("counts") or []
    if not counts:
        return ""
    r, v = max(counts, key=lambda c: c[0])
    what = "secrets decoded" if test.route == "one_run_kary" else "guesses right"
    return f"{v} of {r} {what}"


def alarm_power(arm: str, own: Sequence[AlarmOutcome], hypothetical: Sequence[AlarmTest],
                reference: str) -> PowerCheck:
    """The alarm's power for one DP arm, as a fact about this audit's size: ``hypothetical`` are the arm's own
    alarm tests (same claims, same routes) re-run on ``reference``'s guesses — the audit's non-private arm's
    (a DP-SGD run with no noise and no clipping is that training) or, with none, every guess right — and each
    is held to the level ``own`` (the arm's real tests) was allotted. ``verified``: some route would reject,
    so an implementation broken that badly would have raised "DP guarantee violated" here."""
    level_of = {o.test.route: o.level for o in own}
    hits = [(t.p_value / level_of[t.route], t) for t in hypothetical if t.route in level_of]
    needed = [(t.route, r, v) for t in hypothetical if t.route in level_of and t.needed is not None
              for r, v in t.needed(level_of[t.route])]
    caught = [(ratio, t) for ratio, t in hits if t.p_value <= level_of[t.route]]
    white = [t for _, t in caught if t.route == "whitebox" and t.detectable is not None]
    black = [(ratio, t) for ratio, t in caught if t.route != "whitebox"]
    if white:
        t = white[0]
        r, eps = t.detectable(level_of[t.route])
        text = (f"Checked: its white-box check (gradient canaries read through its own DP steps) catches a step "
                f"without its noise or its clipping, and " +
                (f"one whose noise, relative to its clipping bound, is σ/{r:.3g} or less (ε ≥ {eps:.3g} at this q "
                 f"and T) at least half the time" if math.isfinite(r) else "no milder break at this size") +
                f", at level {level_of[t.route]:.2g}" +
                (f"; its one-run canaries alone would also have caught it broken as badly as {reference}"
                 if black else "") + ".")
        return PowerCheck(arm, True, reference, t.route, t.p_value, level_of[t.route], needed, text)
    if caught:
        _, t = min(caught, key=lambda x: x[0])
        counts = _counts_text(t)
        text = (f"Checked: had {arm} been broken as badly as {reference}{f' ({counts})' if counts else ''}, its "
                f"{ROUTE_SHORT[t.route]} would have raised \"DP guarantee violated\" (p = {t.p_value:.2g} at level "
                f"{level_of[t.route]:.2g}).")
        return PowerCheck(arm, True, reference, t.route, t.p_value, level_of[t.route], needed, text)
    best = min(hits, key=lambda x: x[0])[1] if hits else None
    # the easiest bar to state: the smallest share of right guesses any test would take
    need = min(((rt, r, v) for rt, r, v in needed if v is not None), key=lambda x: (x[2] / x[1], -x[1]), default=None)
    text = (f"Implementation unverified: even guesses as good as {reference}'s"
            + (f" ({_counts_text(best)})" if best is not None and _counts_text(best) else "")
            + f" would not refute {arm}'s claim at this audit's size"
            + (f"; the {ROUTE_SHORT[need[0]]} needs {need[2]} of its {need[1]} guesses right" if need else
               "; no test here can refute it even with every guess right") + ".")
    return PowerCheck(arm, False, reference, best.route if best else None, best.p_value if best else None,
                      level_of.get(best.route) if best else None, needed, text)
