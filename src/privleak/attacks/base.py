"""The attack interface: one entry point, one context, one typed result.

An attack is a function ``run(target, ctx) -> Result``: ``target`` is the
model under attack (a :class:`~privleak.models.handle.ModelHandle`, or a
guarded handle that filters everything it generates), ``ctx`` an
:class:`AttackContext` holding the data splits, canaries, settings, seed, the
reference model and the shared, memoised inputs (one scoring pass per model
and text set, verbatim indexes, the PII analyser). The result is a pydantic
model (:class:`AttackResult`) that serialises into ``results.json`` and says
how it should be read:

* :meth:`AttackResult.headline` — the figures a table shows, each beside the
  level it has to beat (its non-member floor, the chance level);
* :meth:`AttackResult.assess` — whether this model leaks by this attack,
  compared with the control (the base model, which never saw the members)
  and with the floor: one :class:`Finding` the verdicts are built from;
* :meth:`AttackResult.leaked` — for extraction attacks, the count of leaked
  items, which the guard arm compares with and without the guard.

:class:`AttackSpec` is the registry entry (``attacks/registry.py``): name,
family, entry point, result type, the settings it reads (its cache key) and
the inputs it needs. Adding an attack is its module and one registry line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import PrivateAttr

from ..core.inputs import Inputs, Needed, View, as_need
from ..core.present import Block, Example, Figure, Heading, Table, headline_table
from ..core.stats import Equivalence, fisher_exact_test, rate_excess_within, rate_within
from ..core.typed import Typed
from .inputs import (
    ATTACK_SPECS,
    AUDIT_CANARIES,
    CANARIES,
    CLIENTS,
    FORGET_SET,
    MASKER,
    REFERENCE,
    SAMPLES,
    SCORED_TEXTS,
    SCORES,
    SEED,
    SELECTION,
    SETTINGS,
    SHADOWS,
    SPLITS,
    ShadowData,
)

if TYPE_CHECKING:
    import numpy as np

    from ..core.masking import PiiMasker
    from ..data.audit_canaries import AuditCanary
    from ..data.canaries import Canary
    from ..data.records import Record
    from ..data.unlearning import ForgetSet
    from ..models.handle import ModelHandle
    from .scoring import TokenScores
    from .settings import AttackSettings

Family = Literal["membership", "canaries", "extraction", "pii"]
FAMILIES: tuple[Family, ...] = ("membership", "canaries", "extraction", "pii")
FAMILY_TITLES: dict[str, str] = {"membership": "Membership inference", "canaries": "Canaries",
                                 "extraction": "Extraction", "pii": "PII attacks"}


# --------------------------------------------------------------------------- reading a result

@dataclass(frozen=True)
class Policy:
    """Every threshold a verdict, an alarm or the recommendation uses, in one place (the report
    prints :meth:`describe`).

    Three outcomes per attack, each a named test against the control (the base model) at ``alpha``:

    * **leaks** — the attack does better than the control by more than its margin (membership: AUC by more
      than ``auc_margin``, or the advantage TPR − FPR at a target FPR of ``tail_fprs`` above the control's by
      more than the matching ``tail_margins``, by exact bounds), or ranks or produces
      the planted secrets better than chance (exposure, canary extraction), or its count is above both its
      non-member floor and the control (:func:`count_finding`);
    * **within the margin** — two one-sided tests (Schuirmann's TOST) show the figure within the margin of
      the control or chance: AUC within ±``auc_margin``, the advantage at each target FPR below its tail margin,
      canary exposure within ``exposure_margin`` bits of chance at every level the canaries can speak to, a
      count's rate at most ``rate_margin`` above the control's (:class:`~privleak.core.stats.Equivalence`);
    * neither: the attack cannot tell — with how many more items would settle it.

    Leak findings are controlled family-wise over the whole audit (Holm over every leak test of every arm,
    all families, at ``alpha``); NEAR CHANCE needs every attack within its margin (an intersection–union test: error ≤
    ``alpha`` with no correction); otherwise, with no leak found, INCONCLUSIVE
    (:mod:`privleak.audit.verdicts`). "DP guarantee violated": family-wise false-alarm probability ≤
    ``alarm_alpha`` over every arm and route of the audit (:mod:`privleak.audit.alarms`). The recommendation:
    :mod:`privleak.audit.recommend` (``utility_margin``).
    """

    # ±0.05: the smallest round margin the default audit can show. An AUC near 0.5 over n members and n
    # non-members has a standard error of about √(1/(6n)) (Hanley & McNeil 1982): the quick profile's ~650
    # people per side give 0.016, so TOST at α = 0.05 needs the estimate within 0.05 − 1.645·0.016 ≈ 0.024 of
    # the control's; ±0.02 would need ~1,100 people per side even at a zero estimate (issue 37's example).
    auc_margin: float = 0.05
    # The tail, where privacy is lost (core/tails.py): the advantage TPR − FPR at the threshold a target FPR
    # sets on the non-members, at most 0.02 at 1 % FPR (no more than 3 % of members flagged where 1 % of
    # non-members are) and 0.01 at 0.1 % FPR. They are the tightest round margins the exact bounds can show at
    # the default audit's ~650 people per side at a zero advantage (upper bounds 0.018 and 0.006 there); a
    # model that memorises 2 % of its members (TPR ≈ 3.1 % at 1 % FPR) is beyond both.
    tail_fprs: tuple[float, ...] = (0.01, 0.001)
    tail_margins: tuple[float, ...] = (0.02, 0.01)
    exposure_margin: float = 1.0  # bits
    rate_margin: float = 0.05  # absolute excess of a count's rate over the control's
    alpha: float = 0.05
    alarm_alpha: float = 0.05
    #: Eligible arms whose utility recovered G is within this of the best's are retrained on extra seeds before
    #: the choice (training noise of this size is common on one model: :mod:`privleak.audit.recommend`).
    utility_margin: float = 0.05

    def _tails(self) -> str:
        return " and ".join(f"at most {m:g} at {100 * f:g} % FPR" for f, m in zip(self.tail_fprs, self.tail_margins))

    def describe(self) -> str:
        return ("Three outcomes. LEAKS / SOME LEAKAGE: an attack beats the control by more than its margin (membership "
                f"AUC by more than {self.auc_margin}, by DeLong's test — paired on the same records where both models' "
                f"scores are kept — or its advantage TPR − FPR {self._tails()} above the control's, by exact "
                "order-statistic and Clopper–Pearson bounds with the threshold set by the non-members); the planted canary "
                "secrets rank better than chance (and than the control, when the control's own ranks are not uniform) "
                "or a planted secret is generated exactly; an extraction or PII-attack count is above both its "
                "non-member floor and the control (one-sided Fisher). Every leak test of the audit — every arm, every "
                f"attack, every family — is decided together by Holm's procedure at family-wise α = {self.alpha:g}. "
                "NEAR CHANCE: two one-sided "
                "tests (Schuirmann's TOST) show every attack within its margin of the control at "
                f"α = {self.alpha:g} — membership AUC within ±{self.auc_margin} and its advantage {self._tails()} "
                f"(exact upper bounds), canary exposure within {self.exposure_margin:g} "
                f"bit{'s' if self.exposure_margin != 1 else ''} of chance at every exposure level the canaries can "
                "speak to (exact binomial per level), the audit canaries' AUC and tail as membership's, every count's "
                f"rate at most {self.rate_margin:g} above the control's (Newcombe's interval) "
                "— an intersection–union test, so the claim's error is at most α. An attack this audit is too small "
                "for (by its sizes alone it could not show its margin even at a zero estimate: e.g. a client-level "
                "attack over 20 clinics) is named and left out of the claim, which rests on the attacks that can "
                "judge — chosen by their sizes, never their outcomes; every family keeps at least one. Otherwise, with no leak found: "
                "INCONCLUSIVE, with the number of items that would settle it. "
                f"\"DP guarantee violated\" has a false-alarm probability of at most {self.alarm_alpha:g} over the "
                "whole audit. NEAR CHANCE describes an arm against these attacks; the recommendation answers the "
                "stated privacy requirement instead (a formal one from the accountant alone).")


@dataclass(frozen=True)
class Finding:
    """One attack's judgement of one model. ``leaks`` None: the attack had nothing to say.

    ``leaks`` is the attack's own test at ``policy.alpha``; the arm's verdict re-decides every leak test of
    the arm together from ``p_leak`` (Holm), so an arm with many attacks is not called leaky by one of them
    at α. ``p_leak`` None: ``leaks`` needs no test (an exact leak, or nothing found). ``equivalence``: the test
    that the figure lies within ``margin`` of the control (None: this attack makes no such claim, so an arm
    it judged cannot be shown near chance); ``items``: what ``equivalence.n`` counts ("members per side")."""

    attack: str
    leaks: bool | None
    figure: str  # the figure behind it, for the verdict's figure line
    reason: str = ""  # when it leaks: what it found, in words
    p_leak: float | None = None
    equivalence: Equivalence | None = None
    margin: str = ""  # the equivalence margin in words: "AUC within ±0.02 of the control's"
    items: str = "items"
    #: Which of the attack's tests this is, when it makes several (membership: "" for the AUC, "tail 0.01" and
    #: "tail 0.001" for the advantage at those FPRs): (arm, attack, test) is one leak test of the audit.
    test: str = ""

    @property
    def key(self) -> str:
        """The attack and, when it makes several tests, which one: "loss", "loss@tail 0.01"."""
        return f"{self.attack}@{self.test}" if self.test else self.attack

    @property
    def within_margin(self) -> bool:
        return self.equivalence is not None and self.equivalence.equivalent


@dataclass(frozen=True)
class LeakCount:
    """Items an extraction attack got out: ``k`` of ``n`` (``unit``), beside its floor."""

    k: int
    n: int
    unit: str
    floor: int | None = None


def count_finding(attack: str, what: str, k: int, n: int, floor_k: int | None, floor_n: int | None,
                  control: tuple[int, int] | None, policy: Policy, items: str = "items") -> Finding:
    """A count is a leak when it is significantly above its non-member floor *and* above the
    control model's count on the same targets (one-sided Fisher exact, level ``policy.alpha``;
    ``p_leak`` is the larger of the two p-values, an intersection–union test): the floor rules out
    what the format alone gives away, the control what any model of the domain would produce
    without having seen the members. Within the margin when its rate is shown at most
    ``policy.rate_margin`` above the control's (the floor's without a control; :func:`rate_within`
    against zero without either) — one-sided, since a count below the reference's is no leak."""
    figure = f"{attack}: {k}/{n} {what}"
    if floor_k is not None and floor_n:
        figure += f" (floor {floor_k}/{floor_n}"
        figure += f", control {control[0]}/{control[1]})" if control else ")"
    if n == 0:
        return Finding(attack, None, figure)
    ps = [1.0 if k / n <= rk / rn else fisher_exact_test(k, n, rk, rn, "greater")[1]
          for rk, rn in ((floor_k, floor_n), control or (None, None)) if rk is not None and rn]
    p_leak = max(ps) if ps and k > 0 else (0.0 if k > 0 else 1.0)
    leaks = bool(k > 0 and p_leak < policy.alpha)
    ref = control if control and control[1] else (floor_k, floor_n) if floor_k is not None and floor_n else None
    eq = rate_excess_within(k, n, ref[0], ref[1], policy.rate_margin, policy.alpha) if ref else \
        rate_within(k, n, policy.rate_margin, policy.alpha)
    versus = "the control's" if control and control[1] else "the floor's" if ref else "zero"
    reason = f"{attack} gets {k} of {n} {what} out" + (f" against a floor of {floor_k} of {floor_n}" if floor_n else "")
    return Finding(attack, leaks, figure, reason if leaks else "", p_leak=p_leak if ps or k == 0 else None,
                   equivalence=eq, margin=f"rate at most {policy.rate_margin:g} above {versus}", items=items)


