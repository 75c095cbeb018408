"""``results.json``: the typed results of an audit, and the contract every reader relies on.

Every block is a pydantic model; ``results.schema.json`` is generated from
:class:`AuditResults` (``python -m privleak.results`` rewrites it, and a test
fails when the committed file differs). The report, ``compare`` and the
console tables read these fields; they never guess keys.

Schema version 2::

    schema_version   "2"
    tool             {name, version}
    config           the validated AuditConfig
    data             DataSummary: split sizes, canary count, chance-level exposure
    data_release     the members' summary under central DP (--dp-summary ε) and frequent terms under local DP
                     (--ldp-terms ε), with the ε spent; null when neither was asked for
    base_model       ArmResult (kind "control") + source: the base model never saw the members; null for
                     ``privleak attack`` without ``--reference`` (no model known not to have seen them)
    arms             arm name → ArmResult
                       kind            "baseline" | "best" | "dp" | "dp-user" | "dpw" | "fedavg" | "fed-dp" | "guard" | "external"
                                       (external: a model the user trained, audited by ``privleak attack``)
                       target          what an external arm is: the model or adapter named, its base
                       serves          the arm whose model a guard arm serves
                       training        steps, epoch losses, settings, records trained on, tokens (seconds: durations_s['train/<arm>'])
                       privacy         DP parameters and ε by three accountants (DP-SGD arms only)
                       weight_noise    σ and weight scale of a DP-Weights arm (no formal ε)
                       federation      strategy, clients and their sizes, rounds, sampling (federated arms)
                       utility         log-perplexity (nats) and perplexity on held-out private and
                                       public text, and the utility gain recovered G
                       attacks         attack name → that attack's typed result (see attacks/registry.py)
                       empirical_epsilon  the membership attacks' ε lower bound, per attack and for the arm
                       one_run_epsilon    the one-run ε lower bounds from the audit canaries
                       defences        scrub / dedup reports (data-defence arms)
                       guard           interventions and false positives (the guard arm)
                       verdict         near chance / some leakage / leaks, with the findings behind it
    recommendation   the arm to release, and why
    blind_baseline   a model-free member/non-member classifier on the same sets, and whether it rivals the attacks
    statistical_tests  "baseline vs <arm>: …" → two-proportion comparison
    budget           per privacy unit: each DP arm's ε alone and all of them released together (composed)
    warnings         strings
    durations_s      stage → seconds (the only field that differs between identical runs)
    versions         python and package versions

Undefined figures are ``null`` (never NaN). Masked values only: no raw PII.
"""

from __future__ import annotations

import platform
from importlib import metadata
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, SerializeAsAny
from pydantic.json_schema import models_json_schema

from .attacks.base import AttackResult
from .attacks.membership.attacks import MembershipResult
from .attacks.membership.selection import MembershipDesign
from .attacks.registry import result_type, result_types
from .config.requirement import Requirement
from .core.io import finite
from .core.stats import Comparison
from .core.typed import (  # noqa: F401  (GgufSource: results.GgufSource)
    DETAILS, ArmDetails, Bits, Delta, Epsilon, GgufSource, Nats, Perplexity, Probability, ProbabilityInterval, Seconds,
    Typed, register_details)
from .attacks.bounds import (  # noqa: F401  (results.OneRunEpsilon …)
    EmpiricalEpsilon, EmpiricalEpsilonBound, OneRunCandidate, OneRunEpsilon, OneRunReconstruction,
    ReconstructionCandidate, RocBand)
from .defenses.arm_data import DedupArmReport, ScrubArmReport
from .defenses.release_report import (  # noqa: F401  (results.ReleasedSummary …)
    DataRelease, LdpTerms, ReleasedQuery, ReleasedSummary)

SCHEMA_VERSION = "2"
SCHEMA_FILE = "results.schema.json"


