"""One audit, stage by stage: data → base model → arms → evaluation → results.

Each stage is cached in the run directory (see ``rundir``): rerunning the
same command after a crash or Ctrl-C picks up where it stopped, and the same
config + seed reproduce the same ``results.json``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from . import __version__
from .arms import ArmSpec, parse_arm
from .attacks.exposure import canary_exposure, chance_exposure
from .attacks.lira import shadow_splits
from .attacks.scoring import TokenScores, cached_scores, score_texts
from .audit.extraction_eval import run_extraction
from .audit.membership_eval import attack_scores, evaluate_membership
from .audit.pii_eval import PiiAttackSettings, base_emissions, run_pii_attacks
from .audit.shadow_attacks import shadow_scores
from .audit.utility import perplexity
from .config import AuditConfig, resolve_delta
from .core.errors import UserError
from .core.io import atomic_path
from .core.masking import PiiMasker, known_pii_values
from .data.canaries import (
    Canary,
    derive_seed,
    load_canaries,
    make_canaries,
    plant_canaries,
    save_canaries,
)
from .data.clinical import ClinicalCorpusConfig, generate_corpus
from .data.loaders import load_corpus
from .data.records import Record, read_jsonl, write_jsonl
from .data.splits import split_corpus
from .defenses.arm_data import dedup_members, scrub_members
from .defenses.guard.audit_arm import evaluate_guard
from .defenses.pii import get_analyzer
from .models.accounting import epsilons as accountant_epsilons
from .models.base import BaseModelSpec, default_base_model
from .models.batching import encode
from .models.dp_train import DPSettings, train_dp
from .models.handle import (
    ModelHandle,
    check_model_ref,
    clone_model,
    load_handle,
    save_handle,
)
from .models.train import TrainSettings, train
from .results import SCHEMA_VERSION, package_versions, write_results
from .rundir import RunDir, Timer, finite, read_json, stable_hash, write_json

log = logging.getLogger("privleak")

SPLITS = ("public", "members", "non_members", "population")
# Fewer records than this per split and no membership figure means anything.
MIN_PER_SPLIT = 5


@dataclass
class Audit:
    """What the stages share while a run is in progress."""

    cfg: AuditConfig
    run: RunDir
    notify: Callable[[str], None]
    warnings: list[str]
    memo: dict = field(default_factory=dict)  # in-process results shared by stages (never persisted)


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for f in files:
        h.update(str(f.relative_to(path) if path.is_dir() else f.name).encode())
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def _stage(audit: Audit, name: str, key: str, body: Callable[[], None]) -> None:
    if audit.run.done(name, key):
        audit.notify(f"[dim]✓ {name} (cached)[/dim]")
        return
    audit.notify(f"▶ {name}")
    with Timer() as t:
        body()
    audit.run.mark(name, key, t.elapsed)
    audit.notify(f"[green]✓ {name}[/green] ({t.elapsed:.1f} s)")


# ----------------------------------------------------------------- data ---

def _data_key(cfg: AuditConfig) -> str:
    source = None
    if cfg.data.path is not None:
        p = Path(cfg.data.path).expanduser()
        source = _file_digest(p) if p.exists() else str(p)
    return stable_hash("data", cfg.seed, cfg.data.model_dump(mode="json"), cfg.canaries.model_dump(mode="json"), source,
                       cfg.model.base is None)


def _synthetic_cfg(cfg: AuditConfig, **over: object) -> ClinicalCorpusConfig:
    s = cfg.data.synthetic
    kw = dict(
        n_public=s.n_public,
        n_members=s.n_members,
        n_non_members=s.n_non_members,
        n_population=s.n_population,
        phi_fraction=s.phi_fraction,
        public_phi_fraction=s.public_phi_fraction,
        repeat_fraction=s.repeat_fraction,
        repeat_visits=tuple(s.repeat_visits),
        canary_repeats=tuple(cfg.canaries.repeats),
        canaries_per_repeat=cfg.canaries.per_repeat,
        seed=cfg.seed,
    )
    kw.update(over)
    return ClinicalCorpusConfig(**kw)


def _make_data(audit: Audit) -> None:
    cfg, run = audit.cfg, audit.run
    if cfg.data.path is None:
        corpus = generate_corpus(_synthetic_cfg(cfg))
        splits, canaries = corpus.splits, corpus.canaries
    else:
        records = load_corpus(cfg.data.path, text_field=cfg.data.text_field, fmt=cfg.data.format)
        splits = split_corpus(records, fractions=tuple(cfg.data.split), seed=cfg.seed, min_per_split=MIN_PER_SPLIT)
        canaries = []
        if cfg.data.plant_canaries:
            canaries = make_canaries(repeats=tuple(cfg.canaries.repeats), per_repeat=cfg.canaries.per_repeat, seed=cfg.seed)
            splits["members"] = plant_canaries(splits["members"], canaries, seed=cfg.seed)
        if cfg.model.base is None:
            # The embedded base model still needs public text to learn from:
            # the synthetic public split, which shares nothing with the user's data.
            public_cfg = _synthetic_cfg(cfg, n_members=0, n_non_members=0, n_population=0, canary_repeats=())
            splits["public"] = generate_corpus(public_cfg).splits["public"]
        else:
            splits["public"] = []
    with run.staging_dir(run.path("splits")) as tmp:
        for name in SPLITS:
            write_jsonl(tmp / f"{name}.jsonl", splits.get(name, []))
        save_canaries(tmp / "canaries.json", canaries)


def load_splits(run: RunDir) -> tuple[dict[str, list[Record]], list[Canary]]:
    splits = {name: read_jsonl(run.path("splits", f"{name}.jsonl")) for name in SPLITS}
    return splits, load_canaries(run.path("splits", "canaries.json"))


# ----------------------------------------------------------- base model ---

def _base_spec(cfg: AuditConfig) -> BaseModelSpec:
    e = cfg.model.embedded
    return BaseModelSpec(
        vocab_size=e.vocab_size, n_layer=e.n_layer, n_embd=e.n_embd, n_head=e.n_head,
        max_length=cfg.model.max_length, epochs=e.epochs, batch_size=e.batch_size, lr=e.lr, seed=cfg.seed,
    )


def _resolve_base(audit: Audit, public: list[Record]) -> None:
    cfg = audit.cfg
    if cfg.model.base is None:
        _, path = default_base_model(_base_spec(cfg), [r.text for r in public])
        info = {"kind": "embedded", "path": str(path), "spec": asdict(_base_spec(cfg))}
    else:
        handle = load_handle(cfg.model.base, cfg.model.max_length)
        info = {"kind": "user", "ref": cfg.model.base, "path": cfg.model.base,
                "n_params": int(sum(p.numel() for p in handle.model.parameters()))}
    write_json(audit.run.path("base_model.json"), info)


def _load_base(audit: Audit) -> ModelHandle:
    info = read_json(audit.run.path("base_model.json"))
    return load_handle(info["path"], audit.cfg.model.max_length)


# ----------------------------------------------------------------- arms ---

def _arm_settings(cfg: AuditConfig, spec: ArmSpec, n_members: int) -> dict:
    """Everything that determines an arm's model (its stage-cache key)."""
    data = {
        "scrub": cfg.defences.scrub.model_dump(mode="json") if spec.scrub else None,
        "dedup": cfg.defences.dedup.model_dump(mode="json") if spec.dedup else None,
    }
    if spec.dp_epsilon is None:
        return {"kind": "baseline", **cfg.train.model_dump(mode="json"), "seed": cfg.seed, "data_defences": data}
    delta, _ = resolve_delta(cfg, n_members)
    lora = {"lora_rank", "lora_alpha", "lora_lr", "lora_targets"}
    settings = {"kind": "dp", "target_epsilon": spec.dp_epsilon, "delta": delta, "lora": spec.lora,
                **cfg.dp.model_dump(mode="json", exclude={"epsilons", "delta"} | (set() if spec.lora else lora)),
                "seed": cfg.seed, "data_defences": data}
    if spec.lora:
        settings["lr"] = settings.pop("lora_lr")
    return settings