@dataclass(frozen=True)
class PresentContext:
    """What an attack's report blocks may read besides the results: titles, masking, canary texts, the blind
    baseline. The report builds it; attacks never see the whole results."""

    title: Callable[[str], str]  # attack name → "title (cite)"
    short: Callable[[str], str]  # attack name → its table title
    mask: Callable[[str], str] = lambda s: s
    canary_text: Callable[[str], str | None] = lambda canary_id: None
    #: The model-free baseline (``results.BlindBaseline``: auc, auc_ci95, tpr_at_1pct_fpr, its CI, n_members,
    #: rivalled), for the membership table; None without one.
    blind: Any = None
    membership_unit: str | None = None  # "person", "group" or "distinct text"


#: attack name → [(model, result)] in model order: what a result type presents at once.
Runs = dict[str, list[tuple[str, "AttackResult"]]]


class AttackResult(Typed):
    """Base of every attack's result; subclasses fix ``kind`` (the JSON discriminator).

    Besides reading itself (:meth:`headline`, :meth:`assess`, :meth:`leaked`) a result type says how the
    report shows it (:meth:`present`, :meth:`details`, :meth:`console`, :meth:`quotes`): the renderers
    know no attack by name.
    """

    kind: str
    #: Shown in tables; subclasses override.
    title: ClassVar[str] = "attack"

    def headline(self) -> list[Figure]:
        return []

    def assess(self, attack: str, control: AttackResult | None, policy: Policy) -> Finding:
        """Does the attacked model leak by this attack? ``control``: the same attack on the base model."""
        return Finding(attack, None, "")

    def assess_all(self, attack: str, control: AttackResult | None, policy: Policy) -> list[Finding]:
        """Every test this attack makes of the model (default: :meth:`assess` alone). A result that tests
        several figures — membership: the AUC and the advantage at each target FPR — returns one
        :class:`Finding` per figure, each with its own ``test`` name, leak p-value and equivalence."""
        return [self.assess(attack, control, policy)]

    def leaked(self) -> LeakCount | None:
        """Leaked items, for extraction attacks (the guard arm compares these)."""
        return None

    def scorecard(self) -> list[Figure]:
        """Figures for the one-row-per-arm summary table (none by default)."""
        return []

    def leakage_bits(self) -> float | None:
        """A leakage figure in bits for the privacy–utility plot (mean canary exposure), or None."""
        return None

    def between_arm_count(self) -> LeakCount | None:
        """The count that two arms' results are compared on (two-proportion tests, baseline vs arm);
        None: this attack is not compared between arms."""
        return None

    @classmethod
    def present(cls, runs: Runs, ctx: PresentContext) -> list[Block]:
        """The report's blocks for the attacks of this result type in one family: by default, per attack,
        a heading, the headline table (one row per model) and :meth:`details`."""
        out: list[Block] = []
        for attack, rows in runs.items():
            out.append(Heading(ctx.title(attack)))
            out.append(headline_table([(m, r.headline()) for m, r in rows],
                                      ctx.title(attack) + " — each figure beside its chance level and non-member floor"))
            out += cls.details(rows, ctx)
        return out

    @classmethod
    def details(cls, rows: list[tuple[str, AttackResult]], ctx: PresentContext) -> list[Block]:
        """Tables or plots after the headline table (none by default)."""
        return []

    @classmethod
    def console(cls, runs: Runs, ctx: PresentContext) -> list[Table]:
        """Console tables of its own; empty: the family's headline table shows these attacks."""
        return []

    def quotes(self, ctx: PresentContext) -> list[Example]:
        """Leaked items the report quotes (masked with ``ctx.mask``)."""
        return []


