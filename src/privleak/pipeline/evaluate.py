"""Evaluation stages as providers: a model's handle, scoring pass, samples, utility, attack stages, kind stages.

Per model the audit evaluates (:class:`~.audit.ModelInfo`: the base control, an arm, a served arm — another
arm's model behind its kind's wrapper, e.g. the output guard — or ``privleak attack``'s target):

* ``scores/<model>`` — its one scoring pass over every scored text set (:data:`~privleak.attacks.inputs.SCORES`);
* ``samples/<model>`` — its pool of unprompted samples, as many as the attacks that read it draw
  (``AttackSpec.draws``; :data:`~privleak.attacks.inputs.SAMPLES`);
* ``utility/<model>`` — its held-out perplexity and per-text losses (:data:`UTILITY`);
* ``<family>/<model>`` — one stage per attack family (:func:`family_input`), which runs the family's selected
  attacks through the runner and writes ``arms/<model>/attacks/<family>.json``; its inputs are what its
  attacks declare (``needs``, ``reads``);
* the stages its kind adds (:meth:`privleak.arms.ArmKind.extra_stages`; :func:`extra_input`).

Also here: the blind baseline (``blind-baseline``), the membership evaluation sets, and the inputs attacks
read off the config (clients, the registry). Every key is the formula of the stage before the plan was
derived from declarations, so existing run directories resume.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..arms import get as get_kind
from ..arms import specs
from ..arms.inputs import TRAINING
from ..attacks.base import COMMON, FAMILIES, AttackContext, AttackSpec
from ..attacks.inputs import (
    ATTACK_SPECS,
    BASE,
    CLIENTS,
    DRAWN,
    MODEL,
    REFERENCE,
    SAMPLES,
    SCORED_TEXTS,
    SCORES,
    SELECTION,
    SHADOWS,
    SPLITS,
    USER_SPLIT,
    ModelScores,
)
from ..config import AuditConfig, resolve_delta
from ..core.inputs import (
    Input,
    KeyParts,
    Needed,
    Persist,
    View,
    Where,
    as_need,
    input_factory,
    provides,
)
from ..core.io import atomic_path, read_json, stable_hash, write_json
from .data import BASE_INFO, text_format
from .audit import evaluated_key

SCORED_SPLITS = ("members", "non_members", "population")
#: The splits whose scoring pass keeps the vocabulary moments: min-k%++ scores the membership sets only.
MOMENT_SPLITS = ("members", "non_members")
#: One evaluation stage of one model (its scores, an attack family), in the unit of a training's cost (about a
#: CPU second of the default audit): a few seconds each.
EVAL_COST = 5.0

UTILITY: Input[UtilityFigures] = Input("utility", "the model's held-out perplexity and per-text losses "
                                                  "(utility/<model>)", per_model=True)
BLIND: Input[dict[str, Any]] = Input("blind-baseline", "the model-free classifier on the membership evaluation sets")
#: What assembling a model's results reads (the roots of the plan): its training record, utility, attack
#: stages and its kind's stages.
EVALUATION: Input[None] = Input("evaluation", "everything the results of one model read", per_model=True)


@dataclass(frozen=True)
class UtilityFigures:
    """A model's utility stage: the figures, and the per-text losses (all tokens, and those outside PII spans)
    that the interval of its utility recovered G resamples (None where not written)."""

    utility: Any
    texts: tuple[np.ndarray, np.ndarray] | None = None
    outside_pii: tuple[np.ndarray, np.ndarray] | None = None


# --------------------------------------------------------------------------- models

def model_dir(view: View) -> str:
    """Where a model of the audit is, resolved in the process that loads it: the graph holds no paths."""
    info = view.info
    if info.model_dir is not None:
        return info.model_dir
    if info.origin == "base":
        return view[BASE_INFO]["path"]
    return str(view.path("arms", info.serves or info.name, "model"))


def _model_needs(where: Where) -> list[Needed]:
    origin = where.info.origin
    if origin == "base":
        return [BASE_INFO]
    if origin == "served":
        return [MODEL.of("serves")]
    if origin == "provided":
        return []
    return [TRAINING]


def _model_key(k: KeyParts) -> str:
    info = k.info
    if info.origin == "served":  # its source's key already says how it is evaluated
        return stable_hash(info.kind, k.key(MODEL.of("serves")), k.key(SPLITS))
    if info.origin == "provided":
        raise ValueError(f"the key of the provided model {info.name!r} is fixed by the caller")
    return evaluated_key(k.key(BASE) if info.origin == "base" else k.key(TRAINING), k.cfg)


@provides(MODEL, needs=_model_needs, key_formula=_model_key, memo=False)
def _model(view: View) -> Any:
    from ..models.external import load_model

    handle = load_model(model_dir(view), view.cfg.model.max_length, adapter_base=view.info.adapter_base)
    handle.name = view.info.name
    handle.text_format = text_format(view.cfg)
    return handle


@provides(REFERENCE, needs=(BASE,), when=lambda w: w.info.reference)
def _reference(view: View) -> Any:
    return view[BASE]


# --------------------------------------------------------------------------- the scoring pass

def _scores_path(view: View, split: str) -> Path:
    return view.path("arms", view.model, f"scores_{split}.npz")


def _measured_only(where: Where) -> bool:
    """An extra training seed measured for utility alone (not attacked)."""
    return where.info.origin == "seed" and not where.info.evaluated


def _scores_persist(where: Where) -> Persist | None:
    if _measured_only(where):  # such a seed's utility scores what it reads, in its own stage
        return None
    outputs = tuple(f"arms/{where.model}/scores_{s}.npz" for s in (*SCORED_SPLITS, "public_heldout"))
    return Persist("scores/{model}", outputs, kind="eval", cost=EVAL_COST, load=_model_scores)


def _model_scores(view: View) -> ModelScores:
    """The pass, each text set computed on first use unless the run directory holds it under the model's key."""
    from ..attacks.scoring import cached_scores

    texts, key, handle = view[SCORED_TEXTS], view.key(MODEL), []

    def compute(split: str) -> Any:
        if not handle:
            handle.append(_LazyHandle(view))
        return cached_scores(handle[0], texts[split], _scores_path(view, split), key=stable_hash(key, split),
                             desc=f"score {view.model} {split}", moments=split in MOMENT_SPLITS)
    return ModelScores(compute)