def _by_kind(lookup: Any, what: str) -> Any:
    """A validator turning a dict into the class its ``kind`` names, looked up when the data is read (so a type
    registered after this module was imported — a plug-in — is known)."""
    def validate(v: Any) -> Any:
        if isinstance(v, dict):
            cls = lookup(v.get("kind"))
            if cls is None:
                raise ValueError(f"unknown {what} kind {v.get('kind')!r}: is the module that registers it imported?")
            return cls.model_validate(v)
        return v
    return BeforeValidator(validate)


#: An attack's result, as the type its registry entry names (serialised with its own fields).
AnyAttackResult = Annotated[SerializeAsAny[AttackResult], _by_kind(result_type, "attack result")]
#: An arm kind's block, as the type its kind registered.
AnyArmDetails = Annotated[SerializeAsAny[ArmDetails], _by_kind(DETAILS.get, "arm")]


class ToolInfo(Typed):
    name: str
    version: str


class BlindBaseline(Typed):
    """A model-free classifier on the membership evaluation sets (audit/blind.py; Das, Zhang & Tramèr 2024).

    ``shifted``: it rivals the attacks (``rule``) on the arms in ``rivalled``, or is far from chance on its
    own — then membership figures are not evidence of memorisation.
    """

    auc: Probability
    auc_ci95: ProbabilityInterval | None = None
    tpr_at_1pct_fpr: Probability
    tpr_at_1pct_fpr_ci95: ProbabilityInterval | None = None
    n_members: int
    n_non_members: int
    folds: int
    features: str
    rule: str
    shifted: bool = False
    rivalled: list[str] = []


class ForgetSummary(Typed):
    """The unlearning arms' forget set (:func:`privleak.data.unlearning.draw_forget_set`), counted: persons
    forgotten of the eligible member persons, the forgotten canaries by id, records on each side."""

    n_persons: int
    n_member_persons: int
    canary_ids: list[str]
    n_canaries: int
    n_forget_records: int
    n_retain_records: int
    settings: dict[str, Any] = {}


class DataSummary(Typed):
    source: str
    n_public: int
    n_members: int
    n_canary_records: int
    n_non_members: int
    n_population: int
    mia_records_per_side: int
    membership_design: MembershipDesign | None = None
    n_canaries: int
    canary_chance_exposure: Bits | None
    forget: ForgetSummary | None = None  # audits with unlearning arms


class BaseModelSource(Typed):
    """Where the base model came from: the embedded model (pre-trained here) or the user's."""

    kind: Literal["embedded", "user"]
    path: str
    spec: dict[str, Any] | None = None
    ref: str | None = None
    n_params: int | None = None
    gguf: GgufSource | None = None  # the user's model was a GGUF file


class Training(Typed):
    """What training cost, so arms are compared at their real compute."""

    steps: int
    epoch_losses: list[float]
    settings: dict[str, Any]
    tokens: int | None = None  # tokens processed (DP: expected, q · steps · tokens in the data)
    stopped_epoch: float | None = None  # the best arm: where early stopping kept the model
    rehearsal_records: int | None = None  # the best arm: public records trained on beside the members


class GradientCanaryCheck(Typed):
    """The white-box gradient canaries of a DP arm's training (:mod:`privleak.models.gradient_canaries`): m
    canaries (``included`` of them in) read through every one of ``steps`` DP steps, in units of the claimed C, as
    the sufficient statistics S_nn = Σ N_i², S_ny = Σ N_i·y_i, S_yy = Σ y_i² (N_i: steps canary i joined; y_i:
    its summed noised reading); ``scale``: a canary's gradient norm over C. Judged by
    :func:`privleak.audit.whitebox.whitebox_alarm_test`."""

    canaries: int = Field(ge=3)
    included: int
    steps: int
    scale: float = Field(gt=0)
    sum_nn: float = Field(ge=0)
    sum_ny: float
    sum_yy: float = Field(ge=0)


