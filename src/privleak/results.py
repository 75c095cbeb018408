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
                       kind            "baseline" | "best" | "dp" | "dpw" | "fedavg" | "fed-dp" | "guard" | "external"
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
    warnings         strings
    durations_s      stage → seconds (the only field that differs between identical runs)
    versions         python and package versions

Undefined figures are ``null`` (never NaN). Masked values only: no raw PII.
"""

from __future__ import annotations

import json
import platform
from importlib import metadata
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import Field

from .attacks.base import AttackResult
from .attacks.mia import MembershipResult
from .attacks.registry import RESULT_TYPES
from .core.io import finite
from .core.stats import Rate
from .core.typed import Typed
from .defenses.arm_data import DedupArmReport, ScrubArmReport

SCHEMA_VERSION = "2"
SCHEMA_FILE = "results.schema.json"

AnyAttackResult = Annotated[Union[RESULT_TYPES], Field(discriminator="kind")]  # noqa: UP007 (a runtime tuple)


class ToolInfo(Typed):
    name: str
    version: str


class MembershipDesign(Typed):
    """How the membership evaluation sets were drawn (audit/membership.py: ``mia_selection``).

    ``unit``: "person", "group" (``--group-field``) or "distinct text"; pairs are [members, non-members].
    ``available`` false: the sets cannot support an ε bound, and ``reason`` says why.
    """

    unit: str
    eligible_records: list[int]
    units: list[int]
    evaluated: list[int]
    near_duplicate_clusters_dropped: int
    near_duplicate_records_merged: int
    strata: dict[str, int]
    available: bool
    reason: str = ""


class BlindBaseline(Typed):
    """A model-free classifier on the membership evaluation sets (audit/blind.py; Das, Zhang & Tramèr 2024).

    ``shifted``: it rivals the attacks (``rule``) on the arms in ``rivalled``, or is far from chance on its
    own — then membership figures are not evidence of memorisation.
    """

    auc: float
    auc_ci95: tuple[float, float] | None = None
    tpr_at_1pct_fpr: float
    tpr_at_1pct_fpr_ci95: tuple[float, float] | None = None
    n_members: int
    n_non_members: int
    folds: int
    features: str
    rule: str
    shifted: bool = False
    rivalled: list[str] = []


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
    canary_chance_exposure: float | None


class ReleasedQuery(Typed):
    """One statistic released under central DP (:mod:`privleak.defenses.release`): noisy values only."""

    name: str
    mechanism: Literal["laplace", "gaussian"]
    sensitivity: float
    noise_scale: float
    noise_sd: float
    epsilon_alone: float | None
    labels: list[str]
    values: list[float]


class ReleasedSummary(Typed):
    """The data summary under (ε, δ)-DP: Laplace / Gaussian per statistic, composed by dp_accounting's PLD."""

    epsilon: float
    delta: float
    epsilon_basic_composition: float
    accountant: str
    unit: str
    n_units_exact_kept: bool
    clipping: dict[str, list[float]]
    queries: list[ReleasedQuery]
    notes: list[str] = []
    systolic_mean: float | None = None  # post-processed from the released sum and histogram

    def query(self, name: str) -> ReleasedQuery | None:
        return next((q for q in self.queries if q.name == name), None)


class LdpTerms(Typed):
    """The members' frequent terms learned under ε-local DP (:func:`privleak.defenses.ldp_terms.discover`)."""

    epsilon: float
    method: Literal["cms", "hcms"]
    k: int
    m: int
    n_users: int
    n_candidates: int
    threshold: float
    terms: list[tuple[str, float]]
    candidates_from: str
    rule: str


class DataRelease(Typed):
    """What the audit releases about the members under DP, with the ε each spent."""

    summary: ReleasedSummary | None = None
    ldp_terms: LdpTerms | None = None
    epsilon_total: float  # summary ε + LDP ε (basic composition of the two, at the summary's δ)


class BaseModelSource(Typed):
    """Where the base model came from: the embedded model (pre-trained here) or the user's."""

    kind: Literal["embedded", "user"]
    path: str
    spec: dict[str, Any] | None = None
    ref: str | None = None
    n_params: int | None = None


class ExternalModel(Typed):
    """The model an ``external`` arm audits (``privleak attack``): as named, and the directory loaded."""

    ref: str
    path: str
    adapter: bool = False  # a PEFT adapter, merged into ``base`` for the audit
    base: str | None = None
    base_path: str | None = None
    n_params: int | None = None