# ------------------------------------------------------------ defences ---

def _defence_keys(cfg: AuditConfig, data_key: str) -> dict[str, str]:
    return {
        "scrub": stable_hash("scrub", data_key, cfg.defences.scrub.model_dump(mode="json"), cfg.seed),
        "dedup": stable_hash("dedup", data_key, cfg.defences.dedup.model_dump(mode="json"), cfg.seed),
    }


def _scrub_stage(audit: Audit, members: list[Record]) -> None:
    s = audit.cfg.defences.scrub
    scrubbed, report = scrub_members(members, mode=s.mode, entities=s.entities, seed=audit.cfg.seed)
    write_jsonl(audit.run.path("defences", "scrub", "members.jsonl"), scrubbed)
    write_json(audit.run.path("defences", "scrub", "report.json"), report)


def _dedup_stage(audit: Audit, members: list[Record]) -> None:
    d = audit.cfg.defences.dedup
    kept, report = dedup_members(members, method=d.method, threshold=d.threshold, num_perm=d.num_perm, seed=audit.cfg.seed)
    kept_ids = {id(r) for r in kept}  # dedup returns the very objects it keeps
    kept_idx = [i for i, r in enumerate(members) if id(r) in kept_ids]
    write_json(audit.run.path("defences", "dedup", "kept.json"), kept_idx)
    write_json(audit.run.path("defences", "dedup", "report.json"), report)


