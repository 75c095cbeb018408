"""The data and base-model stages: splits, canaries, the model fine-tuning starts from — and their providers.

Providers (:mod:`privleak.core.inputs`) of the audit's data inputs (:mod:`privleak.attacks.inputs`): the
splits (the ``data`` stage, ``splits/``), the canaries and who drew the split (read off it), the attack
settings and seed (from the config), the base model (``base-model``, ``base_model.json``) and the one-run
audit canaries (``audit-canaries``). Their keys are the formulas of the stages before them, so existing run
directories resume.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict
from pathlib import Path

import numpy as np

from typing import TYPE_CHECKING, Any

from ..attacks.inputs import AUDIT_CANARIES, BASE, CANARIES, PUBLIC, SEED, SETTINGS, SPLITS, USER_SPLIT
from ..config import AuditConfig
from ..core.inputs import Input, Persist, View, provides
from ..core.io import read_json, stable_hash, staging_dir, write_json
from ..data.canaries import derive_seed, load_canaries, make_canaries, plant_canaries, save_canaries
from ..data.clinical import ClinicalCorpusConfig, generate_corpus
from ..data.loaders import load_corpus
from ..data.records import Record, read_jsonl, write_jsonl
from ..data.splits import split_corpus, stamp_units
from .audit import SPLITS as SPLIT_NAMES
from .audit import train_precision
from .rundir import RunDir

if TYPE_CHECKING:
    from ..models.base import BaseModelSpec
    from ..models.handle import ModelHandle

#: What ``base_model.json`` says: the embedded model or the user's, and where it is.
BASE_INFO: Input[dict[str, Any]] = Input("base-info", "the base model's record (base_model.json): its kind and path")

# Fewer records than this per split and no membership figure means anything.
MIN_PER_SPLIT = 5


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for f in files:
        h.update(str(f.relative_to(path) if path.is_dir() else f.name).encode())
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def data_key(cfg: AuditConfig) -> str:
    """What determines the splits: the data config, the canaries, the seed and the user's file content."""
    sources = []
    for path in (cfg.data.path, cfg.data.public):
        if path is not None:
            p = Path(path).expanduser()
            sources.append(_file_digest(p) if p.exists() else str(p))
    # client_field joins the key only when set, so runs from before it existed keep their splits.
    data = cfg.data.model_dump(mode="json", exclude=set() if cfg.data.client_field else {"client_field"})
    return stable_hash("data", cfg.seed, data, cfg.canaries.model_dump(mode="json"), sources,
                       cfg.model.base is None)


def synthetic_config(cfg: AuditConfig, **over: object) -> ClinicalCorpusConfig:
    s = cfg.data.synthetic
    kw = dict(n_public=s.n_public, n_members=s.n_members, n_non_members=s.n_non_members, n_population=s.n_population,
              n_public_heldout=s.n_public_heldout, phi_fraction=s.phi_fraction, public_phi_fraction=s.public_phi_fraction, repeat_fraction=s.repeat_fraction,
              repeat_visits=tuple(s.repeat_visits), canary_repeats=tuple(cfg.canaries.repeats),
              canaries_per_repeat=cfg.canaries.per_repeat, seed=cfg.seed)
    kw.update(over)
    return ClinicalCorpusConfig(**kw)