class _LazyHandle:
    """The model, loaded only when a pass is not in the run directory (cached_scores reads it then)."""

    def __init__(self, view: View) -> None:
        self._view, self._handle = view, None

    def __getattr__(self, name: str) -> Any:
        if self._handle is None:
            self._handle = self._view[MODEL]
        return getattr(self._handle, name)


@provides(SCORES, needs=(MODEL, SCORED_TEXTS), persist=_scores_persist, memo=False,
          when=lambda w: w.info.origin not in ("served", "shadow"),
          key_formula=lambda k: stable_hash("scores", k.key(MODEL)))
def _scores(view: View) -> Any:
    """``arms/<model>/scores_<split>.npz``: the model's one scoring pass over every scored text set, which its
    utility and membership stages (and every arm's reference attacks, for the base model) read. One task per
    model, before those that read it: two stages running at once on two workers never score the same texts."""
    scores = _model_scores(view)
    if _scores_persist(view.resolver.where(SCORES, view.model)) is None:
        return scores
    for split, texts in view[SCORED_TEXTS].items():
        if texts:
            scores(split)
    return None


# --------------------------------------------------------------------------- samples

def sample_requests(where: Where) -> dict[Any, int]:
    """What the model's selected attacks draw from its pool of unprompted samples (``AttackSpec.draws``)."""
    from ..attacks.samples import requests

    return requests(where.cfg.attack_settings(), [s for f in FAMILIES for s in family_specs(where, f)])


