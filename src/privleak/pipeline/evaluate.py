"""Evaluation stages: utility, one attack stage per (model, family), and the stages a kind adds.

:class:`Target` names a model the audit evaluates — the base control, an
arm, or a served arm (another arm's model behind its kind's wrapper, e.g.
the output guard) — with the key of the stage that produced it.
:func:`context` builds the :class:`~privleak.attacks.base.AttackContext`
every attack of that model reads; :func:`attack_stage` runs one family
through the runner and writes ``arms/<model>/attacks/<family>.json``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..attacks.base import FAMILIES, AttackContext, AttackSpec, ScoringPasses, ShadowData
from ..attacks.registry import ATTACKS, select
from ..attacks.samples import SamplePool, draw_pool, requests
from ..attacks.scoring import cached_scores
from ..arms import get as get_kind
from ..arms import specs
from ..audit.alarms import largest_unit, unit_privacy
from ..audit.alarms import unit_claim as group_claim
from ..audit.blind import beats_chance, blind_baseline
from ..attacks.membership.selection import MiaSelection, mia_selection
from ..audit.runner import AttackStage, run_family
from ..audit.utility import mean_loss, mean_nll, perplexity, pii_token_mask, text_losses
from ..config import resolve_delta
from ..core.io import atomic_path, read_json, stable_hash, write_json
from ..core.masking import PiiMasker
from ..data.canaries import known_pii
from ..models.external import load_model
from ..models.handle import ModelHandle
from ..results import Utility
from .audit import Audit
from .data import data_key
from .forget import forget_key, forgets
from .training import load_shadows

SCORED_SPLITS = ("members", "non_members", "population")
#: The splits whose scoring pass keeps the vocabulary moments: min-k%++ scores the membership sets only.
MOMENT_SPLITS = ("members", "non_members")


@dataclass(frozen=True)
class Target:
    """A model the audit evaluates. ``name``: "base", an arm, or "guard"; ``key``: the key of the stage that made it."""

    name: str
    key: str
    model_dir: str | None  # None: where this run put it (the base-model stage's choice, or arms/<arm>/model)
    reference: bool  # whether the base model serves as its reference (every model but the base itself)
    serves: str | None = None  # a served arm: the arm whose model it serves
    adapter_base: str | None = None  # privleak attack: model_dir is a PEFT adapter on this base model
    kind: str | None = None  # the arm's kind (None: the base model)


def model_dir(audit: Audit, target: Target) -> str:
    """Resolved when the stage runs, in the process that runs it: the graph holds no paths of its own."""
    if target.name == "base":
        return audit.base_dir()
    return str(audit.run.path("arms", target.serves or target.name, "model"))


def model_handle(audit: Audit, target: Target) -> ModelHandle:
    handle = load_model(target.model_dir or model_dir(audit, target), audit.cfg.model.max_length,
                        adapter_base=target.adapter_base)
    handle.name = target.name
    handle.text_format = audit.text_format()
    return handle


def masker(audit: Audit) -> PiiMasker:
    """Masks every ground-truth PII value of the run (and PII-shaped strings) in whatever an attack returns."""
    def build() -> PiiMasker:
        splits = audit.splits()
        return PiiMasker(known_pii([splits[s] for s in ("members", "non_members", "population", "public")],
                                   audit.canaries()))
    return audit.memo("masker", build)


def scored_texts(audit: Audit) -> dict[str, list[str]]:
    s = audit.splits()
    return audit.memo("scored_texts", lambda: {
        "members": [r.text for r in s["members"] if r.kind != "canary"],
        "non_members": [r.text for r in s["non_members"]],
        "population": [r.text for r in s["population"]],
        # Utility only: held-out public text, for forgetting (no attack reads it).
        "public_heldout": [r.text for r in s["public_heldout"]],
    })


def _passes(audit: Audit, target: Target, handle: ModelHandle, base_key: str) -> ScoringPasses:
    texts = scored_texts(audit)

    def target_pass(split: str):
        return cached_scores(handle, texts[split], audit.run.path("arms", target.name, f"scores_{split}.npz"),
                             key=stable_hash(target.key, split), desc=f"score {target.name} {split}",
                             moments=split in MOMENT_SPLITS)

    def reference_pass(split: str):
        return cached_scores(audit.base(), texts[split], audit.run.path("arms", "base", f"scores_{split}.npz"),
                             key=stable_hash(base_key, split), desc=f"score base {split}",
                             moments=split in MOMENT_SPLITS)

    return ScoringPasses(texts=texts, target_pass=target_pass, reference_pass=reference_pass if target.reference else None)


def _drawn(audit: Audit) -> MiaSelection:
    """The evaluation sets as drawn (the blind baseline classifies these)."""
    def build() -> MiaSelection:
        s = audit.splits()
        members = [r for r in s["members"] if r.kind != "canary"]
        return mia_selection(members, s["non_members"], audit.cfg.attacks.max_mia_records, audit.cfg.seed)
    return audit.memo("mia_drawn", build)


def selection(audit: Audit) -> MiaSelection:
    """The exchangeable member / non-member evaluation sets (one record per unit, matched).

    Sets the user drew (``privleak attack``) that a model-free classifier tells apart (its AUC's CI above 0.5,
    ``blind_baseline.json``, which every attack stage of such a run reads first) support no ε bound: the
    design says so and why."""
    def build() -> MiaSelection:
        sel = _drawn(audit)
        if audit.user_split():
            b = read_json(audit.run.path("blind_baseline.json"))
            if beats_chance(tuple(b["auc_ci95"]) if b.get("auc_ci95") else None):
                sel = dataclasses.replace(sel, design=sel.design.model_copy(update={"available": False, "reason": (
                    f"the member and non-member files differ in composition: a classifier that never sees the model "
                    f"tells them apart (blind AUC {b['auc']:.3f}), so the sets are not exchangeable and an ε bound "
                    "from them would not be valid")}))
        return sel
    return audit.memo("mia_selection", build)


def evaluation_subsets(audit: Audit) -> tuple[np.ndarray, np.ndarray]:
    sel = selection(audit)
    return sel.members, sel.non_members


def context(audit: Audit, target: Target, handle: ModelHandle, base_key: str, shadows: bool = False) -> AttackContext:
    s = audit.splits()
    mi, ni = evaluation_subsets(audit)
    shadow = None
    if shadows:
        x, z, ins = load_shadows(audit, target.name)
        shadow = ShadowData(nll_x=x, nll_z=z, in_x=ins)
    return AttackContext(
        members=s["members"], non_members=s["non_members"], population=s["population"], public=s["public"],
        canaries=audit.canaries(), settings=audit.cfg.attack_settings(), seed=audit.cfg.seed, masker=masker(audit),
        scoring=_passes(audit, target, handle, base_key), mia_members=mi, mia_non_members=ni,
        reference=audit.base() if target.reference else None, shadows=shadow, audit_canaries=audit.audit_canaries(),
        clients=has_clients(audit), forget=audit.forget_set() if forgets(audit.cfg) else None,
        attacks=dict(ATTACKS), shared=audit.memo("attack_shared", dict),
        samples=_stored_pool(audit, target.serves or target.name),
        reference_samples=_stored_pool(audit, "base") if target.reference else None)


def _stored_pool(audit: Audit, model: str) -> SamplePool | None:
    path = samples_path(audit, model)
    return SamplePool.load(path, audit.cfg.seed) if path.exists() else None


def has_clients(audit: Audit) -> bool:
    """Whether the data has clients: the synthetic corpus's clinics, the user's ``--client-field``, or an arm that
    trains over clients (a federated kind). A user corpus without them gets no client-level figures: a partition
    made up for it would measure the partition, not the model."""
    cfg = audit.cfg
    return cfg.data.path is None or cfg.data.client_field is not None or any(
        s.kind_obj.uses_clients for s in specs(cfg))


def family_specs(audit: Audit, family: str, target: Target) -> list[AttackSpec]:
    """The selected attacks of ``family`` for ``target`` (a served arm: those that read text only)."""
    specs = [s for s in select(audit.cfg.selected_attacks()) if s.family == family]
    if not forgets(audit.cfg):  # an audit that forgets no one never runs the forget-set attacks (nor keys them)
        specs = [s for s in specs if "forget" not in s.needs]
    return [s for s in specs if s.text_only] if target.serves else specs


def attack_key(audit: Audit, family: str, target: Target, base_key: str, shadow_key: str | None) -> str:
    settings = audit.cfg.attack_settings()
    used = {s.name: {u: getattr(settings, u) for u in s.uses} for s in family_specs(audit, family, target)}
    alpha = audit.cfg.attacks.alpha if family in ("membership", "canaries") else None
    fdp = audit.cfg.one_run.fdp if family == "canaries" else None
    # The forget set joins the key of the families that read it (only in audits that have one: other keys unchanged).
    forget = [audit.memo("forget_key", lambda: forget_key(audit.cfg, data_key(audit.cfg)))] if any(
        "forget" in s.needs for s in family_specs(audit, family, target)) else []
    return stable_hash("attacks", family, target.key, base_key if target.reference else None, used, audit.cfg.seed,
                       alpha, shadow_key, target.serves, fdp, *forget)


def _privacy(audit: Audit, target: Target) -> dict | None:
    """A DP arm's privacy block from its train.json (None: the base, a served arm, an external model, no DP)."""
    train = audit.run.path("arms", target.name, "train.json")
    if target.name == "base" or target.serves or not train.exists():
        return None
    return read_json(train)["privacy"]