def _training_records(audit: Audit, spec: ArmSpec, members: list[Record]) -> list[Record]:
    """The members as the arm trains on them: deduplicated and/or scrubbed."""
    out = members
    if spec.scrub:
        out = read_jsonl(audit.run.path("defences", "scrub", "members.jsonl"))
    if spec.dedup:
        out = [out[i] for i in read_json(audit.run.path("defences", "dedup", "kept.json"))]
    return out


def _fit(audit: Audit, base: ModelHandle, label: str, settings: dict, records: list[Record]):
    """A fresh copy of the base model trained on ``records`` as ``settings`` say; (model, record)."""
    cfg = audit.cfg
    model = clone_model(base.model)
    data = encode(base.tokenizer, [r.text for r in records], cfg.model.max_length)
    pad = base.pad_id
    if settings["kind"] == "baseline":
        tlog = train(model, data, TrainSettings(epochs=settings["epochs"], batch_size=settings["batch_size"], lr=settings["lr"],
                                                weight_decay=settings["weight_decay"], seed=cfg.seed), pad, desc=f"train {label}")
        record = {"kind": "baseline", "steps": tlog.steps, "epoch_losses": tlog.losses, "settings": settings, "privacy": None}
    else:
        dps = DPSettings(
            target_epsilon=settings["target_epsilon"], delta=settings["delta"], max_grad_norm=settings["max_grad_norm"],
            epochs=settings["epochs"], expected_batch_size=settings["batch_size"], lr=settings["lr"], seed=cfg.seed,
            accountant=settings["accountant"], train_embeddings=settings["train_embeddings"],
            micro_batch_tokens=settings["micro_batch_tokens"], grad_sample_mode=settings["clipping"],
            lora_rank=settings["lora_rank"] if settings["lora"] else None,
            **({"lora_alpha": settings["lora_alpha"], "lora_targets": tuple(settings["lora_targets"])} if settings["lora"] else {}),
        )
        model, tlog = train_dp(model, data, dps, pad, cfg.model.max_length, desc=f"train {label}")
        cross = accountant_epsilons(tlog.sample_rate, tlog.sigma, tlog.steps, dps.delta)
        record = {
            "kind": "dp", "steps": tlog.steps, "epoch_losses": tlog.losses, "settings": settings,
            "privacy": {
                "target_epsilon": dps.target_epsilon, "epsilon": tlog.epsilon, "accountant": tlog.accountant,
                "delta": dps.delta, "sigma": tlog.sigma, "sample_rate": tlog.sample_rate, "steps": tlog.steps,
                "max_grad_norm": dps.max_grad_norm, "epsilon_rdp": cross.epsilon_rdp, "epsilon_pld": cross.epsilon_pld,
                "epsilon_prv": cross.epsilon_prv, "empty_batches": tlog.empty_batches,
            },
        }
    record["n_train_records"] = len(records)
    return model, record


def _train_arm(audit: Audit, arm: str, settings: dict, members: list[Record]) -> None:
    cfg = audit.cfg
    base = _load_base(audit)
    model, record = _fit(audit, base, arm, settings, members)
    final = audit.run.path("arms", arm, "model")
    with audit.run.staging_dir(final) as tmp:
        save_handle(ModelHandle(model=model, tokenizer=base.tokenizer, max_length=cfg.model.max_length), tmp)
    write_json(audit.run.path("arms", arm, "train.json"), record)


# -------------------------------------------------------------- shadows ---

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


def _shadow_plan(cfg: AuditConfig, splits: dict[str, list[Record]]) -> ShadowPlan:
    members = [r for r in splits["members"] if r.kind != "canary"]
    mi, ni = _mia_subsets(cfg, members, splits["non_members"])
    pool = members + splits["non_members"]
    in_mask = shadow_splits(len(pool), cfg.shadows.n_shadows, seed=derive_seed(cfg.seed, "shadows"))
    return ShadowPlan(pool=pool, in_mask=in_mask, eval_x=np.concatenate([mi, len(members) + ni]))


def _shadow_arms(cfg: AuditConfig) -> list[str]:
    if not cfg.shadows.enabled:
        return []
    trained = [s.name for s in cfg.arm_specs() if s.trained]
    return [a for a in trained if cfg.shadows.arms is None or a in cfg.shadows.arms]


def _scrub_pool_stage(audit: Audit, non_members: list[Record]) -> None:
    s = audit.cfg.defences.scrub
    scrubbed, _ = scrub_members(non_members, mode=s.mode, entities=s.entities, seed=audit.cfg.seed,
                                desc="scrub non-members (shadow pool)")
    write_jsonl(audit.run.path("defences", "scrub", "non_members.jsonl"), scrubbed)


