"""``results.json`` from the run directory's artefacts: typed, judged, complete.

One path for ``privleak run`` and ``privleak attack``: the control (the base
model, or the user's reference model), every arm through its kind
(:meth:`privleak.arms.ArmKind.result`), the data summary, the blind
baseline with one distribution-shift rule, the verdicts. Everything it reads
is an input of the process's resolver (:func:`roots`: what the plan makes
first), so assembling reads the artefacts as every stage does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import __version__
from ..arms import ArmInputs, ArmSpec, judging
from ..arms.inputs import TRAINING, TRAINING_RECORDS
from ..attacks.base import FAMILIES
from ..attacks.exposure import chance_exposure
from ..attacks.inputs import AUDIT_CANARIES, BASE, CANARIES, FORGET_SET, SELECTION, SHADOWS, SPLITS, USER_SPLIT
from ..audit.blind import RULE, shifted
from ..audit.runner import AttackStage
from ..audit.utility import MIN_GAIN_NATS, gain_interval, gain_recovered
from ..audit.verdicts import judge
from ..core.inputs import Input, Inputs
from ..core.io import read_json
from ..results import (
    ArmResult,
    AuditResults,
    BaseModelSource,
    BlindBaseline,
    DataRelease,
    DataSummary,
    Defences,
    ExposedPerson,
    ForgetSummary,
    ToolInfo,
    Utility,
    package_versions,
)
from .audit import Audit
from .data import BASE_INFO
from .data_release import RELEASE
from .defences import DEFENCES
from .evaluate import BLIND, EVALUATION, UTILITY, UtilityFigures, extra_input, family_input
from .budget import Trained, privacy_budget
from .ledger import members_hash
from .training import ledger_people, seed_info, seed_name


def roots(inputs: Inputs) -> list[tuple[Input[Any], str | None]]:
    """What assembling the results reads, in the order the plan should make it: the audit-wide inputs, every
    model's training (and its shadows) before any evaluation, then each model's evaluation — the control
    first, then the arms, then the extra training seeds."""
    models = inputs.models
    out: list[tuple[Input[Any], str | None]] = [(i, None) for i in (RELEASE, BASE, AUDIT_CANARIES, FORGET_SET, BLIND)]
    out += [(TRAINING, m) for m, info in models.items() if info.evaluated]
    out += [(SHADOWS, m) for m in models]
    return out + [(EVALUATION, m) for m in models]


@dataclass
class ModelStages:
    """Every family stage of one model merged."""

    attacks: dict[str, Any] = field(default_factory=dict)
    empirical_epsilon: Any = None
    one_run_epsilon: Any = None
    exposed_people: list[ExposedPerson] = field(default_factory=list)
    wrapper: dict[str, Any] = field(default_factory=dict)

    def common(self) -> dict[str, Any]:
        """The fields every model's :class:`ArmResult` takes from its attack stages."""
        return {"attacks": self.attacks, "empirical_epsilon": self.empirical_epsilon,
                "one_run_epsilon": self.one_run_epsilon, "exposed_people": self.exposed_people}


def model_stages(inputs: Inputs, model: str, durations: dict[str, float]) -> ModelStages:
    out = ModelStages()
    for family in FAMILIES:
        key = family_input(family)
        stage: AttackStage | None = inputs.get(key, model) if inputs.available(key, model) else None
        if stage is None:
            continue
        out.attacks.update(stage.results)
        out.empirical_epsilon = stage.empirical_epsilon or out.empirical_epsilon
        out.one_run_epsilon = stage.one_run_epsilon or out.one_run_epsilon
        out.exposed_people = stage.exposed_people or out.exposed_people
        for key, value in (stage.wrapper or {}).items():
            out.wrapper.setdefault(key, {}).update(value)
        durations.update({f"{family}/{model}/{k}": v for k, v in stage.seconds.items()})
    return out


def _utility(inputs: Inputs, model: str) -> Utility:
    return _figures(inputs, model).utility


def _figures(inputs: Inputs, model: str) -> UtilityFigures:
    return inputs.get(UTILITY, model)


def _alarm_warnings(audit: Audit, results: AuditResults) -> None:
    """A refuted DP claim is never hidden: one loud warning per arm the audit-wide alarm names."""
    alarms = results.alarms
    if alarms is None:
        return
    for name in alarms.violated:
        o = next(x for x in alarms.outcomes if x.arm == name and x.alarm and x.rejected)
        audit.warn(f"!!! DP GUARANTEE VIOLATED — {name}: the {o.route.replace('_', '-')} test refutes {o.claim} "
                   f"(p = {o.p_value:.2g} at level {o.level:.3g}; {alarms.statement}) — the DP step of this run does "
                   "not deliver its guarantee (missing noise or clipping?)")
    results.warnings = audit.warnings