def _samples_persist(where: Where) -> Persist:
    return Persist("samples/{model}", ("arms/{model}/samples.json",), kind="eval", cost=EVAL_COST,
                   load=lambda view: _load_pool(view))


def _load_pool(view: View) -> Any:
    from ..attacks.samples import SamplePool

    return SamplePool.load(view.path("arms", view.model, "samples.json"), view.cfg.seed)


def _samples_key(k: KeyParts) -> str:
    want = sample_requests(k)
    return stable_hash("samples", k.key(MODEL), sorted(s.key() for s in want), sorted(want.values()), k.cfg.seed)


@provides(SAMPLES, needs=(MODEL,), persist=_samples_persist, key_formula=_samples_key,
          when=lambda w: w.info.origin not in ("served", "shadow") and not _measured_only(w) and bool(sample_requests(w)))
def _samples(view: View) -> None:
    """``arms/<model>/samples.json``: the model's unprompted samples, drawn once for every attack that reads
    them (sampling and PII extraction; the base model's also serve every arm's PII floor)."""
    from ..attacks.samples import draw_pool

    draw_pool(view[MODEL], sample_requests(view.resolver.where(SAMPLES, view.model)), view.cfg.seed,
              view.path("arms", view.model, "samples.json"))


# --------------------------------------------------------------------------- utility

def _load_utility(view: View) -> UtilityFigures:
    from ..results import Utility

    utility = Utility.model_validate(read_json(view.path("arms", view.model, "utility.json")))
    path = view.path("arms", view.model, "utility_texts.npz")
    if not path.exists():
        return UtilityFigures(utility)
    with np.load(path, allow_pickle=False) as z:
        outside = (z["nll_sum_outside_pii"], z["tokens_outside_pii"]) if "tokens_outside_pii" in z else None
        return UtilityFigures(utility, (z["nll_sum"], z["tokens"]), outside)


def _utility_persist(where: Where) -> Persist:
    return Persist("utility/{model}", ("arms/{model}/utility.json", "arms/{model}/utility_texts.npz"), kind="eval",
                   cost=EVAL_COST if _measured_only(where) else 1.0, load=_load_utility)


@provides(UTILITY, needs=(MODEL, SCORES, SPLITS, SCORED_TEXTS), persist=_utility_persist,
          when=lambda w: w.info.origin not in ("served", "shadow"),
          key_formula=lambda k: stable_hash("utility", k.key(MODEL), "texts"))
def _utility(view: View) -> None:
    from ..audit.utility import mean_loss, mean_nll, perplexity, pii_token_mask, text_losses
    from ..results import Utility

    handle, scores = view[MODEL], view[SCORES]
    non_members = scores("non_members")
    public = scores("public_heldout") if view[SCORED_TEXTS]["public_heldout"] else None
    sums, counts = text_losses(non_members)  # per text: the bootstrap of G's interval resamples these
    records = view[SPLITS]["non_members"]
    pii = pii_token_mask(handle.tokenizer, [r.text for r in records], [[(p.start, p.end) for p in (r.pii or [])]
                                                                       for r in records],
                         non_members, len(handle.lead_ids()))
    outside = text_losses(non_members, ~pii)
    with atomic_path(view.path("arms", view.model, "utility_texts.npz"), suffix=".npz") as tmp:
        np.savez(tmp, nll_sum=sums, tokens=counts, nll_sum_outside_pii=outside[0], tokens_outside_pii=outside[1])
    write_json(view.path("arms", view.model, "utility.json"),
               Utility(ppl_members=perplexity(scores("members")), ppl_non_members=perplexity(non_members),
                       nll_non_members=mean_nll(non_members), nll_public=mean_nll(public) if public else None,
                       ppl_public=perplexity(public) if public else None,
                       nll_non_members_outside_pii=mean_loss(outside) if pii.any() else None).model_dump(mode="json"))


# --------------------------------------------------------------------------- the membership evaluation sets

BLIND_FEATURES = "word 1-2-grams + character 2-4-grams (TF-IDF), logistic regression, 5-fold CV"