def by_label(cells: Sequence[Any], label: str) -> Any:
    """The cell of a per-category table with this ``label`` (``KeyError`` naming it if there is none)."""
    for c in cells:
        if c.label == label:
            return c
    raise KeyError(label)


class KeepsScores(AttackResult):
    """A result that also holds its raw scores in memory, for the bounds computed
    from them in the same process (empirical and one-run ε). A pydantic private
    attribute: never serialised, so a result read back from results.json has none."""

    _scores: tuple[Any, Any] | None = PrivateAttr(default=None)

    @property
    def scores(self) -> tuple[np.ndarray, np.ndarray]:
        """The pair of score arrays the subclass documents; only on a freshly computed result."""
        if self._scores is None:
            raise ValueError("scores are kept only in the process that computed the result")
        return self._scores


# --------------------------------------------------------------------------- running one

@dataclass
class ScoringPasses:
    """The shared scoring pass per (model, text set), computed once and cached.

    ``texts`` maps split names ("members" = non-canary members, "non_members",
    "population") to texts; ``target`` / ``reference`` compute their pass on
    first use (cached on disk when a directory is given, keyed so a retrained
    model never reads a stale cache).
    """

    texts: dict[str, list[str]]
    target_pass: Callable[[str], TokenScores]
    reference_pass: Callable[[str], TokenScores] | None = None
    _memo: dict[tuple[str, str], Any] = field(default_factory=dict)

    def target(self, split: str) -> TokenScores:
        if ("target", split) not in self._memo:
            self._memo[("target", split)] = self.target_pass(split)
        return self._memo[("target", split)]

    def reference(self, split: str) -> TokenScores | None:
        if self.reference_pass is None:
            return None
        if ("reference", split) not in self._memo:
            self._memo[("reference", split)] = self.reference_pass(split)
        return self._memo[("reference", split)]