def make_data(cfg: AuditConfig, run: RunDir) -> None:
    """Write ``splits/`` (the four splits and the canaries) for the synthetic corpus or the user's file."""
    if cfg.data.path is None:
        corpus = generate_corpus(synthetic_config(cfg))
        splits, canaries = corpus.splits, corpus.canaries
    else:
        records = load_corpus(cfg.data.path, text_field=cfg.data.text_field, fmt=cfg.data.format,
                              group_field=cfg.data.group_field, client_field=cfg.data.client_field)
        splits = split_corpus(records, fractions=tuple(cfg.data.split), seed=cfg.seed, min_per_split=MIN_PER_SPLIT)
        canaries = []
        if cfg.data.plant_canaries:
            canaries = make_canaries(repeats=tuple(cfg.canaries.repeats), per_repeat=cfg.canaries.per_repeat, seed=cfg.seed)
            splits["members"] = plant_canaries(splits["members"], canaries, seed=cfg.seed)
        if cfg.model.base is None and cfg.data.public is None:
            # The embedded base model still needs public text to learn from:
            # the synthetic public split, which shares nothing with the user's data.
            public_cfg = synthetic_config(cfg, n_members=0, n_non_members=0, n_population=0, canary_repeats=())
            generated = generate_corpus(public_cfg).splits
            splits["public"], splits["public_heldout"] = generated["public"], generated["public_heldout"]
        elif cfg.model.base is None:
            splits["public"], splits["public_heldout"] = public_splits(cfg)
        else:
            splits["public"], splits["public_heldout"] = [], []
    with staging_dir(run.path("splits")) as tmp:
        for name in SPLIT_NAMES:
            # The privacy unit is fixed here, from the raw data, before any defence rewrites a text.
            write_jsonl(tmp / f"{name}.jsonl", stamp_units(splits.get(name, [])))
        save_canaries(tmp / "canaries.json", canaries)


def read_splits(run: RunDir) -> dict[str, list[Record]]:
    return {n: read_jsonl(run.path("splits", f"{n}.jsonl")) for n in SPLIT_NAMES}


@provides(SPLITS, key_formula=lambda k: data_key(k.cfg),
          persist=Persist("data", ("splits/",), load=lambda view: read_splits(view.resolver.store)))
def _splits(view: View) -> None:
    make_data(view.cfg, view.resolver.store)


@provides(CANARIES, needs=(SPLITS,))
def _canaries(view: View) -> list:
    return load_canaries(view.path("splits", "canaries.json"))


@provides(USER_SPLIT, needs=(SPLITS,))
def _user_split(view: View) -> bool:
    """Whether the user drew the members and non-members (``privleak attack``: ``splits/origin.json``) rather
    than PrivLeak splitting one corpus at random."""
    origin = view.path("splits", "origin.json")
    return origin.exists() and read_json(origin).get("drawn_by") == "user"


def _all_settings(settings: Any) -> dict[str, Any]:
    # The derived fields are left out of every dump (attacks.settings.DERIVED): a key holds them all.
    return {name: getattr(settings, name) for name in type(settings).model_fields}


@provides(SETTINGS, key_formula=lambda k: stable_hash("attack-settings", _all_settings(k.cfg.attack_settings())))
def _settings(view: View) -> Any:
    return view.cfg.attack_settings()


@provides(SEED, key_formula=lambda k: stable_hash("seed", k.cfg.seed))
def _seed(view: View) -> int:
    return view.cfg.seed