class Privacy(Typed):
    """DP-SGD parameters and the ε spent, by the training accountant and cross-checked by dp_accounting."""

    target_epsilon: Epsilon
    epsilon: Epsilon
    accountant: str
    delta: Delta
    sigma: float = Field(ge=0)
    sample_rate: float = Field(gt=0, le=1)
    steps: int = Field(ge=0)
    max_grad_norm: float
    epsilon_rdp: Epsilon | None
    epsilon_pld: Epsilon | None
    epsilon_prv: Epsilon | None
    empty_batches: int | None = None
    # Federated arms (DP-FedAvg): the unit of ``epsilon`` is the client; one record inside a client is held to
    # ``epsilon_record`` (replace-one of the client's update, :mod:`privleak.accountants.analysis.federated`).
    unit: Literal["record", "client", "person"] = "record"
    epsilon_record: Epsilon | None = None
    # The real person (a synthetic patient, a --group-field group, else a distinct raw text; the unit is stamped
    # from the raw data before any defence) with the most records in the training data is guaranteed
    # ε ≤ ``epsilon_person`` at the same δ (an accountant's upper bound: privleak.accountants.group_epsilon for
    # record-level arms; the arm's own ε for person-level ones; ``epsilon_record`` for a client-level one when every
    # person lies in one client, else None). Planted canaries (each its own made-up
    # individual) are reported apart: the one with the most copies, ``canary_records``, at ``epsilon_canary``.
    epsilon_person: Epsilon | None = None
    person_records: int | None = None
    person_accounting: str | None = None
    records_per_person: dict[str, int] = {}
    epsilon_canary: Epsilon | None = None
    canary_records: int | None = None
    records_per_canary: dict[str, int] = {}
    # The white-box check of the DP step (None: not run — a "hooks" step, a federated arm, a model trained elsewhere).
    gradient_canaries: GradientCanaryCheck | None = None

    @property
    def epsilon_per_record(self) -> float:
        """The ε one record's inclusion is held to (what the record-level audits check)."""
        return self.epsilon_record if self.epsilon_record is not None else self.epsilon


class Utility(Typed):
    """Held-out language-modelling quality. L = mean token negative log-likelihood
    (nats; log-perplexity), token-weighted over the texts.

    ``gain_recovered`` is G = (L_base − L_arm) / (L_base − L_best) on the private
    held-out text (non-members): the share of the best non-private fine-tune's
    gain over the base model that this arm keeps (1: all of it; 0: none; < 0:
    worse than not fine-tuning). On log-perplexity, not perplexity: when the
    base model is far off, a ratio of perplexities is dominated by the base.
    """

    ppl_members: Perplexity | None
    ppl_non_members: Perplexity | None
    nll_non_members: Nats | None = None  # L on the private domain's held-out text
    nll_public: Nats | None = None  # L on held-out public (generic) text: does fine-tuning forget?
    ppl_public: Perplexity | None = None
    gain_recovered: float | None = None  # G; None without a best reference or when it gained nothing
    gain_recovered_ci95: tuple[float, float] | None = None  # paired bootstrap over the held-out texts
    # The same on the held-out tokens outside PII spans: what a model should learn (the institution's
    # language), without the names and numbers a defence is meant to remove (scrubbing replaces them).
    nll_non_members_outside_pii: Nats | None = None
    gain_recovered_outside_pii: float | None = None
    gain_recovered_outside_pii_ci95: tuple[float, float] | None = None
    #: G of the same recipe retrained on extra training seeds (``recommendation.seeds``; the audited model's G is
    #: ``gain_recovered``): the training variance the recommendation's tie rule reads.
    gain_recovered_seeds: list[float] = []


class ExposedPerson(Typed):
    """One of an arm's most exposed individuals (audit/membership.py: ``exposed_people``), masked.

    ``flagged_by``: the membership attacks that call this person's evaluated record a member at a
    threshold with ≤ 1 % false positives on the non-members; ``percentile``: the record's highest score
    percentile among the non-members' scores over the attacks.
    """

    id: str
    name: str | None = None
    records: int
    flagged_by: list[str]
    percentile: Probability