def _train_shadow(audit: Audit, spec: ArmSpec, settings: dict, k: int, plan: ShadowPlan,
                  splits: dict[str, list[Record]]) -> None:
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
    base = _load_base(audit)
    label = f"{spec.name} shadow {k + 1}/{cfg.shadows.n_shadows}"
    model, _ = _fit(audit, base, label, settings, records)
    handle = ModelHandle(model=model, tokenizer=base.tokenizer, max_length=cfg.model.max_length)
    # The shadow is scored on the original texts, as the target is.
    nll_x = score_texts(handle, [plan.pool[i].text for i in plan.eval_x], desc=f"score {label}").nll()
    nll_z = score_texts(handle, [r.text for r in splits["population"]], desc=f"score {label} population").nll()
    with atomic_path(run.path("arms", spec.name, "shadows", f"{k}.npz"), suffix=".npz") as tmp:
        np.savez(tmp, nll_x=nll_x, nll_z=nll_z, in_x=plan.in_mask[k][plan.eval_x])


def _load_shadows(run: RunDir, arm: str, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    xs, zs, ins = [], [], []
    for k in range(n):
        with np.load(run.path("arms", arm, "shadows", f"{k}.npz"), allow_pickle=False) as z:
            xs.append(z["nll_x"]), zs.append(z["nll_z"]), ins.append(z["in_x"])
    return np.stack(xs), np.stack(zs), np.stack(ins)


def _add_shadow_attacks(audit: Audit, name: str, target: dict[str, TokenScores], scores: dict,
                        mi: np.ndarray, ni: np.ndarray) -> dict:
    """LiRA / RMIA-with-shadows scores added to ``scores`` (full-length arrays, NaN off the evaluated subsets)."""
    cfg = audit.cfg
    sx, sz, ins = _load_shadows(audit.run, name, cfg.shadows.n_shadows)
    tx = np.concatenate([target["members"].nll()[mi], target["non_members"].nll()[ni]])
    res = shadow_scores(tx, target["population"].nll(), sx, sz, ins,
                        global_variance=cfg.shadows.global_variance, default_a=cfg.attacks.rmia_a)
    n_m, n_n = len(target["members"]), len(target["non_members"])
    for attack, sc in res.scores.items():
        pos, neg = np.full(n_m, np.nan), np.full(n_n, np.nan)
        pos[mi], neg[ni] = sc[: len(mi)], sc[len(mi) :]
        scores[attack] = (pos, neg)
    return {"n_shadows": int(sx.shape[0]), "global_variance": cfg.shadows.global_variance, "rmia_a": res.rmia_a,
            "rmia_a_tuned": res.rmia_a_tuned, "pool": "non-canary members + non-members; population = RMIA's z"}


# ----------------------------------------------------------- evaluation ---

def _mia_subsets(cfg: AuditConfig, members: list[Record], non_members: list[Record]) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the members / non-members the membership attacks compare.

    Records with known PII: only the PII-carrying ones (the records whose
    privacy is at stake); otherwise all. Canaries are excluded (they have
    their own measure). Both sides are capped at the same size, seeded.
    """
    def pick(recs: list[Record]) -> np.ndarray:
        known = any(r.pii is not None for r in recs)
        idx = [i for i, r in enumerate(recs) if r.kind != "canary" and (r.has_pii or not known)]
        return np.asarray(idx, dtype=np.int64)

    m, n = pick(members), pick(non_members)
    cap = min(cfg.attacks.max_mia_records, len(m), len(n))
    rng = np.random.default_rng(cfg.seed)
    return np.sort(rng.choice(m, cap, replace=False)), np.sort(rng.choice(n, cap, replace=False))


def _eval_delta(audit: Audit, name: str, n_members: int) -> tuple[float, float | None]:
    """(δ, accountant ε) for an arm's empirical-ε bound: the arm's own for DP
    arms, the default δ for the others so every arm is held to the same δ."""
    if name != "base":
        privacy = read_json(audit.run.path("arms", name, "train.json"))["privacy"]
        if privacy:
            return float(privacy["delta"]), float(privacy["epsilon"])
    return resolve_delta(audit.cfg, n_members)[0], None


def _evaluate(audit: Audit, name: str, model_dir: Path, splits: dict[str, list[Record]], canaries: list[Canary]) -> None:
    cfg, run = audit.cfg, audit.run
    handle = load_handle(model_dir, cfg.model.max_length)
    texts = {
        "members": [r.text for r in splits["members"] if r.kind != "canary"],
        "non_members": [r.text for r in splits["non_members"]],
        "population": [r.text for r in splits["population"]],
    }
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    target = {
        split: cached_scores(handle, t, run.path("arms", name, f"scores_{split}.npz"), desc=f"score {name} {split}")
        for split, t in texts.items()
    }
    seconds["scoring"] = time.perf_counter() - t0
    # The base model never saw the members: it is the reference model.
    reference = None
    if name != "base":
        reference = {split: TokenScores.load(run.path("arms", "base", f"scores_{split}.npz")) for split in texts}
    members = [r for r in splits["members"] if r.kind != "canary"]
    mi, ni = _mia_subsets(cfg, members, splits["non_members"])
    delta, dp_eps = _eval_delta(audit, name, len(splits["members"]))
    t0 = time.perf_counter()
    scores = attack_scores(target, reference, texts, k=cfg.attacks.min_k_percent / 100.0, rmia_a=cfg.attacks.rmia_a)
    shadows = None
    if name in _shadow_arms(cfg):
        shadows = _add_shadow_attacks(audit, name, target, scores, mi, ni)
    membership = evaluate_membership(scores, mi, ni, delta=delta, bootstrap=cfg.attacks.bootstrap,
                                     alpha=cfg.attacks.alpha, seed=cfg.seed, dp_epsilon=dp_eps)
    seconds["membership"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    exposures = canary_exposure(handle, canaries, n_candidates=cfg.canaries.candidates, seed=cfg.seed, desc=f"exposure {name}")
    seconds["exposure"] = time.perf_counter() - t0
    write_json(run.path("arms", name, "eval_seconds.json"), {k: round(v, 2) for k, v in seconds.items()})
    write_json(run.path("arms", name, "eval.json"), {
        "utility": {"ppl_members": perplexity(target["members"]), "ppl_non_members": perplexity(target["non_members"])},
        **membership,
        **({"shadows": shadows} if shadows else {}),
        "canaries": [e.to_json() for e in exposures],
    })


def _extract(audit: Audit, name: str, model_dir: Path, splits: dict[str, list[Record]], canaries: list[Canary]) -> None:
    cfg, run = audit.cfg, audit.run
    handle = load_handle(model_dir, cfg.model.max_length)
    reference = _load_base(audit) if name != "base" else None
    masker = PiiMasker(known_pii_values(run.root))
    result = run_extraction(
        handle, reference, splits, canaries, seed=cfg.seed, n_samples=cfg.attacks.extraction_samples,
        prefix_records=cfg.attacks.prefix_records, phi_records=cfg.attacks.phi_records, masker=masker,
    )
    write_json(run.path("arms", name, "extraction.json"), result["results"])
    write_json(run.path("arms", name, "extraction_seconds.json"), result["seconds"])


def _pii_settings(cfg: AuditConfig) -> PiiAttackSettings:
    return PiiAttackSettings.full() if cfg.profile == "full" else PiiAttackSettings.quick()


def _pii_attacks(audit: Audit, name: str, model_dir: Path, splits: dict[str, list[Record]]) -> None:
    """Lukas et al.'s three PII attacks; the base model's own emissions are subtracted (sampled once per process)."""
    cfg, run = audit.cfg, audit.run
    settings = _pii_settings(cfg)
    analyzer = get_analyzer()
    handle = load_handle(model_dir, cfg.model.max_length)
    base = None
    if name != "base":
        if "base_pii_emissions" not in audit.memo:
            audit.memo["base_pii_emissions"] = base_emissions(_load_base(audit), analyzer, settings, seed=cfg.seed)
        base = audit.memo["base_pii_emissions"]
    out = run_pii_attacks(handle, base, splits, analyzer, seed=cfg.seed, settings=settings)
    write_json(run.path("arms", name, "pii_attacks.json"), out["results"])
    write_json(run.path("arms", name, "pii_attacks_seconds.json"), out["seconds"])


def _guard_arm(audit: Audit, splits: dict[str, list[Record]], canaries: list[Canary]) -> None:
    """The baseline model behind the output guard: the extraction attacks re-run through it."""
    cfg, run = audit.cfg, audit.run
    handle = load_handle(run.path("arms", "baseline", "model"), cfg.model.max_length)
    pii = None
    if cfg.attacks.pii:
        settings = _pii_settings(cfg)
        if "base_pii_emissions" not in audit.memo:
            audit.memo["base_pii_emissions"] = base_emissions(_load_base(audit), get_analyzer(), settings, seed=cfg.seed)
        pii = (get_analyzer(), settings, audit.memo["base_pii_emissions"])
    out = evaluate_guard(handle, splits, canaries, seed=cfg.seed, n_samples=cfg.attacks.extraction_samples,
                         phi_records=cfg.attacks.phi_records, reference=_load_base(audit),
                         masker=PiiMasker(known_pii_values(run.root)), pii=pii)
    write_json(run.path("arms", "guard", "guard.json"), out["results"])
    write_json(run.path("arms", "guard", "guard_seconds.json"), out["seconds"])


# -------------------------------------------------------------- results ---

def _pii_block(extraction: dict) -> dict | None:
    """PHI leaks per category for the report: member values leaked next to the
    non-member floor (values of the same generator, never trained on)."""
    phi = extraction.get("phi_prompts")
    if not phi:
        return None
    return {
        "by_category": {c["label"]: {"leaked": c["member_leaked"], "n_values": c["n_member_values"],
                                     "non_member_leaked": c["non_member_leaked"], "n_non_member_values": c["n_non_member_values"],
                                     "excess": c["excess"], "excess_ci95": c["excess_ci"]} for c in phi["categories"]},
        "identifying_total": phi["total"],
        "counting": "exact normalised full values (digits only for SSN/phone/MRN), never single tokens or substrings",
    }


def _between_arm_tests(arms: dict[str, dict]) -> dict[str, dict]:
    """Each arm vs the baseline on the leak counts (Fisher / χ², Cohen's h, Newcombe CI), as source 003 does."""
    from .core.stats import compare_proportions

    base = arms.get("baseline", {}).get("extraction")
    if not base:
        return {}
    tests = {}
    for name, arm in arms.items():
        ex = arm.get("extraction")
        if name == "baseline" or not ex:
            continue
        if "phi_prompts" in base and "phi_prompts" in ex:
            a, b = base["phi_prompts"]["total"], ex["phi_prompts"]["total"]
            if a["n_member_values"] and b["n_member_values"]:
                tests[f"baseline vs {name}: PHI values leaked"] = compare_proportions(
                    a["member_leaked"], a["n_member_values"], b["member_leaked"], b["n_member_values"]).to_dict()
        if "canaries" in base and "canaries" in ex:
            def greedy(e: dict) -> tuple[int, int]:
                planted = [c for c in e["canaries"]["canaries"] if c.get("planted", True)]
                return sum(bool(c["greedy_extracted"]) for c in planted), len(planted)
            (k1, n1), (k2, n2) = greedy(base), greedy(ex)
            if n1 and n2:
                tests[f"baseline vs {name}: canaries extracted greedily"] = compare_proportions(k1, n1, k2, n2).to_dict()
    return tests


def _attack_seconds(run: RunDir, names: list[str]) -> dict[str, float]:
    out = {}
    for name in names:
        for stage, file in (("eval", "eval_seconds.json"), ("extract", "extraction_seconds.json"), ("pii", "pii_attacks_seconds.json"),
                            ("guard", "guard_seconds.json")):
            path = run.path("arms", name, file)
            if path.exists():
                out.update({f"{stage}/{name}/{k}": v for k, v in read_json(path).items()})
    return out


def _check_dp_claims(audit: Audit, arm: str, ev: dict) -> None:
    """An empirical lower bound above the accountant's ε, or a measured
    operating point significantly outside TPR ≤ e^ε·FPR + δ, means a bug
    (or a broken DP guarantee): never hide it."""
    emp = ev.get("empirical_epsilon") or {}
    if emp.get("exceeds_accountant"):
        msg = (f"!!! {arm}: empirical ε lower bound {emp['epsilon_lb']:.3f} ({emp['attack']}) EXCEEDS the accountant's ε — "
               "the DP guarantee does not hold for this run; please report it")
        audit.warnings.append(msg)
        audit.notify(f"[bold red]{msg}[/bold red]")
    bound = emp.get("dp_bound") or {}
    if bound and not bound.get("ok", True):
        msg = f"!!! {arm}: measured operating points violate TPR ≤ e^ε·FPR + δ ({bound.get('attack')}) — the DP guarantee is contradicted"
        audit.warnings.append(msg)
        audit.notify(f"[bold red]{msg}[/bold red]")


def _assemble(audit: Audit, splits: dict[str, list[Record]], canaries: list[Canary], arms: list[str]) -> dict:
    cfg, run = audit.cfg, audit.run
    out_arms = {}
    for arm in arms:
        if arm == "guard":
            served = out_arms["baseline"]
            out_arms[arm] = {
                "kind": "guard", "serves": "baseline", "privacy": served["privacy"], "utility": served["utility"],
                # Behind an API that returns only text, score-based attacks do not apply.
                "attacks": {}, "guard": read_json(run.path("arms", "guard", "guard.json")),
            }
            continue
        tr = read_json(run.path("arms", arm, "train.json"))
        ev = read_json(run.path("arms", arm, "eval.json"))
        privacy = tr["privacy"] or {"epsilon": None, "delta": None, "sigma": None, "sample_rate": None, "steps": tr["steps"],
                                    "max_grad_norm": None, "epsilon_rdp": None, "epsilon_pld": None}
        out_arms[arm] = {"kind": tr["kind"], "training": {"steps": tr["steps"], "epoch_losses": tr["epoch_losses"],
                                                          "settings": tr["settings"]},
                         "privacy": privacy, **ev}
        extraction = run.path("arms", arm, "extraction.json")
        if cfg.attacks.extraction and extraction.exists():
            out_arms[arm]["extraction"] = read_json(extraction)
            pii = _pii_block(out_arms[arm]["extraction"])
            if pii:
                out_arms[arm]["pii"] = pii
        pii_attacks = run.path("arms", arm, "pii_attacks.json")
        if cfg.attacks.pii and pii_attacks.exists():
            out_arms[arm]["pii_attacks"] = read_json(pii_attacks)
        spec = parse_arm(arm)
        if spec.data_defences:
            out_arms[arm]["defences"] = {d: read_json(run.path("defences", d, "report.json")) for d in spec.data_defences}
            out_arms[arm]["n_train_records"] = tr.get("n_train_records")
        _check_dp_claims(audit, arm, ev)
    base_eval = read_json(run.path("arms", "base", "eval.json"))
    base_extraction = run.path("arms", "base", "extraction.json")
    if cfg.attacks.extraction and base_extraction.exists():
        base_eval["extraction"] = read_json(base_extraction)
    base_pii = run.path("arms", "base", "pii_attacks.json")
    if cfg.attacks.pii and base_pii.exists():
        base_eval["pii_attacks"] = read_json(base_pii)
    members = splits["members"]
    mi, ni = _mia_subsets(cfg, [r for r in members if r.kind != "canary"], splits["non_members"])
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "privleak", "version": __version__},
        "config": cfg.model_dump(mode="json"),
        "data": {
            "source": cfg.data.path or "synthetic-clinical",
            "n_public": len(splits["public"]),
            "n_members": len(members),
            "n_canary_records": sum(r.kind == "canary" for r in members),
            "n_non_members": len(splits["non_members"]),
            "n_population": len(splits["population"]),
            "mia_records_per_side": int(len(mi)),
            "n_canaries": len(canaries),
            "canary_chance_exposure": chance_exposure(cfg.canaries.candidates) if canaries else None,
        },
        "base_model": {**read_json(run.path("base_model.json")), **base_eval},
        "arms": out_arms,
        "statistical_tests": _between_arm_tests(out_arms),
        "warnings": audit.warnings,
        "durations_s": {**{k: round(v, 2) for k, v in run.durations.items()}, **_attack_seconds(run, ["base", *arms])},
        "versions": package_versions(),
    }