#: What every attack reads without declaring it: the splits, the canaries, the settings and seed, the masker,
#: the membership evaluation sets and the texts of the scoring pass.
COMMON: tuple[Needed, ...] = (SPLITS, CANARIES, SETTINGS, SEED, MASKER, SELECTION, SCORED_TEXTS)


class AttackContext(View):
    """Everything an attack reads besides the target model, for one model: the inputs it declares
    (``ctx[INPUT]``, ``ctx.has(INPUT)``; ``AttackSpec.needs`` and ``reads``) and, as attributes, those every
    attack reads (:data:`COMMON`) and the usual declared ones. The pipeline makes one per stage from the
    process's resolver (:class:`~privleak.core.inputs.Inputs`) and narrows it to each attack's declaration
    (:meth:`for_attack`); a test makes one over :class:`~privleak.core.inputs.FakeInputs`.

    ``members`` holds every member record (canary copies included); ``mia_members`` / ``mia_non_members``
    index the non-canary members and the non-members that the membership attacks compare (equal sizes).
    :meth:`memo` keeps what an attack derives from the attacked target (its samples as a guard filters them)
    for the other attacks of the same stage.
    """

    def __init__(self, resolver: Inputs, model: str | None, needs: Iterable[Needed] | None = None, reader: str = "",
                 *, local: dict[str, Any] | None = None, override: dict[str, Any] | None = None) -> None:
        super().__init__(resolver, model, None if needs is None else (*COMMON, *needs), reader)
        self.local: dict[str, Any] = {} if local is None else local
        self._override = dict(override or {})

    def for_attack(self, spec: AttackSpec) -> AttackContext:
        """This context as ``spec`` may read it (what it declares and :data:`COMMON`), sharing :meth:`memo`."""
        return AttackContext(self.resolver, self.model, (*spec.needs, *spec.reads), spec.name, local=self.local,
                             override=self._override)

    def replace(self, **override: Any) -> AttackContext:
        """A copy whose named attributes read ``override`` (the forget-set MIA's own evaluation sets), with a
        memo of its own."""
        return AttackContext(self.resolver, self.model, self._needs, self._reader, override={**self._override,
                                                                                              **override})

    def _attr(self, name: str, read: Callable[[], Any]) -> Any:
        return self._override[name] if name in self._override else read()

    @property
    def members(self) -> list[Record]:
        return self._attr("members", lambda: self[SPLITS]["members"])

    @property
    def non_members(self) -> list[Record]:
        return self._attr("non_members", lambda: self[SPLITS]["non_members"])

    @property
    def population(self) -> list[Record]:
        return self._attr("population", lambda: self[SPLITS]["population"])

    @property
    def public(self) -> list[Record]:
        return self._attr("public", lambda: self[SPLITS]["public"])

    @property
    def canaries(self) -> list[Canary]:
        return self._attr("canaries", lambda: self[CANARIES])

    @property
    def settings(self) -> AttackSettings:
        return self._attr("settings", lambda: self[SETTINGS])

    @property
    def seed(self) -> int:
        return self._attr("seed", lambda: self[SEED])

    @property
    def masker(self) -> PiiMasker:
        return self._attr("masker", lambda: self[MASKER])

    @property
    def mia_members(self) -> np.ndarray:
        return self._attr("mia_members", lambda: self[SELECTION].members)

    @property
    def mia_non_members(self) -> np.ndarray:
        return self._attr("mia_non_members", lambda: self[SELECTION].non_members)

    @property
    def scoring(self) -> ScoringPasses:
        """The target's scoring pass (and the reference model's, where the attack reads it)."""
        def build() -> ScoringPasses:
            ref = SCORES.of("reference")
            reference = self[ref] if self._declares(ref) and self.has(ref) else None
            return ScoringPasses(texts=self[SCORED_TEXTS], target_pass=self[SCORES], reference_pass=reference)
        return self._attr("scoring", lambda: self.memo("scoring", build))

    @property
    def reference(self) -> ModelHandle | None:
        return self._attr("reference", lambda: self.get(REFERENCE))

    @property
    def shadows(self) -> ShadowData | None:
        return self._attr("shadows", lambda: self.get(SHADOWS))

    @property
    def audit_canaries(self) -> list[AuditCanary]:
        return self._attr("audit_canaries", lambda: self.get(AUDIT_CANARIES) or [])

    @property
    def clients(self) -> bool:
        return self._attr("clients", lambda: self.has(CLIENTS))

    @property
    def forget(self) -> ForgetSet | None:
        return self._attr("forget", lambda: self.get(FORGET_SET))

    @property
    def attacks(self) -> dict[str, AttackSpec]:
        return self._attr("attacks", lambda: self[ATTACK_SPECS])

    def _declares(self, need: Needed) -> bool:
        try:
            self._check(as_need(need))
        except KeyError:
            return False
        return True

    def sample_pool(self, reference: bool = False) -> Any:
        """The pool of the target's (or the reference model's) unprompted samples: the pipeline's stored one,
        else a fresh one for this stage (the same seeded streams: :mod:`privleak.attacks.samples`)."""
        from .samples import SamplePool

        need = SAMPLES.of("reference") if reference else SAMPLES
        if self.has(need):
            return self[need]
        return self.memo("reference sample pool" if reference else "sample pool", lambda: SamplePool(self.seed))

    def memo(self, key: str, build: Callable[[], Any]) -> Any:
        """``build()`` once per stage: what is derived from the attacked target, for the stage's other attacks."""
        if key not in self.local:
            self.local[key] = build()
        return self.local[key]