class Training(Typed):
    """What training cost, so arms are compared at their real compute."""

    steps: int
    epoch_losses: list[float]
    settings: dict[str, Any]
    tokens: int | None = None  # tokens processed (DP: expected, q · steps · tokens in the data)
    stopped_epoch: float | None = None  # the best arm: where early stopping kept the model
    rehearsal_records: int | None = None  # the best arm: public records trained on beside the members


class Privacy(Typed):
    """DP-SGD parameters and the ε spent, by the training accountant and cross-checked by dp_accounting."""

    target_epsilon: float
    epsilon: float
    accountant: str
    delta: float
    sigma: float
    sample_rate: float
    steps: int
    max_grad_norm: float
    epsilon_rdp: float | None
    epsilon_pld: float | None
    epsilon_prv: float | None
    empty_batches: int | None = None
    # Federated arms (DP-FedAvg): the unit of ``epsilon`` is the client; one record inside a client is held to
    # ``epsilon_record`` (replace-one of the client's update, :mod:`privleak.accountants.analysis.federated`).
    unit: Literal["record", "client"] = "record"
    epsilon_record: float | None = None

    @property
    def epsilon_per_record(self) -> float:
        """The ε one record's inclusion is held to (what the record-level audits check)."""
        return self.epsilon_record if self.epsilon_record is not None else self.epsilon


class Federation(Typed):
    """How a federated arm was trained (:mod:`privleak.models.federated`): the strategy, the clients and
    their sizes (records), the rounds, the per-round sampling, and who was asked and who answered."""

    strategy: str
    clients: int
    client_sizes: dict[str, int]
    rounds: int
    sample_rate: float
    sampling: str
    local_steps: int
    sampled: list[int]
    replied: list[int]
    failures: int
    client_steps: int


class WeightNoise(Typed):
    """A DP-Weights arm's noise (:mod:`privleak.defenses.weight_noise`): θ + N(0, σ²I) after training.
    ``guarantee`` says in words that there is no formal ε; there is deliberately no ε field."""

    sigma: float
    n_parameters: int
    weight_rms: float
    update_rms: float | None
    seed: int
    guarantee: str


class Utility(Typed):
    """Held-out language-modelling quality. L = mean token negative log-likelihood
    (nats; log-perplexity), token-weighted over the texts.

    ``gain_recovered`` is G = (L_base − L_arm) / (L_base − L_best) on the private
    held-out text (non-members): the share of the best non-private fine-tune's
    gain over the base model that this arm keeps (1: all of it; 0: none; < 0:
    worse than not fine-tuning). On log-perplexity, not perplexity: when the
    base model is far off, a ratio of perplexities is dominated by the base.
    """

    ppl_members: float | None
    ppl_non_members: float | None
    nll_non_members: float | None = None  # L on the private domain's held-out text
    nll_public: float | None = None  # L on held-out public (generic) text: does fine-tuning forget?
    ppl_public: float | None = None
    gain_recovered: float | None = None  # G; None without a best reference or when it gained nothing


class EmpiricalEpsilonBound(Typed):
    """One attack's ε lower bound (:func:`privleak.audit.epsilon.empirical_epsilon`)."""

    epsilon_lb: float
    threshold: float | None
    test: str
    tpr_lo: float
    fpr_hi: float
    k_p_eval: int
    k_q_eval: int
    n_pos_eval: int
    n_neg_eval: int
    n_pos_select: int
    n_neg_select: int
    epsilon_select: float | None
    delta: float
    alpha: float
    per_bound_alpha: float
    notes: list[str] = []


class BoundViolation(Typed):
    index: int
    inequality: str
    fpr: float
    tpr: float
    lhs: float
    rhs: float
    excess: float


class DpBound(Typed):
    """The strongest attack's ROC against TPR ≤ e^ε·FPR + δ (:func:`privleak.audit.epsilon.dp_bound_check`)."""

    attack: str
    epsilon: float
    delta: float
    violations: list[BoundViolation]
    max_excess: float
    ok: bool


class EmpiricalEpsilon(Typed):
    """The arm's empirical ε: the attack chosen on a selection half, its bound on the other half."""

    epsilon_lb: float
    attack: str
    alpha: float
    delta: float
    procedure: str
    strongest_attack_by_auc: str
    dp_bound: DpBound | None = None
    exceeds_accountant: bool | None = None
    by_attack: dict[str, EmpiricalEpsilonBound]


class OneRunCandidate(Typed):
    """One guess count of the one-run audit: k_in top guesses "in", k_out bottom guesses "out"."""

    k_in: int
    k_out: int
    guesses: int
    correct: int
    epsilon_steinke: float
    epsilon_fdp: float | None = None