class Defences(Typed):
    scrub: ScrubArmReport | None = None
    dedup: DedupArmReport | None = None


class Verdict(Typed):
    """Plain-language verdict of one arm (audit/verdicts.py)."""

    #: forgotten / not_forgotten / over_forgotten: an unlearning arm, judged on its forget set (arms/forgetting.py)
    #: inconclusive: no leak found, not shown near chance (an arm's attacks), or not shown forgotten (unlearning)
    level: Literal["control", "guard", "chance", "some", "leaks", "inconclusive", "none", "forgotten", "not_forgotten",
                   "over_forgotten"]
    label: str
    text: str
    findings: list[str]  # what leaks, in words
    figures: list[str]  # the figures behind it
    families_leaking: list[str] = []
    attacks_leaking: list[str] = []  # registry names of the attacks behind ``findings``
    #: The attacks that found no leak yet could not show their figure within its margin, each with the items that
    #: would settle it (what keeps an arm INCONCLUSIVE).
    unsettled: list[str] = []
    #: INCONCLUSIVE only: every unsettled figure's estimate lies inside its margin, so more items at these
    #: estimates would show the arm near chance (False: some estimate is at or beyond its margin).
    settleable: bool = False
    #: How the verdict's error rates are controlled, in words: the family-wise rule over the arm's leak tests and
    #: the equivalence tests behind NEAR CHANCE.
    error_control: str = ""

    @property
    def near_chance(self) -> bool:
        return self.level == "chance"


class ArmResult(Typed):
    """One model's results. ``kind``: its arm kind (:mod:`privleak.arms`), or "control" for the base model;
    ``details``: the kind's own block (DP-Weights' noise, a federation, the guard's costs, an external model)."""

    kind: str
    serves: str | None = None
    training: Training | None = None
    n_train_records: int | None = None
    privacy: Privacy | None = None
    utility: Utility
    attacks: dict[str, AnyAttackResult] = {}
    empirical_epsilon: EmpiricalEpsilon | None = None
    one_run_epsilon: OneRunEpsilon | None = None
    exposed_people: list[ExposedPerson] = []
    defences: Defences | None = None
    details: AnyArmDetails | None = None
    verdict: Verdict | None = None
    source: BaseModelSource | None = None  # the control only
    #: The same recipe retrained on extra training seeds and attacked like the arm (an empirical requirement must
    #: hold on every measured seed); empty unless the recommendation asked for them.
    seed_results: list["ArmResult"] = []

    def attack(self, name: str) -> AttackResult | None:
        return self.attacks.get(name)

    def membership(self) -> dict[str, MembershipResult]:
        return {k: v for k, v in self.attacks.items() if isinstance(v, MembershipResult)}

    def best_membership(self) -> tuple[str | None, MembershipResult | None]:
        """The membership attack with the highest AUC (ties: the later name, as before)."""
        mia = self.membership()
        if not mia:
            return None, None
        name = max(mia, key=lambda a: (mia[a].auc, a))
        return name, mia[name]

    @property
    def epsilon(self) -> float | None:
        return self.privacy.epsilon if self.privacy else None


class AlarmOutcome(Typed):
    """One test of one DP arm's claim (:mod:`privleak.audit.alarms`): its p-value, the level it was allotted,
    whether it rejects, and whether it may raise the alarm (the one-run route) or is a diagnostic."""

    arm: str
    route: str
    claim: str
    p_value: Probability
    level: Probability
    rejected: bool
    alarm: bool
    bound_at_level: float | None = None  # the ε lower bound at the allotted level (routes that give one)


class PowerNeed(Typed):
    """The smallest violation one alarm test can show at its level: ``correct`` right of its ``guesses``
    (None: not even every guess right would)."""

    route: str
    guesses: int
    correct: int | None


