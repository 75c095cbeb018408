"""Training stages: data defences, one model per arm, shadow models.

What an arm's model is — its settings, how it is fitted or derived — is its
kind's business (:mod:`privleak.arms`); this module runs it: the records an
arm trains on (after its data defences, with the one-run audit canaries), a
fresh copy of the base model, timing, saving. A new kind of arm changes
nothing here.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..arms import ArmSpec, DeriveContext, FitContext, parse_arm, specs
from ..attacks.membership.lira import shadow_splits
from ..attacks.scoring import score_texts
from ..attacks.membership.selection import mia_subsets
from ..audit.utility import mean_nll
from ..config import AuditConfig
from ..core.io import atomic_path, read_json, stable_hash, staging_dir, write_json
from ..data.audit_canaries import insert_audit_canaries
from ..data.canaries import derive_seed
from ..data.records import Record, read_jsonl, write_jsonl
from ..defenses.arm_data import dedup_members, scrub_members
from ..models.batching import encode
from ..models.device import current as current_policy
from ..models.handle import ModelHandle, clone_model, load_handle, save_handle
from .audit import Audit
from .ledger import People, entry_for, members_hash, record_training, training_people

# ---------------------------------------------------------------- settings

def arm_settings(cfg: AuditConfig, spec: ArmSpec, n_members: int) -> dict[str, Any]:
    """Everything that determines an arm's model (its stage-cache key): its kind's settings.

    bf16 autocast changes the trained weights, so it is part of the key; fp32
    adds nothing, and those keys are what they always were.
    """
    settings = spec.kind_obj.settings(cfg, spec, n_members)
    if current_policy().train_precision == "bf16":
        settings["precision"] = "bf16"
    return settings


# ---------------------------------------------------------------- data defences

def defence_keys(cfg: AuditConfig, data_key: str) -> dict[str, str]:
    return {
        "scrub": stable_hash("scrub", data_key, cfg.defences.scrub.model_dump(mode="json"), cfg.seed),
        "dedup": stable_hash("dedup", data_key, cfg.defences.dedup.model_dump(mode="json"), cfg.seed),
    }


def scrub_stage(audit: Audit) -> None:
    s, splits = audit.cfg.defences.scrub, audit.splits()
    others = [r for name, recs in splits.items() if name != "members" for r in recs]
    scrubbed, report = scrub_members(splits["members"], mode=s.mode, entities=s.entities, seed=audit.cfg.seed,
                                     reserve=others)
    write_jsonl(audit.run.path("defences", "scrub", "members.jsonl"), scrubbed)
    write_json(audit.run.path("defences", "scrub", "report.json"), report.model_dump(mode="json"))


def dedup_stage(audit: Audit) -> None:
    d = audit.cfg.defences.dedup
    members = audit.splits()["members"]
    kept, report = dedup_members(members, method=d.method, threshold=d.threshold, num_perm=d.num_perm, seed=audit.cfg.seed)
    kept_ids = {id(r) for r in kept}  # dedup returns the very objects it keeps
    write_json(audit.run.path("defences", "dedup", "kept.json"), [i for i, r in enumerate(members) if id(r) in kept_ids])
    write_json(audit.run.path("defences", "dedup", "report.json"), report.model_dump(mode="json"))


def training_records(audit: Audit, spec: ArmSpec) -> list[Record]:
    """The members as the arm trains on them: deduplicated and/or scrubbed."""
    out = audit.splits()["members"]
    if "scrub" in spec.data:
        out = read_jsonl(audit.run.path("defences", "scrub", "members.jsonl"))
    if "dedup" in spec.data:
        out = [out[i] for i in read_json(audit.run.path("defences", "dedup", "kept.json"))]
    return with_audit_canaries(audit, out)


def with_audit_canaries(audit: Audit, records: list[Record]) -> list[Record]:
    """``records`` plus the included one-run audit canaries, after any data defence: the canaries audit
    the training step (the mechanism whose ε the accountant states), so no defence may touch them."""
    return insert_audit_canaries(records, audit.audit_canaries(), audit.cfg.seed)


# ---------------------------------------------------------------- fitting

def _validation(audit: Audit) -> Any:
    """Mean token NLL on the first ``n`` records of the population split (already in random order): the
    early-stopping signal a recipe may use (never members)."""
    def make(n_records: int) -> Any:
        base = audit.base()
        texts = [r.text for r in audit.splits()["population"][:n_records]]

        def validate(model: Any) -> float:
            handle = ModelHandle(model=model, tokenizer=base.tokenizer, max_length=audit.cfg.model.max_length)
            return float(mean_nll(score_texts(handle, texts, desc="validate on population", moments=False)) or math.inf)
        return validate
    return make


def fit(audit: Audit, spec: ArmSpec, label: str, settings: dict[str, Any], records: list[Record],
        seed: int | None = None) -> tuple[Any, dict[str, Any]]:
    """A fresh copy of the base model fitted by the arm's kind on ``records`` (after :meth:`ArmKind.prepare`,
    e.g. public rehearsal); (model, training record with tokens, records and seconds). ``seed``: a training
    seed other than the audit's (the kind reads it as ``FitContext.seed``; the data stay the audit's)."""
    cfg, base, kind = audit.cfg, audit.base(), spec.kind_obj
    if seed is not None:
        cfg = cfg.model_copy(update={"seed": seed})
    ctx = FitContext(cfg=cfg, data=None, records=records, pad=base.pad_id, label=label,  # type: ignore[arg-type]
                     public=lambda: audit.splits()["public"], population=lambda: audit.splits()["population"],
                     validation=_validation(audit), forget=audit.forget_set,
                     encode=lambda texts: encode(base.tokenizer, texts, cfg.model.max_length))
    prepared = kind.prepare(records, settings, ctx)
    ctx.records, ctx.data = prepared, encode(base.tokenizer, [r.text for r in prepared], cfg.model.max_length)
    start = time.perf_counter()
    model, record = kind.fit(clone_model(base.model), settings, ctx)
    tokens = sum(min(len(s), cfg.model.max_length) for s in ctx.data.ids)
    # prepare() may add records (public rehearsal) or leave some out (retrain: the forget set).
    return model, {**record, "settings": settings, "n_train_records": min(len(records), len(prepared)),
                   "rehearsal_records": max(0, len(prepared) - len(records)),
                   "tokens": int(round(record.pop("epochs_run") * tokens)),
                   "seconds": round(time.perf_counter() - start, 2)}


def _save(audit: Audit, arm: str, model: Any, record: dict[str, Any]) -> None:
    base = audit.base()
    with staging_dir(audit.run.path("arms", arm, "model")) as tmp:
        save_handle(ModelHandle(model=model, tokenizer=base.tokenizer, max_length=audit.cfg.model.max_length), tmp)
    write_json(audit.run.path("arms", arm, "train.json"), record)


def ledger_people(audit: Audit, spec: ArmSpec, record: dict[str, Any]) -> tuple[People, int | None]:
    """The real people a DP arm trained on, as the budget ledger keys them (:func:`.ledger.training_people`),
    and the per-person cap of a user-level ELS arm (None otherwise). DP-FedAvg: also the clients each person's
    records lie in."""
    records = training_records(audit, spec)
    privacy = record.get("privacy") or {}
    clients = None
    if privacy.get("unit") == "client":
        from ..data.clients import client_labels

        cfg = audit.cfg
        clients = client_labels(records, cfg.federated.clients, cfg.seed, cfg.data.client_field)
    user = record.get("user_dp") or {}
    cap = user.get("records_per_person_cap") if user.get("method") == "els" else None
    return training_people(records, clients), cap


def train_arm(audit: Audit, spec: ArmSpec, settings: dict[str, Any]) -> None:
    """Train one arm: ``arms/<arm>/model`` (safetensors) and ``arms/<arm>/train.json``; a DP training joins the
    privacy-budget ledger (:mod:`.ledger`), with the people it trained on, once it is saved."""
    model, record = fit(audit, spec, spec.name, settings, training_records(audit, spec))
    _save(audit, spec.name, model, record)
    members = audit.memo("members_hash", lambda: members_hash(audit.splits()["members"]))
    if (record.get("privacy") or {}).get("sigma"):
        people, cap = ledger_people(audit, spec, record)
        entry = entry_for(members, spec.name, audit.run.root, settings, record["privacy"], people, cap)
        if entry is not None:
            record_training(audit.run.root, entry, people)


def training_seed(seed: int, k: int) -> int:
    """Extra training seed k of an audit seeded ``seed``: its own stream, never the audit's."""
    return derive_seed(seed, f"training-seed-{k}") % 2**31