@provides(BLIND, needs=(DRAWN, SPLITS),
          key_formula=lambda k: stable_hash("blind", k.key(SPLITS), k.cfg.attacks.max_mia_records,
                                            k.cfg.attacks.bootstrap, k.cfg.seed),
          persist=Persist("blind-baseline", ("blind_baseline.json",),
                          load=lambda view: read_json(view.path("blind_baseline.json"))))
def _blind(view: View) -> None:
    """``blind_baseline.json``: the model-free classifier on the membership evaluation sets."""
    from ..audit.blind import blind_baseline

    s, sel = view[SPLITS], view[DRAWN]
    members = [r for r in s["members"] if r.kind != "canary"]
    b = blind_baseline([members[i].text for i in sel.members], [s["non_members"][i].text for i in sel.non_members],
                       seed=view.cfg.seed, bootstrap=view.cfg.attacks.bootstrap)
    write_json(view.path("blind_baseline.json"), {**b.__dict__, "features": BLIND_FEATURES})


def _selection_needs(where: Where) -> list[Needed]:
    # Sets the user drew are checked by the blind baseline first (which every attack stage then reads).
    return [DRAWN, USER_SPLIT, *((BLIND,) if where.get(USER_SPLIT) else ())]


@provides(SELECTION, needs=_selection_needs)
def _selection(view: View) -> Any:
    """The exchangeable member / non-member evaluation sets (one record per unit, matched).

    Sets the user drew (``privleak attack``) that a model-free classifier tells apart (its AUC's CI above 0.5,
    ``blind_baseline.json``) support no ε bound: the design says so and why."""
    from ..audit.blind import beats_chance

    sel = view[DRAWN]
    if view[USER_SPLIT]:
        b = view[BLIND]
        if beats_chance(tuple(b["auc_ci95"]) if b.get("auc_ci95") else None):
            sel = dataclasses.replace(sel, design=sel.design.model_copy(update={"available": False, "reason": (
                f"the member and non-member files differ in composition: a classifier that never sees the model "
                f"tells them apart (blind AUC {b['auc']:.3f}), so the sets are not exchangeable and an ε bound "
                "from them would not be valid")}))
    return sel


# --------------------------------------------------------------------------- what attacks read off the config

def has_clients(cfg: AuditConfig) -> bool:
    """Whether the data has clients: the synthetic corpus's clinics, the user's ``--client-field``, or an arm that
    trains over clients (a federated kind). A user corpus without them gets no client-level figures: a partition
    made up for it would measure the partition, not the model."""
    return cfg.data.path is None or cfg.data.client_field is not None or any(
        s.kind_obj.uses_clients for s in specs(cfg))


@provides(CLIENTS, key_formula=lambda k: stable_hash("clients", has_clients(k.cfg)))
def _clients(view: View) -> bool:
    return has_clients(view.cfg)


@provides(ATTACK_SPECS, pure=True)
def _attack_specs(view: View) -> dict[str, AttackSpec]:
    from ..attacks.registry import ATTACKS

    return dict(ATTACKS)


# --------------------------------------------------------------------------- attack stages

def family_specs(where: Where, family: str) -> list[AttackSpec]:
    """The selected attacks of ``family`` for the model (a served arm: those that read text only). An attack
    that needs an input which drops its readers where it does not exist (the forget set) is left out of such
    audits: not run, not in any key."""
    from ..attacks.registry import select

    r = where.resolver
    out = [s for s in select(where.cfg.selected_attacks()) if s.family == family]
    out = [s for s in out if all(r.available(as_need(n).input) for n in s.needs if as_need(n).input.drops_readers)]
    return [s for s in out if s.text_only] if where.info.serves else out


_FAMILY_INPUTS: dict[str, Input[Any]] = {}


def family_input(family: str) -> Input[Any]:
    """The attack stage of one family, per model (``<family>/<model>``)."""
    return _FAMILY_INPUTS[family]