#: The base model "does not fit" the private domain when its held-out perplexity
#: there is this many times the best fine-tune's (≈ 3 nats): fine-tuning is then
#: mostly learning the domain's text from scratch, which DP does poorly.
BASE_MISFIT_RATIO = 20.0


def _text_losses(figures: dict[str, UtilityFigures], model: str | None,
                 outside_pii: bool = False) -> tuple[np.ndarray, np.ndarray] | None:
    f = figures.get(model or "")
    return None if f is None else f.outside_pii if outside_pii else f.texts


def _utility_recovered(audit: Audit, base: ArmResult | None, arms: dict[str, ArmResult], reference: str | None,
                       figures: dict[str, UtilityFigures]) -> None:
    """Fill in every arm's G (and its paired-bootstrap interval) against the base and the utility reference arm;
    warn when the base does not fit. ``figures``: each measured model's utility stage."""
    if base is None:
        return
    best = arms.get(reference) if reference else None
    l_base = base.utility.nll_non_members
    l_best = best.utility.nll_non_members if best else None
    texts_base, texts_best = _text_losses(figures, "base"), _text_losses(figures, reference)
    o_base, o_best = _text_losses(figures, "base", outside_pii=True), _text_losses(figures, reference, outside_pii=True)
    lo_base = base.utility.nll_non_members_outside_pii
    lo_best = best.utility.nll_non_members_outside_pii if best else None
    for name, arm in [("base", base), *arms.items()]:
        arm.utility.gain_recovered = gain_recovered(l_base, arm.utility.nll_non_members, l_best)
        texts = _text_losses(figures, arm.serves or name)
        if arm.utility.gain_recovered is not None and texts is not None and texts_base is not None and texts_best:
            arm.utility.gain_recovered_ci95 = gain_interval(texts_base, texts, texts_best, seed=audit.cfg.seed)
        # The same gain on the held-out tokens outside PII spans (None where the texts carry no spans).
        arm.utility.gain_recovered_outside_pii = gain_recovered(lo_base, arm.utility.nll_non_members_outside_pii, lo_best)
        outside = _text_losses(figures, arm.serves or name, outside_pii=True)
        if arm.utility.gain_recovered_outside_pii is not None and outside is not None and o_base is not None and o_best:
            arm.utility.gain_recovered_outside_pii_ci95 = gain_interval(o_base, outside, o_best, seed=audit.cfg.seed)
    for name, arm in arms.items():  # the recommendation's training noise: G of each extra training seed
        for m in _seeds(audit, name, "utility.json"):
            g = gain_recovered(l_base, _utility(audit.inputs, m).nll_non_members, l_best)
            if g is not None:
                arm.utility.gain_recovered_seeds.append(g)
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


def arm_result(audit: Audit, spec: ArmSpec, assembled: dict[str, ArmResult], durations: dict[str, float],
               extra: dict[str, dict[str, Any]] | None = None, control: ArmResult | None = None) -> ArmResult:
    """One arm's results through its kind: its stages, train.json, extra stages and data-defence reports.
    The seconds of the phases a kind times itself (``phases_s`` in its train.json: e.g. SISA's fit and its
    unlearning) join the durations as ``train/<arm>/<phase>`` (``derive/…`` for a derived kind), inside the
    stage's own figure."""
    kind, name, resolver = spec.kind_obj, spec.name, audit.inputs
    stages = model_stages(resolver, name, durations)
    record = resolver.get(TRAINING, name) if resolver.available(TRAINING, name) else None
    for phase, secs in ((record or {}).get("phases_s") or {}).items():
        durations[f"{'derive' if kind.model == 'derived' else 'train'}/{name}/{phase}"] = secs
    inputs = ArmInputs(record=record, extra={**(extra or {}), **stages.wrapper}, assembled=assembled, control=control)
    for x in kind.extra_stages():
        key = extra_input(f"extra/{x.name}")
        if resolver.available(key, name):
            inputs.extra[x.name] = resolver.get(key, name)
    common = stages.common()
    if spec.data:
        common["defences"] = Defences.model_validate({d: DEFENCES[d].report(audit.run) for d in spec.data})
    if kind.model != "served":
        common["utility"] = _utility(resolver, name)
    return kind.result(name, inputs, common)


