"""``results.json`` from the run directory's artefacts: typed, judged, complete."""

from __future__ import annotations

import math

from .. import __version__
from ..arms import parse_arm
from ..attacks.base import FAMILIES
from ..attacks.exposure import chance_exposure
from ..audit.utility import MIN_GAIN_NATS, gain_recovered
from ..audit.verdicts import judge
from ..core.io import read_json
from ..results import (
    ArmResult,
    AuditResults,
    BaseModelSource,
    DataSummary,
    Defences,
    GuardReport,
    Privacy,
    ToolInfo,
    Training,
    Utility,
    package_versions,
)
from .audit import Audit
from .evaluate import evaluation_subsets, read_stage


def _attacks(audit: Audit, model: str, durations: dict[str, float]) -> tuple[dict, object, dict]:
    """Every family stage of one model merged: (results by attack, membership summary, interventions)."""
    results, summary, interventions = {}, None, {}
    for family in FAMILIES:
        stage = read_stage(audit, model, family)
        if stage is None:
            continue
        results.update(stage.results)
        summary = stage.empirical_epsilon or summary
        interventions.update(stage.interventions or {})
        durations.update({f"{family}/{model}/{k}": v for k, v in stage.seconds.items()})
    return results, summary, interventions


def _utility(audit: Audit, model: str) -> Utility:
    return Utility.model_validate(read_json(audit.run.path("arms", model, "utility.json")))


def _check_dp_claims(audit: Audit, name: str, arm: ArmResult) -> None:
    """An empirical lower bound above the accountant's ε, or a measured operating point significantly
    outside TPR ≤ e^ε·FPR + δ, means a bug (or a broken DP guarantee): never hide it."""
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
    attacks, summary, _ = _attacks(audit, "base", durations)
    base = ArmResult(kind="control", utility=_utility(audit, "base"), attacks=attacks, empirical_epsilon=summary,
                     source=BaseModelSource.model_validate(read_json(run.path("base_model.json"))))
    arms: dict[str, ArmResult] = {}
    for name in arm_names:
        spec = parse_arm(name)
        attacks, summary, interventions = _attacks(audit, name, durations)
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
                                               tokens=tr.get("tokens"), seconds=tr.get("seconds"),
                                               stopped_epoch=tr.get("stopped_epoch")),
            n_train_records=tr.get("n_train_records"), privacy=Privacy.model_validate(tr["privacy"]) if tr["privacy"] else None,
            utility=_utility(audit, name), attacks=attacks, empirical_epsilon=summary, defences=defences)
        _check_dp_claims(audit, name, arms[name])
    _utility_recovered(audit, base, arms)
    mi, _ = evaluation_subsets(audit)
    members = splits["members"]
    data = DataSummary(
        source=cfg.data.path or "synthetic-clinical", n_public=len(splits["public"]), n_members=len(members),
        n_canary_records=sum(r.kind == "canary" for r in members), n_non_members=len(splits["non_members"]),
        n_population=len(splits["population"]), mia_records_per_side=int(len(mi)), n_canaries=len(canaries),
        canary_chance_exposure=chance_exposure(cfg.canaries.candidates) if canaries else None)
    results = AuditResults(
        tool=ToolInfo(name="privleak", version=__version__), config=cfg.model_dump(mode="json"), data=data,
        base_model=base, arms=arms, warnings=audit.warnings,
        durations_s={**{k: round(v, 2) for k, v in run.durations.items()}, **durations}, versions=package_versions())
    return judge(results)