class OneRunEpsilon(Typed):
    """The one-run ε lower bounds of one model from its audit canaries (audit/one_run.py).

    ``epsilon_steinke``: Steinke, Nasr & Jagielski 2023 — valid for any (ε, δ)-DP training, the
    figure checked against the accountant. ``epsilon_fdp``: Mahloujifar, Melis & Chaudhuri 2024 under
    the Gaussian trade-off function with the same (ε, δ) (the curve DP-SGD's analysis approximates;
    tighter, but it refutes "as private as that Gaussian mechanism", not (ε, δ)-DP itself). Both are
    maxima over a fixed grid of guess counts at α / |grid| each. ``available`` false: no bound, and
    ``reason`` says why.
    """

    available: bool
    reason: str = ""
    epsilon_steinke: float | None = None
    epsilon_fdp: float | None = None
    m: int = 0
    n_included: int = 0
    score: str = ""
    alpha: float = 0.05
    alpha_each: float | None = None
    delta: float = 0.0
    best: OneRunCandidate | None = None
    candidates: list[OneRunCandidate] = []
    exceeds_accountant: bool | None = None


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
    percentile: float


class Defences(Typed):
    scrub: ScrubArmReport | None = None
    dedup: DedupArmReport | None = None


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


class GuardReport(Typed):
    interventions: dict[str, Interventions]
    false_positives: FalsePositives
    false_positive_examples: list[GuardExample]
    guard: dict[str, Any]  # the guard's own description (thresholds, index sizes, policy)
    settings: dict[str, Any]


class Verdict(Typed):
    """Plain-language verdict of one arm (audit/verdicts.py)."""

    level: Literal["control", "guard", "chance", "some", "leaks", "none"]
    label: str
    text: str
    findings: list[str]  # what leaks, in words
    figures: list[str]  # the figures behind it
    families_leaking: list[str] = []
    attacks_leaking: list[str] = []  # registry names of the attacks behind ``findings``

    @property
    def near_chance(self) -> bool:
        return self.level == "chance"


class ArmResult(Typed):
    kind: Literal["control", "baseline", "best", "dp", "dpw", "fedavg", "fed-dp", "guard", "external"]
    serves: str | None = None
    target: ExternalModel | None = None  # an external arm only
    training: Training | None = None
    n_train_records: int | None = None
    privacy: Privacy | None = None
    weight_noise: WeightNoise | None = None
    federation: Federation | None = None
    utility: Utility
    attacks: dict[str, AnyAttackResult] = {}
    empirical_epsilon: EmpiricalEpsilon | None = None
    one_run_epsilon: OneRunEpsilon | None = None
    exposed_people: list[ExposedPerson] = []
    defences: Defences | None = None
    guard: GuardReport | None = None
    verdict: Verdict | None = None
    source: BaseModelSource | None = None  # the control only

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


class Comparison(Typed):
    """Arm 1 vs arm 2 on a leak count (:func:`privleak.core.stats.compare_proportions`)."""

    k1: int
    n1: int
    k2: int
    n2: int
    p1: float
    p2: float
    p1_ci95: tuple[float, float]
    p2_ci95: tuple[float, float]
    diff: float
    diff_ci95: tuple[float, float]
    cohens_h: float
    fisher_p: float
    fisher_p_greater: float
    chi2_p: float


class Recommendation(Typed):
    arm: str | None
    text: str
    policy: str  # the thresholds that decide "near chance", in words


class AuditResults(Typed):
    schema_version: Literal["2"] = SCHEMA_VERSION
    tool: ToolInfo
    config: dict[str, Any]
    data: DataSummary
    data_release: DataRelease | None = None
    base_model: ArmResult | None  # None: no control (privleak attack without --reference)
    arms: dict[str, ArmResult] = Field(min_length=1)
    recommendation: Recommendation | None = None
    blind_baseline: BlindBaseline | None = None
    statistical_tests: dict[str, Comparison] = {}
    warnings: list[str] = []
    durations_s: dict[str, float | None] = {}
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
    """The JSON Schema of ``results.json`` as written (computed fields included)."""
    schema = AuditResults.model_json_schema(mode="serialization")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://privleak.dev/results.schema.json"
    return schema


def write_schema(path: Path | None = None) -> Path:
    target = path or Path(__file__).with_name(SCHEMA_FILE)
    target.write_text(json.dumps(json_schema(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return target


if __name__ == "__main__":
    print(write_schema())