def seed_name(arm: str, k: int) -> str:
    """Where extra seed k of an arm lives (``arms/<arm>/seeds/<k>``) and its stages' names."""
    return f"{arm}/seeds/{k}"


def train_seed(audit: Audit, spec: ArmSpec, settings: dict[str, Any], k: int) -> None:
    """The arm's recipe on the same records with extra training seed k (:func:`training_seed`): its model and
    train.json under ``arms/<arm>/seeds/<k>``. A DP training spends privacy budget like the arm's own, so it
    joins the ledger too."""
    seed = training_seed(audit.cfg.seed, k)
    name = seed_name(spec.name, k)
    model, record = fit(audit, spec, name, {**settings, "seed": seed}, training_records(audit, spec), seed=seed)
    _save(audit, name, model, record)
    members = audit.memo("members_hash", lambda: members_hash(audit.splits()["members"]))
    if (record.get("privacy") or {}).get("sigma"):
        # The same people as the arm's own training, and the same per-person cap: the ledger composes it for them.
        people, cap = ledger_people(audit, spec, record)
        entry = entry_for(members, name, audit.run.root, {**settings, "seed": seed}, record["privacy"], people, cap)
        if entry is not None:
            record_training(audit.run.root, entry, people)


def derive_arm(audit: Audit, spec: ArmSpec, settings: dict[str, Any]) -> None:
    """A derived arm: its kind makes its model from its source arm's trained model. ``seconds`` in its
    train.json is what deriving took (not its source's training)."""
    run, max_length = audit.run, audit.cfg.model.max_length
    ctx = DeriveContext(cfg=audit.cfg, base=audit.base(),
                        load=lambda arm: load_handle(run.path("arms", arm, "model"), max_length),
                        train_record=lambda arm: read_json(run.path("arms", arm, "train.json")),
                        records=lambda arm: training_records(audit, parse_arm(arm)),
                        validation=_validation(audit), forget=audit.forget_set)
    start = time.perf_counter()
    model, record = spec.kind_obj.derive(settings, ctx)
    _save(audit, spec.name, model, {**record, "seconds": round(time.perf_counter() - start, 2)})


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


