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
    base_model       ArmResult (kind "control") + source: the base model never saw the members
    arms             arm name → ArmResult
                       kind            "baseline" | "best" | "dp" | "guard"
                       serves          the arm whose model a guard arm serves
                       training        steps, epoch losses, settings, records trained on
                       privacy         DP parameters and ε by three accountants (DP arms only)
                       utility         log-perplexity (nats) and perplexity on held-out private and
                                       public text, and the utility gain recovered G
                       attacks         attack name → that attack's typed result (see attacks/registry.py)
                       empirical_epsilon  the membership attacks' ε lower bound, per attack and for the arm
                       defences        scrub / dedup reports (data-defence arms)
                       guard           interventions and false positives (the guard arm)
                       verdict         near chance / some leakage / leaks, with the findings behind it
    recommendation   the arm to release, and why
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


class DataSummary(Typed):
    source: str
    n_public: int
    n_members: int
    n_canary_records: int
    n_non_members: int
    n_population: int
    mia_records_per_side: int
    n_canaries: int
    canary_chance_exposure: float | None


class BaseModelSource(Typed):
    """Where the base model came from: the embedded model (pre-trained here) or the user's."""

    kind: Literal["embedded", "user"]
    path: str
    spec: dict[str, Any] | None = None
    ref: str | None = None
    n_params: int | None = None


class Training(Typed):
    """What training cost, so arms are compared at their real compute."""

    steps: int
    epoch_losses: list[float]
    settings: dict[str, Any]
    tokens: int | None = None  # tokens processed (DP: expected, q · steps · tokens in the data)
    seconds: float | None = None  # wall-clock training time on this machine
    stopped_epoch: float | None = None  # the best arm: where early stopping kept the model


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
    kind: Literal["control", "baseline", "best", "dp", "guard"]
    serves: str | None = None
    training: Training | None = None
    n_train_records: int | None = None
    privacy: Privacy | None = None
    utility: Utility
    attacks: dict[str, AnyAttackResult] = {}
    empirical_epsilon: EmpiricalEpsilon | None = None
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
    base_model: ArmResult
    arms: dict[str, ArmResult] = Field(min_length=1)
    recommendation: Recommendation | None = None
    statistical_tests: dict[str, Comparison] = {}
    warnings: list[str] = []
    durations_s: dict[str, float | None] = {}
    versions: dict[str, str | None] = {}

    def models(self) -> list[tuple[str, ArmResult]]:
        """(name, result) of the control first, then every arm."""
        return [(CONTROL, self.base_model), *self.arms.items()]

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
