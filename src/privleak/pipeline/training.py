"""Training stages as providers: one model per arm (trained or derived), its extra seeds, its shadow models.

What an arm's model is — its settings, how it is fitted or derived, what else it reads (``ArmKind.needs``) —
is its kind's business (:mod:`privleak.arms`); this module runs it: the records an arm trains on (after its
data defences, :mod:`.defences`, with the one-run audit canaries), a fresh copy of the base model, timing,
saving, the privacy-budget ledger. A new kind of arm changes nothing here.

Inputs provided (keys in :mod:`privleak.arms.inputs` and :mod:`privleak.attacks.inputs`): the training
records and the trained model of each arm and seed (``train/<arm>``, ``derive/<arm>``,
``train/<arm>/seeds/<k>``), the validation and encoding functions kinds read, the shadow plan, each shadow's
NLLs (``shadow/<arm>/<k>``) and an arm's shadows together.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..arms import ArmSpec, BuildContext, FitContext, specs
from ..arms.base import Settings, settings_key, with_settings
from ..arms.inputs import ENCODE, TRAINING, TRAINING_RECORDS, VALIDATION
from ..attacks.inputs import AUDIT_CANARIES, BASE, MODEL, POPULATION, SHADOWS, SPLITS, ShadowData
from ..config import AuditConfig
from ..core.inputs import Input, KeyParts, Needed, Persist, View, Where, provides
from ..core.io import atomic_path, read_json, stable_hash, staging_dir, write_json
from ..data.audit_canaries import insert_audit_canaries
from ..data.canaries import derive_seed
from ..data.records import Record
from .audit import ModelInfo, train_precision
from .defences import DEFENCES, defences_of
from .ledger import People, entry_for, members_hash, record_training, training_people

# ---------------------------------------------------------------- settings

def arm_settings(cfg: AuditConfig, spec: ArmSpec, n_members: int) -> Settings:
    """Everything that determines an arm's model (its stage-cache key): its kind's settings.

    bf16 autocast changes the trained weights, so it is part of the key; fp32
    adds nothing, and those keys are what they always were.
    """
    settings = spec.kind_obj.settings(cfg, spec, n_members)
    if train_precision(cfg) == "bf16":
        settings = with_settings(settings, precision="bf16")
    return settings


def _n_members(where: Where | View) -> int:
    # The graph's shape depends on the members (the DP recipe): the splits are read where the plan is made.
    return len(where.resolver.get(SPLITS)["members"])


def _settings(where: Where | View) -> Settings:
    return arm_settings(where.cfg, where.info.spec, _n_members(where))


#: DP-SGD's step costs about this many plain steps (per-sample clipping; bench/bench_dp_insitu.py).
DP_COST = 1.2


def train_cost(record_epochs: float) -> float:
    """A training's cost for the executors' order: record-epochs ÷ 200 (≈ CPU seconds of the embedded model)."""
    return max(1.0, record_epochs / 200.0)


def arm_cost(settings: Settings, n_members: int) -> float:
    """An arm's (or shadow's) training cost from its settings: epochs × records, DP-SGD's clipping on top.
    Only the order of the parallel executors reads it; an unknown kind counts as one plain epoch."""
    settings = settings_key(settings)
    epochs = settings.get("epochs") or settings.get("rounds") or 1.0
    try:
        epochs = float(epochs)
    except (TypeError, ValueError):
        epochs = 1.0
    records = n_members * (1.0 + float(settings.get("replay") or 0.0))
    dp = DP_COST if settings.get("kind") in ("dp", "dp-user") or settings.get("target_epsilon") else 1.0
    return train_cost(epochs * records * dp)


def _cost(where: Where) -> float:
    return arm_cost(_settings(where), _n_members(where))


# ---------------------------------------------------------------- training records

def _records_needs(where: Where) -> list[Needed]:
    return [SPLITS, AUDIT_CANARIES, *(n for d in defences_of(where.info.spec) for n in d.needs)]


@provides(TRAINING_RECORDS, needs=_records_needs)
def _training_records(view: View) -> list[Record]:
    """The members as the arm trains on them (deduplicated and/or scrubbed), with the audit canaries."""
    out = view[SPLITS]["members"]
    for d in defences_of(view.info.spec):
        out = d.apply(out, view)
    return with_audit_canaries(view, out)


def with_audit_canaries(view: View, records: list[Record]) -> list[Record]:
    """``records`` plus the included one-run audit canaries, after any data defence: the canaries audit
    the training step (the mechanism whose ε the accountant states), so no defence may touch them."""
    return insert_audit_canaries(records, view[AUDIT_CANARIES], view.cfg.seed)


# ---------------------------------------------------------------- what kinds read

@provides(VALIDATION, needs=(BASE, POPULATION))
def _validation(view: View) -> Any:
    """Mean token NLL on the first ``n`` records of the population split (already in random order): the
    early-stopping signal a recipe may use (never members)."""
    base, population, max_length = view[BASE], view[POPULATION], view.cfg.model.max_length

    def make(n_records: int) -> Any:
        from ..attacks.scoring import score_texts
        from ..audit.utility import mean_nll
        from ..models.handle import ModelHandle

        texts = [r.text for r in population[:n_records]]

        def validate(model: Any) -> float:
            handle = ModelHandle(model=model, tokenizer=base.tokenizer, max_length=max_length)
            return float(mean_nll(score_texts(handle, texts, desc="validate on population", moments=False)) or math.inf)
        return validate
    return make


@provides(ENCODE, needs=(BASE,))
def _encode(view: View) -> Any:
    from ..models.batching import encode

    tokenizer, max_length = view[BASE].tokenizer, view.cfg.model.max_length
    return lambda texts: encode(tokenizer, texts, max_length)


# ---------------------------------------------------------------- fitting

def fit(view: View, spec: ArmSpec, label: str, settings: Settings, records: list[Record],
        seed: int | None = None) -> tuple[Any, dict[str, Any]]:
    """A fresh copy of the base model fitted by the arm's kind on ``records`` (after :meth:`ArmKind.prepare`,
    e.g. public rehearsal); (model, training record with tokens, records and seconds). ``seed``: a training
    seed other than the audit's (the kind reads it as ``FitContext.seed``; the data stay the audit's)."""
    from ..models.batching import encode
    from ..models.handle import clone_model

    cfg, base, kind = view.cfg, view[BASE], spec.kind_obj
    if seed is not None:
        cfg = cfg.model_copy(update={"seed": seed})
    inputs = View(view.resolver, view.model, kind.needs, f"arm kind {kind.name}")
    prepared = kind.prepare(records, settings, BuildContext(cfg=cfg, label=label, inputs=inputs))
    ctx = FitContext(cfg=cfg, label=label, inputs=inputs, records=prepared, pad=base.pad_id,
                     data=encode(base.tokenizer, [r.text for r in prepared], cfg.model.max_length))
    start = time.perf_counter()
    model, record = kind.fit(clone_model(base.model), settings, ctx)
    tokens = sum(min(len(s), cfg.model.max_length) for s in ctx.data.ids)
    # prepare() may add records (public rehearsal) or leave some out (retrain: the forget set).
    return model, {**record, "settings": settings_key(settings), "n_train_records": min(len(records), len(prepared)),
                   "rehearsal_records": max(0, len(prepared) - len(records)),
                   "tokens": int(round(record.pop("epochs_run") * tokens)),
                   "seconds": round(time.perf_counter() - start, 2)}


def _save(view: View, arm: str, model: Any, record: dict[str, Any]) -> None:
    from ..models.handle import ModelHandle, save_handle

    base = view[BASE]
    with staging_dir(view.path("arms", arm, "model")) as tmp:
        save_handle(ModelHandle(model=model, tokenizer=base.tokenizer, max_length=view.cfg.model.max_length), tmp)
    write_json(view.path("arms", arm, "train.json"), record)


def ledger_people(records: list[Record], cfg: AuditConfig, record: dict[str, Any]) -> tuple[People, int | None]:
    """The real people a DP arm trained on (its training ``records``), as the budget ledger keys them
    (:func:`.ledger.training_people`), and the per-person cap of a user-level ELS arm (None otherwise).
    DP-FedAvg: also the clients each person's records lie in."""
    privacy = record.get("privacy") or {}
    clients = None
    if privacy.get("unit") == "client":
        from ..data.clients import client_labels

        clients = client_labels(records, cfg.federated.clients, cfg.seed, cfg.data.client_field)
    user = record.get("user_dp") or {}
    cap = user.get("records_per_person_cap") if user.get("method") == "els" else None
    return training_people(records, clients), cap