def shadow_plan(cfg: AuditConfig, splits: dict[str, list[Record]]) -> ShadowPlan:
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


def scrub_pool_stage(audit: Audit) -> None:
    s, splits = audit.cfg.defences.scrub, audit.splits()
    others = [r for name, recs in splits.items() if name != "non_members" for r in recs]
    scrubbed, _ = scrub_members(splits["non_members"], mode=s.mode, entities=s.entities, seed=audit.cfg.seed,
                                desc="scrub non-members (shadow pool)", reserve=others)
    write_jsonl(audit.run.path("defences", "scrub", "non_members.jsonl"), scrubbed)


def train_shadow(audit: Audit, spec: ArmSpec, settings: dict[str, Any], k: int, plan: ShadowPlan) -> None:
    """Shadow k of an arm: trained like the arm on its half of the pool; keeps only NLLs."""
    cfg, run = audit.cfg, audit.run
    pool = plan.pool
    if "scrub" in spec.data:
        scrubbed_members = [r for r in read_jsonl(run.path("defences", "scrub", "members.jsonl")) if r.kind != "canary"]
        pool = scrubbed_members + read_jsonl(run.path("defences", "scrub", "non_members.jsonl"))
    records = [pool[i] for i in np.flatnonzero(plan.in_mask[k])]
    if "dedup" in spec.data:
        d = cfg.defences.dedup
        records, _ = dedup_members(records, method=d.method, threshold=d.threshold, num_perm=d.num_perm, seed=cfg.seed)
    records = with_audit_canaries(audit, records)  # a shadow is trained like its arm, canaries included
    base = audit.base()
    label = f"{spec.name} shadow {k + 1}/{cfg.shadows.n_shadows}"
    model, _ = fit(audit, spec, label, settings, records)
    handle = ModelHandle(model=model, tokenizer=base.tokenizer, max_length=cfg.model.max_length)
    # The shadow is scored on the original texts, as the target is.
    nll_x = score_texts(handle, [plan.pool[i].text for i in plan.eval_x], desc=f"score {label}", moments=False).nll()
    nll_z = score_texts(handle, [r.text for r in audit.splits()["population"]], desc=f"score {label} population", moments=False).nll()
    with atomic_path(run.path("arms", spec.name, "shadows", f"{k}.npz"), suffix=".npz") as tmp:
        np.savez(tmp, nll_x=nll_x, nll_z=nll_z, in_x=plan.in_mask[k][plan.eval_x])


def load_shadows(audit: Audit, arm: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    xs, zs, ins = [], [], []
    for k in range(audit.cfg.shadows.n_shadows):
        with np.load(audit.run.path("arms", arm, "shadows", f"{k}.npz"), allow_pickle=False) as z:
            xs.append(z["nll_x"]), zs.append(z["nll_z"]), ins.append(z["in_x"])
    return np.stack(xs), np.stack(zs), np.stack(ins)
