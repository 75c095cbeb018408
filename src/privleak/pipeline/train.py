"""Training stages: data defences, one model per arm, shadow models.

:func:`arm_settings` translates the config into everything that determines
an arm's model (its cache key); :data:`TRAINERS` maps an arm's training kind
to the function that fits it (the way the attack registry maps names to
attacks), so a new kind of arm is one trainer and one line.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..arms import ArmSpec
from ..attacks.lira import shadow_splits
from ..attacks.scoring import score_texts
from ..audit.membership import mia_subsets
from ..audit.utility import mean_nll
from ..config import AuditConfig, dp_recipe, resolve_delta
from ..core.io import atomic_path, read_json, stable_hash, staging_dir, write_json
from ..data.audit_canaries import insert_audit_canaries
from ..data.canaries import derive_seed
from ..data.clients import client_labels, partition
from ..data.records import Record, read_jsonl, write_jsonl
from ..defenses.arm_data import dedup_members, scrub_members
from ..defenses.weight_noise import add_weight_noise
from ..accountants import epsilons as accountant_epsilons
from ..models.batching import Encoded, encode
from ..models.device import current as current_policy
from ..models.dp_train import DPSettings, train_dp
from ..models.federated import FedSettings, train_federated
from ..models.handle import ModelHandle, clone_model, load_handle, save_handle
from ..models.train import EarlyStopping, TrainSettings, train
from .audit import Audit

# ---------------------------------------------------------------- settings

def arm_settings(cfg: AuditConfig, spec: ArmSpec, n_members: int) -> dict[str, Any]:
    """Everything that determines an arm's model (its stage-cache key).

    bf16 autocast changes the trained weights, so it is part of the key; fp32
    (every CPU run) adds nothing, and those keys are what they always were.
    """
    settings = _arm_settings(cfg, spec, n_members)
    if current_policy().precision == "bf16":
        settings["precision"] = "bf16"
    return settings


def _arm_settings(cfg: AuditConfig, spec: ArmSpec, n_members: int) -> dict[str, Any]:
    data = {
        "scrub": cfg.defences.scrub.model_dump(mode="json") if spec.scrub else None,
        "dedup": cfg.defences.dedup.model_dump(mode="json") if spec.dedup else None,
        "audit_canaries": cfg.one_run.model_dump(mode="json", exclude={"fdp"}) if cfg.one_run.canaries else None,
    }
    if spec.dpw_sigma is not None:
        # The baseline's training, then noise on the weights: the shadows of a DP-Weights arm are made the same way.
        return {"kind": "dpw", "sigma": spec.dpw_sigma, "noise_seed": derive_seed(cfg.seed, spec.name),
                "trained_as": arm_settings(cfg, ArmSpec(), n_members)}
    if spec.fed:
        return fed_settings(cfg, spec, n_members, data)
    if spec.best:
        # Fine-tuning with public rehearsal, stopped where held-out population loss is lowest (BestConfig).
        b = cfg.best
        return {"kind": "best", "epochs": b.epochs, "batch_size": cfg.train.batch_size, "lr": b.lr,
                "weight_decay": cfg.train.weight_decay, "seed": cfg.seed, "data_defences": data,
                "replay": b.replay, "validate_records": b.validate_records,
                "validate_every_epochs": 0.5, "patience": b.patience}
    if spec.dp_epsilon is None:
        return {"kind": "baseline", **cfg.train.model_dump(mode="json"), "seed": cfg.seed, "data_defences": data}
    delta, _ = resolve_delta(cfg, n_members)
    lora = {"lora_rank", "lora_alpha", "lora_lr", "lora_targets", "qlora"}
    settings = {"kind": "dp", "target_epsilon": spec.dp_epsilon, "delta": delta, "lora": spec.lora,
                **cfg.dp.model_dump(mode="json", exclude={"epsilons", "delta", "debug_break"} | (set() if spec.lora else lora)),
                "seed": cfg.seed, "data_defences": data}
    if spec.name in cfg.dp.debug_break:  # only a broken arm's key (and train.json) carries it
        settings["debug_break"] = cfg.dp.debug_break[spec.name]
    recipe_batch, recipe_epochs = dp_recipe(n_members, spec.dp_epsilon)
    settings["batch_size"] = settings["batch_size"] or recipe_batch
    settings["epochs"] = settings["epochs"] or recipe_epochs
    if spec.lora:
        settings["lr"] = settings.pop("lora_lr")
    return settings


def fed_settings(cfg: AuditConfig, spec: ArmSpec, n_members: int, data: dict[str, Any]) -> dict[str, Any]:
    """A federated arm's settings: ``federated`` config, the client field, and for DP-FedAvg the target
    client-level ε, δ (the central arms' δ, already below 1/K) and the central arms' accountant."""
    settings = {"kind": "fedavg" if spec.fed_epsilon is None else "fed-dp",
                **cfg.federated.model_dump(mode="json"), "client_field": cfg.data.client_field,
                "seed": cfg.seed, "data_defences": data, "train_embeddings": True}
    if spec.fed_epsilon is not None:
        delta, _ = resolve_delta(cfg, n_members)
        settings.update(target_epsilon=spec.fed_epsilon, delta=delta, accountant=cfg.dp.accountant,
                        train_embeddings=cfg.dp.train_embeddings)
    return settings


# ---------------------------------------------------------------- data defences

def defence_keys(cfg: AuditConfig, data_key: str) -> dict[str, str]:
    return {
        "scrub": stable_hash("scrub", data_key, cfg.defences.scrub.model_dump(mode="json"), cfg.seed),
        "dedup": stable_hash("dedup", data_key, cfg.defences.dedup.model_dump(mode="json"), cfg.seed),
    }


def scrub_stage(audit: Audit) -> None:
    s = audit.cfg.defences.scrub
    scrubbed, report = scrub_members(audit.splits()["members"], mode=s.mode, entities=s.entities, seed=audit.cfg.seed)
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
    if spec.scrub:
        out = read_jsonl(audit.run.path("defences", "scrub", "members.jsonl"))
    if spec.dedup:
        out = [out[i] for i in read_json(audit.run.path("defences", "dedup", "kept.json"))]
    return with_audit_canaries(audit, out)


def with_audit_canaries(audit: Audit, records: list[Record]) -> list[Record]:
    """``records`` plus the included one-run audit canaries, after any data defence: the canaries audit
    the training step (the mechanism whose ε the accountant states), so no defence may touch them."""
    return insert_audit_canaries(records, audit.audit_canaries(), audit.cfg.seed)


# ---------------------------------------------------------------- trainers

Trainer = Callable[..., tuple[Any, dict[str, Any]]]


def fit_plain(model: Any, data: Encoded, s: dict[str, Any], pad: int, max_length: int, seed: int,
              label: str, validate: Callable[[Any], float] | None = None) -> tuple[Any, dict[str, Any]]:
    """Plain fine-tuning; early-stopped on ``validate`` when the settings ask for it (the best arm)."""
    stopping = None
    if "validate_every_epochs" in s:
        if validate is None:
            raise ValueError("early stopping needs a validation function")
        per_epoch = -(-len(data) // s["batch_size"])
        stopping = EarlyStopping(validate=validate, every=max(1, round(s["validate_every_epochs"] * per_epoch)),
                                 patience=s["patience"])
    tlog = train(model, data, TrainSettings(epochs=s["epochs"], batch_size=s["batch_size"], lr=s["lr"],
                                            weight_decay=s["weight_decay"], seed=seed), pad, desc=f"train {label}",
                 early_stopping=stopping)
    record = {"kind": s["kind"], "steps": tlog.steps, "epoch_losses": tlog.losses, "privacy": None,
              "epochs_run": tlog.steps / max(1, -(-len(data) // s["batch_size"]))}
    if stopping is not None:
        record["stopped_epoch"] = round(tlog.best_step / (-(-len(data) // s["batch_size"])), 3)
        record["val_losses"] = tlog.val_losses
    return model, record


def fit_dp(model: Any, data: Encoded, s: dict[str, Any], pad: int, max_length: int, seed: int,
           label: str, validate: Callable[[Any], float] | None = None) -> tuple[Any, dict[str, Any]]:
    """DP-SGD fine-tuning (``validate`` is not used: looking at held-out loss to stop would need accounting too)."""
    dps = DPSettings(
        target_epsilon=s["target_epsilon"], delta=s["delta"], max_grad_norm=s["max_grad_norm"], epochs=s["epochs"],
        expected_batch_size=s["batch_size"], lr=s["lr"], seed=seed, accountant=s["accountant"],
        train_embeddings=s["train_embeddings"], train_output=s.get("train_output", False),
        micro_batch_tokens=s["micro_batch_tokens"], grad_sample_mode=s["clipping"], lora_rank=s["lora_rank"] if s["lora"] else None,
        debug_break=s.get("debug_break"),
        **({"lora_alpha": s["lora_alpha"], "qlora": s.get("qlora", False),
            "lora_targets": s["lora_targets"] if isinstance(s["lora_targets"], str) else tuple(s["lora_targets"])}
           if s["lora"] else {}),
    )
    model, tlog = train_dp(model, data, dps, pad, max_length, desc=f"train {label}")
    # Poisson sampling: each step sees q·n records in expectation.
    epochs_run = tlog.sample_rate * tlog.steps
    cross = accountant_epsilons(sample_rate=tlog.sample_rate, noise_multiplier=tlog.sigma, steps=tlog.steps, delta=dps.delta)
    privacy = {"target_epsilon": dps.target_epsilon, "epsilon": tlog.epsilon, "accountant": tlog.accountant,
               "delta": dps.delta, "sigma": tlog.sigma, "sample_rate": tlog.sample_rate, "steps": tlog.steps,
               "max_grad_norm": dps.max_grad_norm, "epsilon_rdp": cross.epsilon_rdp, "epsilon_pld": cross.epsilon_pld,
               "epsilon_prv": cross.epsilon_prv, "empty_batches": tlog.empty_batches}
    return model, {"kind": "dp", "steps": tlog.steps, "epoch_losses": tlog.losses, "privacy": privacy,
                   "epochs_run": epochs_run}


def fit_dpw(model: Any, data: Encoded, s: dict[str, Any], pad: int, max_length: int, seed: int,
            label: str, validate: Callable[[Any], float] | None = None) -> tuple[Any, dict[str, Any]]:
    """DP-Weights from scratch (the shadows): plain training as the baseline, then θ + N(0, σ²I)."""
    model, record = fit_plain(model, data, s["trained_as"], pad, max_length, seed, label)
    noise = add_weight_noise(model, s["sigma"], s["noise_seed"])
    return model, {**record, "kind": "dpw", "weight_noise": noise.to_dict()}


def fit_fed(model: Any, data: Encoded, s: dict[str, Any], pad: int, max_length: int, seed: int,
            label: str, validate: Callable[[Any], float] | None = None,
            clients: list[str] | None = None) -> tuple[Any, dict[str, Any]]:
    """FedAvg / DP-FedAvg on Flower over the records' clients (``clients``: one label per record)."""
    if clients is None:
        raise ValueError("a federated arm needs each record's client")
    names, index = partition(clients)
    fs = FedSettings(rounds=s["rounds"], sample_rate=s["sample_rate"], local_steps=s["local_steps"],
                     batch_size=s["batch_size"], lr=s["lr"], seed=seed, dp=s["kind"] == "fed-dp",
                     target_epsilon=s.get("target_epsilon"), delta=s.get("delta"), clip=s["clip"],
                     train_embeddings=s["train_embeddings"], accountant=s.get("accountant", "prv"),
                     parallel_clients=s["parallel_clients"], round_timeout_s=s["round_timeout_s"],
                     drop=tuple(tuple(d) for d in s["drop"]))
    model, log = train_federated(model, data, index, len(names), fs, pad, max_length, desc=f"train {label}")
    privacy = None
    if fs.dp:
        privacy = {"target_epsilon": fs.target_epsilon, "epsilon": log.epsilon, "accountant": fs.accountant,
                   "delta": fs.delta, "sigma": log.sigma, "sample_rate": fs.sample_rate, "steps": log.rounds,
                   "max_grad_norm": fs.clip, "epsilon_rdp": log.epsilon_rdp, "epsilon_pld": log.epsilon_pld,
                   "epsilon_prv": log.epsilon_prv, "empty_batches": log.empty_rounds, "unit": "client",
                   "epsilon_record": log.epsilon_record}
    federation = {"strategy": "DP-FedAvg (Poisson client sampling; ours)" if fs.dp else "FedAvg (Flower)",
                  "clients": len(names), "client_sizes": dict(zip(names, log.client_sizes)), "rounds": log.rounds,
                  "sample_rate": fs.sample_rate, "sampling": "poisson" if fs.dp else "fixed-size without replacement",
                  "local_steps": fs.local_steps, "sampled": log.sampled, "replied": log.replied,
                  "failures": log.failures, "client_steps": log.client_steps}
    return model, {"kind": s["kind"], "steps": log.rounds, "privacy": privacy, "federation": federation,
                   "epoch_losses": [x for x in log.losses if x == x],  # rounds nobody answered have no loss
                   "epochs_run": log.client_records / max(1, len(data))}


#: Arm training kind (``arm_settings(...)["kind"]``) → trainer.
TRAINERS: dict[str, Trainer] = {"baseline": fit_plain, "best": fit_plain, "dp": fit_dp, "dpw": fit_dpw,
                                "fedavg": fit_fed, "fed-dp": fit_fed}


def _validation(audit: Audit, n_records: int) -> Callable[[Any], float]:
    """Mean token NLL on the first ``n_records`` of the population split (already in random order): the best
    arm's early-stopping signal (never members)."""
    base = audit.base()
    texts = [r.text for r in audit.splits()["population"][:n_records]]

    def validate(model: Any) -> float:
        handle = ModelHandle(model=model, tokenizer=base.tokenizer, max_length=audit.cfg.model.max_length)
        return float(mean_nll(score_texts(handle, texts, desc="validate on population")) or math.inf)
    return validate


def rehearsal_records(audit: Audit, n: int, replay: float) -> list[Record]:
    """``round(replay · n)`` public records (at most the whole public split), a seeded sample: what the best
    arm rehearses so it keeps what the base model knew. Public text costs no privacy; none with a base
    model of the user's own and no ``--public`` (there is no public split to rehearse)."""
    public = audit.splits()["public"]
    k = min(len(public), int(round(replay * n)))
    order = np.random.default_rng(derive_seed(audit.cfg.seed, "best-rehearsal")).permutation(len(public))[:k]
    return [public[i] for i in sorted(order)]


def fit(audit: Audit, label: str, settings: dict[str, Any], records: list[Record]) -> tuple[Any, dict[str, Any]]:
    """A fresh copy of the base model trained on ``records`` as ``settings`` say; (model, training record).

    The best arm (and its shadows, trained like it) also rehearses public records (:func:`rehearsal_records`).
    """
    cfg, base = audit.cfg, audit.base()
    rehearsed = rehearsal_records(audit, len(records), settings["replay"]) if settings.get("replay") else []
    records = records + rehearsed
    data = encode(base.tokenizer, [r.text for r in records], cfg.model.max_length)
    start = time.perf_counter()
    extra = {"clients": client_labels(records, cfg.federated.clients, cfg.seed, cfg.data.client_field)} \
        if settings["kind"] in ("fedavg", "fed-dp") else {}
    model, record = TRAINERS[settings["kind"]](clone_model(base.model), data, settings, base.pad_id,
                                               cfg.model.max_length, cfg.seed, label,
                                               validate=_validation(audit, settings["validate_records"])
                                               if settings["kind"] == "best" else None,
                                               **extra)
    tokens = sum(min(len(s), cfg.model.max_length) for s in data.ids)
    return model, {**record, "settings": settings, "n_train_records": len(records) - len(rehearsed),
                   "rehearsal_records": len(rehearsed),
                   "tokens": int(round(record.pop("epochs_run") * tokens)),
                   "seconds": round(time.perf_counter() - start, 2)}


def train_arm(audit: Audit, spec: ArmSpec, settings: dict[str, Any]) -> None:
    """Train one arm: ``arms/<arm>/model`` (safetensors) and ``arms/<arm>/train.json``."""
    base = audit.base()
    model, record = fit(audit, spec.name, settings, training_records(audit, spec))
    with staging_dir(audit.run.path("arms", spec.name, "model")) as tmp:
        save_handle(ModelHandle(model=model, tokenizer=base.tokenizer, max_length=audit.cfg.model.max_length), tmp)
    write_json(audit.run.path("arms", spec.name, "train.json"), record)


def derive_dpw_arm(audit: Audit, spec: ArmSpec, settings: dict[str, Any]) -> None:
    """A DP-Weights arm: the baseline's trained model (not retrained) plus N(0, σ²I) on every weight."""
    run, base = audit.run, audit.base()
    handle = load_handle(run.path("arms", "baseline", "model"), audit.cfg.model.max_length)
    noise = add_weight_noise(handle.model, settings["sigma"], settings["noise_seed"], start=base.model)
    with staging_dir(run.path("arms", spec.name, "model")) as tmp:
        save_handle(handle, tmp)
    trained = read_json(run.path("arms", "baseline", "train.json"))
    write_json(run.path("arms", spec.name, "train.json"),
               {**trained, "kind": "dpw", "settings": settings, "privacy": None, "weight_noise": noise.to_dict()})


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
    trained = [s.name for s in cfg.arm_specs() if s.trained]
    return [a for a in trained if cfg.shadows.arms is None or a in cfg.shadows.arms]


def scrub_pool_stage(audit: Audit) -> None:
    s = audit.cfg.defences.scrub
    scrubbed, _ = scrub_members(audit.splits()["non_members"], mode=s.mode, entities=s.entities, seed=audit.cfg.seed,
                                desc="scrub non-members (shadow pool)")
    write_jsonl(audit.run.path("defences", "scrub", "non_members.jsonl"), scrubbed)


def train_shadow(audit: Audit, spec: ArmSpec, settings: dict[str, Any], k: int, plan: ShadowPlan) -> None:
    """Shadow k of an arm: trained like the arm on its half of the pool; keeps only NLLs."""
    cfg, run = audit.cfg, audit.run
    pool = plan.pool
    if spec.scrub:
        scrubbed_members = [r for r in read_jsonl(run.path("defences", "scrub", "members.jsonl")) if r.kind != "canary"]
        pool = scrubbed_members + read_jsonl(run.path("defences", "scrub", "non_members.jsonl"))
    records = [pool[i] for i in np.flatnonzero(plan.in_mask[k])]
    if spec.dedup:
        d = cfg.defences.dedup
        records, _ = dedup_members(records, method=d.method, threshold=d.threshold, num_perm=d.num_perm, seed=cfg.seed)
    records = with_audit_canaries(audit, records)  # a shadow is trained like its arm, canaries included
    base = audit.base()
    label = f"{spec.name} shadow {k + 1}/{cfg.shadows.n_shadows}"
    model, _ = fit(audit, label, settings, records)
    handle = ModelHandle(model=model, tokenizer=base.tokenizer, max_length=cfg.model.max_length)
    # The shadow is scored on the original texts, as the target is.
    nll_x = score_texts(handle, [plan.pool[i].text for i in plan.eval_x], desc=f"score {label}").nll()
    nll_z = score_texts(handle, [r.text for r in audit.splits()["population"]], desc=f"score {label} population").nll()
    with atomic_path(run.path("arms", spec.name, "shadows", f"{k}.npz"), suffix=".npz") as tmp:
        np.savez(tmp, nll_x=nll_x, nll_z=nll_z, in_x=plan.in_mask[k][plan.eval_x])


def load_shadows(audit: Audit, arm: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    xs, zs, ins = [], [], []
    for k in range(audit.cfg.shadows.n_shadows):
        with np.load(audit.run.path("arms", arm, "shadows", f"{k}.npz"), allow_pickle=False) as z:
            xs.append(z["nll_x"]), zs.append(z["nll_z"]), ins.append(z["in_x"])
    return np.stack(xs), np.stack(zs), np.stack(ins)