# Rough resident bytes per unit of work, measured on the embedded model with
# generous headroom: a generated sample (text, ids, per-token scores, index
# hits) and an exposure candidate (string, ids, log-likelihood).
_BYTES_PER_SAMPLE = 64 * 1024
_BYTES_PER_CANDIDATE = 2 * 1024


def _available_memory() -> int | None:
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(cfg: AuditConfig, available: int | None = None) -> None:
    """Refuse sample counts that cannot fit in memory, before any work starts."""
    available = _available_memory() if available is None else available
    if available is None:
        return
    gib = 1024**3
    need = cfg.attacks.extraction_samples * _BYTES_PER_SAMPLE
    if cfg.attacks.extraction and need > 0.5 * available:
        raise UserError(
            f"attacks.extraction_samples = {cfg.attacks.extraction_samples} needs about {need / gib:.1f} GiB but only "
            f"{available / gib:.1f} GiB is free; use at most {int(0.5 * available / _BYTES_PER_SAMPLE)} samples"
        )
    need = cfg.canaries.candidates * _BYTES_PER_CANDIDATE
    if need > 0.5 * available:
        raise UserError(
            f"canaries.candidates = {cfg.canaries.candidates} needs about {need / gib:.1f} GiB but only "
            f"{available / gib:.1f} GiB is free; use at most {int(0.5 * available / _BYTES_PER_CANDIDATE)} candidates"
        )


