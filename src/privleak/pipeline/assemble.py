"""``results.json`` from the run directory's artefacts: typed, judged, complete."""

from __future__ import annotations

import math

from .. import __version__
from ..arms import parse_arm
from ..attacks.base import FAMILIES
from ..attacks.exposure import chance_exposure
from ..audit.blind import RULE, rivals
from ..audit.utility import MIN_GAIN_NATS, gain_recovered
from ..audit.verdicts import judge
from ..core.io import read_json
from ..results import (
    ArmResult,
    AuditResults,
    BlindBaseline,
    BaseModelSource,
    DataRelease,
    DataSummary,
    Defences,
    Federation,
    GuardReport,
    Privacy,
    ToolInfo,
    Training,
    Utility,
    WeightNoise,
    package_versions,
)
from .audit import Audit
from .evaluate import read_stage, selection


def _attacks(audit: Audit, model: str, durations: dict[str, float]) -> tuple[dict, object, dict, object]:
    """Every family stage of one model merged: (results by attack, membership summary, interventions, one-run bound)."""
    results, summary, interventions, one_run = {}, None, {}, None
    exposed: list = []
    for family in FAMILIES:
        stage = read_stage(audit, model, family)
        if stage is None:
            continue
        results.update(stage.results)
        summary = stage.empirical_epsilon or summary
        one_run = stage.one_run_epsilon or one_run
        exposed = stage.exposed_people or exposed
        interventions.update(stage.interventions or {})
        durations.update({f"{family}/{model}/{k}": v for k, v in stage.seconds.items()})
    audit.shared.setdefault("exposed_people", {})[model] = exposed
    return results, summary, interventions, one_run


def _utility(audit: Audit, model: str) -> Utility:
    return Utility.model_validate(read_json(audit.run.path("arms", model, "utility.json")))


def _check_dp_claims(audit: Audit, name: str, arm: ArmResult) -> None:
    """An empirical lower bound above the accountant's ε, or a measured operating point significantly
    outside TPR ≤ e^ε·FPR + δ, means a bug (or a broken DP guarantee): never hide it."""
    one = arm.one_run_epsilon
    if arm.privacy is not None and one is not None and one.exceeds_accountant:
        audit.warn(f"!!! DP GUARANTEE VIOLATED — {name}: the one-run ε lower bound {one.epsilon_steinke:.2f} "
                   f"(95% confidence, {one.m} audit canaries) EXCEEDS the ε = {arm.privacy.epsilon_per_record:.2f} the accountant "
                   "claims; the DP step of this run does not deliver its guarantee (missing noise or clipping?)")
    emp = arm.empirical_epsilon
    if emp is None or arm.privacy is None:
        return
    if emp.exceeds_accountant:
        audit.warn(f"!!! {name}: empirical ε lower bound {emp.epsilon_lb:.3f} ({emp.attack}) EXCEEDS the accountant's ε — "
                   "the DP guarantee does not hold for this run; please report it")
    if emp.dp_bound is not None and not emp.dp_bound.ok:
        audit.warn(f"!!! {name}: measured operating points violate TPR ≤ e^ε·FPR + δ ({emp.dp_bound.attack}) — "
                   "the DP guarantee is contradicted")


#: The base model "does not fit" the private domain when its held-out perplexity
#: there is this many times the best fine-tune's (≈ 3 nats): fine-tuning is then
#: mostly learning the domain's text from scratch, which DP does poorly.
BASE_MISFIT_RATIO = 20.0


def _utility_recovered(audit: Audit, base: ArmResult, arms: dict[str, ArmResult]) -> None:
    """Fill in every arm's G against the base and the best reference; warn when the base does not fit."""
    best = arms.get("best")
    l_base = base.utility.nll_non_members
    l_best = best.utility.nll_non_members if best else None
    for arm in [base, *arms.values()]:
        arm.utility.gain_recovered = gain_recovered(l_base, arm.utility.nll_non_members, l_best)
    if best is None or l_base is None or l_best is None:
        return
    if l_base - l_best < MIN_GAIN_NATS:
        audit.warn(f"the best non-private fine-tune is no better than the base model on held-out text "
                   f"(log-perplexity {l_best:.3f} vs {l_base:.3f} nats): there was nothing to learn from the members, "
                   "so utility recovered is undefined and no defence's cost can be measured")
    elif l_base - l_best > math.log(BASE_MISFIT_RATIO):
        audit.warn(f"the base model does not fit this corpus: its held-out perplexity ({math.exp(l_base):,.1f}) is "
                   f"{math.exp(l_base - l_best):,.0f}× the best fine-tune's ({math.exp(l_best):.2f}), so fine-tuning mostly "
                   "learns the domain's text from scratch and DP arms pay for it; pass public text of your domain with "
                   "--public FILE (or a base model that knows it with --model)")