class AlarmPower(Typed):
    """What one DP arm's alarm could have caught at this audit's size (:func:`privleak.audit.alarms.alarm_power`).

    ``verified``: had this arm been broken as badly as ``reference`` — its canaries guessed and decoded as well as
    the audit's non-private arm's (the model a DP-SGD without noise or clipping approaches), or, with no such arm,
    every guess right — its alarm tests, at their allotted levels, would have raised "DP guarantee violated".
    False: a broken implementation could pass this audit unnoticed ("implementation unverified"). ``route`` and
    ``p_value``: the test that would have caught it and its p-value on the reference's guesses; ``needed``: per
    alarm test, the fewest right guesses of the test's largest guess count that refute the claim."""

    arm: str
    verified: bool
    reference: str  # an arm's name, or "every guess right"
    route: str | None = None
    p_value: Probability | None = None
    level: Probability | None = None
    needed: list[PowerNeed] = []
    text: str


class Alarms(Typed):
    """"DP guarantee violated", decided once for the whole audit with a stated false-alarm probability:
    ``statement`` says it in one sentence; ``violated``: the arms it names; ``power``: per DP arm, what the
    alarm could have caught at this size."""

    alpha: Probability
    statement: str
    violated: list[str]
    outcomes: list[AlarmOutcome]
    diagnostics_rejected: list[str] = []  # "arm: route" of the diagnostics that reject (never an alarm)
    power: dict[str, AlarmPower] = {}


class Standing(Typed):
    """One recommendable arm against the requirement (:mod:`privleak.audit.recommend`): does it ``meets`` it, and
    if not what it lacks (``lacks`` in words, ``lacking`` the reason's code); its ε on the requirement's ``unit``
    (None: no DP guarantee for it) at ``delta``; ``verified``: the DP alarm could have caught it broken at this
    audit's size (None: not a DP arm, or no power figure), ``power`` its words; its utility (G, the mean over its
    ``seeds`` trained models; minus the held-out perplexity when ``utility_is_g`` is false) with the interval the
    choice reads, and ``epsilon_all_together``: everything trained on the same people, composed, on the unit."""

    arm: str
    meets: bool
    lacks: str = ""
    lacking: Literal["", "no_dp", "alarm", "delta", "unit", "epsilon", "leak", "blind", "unshown"] = ""
    epsilon: Epsilon | None = None
    delta: Delta | None = None
    unit: Literal["person", "record"] = "person"
    verified: bool | None = None
    power: str = ""
    utility: float | None = None
    utility_is_g: bool = True
    utility_ci: tuple[float, float] | None = None
    seeds: int = Field(1, ge=1)
    seed_sd: float | None = Field(None, ge=0)
    epsilon_all_together: Epsilon | None = None


class Recommendation(Typed):
    """Which arm meets the stated ``requirement`` with the most utility (:mod:`privleak.audit.recommend`; the
    sentences: :mod:`privleak.audit.wording`). ``arm`` None: no arm meets it (``text`` says the one reason).
    ``standings``: every recommendable arm against the requirement; ``eligible``: those that meet it;
    ``contenders``: the eligible arms the audit could not tell from the best on utility; ``tied``: those still
    tied after retraining, in the tie rule's order; ``needs_seeds``: contenders awaiting extra training seeds
    (the pipeline trains them and asks again; empty in a finished audit unless ``recommendation.seeds`` is 0)."""

    arm: str | None
    text: str
    requirement: Requirement = Requirement()
    requirement_text: str = ""
    audit_delta: Delta | None = None
    standings: list[Standing] = []
    eligible: list[str] = []
    contenders: list[str] = []
    tied: list[str] = []
    needs_seeds: list[str] = []
    policy: str = ""  # the thresholds of the verdicts and the choice, in words
    rule: str = ""  # the choice, in words
    training_noise: str = ""  # how training-seed variance entered the choice, in words