def _ledger(view: View, name: str, settings: Any, records: list[Record], record: dict[str, Any]) -> None:
    """A DP training (σ > 0) joins the privacy-budget ledger with the people it trained on, once it is saved."""
    if (record.get("privacy") or {}).get("sigma"):
        people, cap = ledger_people(records, view.cfg, record)
        entry = entry_for(members_hash(view[SPLITS]["members"]), name, view.resolver.store.root,
                          settings_key(settings), record["privacy"], people, cap)
        if entry is not None:
            record_training(view.resolver.store.root, entry, people)


def train_arm(view: View) -> None:
    """Train one arm: ``arms/<arm>/model`` (safetensors) and ``arms/<arm>/train.json``; a DP training joins the
    privacy-budget ledger (:mod:`.ledger`), with the people it trained on, once it is saved."""
    spec, settings, records = view.info.spec, _settings(view), view[TRAINING_RECORDS]
    model, record = fit(view, spec, spec.name, settings, records)
    _save(view, spec.name, model, record)
    _ledger(view, spec.name, settings, records, record)


def training_seed(seed: int, k: int) -> int:
    """Extra training seed k of an audit seeded ``seed``: its own stream, never the audit's."""
    return derive_seed(seed, f"training-seed-{k}") % 2**31


def seed_name(arm: str, k: int) -> str:
    """Where extra seed k of an arm lives (``arms/<arm>/seeds/<k>``) and its stages' names."""
    return f"{arm}/seeds/{k}"