def _stage_needs(family: str) -> Any:
    def needs(where: Where) -> list[Needed]:
        out: list[Needed] = [*COMMON, MODEL, TRAINING]
        for s in family_specs(where, family):
            out += [*s.needs, *s.reads]
        if where.info.serves:
            out += list(get_kind(where.info.kind).needs)
        return out
    return needs


#: What a family stage's key holds besides its attacks' settings and the model's shadows, as the stages have
#: keyed it from the start: the confidence level α of its bounds, the one-run audit's f-DP switch.
_KEYED = {"membership": ("alpha",), "canaries": ("alpha", "fdp")}


def _stage_key(family: str) -> Any:
    def key(k: KeyParts) -> str:
        cfg, info = k.cfg, k.info
        settings, found = cfg.attack_settings(), family_specs(k, family)
        used = {s.name: {u: getattr(settings, u) for u in s.uses} for s in found}
        keyed = _KEYED.get(family, ())
        # The forget set joins the key of the families that read it (only in audits that have one: other keys
        # unchanged); likewise any input that drops its readers where it is absent.
        dropping = [n for s in found for n in s.needs if as_need(n).input.drops_readers]
        extra = [k.key(n) for n in dict.fromkeys(as_need(n) for n in dropping)]
        return stable_hash("attacks", family, k.key(MODEL), k.key(BASE) if info.reference else None, used, cfg.seed,
                           cfg.attacks.alpha if "alpha" in keyed else None,
                           k.key(SHADOWS) if k.available(SHADOWS) else None, info.serves,
                           cfg.one_run.fdp if "fdp" in keyed else None, *extra)
    return key


def _stage_persist(family: str) -> Persist:
    return Persist(f"{family}/{{model}}", (f"arms/{{model}}/attacks/{family}.json",), kind="eval", cost=EVAL_COST,
                   load=lambda view: _read_stage(view.path("arms", view.model, "attacks", f"{family}.json")))


def _read_stage(path: Path) -> Any:
    from ..audit.runner import AttackStage

    return AttackStage.model_validate(read_json(path)) if path.exists() else None


def _privacy(view: View) -> dict | None:
    """A DP arm's privacy block from its train.json (None: the base, a served arm, an external model, no DP)."""
    if view.info.origin not in ("trained", "derived", "seed") or not view.has(TRAINING):
        return None
    return view[TRAINING]["privacy"]


def _delta(view: View) -> float:
    """δ for an arm's bounds: a DP arm's own δ, the default δ for the others, so every arm is held to the same δ."""
    privacy = _privacy(view)
    return float(privacy["delta"]) if privacy else resolve_delta(view.cfg, len(view[SPLITS]["members"]))[0]


def unit_claim(view: View) -> tuple[float, float, int] | None:
    """A DP arm's (ε, δ) for the units the membership attacks evaluate, and the most records such a unit holds:
    every record of a member unit was trained on, so a unit of k records is protected at the group level
    (:func:`privleak.audit.alarms.unit_claim`), not at the record's ε. An arm accounted per person already
    claims its ε for the whole unit."""
    from ..audit.alarms import largest_unit, unit_privacy
    from ..audit.alarms import unit_claim as group_claim

    privacy = _privacy(view)
    if not privacy:
        return None
    eps = float(privacy.get("epsilon_record") or privacy["epsilon"])
    design = view[SELECTION].design
    k = largest_unit(design.strata) if any(design.strata.values()) else 1
    if privacy.get("unit") == "person":
        return float(privacy["epsilon"]), float(privacy["delta"]), k
    eps_u, delta_u = group_claim(eps, float(privacy["delta"]), k, unit_privacy(privacy))
    return eps_u, delta_u, k