def public_splits(cfg: AuditConfig) -> tuple[list[Record], list[Record]]:
    """The user's ``--public`` text: 90 % to pre-train the embedded base model on, 10 % held out for forgetting."""
    records = load_corpus(cfg.data.public, text_field=cfg.data.text_field, fmt=None)
    order = np.random.default_rng(derive_seed(cfg.seed, "public-split")).permutation(len(records))
    n_held = max(1, len(records) // 10)
    return [records[i] for i in order[n_held:]], [records[i] for i in order[:n_held]]


def base_spec(cfg: AuditConfig) -> BaseModelSpec:
    from ..models.base import BaseModelSpec
    from ..models.device import current as current_policy

    e = cfg.model.embedded
    return BaseModelSpec(vocab_size=e.vocab_size, n_layer=e.n_layer, n_embd=e.n_embd, n_head=e.n_head,
                         max_length=cfg.model.max_length, epochs=e.epochs, batch_size=e.batch_size, lr=e.lr, seed=cfg.seed,
                         precision=current_policy().train_precision)


def base_key(cfg: AuditConfig, data: str) -> str:
    # text_format is not in the key: `run` always scores its models in PrivLeak's format.
    # bf16 training changes the embedded model's weights (a user's base model is not trained here).
    from ..models.gguf import gguf_digest, is_gguf

    precision = ["bf16"] if cfg.model.base is None and train_precision(cfg) == "bf16" else []
    return stable_hash("base", data, cfg.model.model_dump(mode="json", exclude={"text_format"}), cfg.seed,
                       *([gguf_digest(cfg.model.base)] if cfg.model.base and is_gguf(cfg.model.base) else []), *precision)


def resolve_base(cfg: AuditConfig, run: RunDir, public: list[Record]) -> None:
    """``base_model.json``: the embedded model (pre-trained on the public split, cached) or the user's."""
    from ..models.base import default_base_model
    from ..models.gguf import converted_info
    from ..models.handle import check_model_ref, load_handle

    if cfg.model.base is None:
        _, path = default_base_model(base_spec(cfg), [r.text for r in public])
        info = {"kind": "embedded", "path": str(path), "spec": asdict(base_spec(cfg))}
    else:
        path = check_model_ref(cfg.model.base)  # a GGUF file: its converted directory in the model cache
        handle = load_handle(path, cfg.model.max_length)
        info = {"kind": "user", "ref": cfg.model.base, "path": path,
                "n_params": int(sum(p.numel() for p in handle.model.parameters())), "gguf": converted_info(path)}
    write_json(run.path("base_model.json"), info)


def load_base(cfg: AuditConfig, info: dict[str, Any], text_format: str) -> ModelHandle:
    from ..models.handle import load_handle

    handle = load_handle(info["path"], cfg.model.max_length)
    handle.text_format = text_format
    return handle


def text_format(cfg: AuditConfig) -> str:
    """How every model of this run is scored and prompted (models.batching): the run's own arms in PrivLeak's
    format; ``privleak attack`` resolves ``auto`` before the run starts."""
    fmt = cfg.model.text_format
    return "privleak" if fmt == "auto" else fmt


def _base_cost(where: Any) -> float:
    from .training import train_cost

    cfg = where.cfg
    return train_cost(cfg.model.embedded.epochs * len(where.get(SPLITS)["public"])) if cfg.model.base is None else 1.0


@provides(BASE, needs=(PUBLIC,), key_formula=lambda k: base_key(k.cfg, k.key(SPLITS)),
          persist=Persist("base-model", ("base_model.json",), kind="train", cost=_base_cost, wide=True,
                          load=lambda view: load_base(view.cfg, read_json(view.path("base_model.json")),
                                                      text_format(view.cfg))))
def _base(view: View) -> None:
    resolve_base(view.cfg, view.resolver.store, view[PUBLIC])


@provides(BASE_INFO, needs=(BASE,))
def _base_info(view: View) -> dict[str, Any]:
    return read_json(view.path("base_model.json"))


def audit_canaries_key(cfg: AuditConfig, base: str) -> str:
    return stable_hash("audit-canaries", base, cfg.one_run.model_dump(mode="json", exclude={"fdp"}), cfg.seed)


def _load_audit_canaries(view: View) -> list:
    from ..data.audit_canaries import load_audit_canaries

    return load_audit_canaries(view.path("audit_canaries.json"))


@provides(AUDIT_CANARIES, needs=(BASE, PUBLIC), when=lambda w: bool(w.cfg.one_run.canaries), empty=list,
          key_formula=lambda k: audit_canaries_key(k.cfg, k.key(BASE)),
          persist=Persist("audit-canaries", ("audit_canaries.json",), load=_load_audit_canaries))
def _audit_canaries(view: View) -> None:
    """``audit_canaries.json``: m rare-word canaries of the base tokenizer, each included with probability ½."""
    from ..attacks.one_run_canaries import rare_word_pool
    from ..data.audit_canaries import make_audit_canaries, save_audit_canaries

    cfg = view.cfg
    pool = rare_word_pool(view[BASE].tokenizer, [r.text for r in view[PUBLIC]])
    canaries = make_audit_canaries(pool, cfg.one_run.canaries, cfg.one_run.prefix_words, cfg.one_run.secret_words,
                                   cfg.seed, cfg.one_run.query_words)
    save_audit_canaries(view.path("audit_canaries.json"), canaries,
                        {"pool_size": len(pool), "n_included": sum(c.included for c in canaries)})