def _delta(audit: Audit, target: Target) -> float:
    """δ for an arm's bounds: a DP arm's own δ, the default δ for the others, so every arm is held to the same δ."""
    privacy = _privacy(audit, target)
    return float(privacy["delta"]) if privacy else resolve_delta(audit.cfg, len(audit.splits()["members"]))[0]


def unit_claim(audit: Audit, target: Target) -> tuple[float, float, int] | None:
    """A DP arm's (ε, δ) for the units the membership attacks evaluate, and the most records such a unit holds:
    every record of a member unit was trained on, so a unit of k records is protected at the group level
    (:func:`privleak.audit.alarms.unit_claim`), not at the record's ε. An arm accounted per person already
    claims its ε for the whole unit."""
    privacy = _privacy(audit, target)
    if not privacy:
        return None
    eps = float(privacy.get("epsilon_record") or privacy["epsilon"])
    design = selection(audit).design
    k = largest_unit(design.strata) if any(design.strata.values()) else 1
    if privacy.get("unit") == "person":
        return float(privacy["epsilon"]), float(privacy["delta"]), k
    eps_u, delta_u = group_claim(eps, float(privacy["delta"]), k, unit_privacy(privacy))
    return eps_u, delta_u, k


def stage_path(audit: Audit, model: str, family: str) -> Path:
    return audit.run.path("arms", model, "attacks", f"{family}.json")