def seed_info(cfg: AuditConfig, spec: ArmSpec, k: int) -> ModelInfo:
    """Extra training seed k of an arm as a model of the audit: measured for utility, and attacked like its arm
    under an empirical requirement (which must hold on every measured seed)."""
    return ModelInfo(seed_name(spec.name, k), "seed", spec, {"reference": "base", "arm": spec.name},
                     evaluated=not cfg.recommendation.require.formal, k=k)


def train_seed(view: View) -> None:
    """The arm's recipe on the same records with extra training seed k (:func:`training_seed`): its model and
    train.json under ``arms/<arm>/seeds/<k>``. A DP training spends privacy budget like the arm's own, so it
    joins the ledger too."""
    info = view.info
    seed = training_seed(view.cfg.seed, info.k)
    settings = with_settings(_settings(view), seed=seed)
    records = view[TRAINING_RECORDS]
    model, record = fit(view, info.spec, info.name, settings, records, seed=seed)
    _save(view, info.name, model, record)
    # The same people as the arm's own training, and the same per-person cap: the ledger composes it for them.
    _ledger(view, info.name, settings, records, record)


def derive_arm(view: View) -> None:
    """A derived arm: its kind makes its model from its source arm's trained model. ``seconds`` in its
    train.json is what deriving took (not its source's training)."""
    spec = view.info.spec
    kind = spec.kind_obj
    ctx = BuildContext(cfg=view.cfg, label=spec.name, inputs=View(view.resolver, view.model, kind.needs,
                                                                  f"arm kind {kind.name}"))
    start = time.perf_counter()
    model, record = kind.derive(_settings(view), ctx)
    _save(view, spec.name, model, {**record, "seconds": round(time.perf_counter() - start, 2)})