class BudgetRelease(Typed):
    """Some of the audit's DP models released together, and the ε that costs (their trainings composed): per
    record (every training's record-level event: add/remove, or replace-one for person- and client-level
    trainings) and per real person (every training's event for the person with the most records), both
    guaranteed upper bounds at ``delta``."""

    what: str
    arms: list[str]
    epsilon: Epsilon  # per record
    delta: Delta
    epsilon_person: Epsilon | None = None
    person_records: int | None = None  # that person's records in the training that held most of them


class PrivacyBudget(Typed):
    """Which ε a release of this audit's DP arms carries (:mod:`privleak.pipeline.budget`): each arm alone, and
    every one of them together — the composition of their trainings of the same people (``members``: the members'
    content hash) at one common unit, whatever unit each arm's own accountant states: ``epsilon`` per record
    (``unit``), ``epsilon_person`` per person. Other trainings of these people (tuning, earlier runs) are in the
    ledgers ``privleak budget`` reads, not here."""

    members: str
    unit: str
    accountant: str
    releases: list[BudgetRelease]


class AuditResults(Typed):
    schema_version: Literal["2"] = SCHEMA_VERSION
    tool: ToolInfo
    config: dict[str, Any]
    data: DataSummary
    data_release: DataRelease | None = None
    base_model: ArmResult | None  # None: no control (privleak attack without --reference)
    arms: dict[str, ArmResult] = Field(min_length=1)
    recommendation: Recommendation | None = None
    alarms: Alarms | None = None
    blind_baseline: BlindBaseline | None = None
    statistical_tests: dict[str, Comparison] = {}
    budget: list[PrivacyBudget] = []  # what releasing several DP arms together costs
    warnings: list[str] = []
    durations_s: dict[str, Seconds | None] = {}
    versions: dict[str, str | None] = {}

    def models(self) -> list[tuple[str, ArmResult]]:
        """(name, result) of the control first (when there is one), then every arm."""
        control = [(CONTROL, self.base_model)] if self.base_model is not None else []
        return [*control, *self.arms.items()]

    def to_json(self) -> dict[str, Any]:
        return finite(self.model_dump(mode="json"))


CONTROL = "base (control)"

_PACKAGES = ("torch", "transformers", "tokenizers", "opacus", "dp-accounting", "numpy", "scipy", "faker")


def package_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def json_schema() -> dict[str, Any]:
    """The JSON Schema of ``results.json`` as written (computed fields included), for the attacks and arm kinds
    registered now: ``attacks`` values and ``details`` are one of their registered types (by ``kind``)."""
    attacks, details = list(result_types()), list(dict.fromkeys(DETAILS.values()))
    _, top = models_json_schema([(AuditResults, "serialization"), *[(c, "serialization") for c in attacks + details]],
                                ref_template="#/$defs/{model}")
    defs = top["$defs"]

    def one_of(classes: list[type]) -> dict[str, Any]:
        return {"oneOf": [{"$ref": f"#/$defs/{c.__name__}"} for c in classes]} if classes else {}

    polymorphic = {"AttackResult": one_of(attacks), "ArmDetails": one_of(details)}

    def patch(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref", "")
            name = ref.rsplit("/", 1)[-1]
            if name in polymorphic and len(node) == 1:
                return polymorphic[name]
            if node.get("type") == "integer" and "minimum" not in node:  # every int of a result is a count (Typed)
                node = {**node, "minimum": 0}
            return {k: patch(v) for k, v in node.items()}
        if isinstance(node, list):
            return [patch(x) for x in node]
        return node

    defs = {k: patch(v) for k, v in defs.items() if k not in polymorphic}
    schema = defs.pop("AuditResults")
    schema["$defs"] = dict(sorted(defs.items()))
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://privleak.dev/results.schema.json"
    return schema