def run_stage(view: View, family: str) -> Any:
    """One family's attacks on the model, through the runner (a served arm: through its kind's wrapper)."""
    from ..audit.runner import run_family

    cfg, info = view.cfg, view.info
    served = view[MODEL]
    ctx = AttackContext(view.resolver, view.model, _stage_needs(family)(view.resolver.where(MODEL, view.model)),
                        f"{family}/{view.model}")
    found = family_specs(view.resolver.where(MODEL, view.model), family)
    delta = _delta(view)
    if info.serves:
        kind = get_kind(info.kind)
        wrapped = kind.serve(served, AttackContext(view.resolver, view.model, kind.needs, f"arm kind {kind.name}",
                                                   local=ctx.local))
        out = run_family(found, wrapped.target, ctx, on_start=wrapped.on_start)
        out.wrapper = wrapped.finish()
        return out
    if family == "membership" and not view[SELECTION].design.available:
        delta = None  # no empirical ε on sets that cannot support one (DataSummary says why)
    return run_family(found, served, ctx, delta=delta, alpha=cfg.attacks.alpha,
                      unit_claim=unit_claim(view) if family == "membership" else None, fdp=cfg.one_run.fdp)


def _family_provider(family: str) -> None:
    key = Input(f"attacks/{family}", f"the {family} attacks' stage of a model ({family}/<model>)", per_model=True)
    _FAMILY_INPUTS[family] = key

    @provides(key, needs=_stage_needs(family), key_formula=_stage_key(family), persist=_stage_persist(family),
              when=lambda w: w.info.evaluated and bool(family_specs(w, family)))
    def _stage(view: View) -> None:
        out = run_stage(view, family)
        write_json(view.path("arms", view.model, "attacks", f"{family}.json"), out.model_dump(mode="json"))


for _family in FAMILIES:
    _family_provider(_family)


# --------------------------------------------------------------------------- the stages a kind adds

def _extra_of(where: Where, name: str) -> Any:
    kind = where.info.kind
    return next((x for x in get_kind(kind).extra_stages() if x.name == name), None) if kind else None


@input_factory("extra/")
def extra_input(name: str) -> Input[Any]:
    """A kind's own evaluation stage, per model (``<stage>/<model>``; :meth:`privleak.arms.ArmKind.extra_stages`)."""
    stage = name.removeprefix("extra/")
    key: Input[Any] = Input(f"extra/{stage}", f"the {stage} stage a kind adds ({stage}/<model>)", per_model=True)

    def needs(where: Where) -> list[Needed]:
        x = _extra_of(where, stage)
        return [*COMMON, MODEL, *(x.needs if x else ())]

    def persist(where: Where) -> Persist:
        x = _extra_of(where, stage)
        return Persist(f"{stage}/{{model}}", (f"arms/{{model}}/{x.file}",), kind="eval", cost=EVAL_COST,
                       load=lambda view: read_json(view.path("arms", view.model, x.file)))

    @provides(key, needs=needs, persist=persist, when=lambda w: w.info.evaluated and _extra_of(w, stage) is not None,
              key_formula=lambda k: stable_hash(stage, k.key(MODEL), k.key(BASE), k.cfg.seed))
    def _extra(view: View) -> None:
        x = _extra_of(view.resolver.where(key, view.model), stage)
        ctx = AttackContext(view.resolver, view.model, x.needs, f"{stage}/{view.model}")
        write_json(view.path("arms", view.model, x.file), x.run(view[MODEL], ctx))
    return key


def extra_inputs(kind: str | None) -> list[Input[Any]]:
    return [extra_input(f"extra/{x.name}") for x in get_kind(kind).extra_stages()] if kind else []


# --------------------------------------------------------------------------- what the results of a model read

def _evaluation_needs(where: Where) -> list[Needed]:
    return [TRAINING, UTILITY, *(family_input(f) for f in FAMILIES), *extra_inputs(where.info.kind)]


@provides(EVALUATION, needs=_evaluation_needs, when=lambda w: w.info.origin != "shadow")
def _evaluation(view: View) -> None:
    return None


def read_stage(audit: Any, model: str, family: str) -> Any:
    """A model's stage of one family as its artefact says (None: the stage did not run)."""
    return _read_stage(audit.run.path("arms", model, "attacks", f"{family}.json"))