def _trained_needs(where: Where) -> list[Needed]:
    kind = where.info.spec.kind_obj
    if where.info.origin == "derived":
        return [BASE, TRAINING.of("source"), *kind.needs]
    return [BASE, TRAINING_RECORDS, SPLITS, *kind.needs]  # the splits: the members' hash (the budget ledger)


def _trained_key(k: KeyParts) -> str:
    info = k.info
    if info.origin == "seed":
        return stable_hash("arm-seed", k.key(TRAINING.of("arm")), info.k)
    settings = settings_key(_settings(k))
    if info.origin == "derived":
        return stable_hash(f"arm-{info.spec.kind}", k.key(TRAINING.of("source")), settings)
    return stable_hash("arm", k.key(BASE), settings, tuple(k.key(DEFENCES[d].needs[0]) for d in info.spec.data))


def _trained_persist(where: Where) -> Persist:
    verb = "derive" if where.info.origin == "derived" else "train"
    return Persist(f"{verb}/{where.model}", (f"arms/{where.model}/model/", f"arms/{where.model}/train.json"),
                   kind="train", cost=_cost, load=lambda view: read_json(view.path("arms", view.model, "train.json")))


@provides(TRAINING, needs=_trained_needs, key_formula=_trained_key, persist=_trained_persist,
          when=lambda w: w.info.origin in ("trained", "derived", "seed"))
def _train(view: View) -> None:
    {"trained": train_arm, "derived": derive_arm, "seed": train_seed}[view.info.origin](view)


# ---------------------------------------------------------------- shadows

@dataclass
class ShadowPlan:
    """LiRA's candidate pool and who trains on what.

    Pool = the non-canary members + the non-members. The evaluated members
    *and* non-members must each be IN for half the shadows (otherwise the
    online Gaussians of one class would come from the fallback, a different
    model, and LiRA would score the label rather than the example), so the
    pool holds both; the population stays out of every shadow and serves as
    RMIA's z. Each shadow trains on half the pool, about as many records as
    the arm itself.
    """

    pool: list[Record]
    in_mask: np.ndarray  # (S, len(pool)), True = IN
    eval_x: np.ndarray  # pool indices of the evaluated members then non-members


SHADOW_PLAN: Input[ShadowPlan] = Input("shadow-plan", "LiRA's candidate pool and which half each shadow trains on")
SHADOW_NLL: Input[dict[str, np.ndarray]] = Input("shadow-nll", "one shadow model's NLLs on the candidates and the "
                                                               "population (shadow/<arm>/<k>)", per_model=True)


def shadow_plan(cfg: AuditConfig, splits: dict[str, list[Record]]) -> ShadowPlan:
    from ..attacks.membership.lira import shadow_splits
    from ..attacks.membership.selection import mia_subsets

    members = [r for r in splits["members"] if r.kind != "canary"]
    mi, ni = mia_subsets(members, splits["non_members"], cfg.attacks.max_mia_records, cfg.seed)
    pool = members + splits["non_members"]
    in_mask = shadow_splits(len(pool), cfg.shadows.n_shadows, seed=derive_seed(cfg.seed, "shadows"))
    return ShadowPlan(pool=pool, in_mask=in_mask, eval_x=np.concatenate([mi, len(members) + ni]))


def shadow_arms(cfg: AuditConfig) -> list[str]:
    if not cfg.shadows.enabled:
        return []
    trained = [s.name for s in specs(cfg) if s.kind_obj.shadows]
    return [a for a in trained if cfg.shadows.arms is None or a in cfg.shadows.arms]


def shadow_name(arm: str, k: int) -> str:
    """Shadow k (0-based) of an arm, as a model of the audit."""
    return f"{arm}/shadow/{k + 1}"


@provides(SHADOW_PLAN, needs=(SPLITS,))
def _shadow_plan(view: View) -> ShadowPlan:
    # The plan is a pure function of the config and the splits: each process derives the same one.
    return shadow_plan(view.cfg, view[SPLITS])


def _shadow_needs(where: Where) -> list[Needed]:
    spec = where.info.spec
    return [SHADOW_PLAN, BASE, AUDIT_CANARIES, SPLITS, *(n for d in defences_of(spec) for n in d.shadow_needs),
            *spec.kind_obj.needs]