def preflight(cfg: AuditConfig) -> None:
    """Fail on bad input before any output or work: the user's corpus must load
    and split, a ``--model`` reference must be a model directory or hub id, and
    the attack sizes must fit in memory."""
    check_memory(cfg)
    if cfg.data.path is not None:
        records = load_corpus(cfg.data.path, text_field=cfg.data.text_field, fmt=cfg.data.format)
        split_corpus(records, fractions=tuple(cfg.data.split), seed=cfg.seed, min_per_split=MIN_PER_SPLIT)
    if cfg.model.base is not None:
        check_model_ref(cfg.model.base)


def run_audit(cfg: AuditConfig, out_dir: str | Path, notify: Callable[[str], None] = lambda s: None) -> dict:
    """Run (or resume) the whole audit; returns the ``results.json`` content."""
    run = RunDir.open(out_dir)
    preflight(cfg)
    notify(f"PrivLeak audit → {run.root}  (arms: {', '.join(cfg.arm_names())})")
    audit = Audit(cfg=cfg, run=run, notify=notify, warnings=[])
    write_json(run.path("config.json"), cfg.model_dump(mode="json"))

    data_key = _data_key(cfg)
    _stage(audit, "data", data_key, lambda: _make_data(audit))
    splits, canaries = load_splits(run)
    members = splits["members"]
    _, delta_warning = resolve_delta(cfg, len(members))
    if delta_warning and cfg.dp.epsilons:
        audit.warnings.append(delta_warning)
        notify(f"[yellow]warning:[/yellow] {delta_warning}")

    base_key = stable_hash("base", data_key, cfg.model.model_dump(mode="json"), cfg.seed)
    _stage(audit, "base-model", base_key, lambda: _resolve_base(audit, splits["public"]))

    specs = cfg.arm_specs()
    defence_keys = _defence_keys(cfg, data_key)
    if any(s.scrub for s in specs):
        _stage(audit, "defend/scrub", defence_keys["scrub"], lambda: _scrub_stage(audit, members))
    if any(s.dedup for s in specs):
        _stage(audit, "defend/dedup", defence_keys["dedup"], lambda: _dedup_stage(audit, members))

    arms = [s.name for s in specs if s.trained]
    arm_keys = {}
    for spec in specs:
        if not spec.trained:
            continue
        arm = spec.name
        settings = _arm_settings(cfg, spec, len(members))
        used = tuple(defence_keys[d] for d in spec.data_defences)
        arm_keys[arm] = stable_hash("arm", base_key, settings, used)
        _stage(audit, f"train/{arm}", arm_keys[arm],
               lambda arm=arm, s=settings, sp=spec: _train_arm(audit, arm, s, _training_records(audit, sp, members)))

    shadow_keys: dict[str, str] = {}
    shadow_arms = _shadow_arms(cfg)
    if shadow_arms:
        plan = _shadow_plan(cfg, splits)
        by_name = {s.name: s for s in specs}
        if any(by_name[a].scrub for a in shadow_arms):
            _stage(audit, "defend/scrub-pool", stable_hash("scrub-pool", defence_keys["scrub"]),
                   lambda: _scrub_pool_stage(audit, splits["non_members"]))
        for arm in shadow_arms:
            spec = by_name[arm]
            settings = _arm_settings(cfg, spec, len(members))
            keys = []
            for k in range(cfg.shadows.n_shadows):
                # Which other arms get shadows does not change this arm's shadows.
                key = stable_hash("shadow", arm_keys[arm], cfg.shadows.model_dump(mode="json", exclude={"arms"}), k,
                                  cfg.attacks.max_mia_records)
                keys.append(key)
                _stage(audit, f"shadow/{arm}/{k + 1}", key,
                       lambda sp=spec, st=settings, k=k: _train_shadow(audit, sp, st, k, plan, splits))
            shadow_keys[arm] = stable_hash(*keys)

    extraction_keys = {"extraction", "extraction_samples", "prefix_records", "phi_records"}
    eval_cfg = (cfg.attacks.model_dump(mode="json", exclude=extraction_keys), cfg.canaries.model_dump(mode="json"), cfg.seed)
    base_dir = Path(read_json(run.path("base_model.json"))["path"])
    _stage(audit, "eval/base", stable_hash("eval", base_key, eval_cfg),
           lambda: _evaluate(audit, "base", base_dir, splits, canaries))
    base_eval_key = stable_hash("eval", base_key, eval_cfg)
    for arm in arms:
        _stage(audit, f"eval/{arm}", stable_hash("eval", arm_keys[arm], base_eval_key, eval_cfg, shadow_keys.get(arm)),
               lambda arm=arm: _evaluate(audit, arm, run.path("arms", arm, "model"), splits, canaries))

    if cfg.attacks.extraction:
        extract_cfg = (cfg.attacks.model_dump(mode="json"), cfg.seed)
        _stage(audit, "extract/base", stable_hash("extract", base_key, extract_cfg),
               lambda: _extract(audit, "base", base_dir, splits, canaries))
        for arm in arms:
            _stage(audit, f"extract/{arm}", stable_hash("extract", arm_keys[arm], base_key, extract_cfg),
                   lambda arm=arm: _extract(audit, arm, run.path("arms", arm, "model"), splits, canaries))

    if cfg.attacks.pii:
        pii_cfg = (_pii_settings(cfg).to_json(), cfg.seed)
        _stage(audit, "pii/base", stable_hash("pii", base_key, pii_cfg), lambda: _pii_attacks(audit, "base", base_dir, splits))
        for arm in arms:
            _stage(audit, f"pii/{arm}", stable_hash("pii", arm_keys[arm], base_key, pii_cfg),
                   lambda arm=arm: _pii_attacks(audit, arm, run.path("arms", arm, "model"), splits))

    if any(s.guard for s in specs):
        guard_cfg = (cfg.attacks.model_dump(mode="json"), _pii_settings(cfg).to_json(), cfg.seed)
        _stage(audit, "guard", stable_hash("guard", arm_keys["baseline"], base_key, data_key, guard_cfg),
               lambda: _guard_arm(audit, splits, canaries))

    results = finite(_assemble(audit, splits, canaries, [s.name for s in specs]))
    write_results(run.path("results.json"), results)
    return results