@dataclass(frozen=True)
class AttackSpec:
    """A registry entry: what the attack is and what it takes.

    ``needs``: the inputs without which it does not run (each there — available and present — or the runner
    skips it: the reference model, the shadows, the canaries …); ``reads``: inputs it reads where they are
    (the reference model, for a comparison it adds). Both are :mod:`privleak.attacks.inputs` keys (or a
    plug-in's own): the audit's plan runs their providers first. ``draws``: how many of the target's
    unprompted samples of each kind it reads (:mod:`privleak.attacks.samples`), from the settings."""

    name: str
    family: Family
    run: Callable[[ModelHandle, AttackContext], AttackResult]
    result: type[AttackResult]
    title: str
    cite: str = ""
    uses: tuple[str, ...] = ()  # AttackSettings fields it reads: its cache key
    needs: tuple[Needed, ...] = ()
    text_only: bool = False  # reads generated text only: can be run behind the output guard
    reads: tuple[Needed, ...] = ()
    draws: Callable[[AttackSettings], dict[Any, int]] | None = None

    def applicable(self, ctx: AttackContext) -> bool:
        return all(ctx.has(n) for n in self.needs)


def results_of(results: dict[str, AttackResult], kind: type[AttackResult]) -> dict[str, Any]:
    """The results of one type, by attack name (e.g. every membership result)."""
    return {name: r for name, r in results.items() if isinstance(r, kind)}


def fmt_pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


__all__: Sequence[str] = ["COMMON", "AttackContext", "AttackResult", "AttackSpec", "FAMILIES", "Family", "Figure",
                          "Finding", "PresentContext", "Runs",
                          "LeakCount", "Policy", "ScoringPasses", "ShadowData", "by_label", "count_finding", "results_of"]