def _shadow_key(k: KeyParts) -> str:
    # Which other arms get shadows does not change this arm's shadows.
    cfg = k.cfg
    return stable_hash("shadow", k.key(MODEL.of("arm")), cfg.shadows.model_dump(mode="json", exclude={"arms"}),
                       k.info.k, cfg.attacks.max_mia_records)


def _shadow_file(view: View) -> Any:
    return view.path("arms", view.info.roles["arm"], "shadows", f"{view.info.k}.npz")


def _load_shadow(view: View) -> dict[str, np.ndarray]:
    with np.load(_shadow_file(view), allow_pickle=False) as z:
        return {"nll_x": z["nll_x"], "nll_z": z["nll_z"], "in_x": z["in_x"]}


def _shadow_persist(where: Where) -> Persist:
    arm, k = where.info.roles["arm"], where.info.k
    return Persist(f"shadow/{arm}/{k + 1}", (f"arms/{arm}/shadows/{k}.npz",), kind="train", cost=_cost,
                   load=_load_shadow)


@provides(SHADOW_NLL, needs=_shadow_needs, key_formula=_shadow_key, persist=_shadow_persist, memo=False,
          when=lambda w: w.info.origin == "shadow")
def _train_shadow(view: View) -> None:
    """Shadow k of an arm: trained like the arm on its half of the pool; keeps only NLLs."""
    from ..attacks.scoring import score_texts
    from ..models.handle import ModelHandle

    cfg, info, plan = view.cfg, view.info, view[SHADOW_PLAN]
    spec, k = info.spec, info.k
    pool = plan.pool
    for d in defences_of(spec):
        if d.shadow_pool is not None:
            pool = d.shadow_pool(pool, view)
    records = [pool[i] for i in np.flatnonzero(plan.in_mask[k])]
    for d in defences_of(spec):
        if d.shadow_records is not None:
            records = d.shadow_records(records, view)
    records = with_audit_canaries(view, records)  # a shadow is trained like its arm, canaries included
    base = view[BASE]
    label = f"{spec.name} shadow {k + 1}/{cfg.shadows.n_shadows}"
    model, _ = fit(view, spec, label, _settings(view), records)
    handle = ModelHandle(model=model, tokenizer=base.tokenizer, max_length=cfg.model.max_length)
    # The shadow is scored on the original texts, as the target is.
    nll_x = score_texts(handle, [plan.pool[i].text for i in plan.eval_x], desc=f"score {label}", moments=False).nll()
    nll_z = score_texts(handle, [r.text for r in view[SPLITS]["population"]], desc=f"score {label} population",
                        moments=False).nll()
    with atomic_path(_shadow_file(view), suffix=".npz") as tmp:
        np.savez(tmp, nll_x=nll_x, nll_z=nll_z, in_x=plan.in_mask[k][plan.eval_x])


def _shadows_needs(where: Where) -> list[Needed]:
    return [SHADOW_NLL.of(r) for r in where.info.roles if r.startswith("shadow-")]


@provides(SHADOWS, needs=_shadows_needs, memo=False, when=lambda w: any(r.startswith("shadow-") for r in w.info.roles),
          key_formula=lambda k: stable_hash(*(k.key(n) for n in _shadows_needs(k))))
def _shadows(view: View) -> ShadowData:
    parts = [view[SHADOW_NLL.of(r)] for r in view.info.roles if r.startswith("shadow-")]
    return ShadowData(nll_x=np.stack([p["nll_x"] for p in parts]), nll_z=np.stack([p["nll_z"] for p in parts]),
                      in_x=np.stack([p["in_x"] for p in parts]))


__all__ = ["DP_COST", "SHADOW_NLL", "SHADOW_PLAN", "ShadowPlan", "arm_cost", "arm_settings", "fit", "ledger_people",
           "seed_name", "shadow_arms", "shadow_name", "shadow_plan", "train_cost", "training_seed",
           "with_audit_canaries"]