def assemble(audit: Audit, arm_names: list[str]) -> AuditResults:
    cfg, run = audit.cfg, audit.run
    splits, canaries = audit.splits(), audit.canaries()
    durations: dict[str, float] = {}
    attacks, summary, _, one_run = _attacks(audit, "base", durations)
    base = ArmResult(kind="control", utility=_utility(audit, "base"), attacks=attacks, empirical_epsilon=summary,
                     one_run_epsilon=one_run, exposed_people=audit.shared["exposed_people"]["base"],
                     source=BaseModelSource.model_validate(read_json(run.path("base_model.json"))))
    arms: dict[str, ArmResult] = {}
    for name in arm_names:
        spec = parse_arm(name)
        attacks, summary, interventions, one_run = _attacks(audit, name, durations)
        if spec.guard:
            served = arms["baseline"]
            report = GuardReport.model_validate(read_json(run.path("arms", name, "guard.json")))
            report.interventions = interventions
            arms[name] = ArmResult(kind="guard", serves="baseline", privacy=served.privacy, utility=served.utility,
                                   attacks=attacks, guard=report)
            continue
        tr = read_json(run.path("arms", name, "train.json"))
        defences = None
        if spec.data_defences:
            defences = Defences.model_validate({d: read_json(run.path("defences", d, "report.json"))
                                                for d in spec.data_defences})
        arms[name] = ArmResult(
            kind=tr["kind"], training=Training(steps=tr["steps"], epoch_losses=tr["epoch_losses"], settings=tr["settings"],
                                               tokens=tr.get("tokens"),
                                               stopped_epoch=tr.get("stopped_epoch"),
                                               rehearsal_records=tr.get("rehearsal_records") or None),
            n_train_records=tr.get("n_train_records"), privacy=Privacy.model_validate(tr["privacy"]) if tr["privacy"] else None,
            utility=_utility(audit, name), attacks=attacks, empirical_epsilon=summary, one_run_epsilon=one_run,
            exposed_people=audit.shared["exposed_people"][name], defences=defences,
            weight_noise=WeightNoise.model_validate(tr["weight_noise"]) if tr.get("weight_noise") else None,
            federation=Federation.model_validate(tr["federation"]) if tr.get("federation") else None)
        _check_dp_claims(audit, name, arms[name])
    _utility_recovered(audit, base, arms)
    sel = selection(audit)
    mi = sel.members
    if not sel.design.available:
        audit.warn(f"empirical ε unavailable: {sel.design.reason}")
    members = splits["members"]
    data = DataSummary(
        source=cfg.data.path or "synthetic-clinical", n_public=len(splits["public"]), n_members=len(members),
        n_canary_records=sum(r.kind == "canary" for r in members), n_non_members=len(splits["non_members"]),
        n_population=len(splits["population"]), mia_records_per_side=int(len(mi)),
        membership_design=sel.design, n_canaries=len(canaries),
        canary_chance_exposure=chance_exposure(cfg.canaries.candidates) if canaries else None)
    release = None
    if cfg.release.summary_epsilon is not None or cfg.release.ldp_terms_epsilon is not None:
        release = DataRelease.model_validate(read_json(run.path("release.json")))
    blind = BlindBaseline.model_validate({**read_json(run.path("blind_baseline.json")), "rule": RULE})
    for name, arm in arms.items():
        _, best = arm.best_membership()
        if best is not None and rivals(blind.auc, None, best.auc):
            blind.rivalled.append(name)
    blind.shifted = bool(blind.rivalled) or rivals(blind.auc, blind.auc_ci95, None)
    if blind.shifted:
        audit.warn(f"!!! distribution shift: a classifier that never sees the model tells the evaluated members from "
                   f"non-members with AUC {blind.auc:.3f} (TPR@1%FPR {blind.tpr_at_1pct_fpr:.3f})"
                   + (f", rivalling the attacks on {', '.join(blind.rivalled)}" if blind.rivalled else "")
                   + " — the split is distribution-shifted and membership figures are not evidence of memorisation")
    results = AuditResults(blind_baseline=blind,
        tool=ToolInfo(name="privleak", version=__version__), config=cfg.model_dump(mode="json"), data=data,
        data_release=release,
        base_model=base, arms=arms, warnings=audit.warnings,
        durations_s={**{k: round(v, 2) for k, v in run.durations.items()}, **durations}, versions=package_versions())
    return judge(results)