def attack_stage(audit: Audit, family: str, target: Target, base_key: str, shadows: bool = False) -> None:
    served = model_handle(audit, target)
    ctx = context(audit, target, served, base_key, shadows)
    specs = family_specs(audit, family, target)
    delta = _delta(audit, target)
    if target.serves:
        view = get_kind(target.kind).serve(served, ctx)
        out = run_family(specs, view.target, ctx, on_start=view.on_start)
        out.wrapper = view.finish()
    else:
        if family == "membership" and not selection(audit).design.available:
            delta = None  # no empirical ε on sets that cannot support one (DataSummary says why)
        out = run_family(specs, served, ctx, delta=delta, alpha=audit.cfg.attacks.alpha,
                         unit_claim=unit_claim(audit, target) if family == "membership" else None,
                         fdp=audit.cfg.one_run.fdp)
    write_json(stage_path(audit, target.name, family), out.model_dump(mode="json"))


def extra_stage(audit: Audit, target: Target, base_key: str, stage: str) -> None:
    """One of the target's kind's own evaluation stages (:meth:`privleak.arms.ArmKind.extra_stages`)."""
    extra = next(x for x in get_kind(target.kind).extra_stages() if x.name == stage)
    handle = model_handle(audit, target)
    write_json(audit.run.path("arms", target.name, extra.file), extra.run(handle, context(audit, target, handle, base_key)))