def _blind(audit: Audit, arms: dict[str, ArmResult], user_split: bool) -> BlindBaseline:
    """The blind baseline, judged by :func:`privleak.audit.blind.shifted` (one rule; stricter for sets the user drew)."""
    blind = BlindBaseline.model_validate({**audit.inputs.get(BLIND), "rule": RULE})
    best = {n: a.best_membership()[1] for n, a in arms.items()}
    blind.shifted, blind.rivalled = shifted(blind.auc, blind.auc_ci95,
                                            {n: b.auc for n, b in best.items() if b is not None}, user_split)
    if blind.shifted and user_split:
        ci = f" [95% CI {blind.auc_ci95[0]:.3f}, {blind.auc_ci95[1]:.3f}]" if blind.auc_ci95 else ""
        top = max((b.auc for b in best.values() if b is not None), default=None)
        audit.warn(f"!!! shifted split: a classifier that never sees the model tells the given members from the "
                   f"non-members with AUC {blind.auc:.3f}{ci}"
                   + (f", rivalling the best attack's {top:.3f}" if blind.rivalled and top is not None else "")
                   + " — the two files differ in composition, so the membership-inference AUCs are NOT evidence of "
                   "leakage or memorisation, and no claim that a DP guarantee is violated can rest on them; give "
                   "non-members drawn from the same source and period as the members (canary exposure and "
                   "extraction do not depend on the split)")
    elif blind.shifted:
        audit.warn(f"!!! distribution shift: a classifier that never sees the model tells the evaluated members from "
                   f"non-members with AUC {blind.auc:.3f} (TPR@1%FPR {blind.tpr_at_1pct_fpr:.3f})"
                   + (f", rivalling the attacks on {', '.join(blind.rivalled)}" if blind.rivalled else "")
                   + " — the split is distribution-shifted and membership figures are not evidence of memorisation")
    return blind


def _seeds(audit: Audit, arm: str, artefact: str) -> list[str]:
    """The arm's extra training seeds (``arms/<arm>/seeds/<k>``) whose ``artefact`` is there — this run's, or a
    run's before it that asked for them — as models the resolver knows."""
    from ..arms import parse_arm

    out = []
    for k in range(1, audit.cfg.recommendation.seeds + 1):
        model = seed_name(arm, k)
        if audit.run.path("arms", model, artefact).exists():
            audit.inputs.models.setdefault(model, seed_info(audit.cfg, parse_arm(arm), k))
            out.append(model)
    return out


def _seed_results(audit: Audit, arms: dict[str, ArmResult], durations: dict[str, float]) -> None:
    """Under an empirical requirement, each extra training seed that was attacked (``arms/<arm>/seeds/<k>``), as
    a result of its own: the requirement must hold on every measured seed."""
    for name, arm in arms.items():
        for model in _seeds(audit, name, "attacks"):
            stages = model_stages(audit.inputs, model, durations)
            arm.seed_results.append(ArmResult(kind=arm.kind, utility=_utility(audit.inputs, model), privacy=arm.privacy,
                                              **stages.common()))


def _forget_summary(audit: Audit) -> ForgetSummary | None:
    if not audit.inputs.available(FORGET_SET):
        return None
    f = audit.inputs.get(FORGET_SET)
    return ForgetSummary(n_persons=f.n_persons, n_member_persons=f.n_member_persons, canary_ids=list(f.canary_ids),
                         n_canaries=f.n_canaries, n_forget_records=f.n_forget_records,
                         n_retain_records=f.n_retain_records, settings=f.settings)


def assembly_order(arm_specs: list[ArmSpec]) -> list[ArmSpec]:
    """The arms in an order where every arm comes after the arms its kind's :meth:`~privleak.arms.ArmKind.result`
    reads (its ``source``, its ``after`` arms), the audit's order otherwise."""
    names = {s.name for s in arm_specs}
    done: set[str] = set()
    out: list[ArmSpec] = []
    pending = list(arm_specs)
    while pending:
        for spec in pending:
            k = spec.kind_obj
            needs = {a for a in (k.source, *k.after) if a in names and a != spec.name}
            if needs <= done:
                out.append(spec)
                done.add(spec.name)
                pending.remove(spec)
                break
        else:  # a cycle cannot come from the built-in kinds; keep the audit's order for what is left
            out += pending
            break
    return out