def read_stage(audit: Audit, model: str, family: str) -> AttackStage | None:
    path = stage_path(audit, model, family)
    return AttackStage.model_validate(read_json(path)) if path.exists() else None


def sample_requests(audit: Audit, target: Target) -> dict:
    """What the target's selected attacks draw from its pool of unprompted samples (:mod:`privleak.attacks.samples`)."""
    names = [sp.name for fam in FAMILIES for sp in family_specs(audit, fam, target)]
    return requests(audit.cfg.attack_settings(), names)


def samples_path(audit: Audit, model: str) -> Path:
    return audit.run.path("arms", model, "samples.json")


def samples_stage(audit: Audit, target: Target, base_key: str) -> None:
    """``arms/<model>/samples.json``: the model's unprompted samples, drawn once for every attack that reads
    them (sampling and PII extraction; the base model's also serve every arm's PII floor)."""
    draw_pool(model_handle(audit, target), sample_requests(audit, target), audit.cfg.seed,
              samples_path(audit, target.name))


def scores_stage(audit: Audit, target: Target, base_key: str) -> None:
    """``arms/<model>/scores_<split>.npz``: the model's one scoring pass over every scored text set, which its
    utility and membership stages (and every arm's reference attacks, for the base model) read. One task per
    model, before those that read it: two stages running at once on two workers never score the same texts."""
    passes = _passes(audit, target, model_handle(audit, target), base_key)
    for split, texts in scored_texts(audit).items():
        if texts:
            passes.target(split)


def utility_stage(audit: Audit, target: Target, base_key: str) -> None:
    handle = model_handle(audit, target)
    passes = _passes(audit, target, handle, base_key)
    non_members = passes.target("non_members")
    public = passes.target("public_heldout") if scored_texts(audit)["public_heldout"] else None
    sums, counts = text_losses(non_members)  # per text: the bootstrap of G's interval resamples these
    records = audit.splits()["non_members"]
    pii = pii_token_mask(handle.tokenizer, [r.text for r in records], [[(p.start, p.end) for p in (r.pii or [])] for r in records],
                         non_members, len(handle.lead_ids()))
    outside = text_losses(non_members, ~pii)
    with atomic_path(audit.run.path("arms", target.name, "utility_texts.npz"), suffix=".npz") as tmp:
        np.savez(tmp, nll_sum=sums, tokens=counts, nll_sum_outside_pii=outside[0], tokens_outside_pii=outside[1])
    write_json(audit.run.path("arms", target.name, "utility.json"),
               Utility(ppl_members=perplexity(passes.target("members")), ppl_non_members=perplexity(non_members),
                       nll_non_members=mean_nll(non_members), nll_public=mean_nll(public) if public else None,
                       ppl_public=perplexity(public) if public else None,
                       nll_non_members_outside_pii=mean_loss(outside) if pii.any() else None).model_dump(mode="json"))


BLIND_FEATURES = "word 1-2-grams + character 2-4-grams (TF-IDF), logistic regression, 5-fold CV"


def blind_stage(audit: Audit) -> None:
    """``blind_baseline.json``: the model-free classifier on the membership evaluation sets."""
    s, sel = audit.splits(), _drawn(audit)
    members = [r for r in s["members"] if r.kind != "canary"]
    b = blind_baseline([members[i].text for i in sel.members], [s["non_members"][i].text for i in sel.non_members],
                       seed=audit.cfg.seed, bootstrap=audit.cfg.attacks.bootstrap)
    write_json(audit.run.path("blind_baseline.json"), {**b.__dict__, "features": BLIND_FEATURES})