def _budget_trainings(audit: Audit, arm_specs: list[ArmSpec], arms: dict[str, ArmResult]) -> dict[str, Trained]:
    """Every DP training of this audit as the results' budget composes it: each DP arm (a served arm is its
    source's model, not a training) and its extra training seeds, each with the people it trained on and an ELS
    arm's per-person cap (the ledger's key and event)."""
    from ..results import Privacy

    out: dict[str, Trained] = {}
    r = audit.inputs
    for spec in arm_specs:
        a = arms[spec.name]
        # A DP model trained outside the run (privleak.integrations: the user's own loop) has no training
        # record here: only the run's own trainings are composed.
        if (a.privacy is None or a.serves is not None or not a.privacy.sigma > 0
                or not r.available(TRAINING, spec.name)):
            continue
        records = r.get(TRAINING_RECORDS, spec.name)
        # The seeds trained: the arms named in recommendation.arms, and the contenders the recommendation asked for.
        seeds = [seed_name(spec.name, k) for k in range(1, audit.cfg.recommendation.seeds + 1)]
        for name in [spec.name] + [s for s in seeds if s in r.models]:
            record = r.get(TRAINING, name)
            people, cap = ledger_people(records, audit.cfg, record)
            privacy = a.privacy if name == spec.name else Privacy.model_validate(record["privacy"])
            out[name] = Trained(privacy=privacy, people=people, person_cap=cap)
    return out


def assemble(audit: Audit, arm_specs: list[ArmSpec], *, control: bool = True, source: str | None = None,
             extra: dict[str, dict[str, dict[str, Any]]] | None = None) -> AuditResults:
    """The typed, judged results of a run. ``control``: the base (or reference) model was evaluated as the
    control; ``source``: how the data is named (default: the config's corpus); ``extra``: per arm, inputs a
    caller adds to its kind's :class:`ArmInputs` (e.g. what the external target is)."""
    cfg, run, r = audit.cfg, audit.run, audit.inputs
    splits, canaries = r.get(SPLITS), r.get(CANARIES)
    durations: dict[str, float] = {}
    base = None
    if control:
        stages = model_stages(r, "base", durations)
        base = ArmResult(kind="control", utility=_utility(r, "base"), **stages.common(),
                         source=BaseModelSource.model_validate(r.get(BASE_INFO)))
    arms: dict[str, ArmResult] = {}
    for spec in assembly_order(arm_specs):
        arms[spec.name] = arm_result(audit, spec, arms, durations, (extra or {}).get(spec.name), base)
    arms = {s.name: arms[s.name] for s in arm_specs}
    if not cfg.recommendation.require.formal:
        _seed_results(audit, arms, durations)
    for spec in arm_specs:
        for w in judging(spec.kind).warnings(spec.name, arms[spec.name]):
            audit.warn(w)
    # The reference is the recipe on the members as they are (``best``), not one of its defended variants.
    reference = next((s.name for s in arm_specs if judging(s.kind).utility_reference and not s.data), None)
    measured = ["base", *(s.name for s in arm_specs)]
    _utility_recovered(audit, base, arms, reference, {m: r.get(UTILITY, m) for m in measured if r.available(UTILITY, m)})
    sel = r.get(SELECTION)
    if not sel.design.available:
        audit.warn(f"empirical ε unavailable: {sel.design.reason}")
    members = splits["members"]
    data = DataSummary(
        source=source or cfg.data.path or "synthetic-clinical", n_public=len(splits["public"]), n_members=len(members),
        n_canary_records=sum(r.kind == "canary" for r in members), n_non_members=len(splits["non_members"]),
        n_population=len(splits["population"]), mia_records_per_side=int(len(sel.members)),
        membership_design=sel.design, n_canaries=len(canaries),
        canary_chance_exposure=chance_exposure(cfg.canaries.candidates) if canaries else None,
        forget=_forget_summary(audit))
    release = DataRelease.model_validate(r.get(RELEASE)) if r.available(RELEASE) else None
    blind = _blind(audit, arms, r.get(USER_SPLIT))
    budget = privacy_budget(members_hash(members), _budget_trainings(audit, arm_specs, arms))
    results = AuditResults(
        blind_baseline=blind, tool=ToolInfo(name="privleak", version=__version__),
        config=read_json(run.path("config.json")), data=data, data_release=release, base_model=base, arms=arms,
        budget=budget, warnings=audit.warnings,
        durations_s={**{k: round(v, 2) for k, v in run.durations.items()}, **durations}, versions=package_versions())
    results = judge(results, requirement=audit.cfg.recommendation.require, seeds_allowed=audit.cfg.recommendation.seeds)
    _alarm_warnings(audit, results)
    return results
