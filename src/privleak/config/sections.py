"""The config's sections: one strict pydantic model per YAML/TOML section, each number with its range.

:class:`privleak.config.AuditConfig` assembles them; :mod:`privleak.core.limits` says
where each bound comes from.
"""

from __future__ import annotations

import math
import re
import typing
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..core import limits as L
from .requirement import Requirement

#: Seeds are unsigned 32-bit: numpy's legacy RandomState, torch and Python's
#: hash-based derivations all accept 0 … 2**32 - 1, and numpy's
#: ``default_rng`` refuses negatives (after training, when it is first used).
MAX_SEED = 2**32 - 1
#: σ of the DP-Weights arms (θ + N(0, σ²I)): weights are O(1), so σ = 1000 already replaces them by noise.
MAX_WEIGHT_SIGMA = 1e3


def _literals(annotation: Any) -> frozenset[str]:
    """The string values of the ``Literal`` types inside an annotation (``Literal["a", "b"] | None`` → a, b)."""
    if typing.get_origin(annotation) is Literal:
        return frozenset(a for a in typing.get_args(annotation) if isinstance(a, str))
    return frozenset().union(*(_literals(a) for a in typing.get_args(annotation)))


def _wants_number(annotation: Any) -> bool:
    """Whether an annotation asks for numbers only — an int or a float, or a list or tuple of them (not a bool)."""
    if annotation is bool or typing.get_origin(annotation) is Literal:
        return False
    if annotation in (int, float):
        return True
    args = [a for a in typing.get_args(annotation) if a is not Ellipsis and a is not type(None)]
    return bool(args) and all(_wants_number(a) for a in args)


def _has_bool(value: Any) -> bool:
    return isinstance(value, bool) or (isinstance(value, (list, tuple)) and any(_has_bool(v) for v in value))


class Choices(BaseModel):
    """One rule for every config enum and number (issue 49 item 5), for the config's sections and the arm kinds'
    own options alike: a choice is matched without regard to case and kept in lower case (``mode: PSEUDONYM`` is
    ``pseudonym``, as ``privleak scrub --mode PSEUDONYM`` is), and a boolean is never a number (``seeds: true``
    was read as 1)."""

    _choices: ClassVar[dict[str, frozenset[str]]] = {}
    _numbers: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        fields = cls.model_fields.items()
        cls._choices = {n: v for n, f in fields if (v := _literals(f.annotation))}
        cls._numbers = frozenset(n for n, f in fields if _wants_number(f.annotation))

    @field_validator("*", mode="before")
    @classmethod
    def _one_rule(cls, value: Any, info: Any) -> Any:
        name = info.field_name
        if name in cls._numbers and _has_bool(value):
            raise ValueError(f"{str(value).lower()} is a yes/no value where a number is asked; give a number")
        choices = cls._choices.get(name)
        if choices and isinstance(value, str) and value not in choices and value.lower() in choices:
            return value.lower()
        return value


class _Strict(Choices):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SyntheticConfig(_Strict):
    n_public: int = Field(3000, ge=L.MIN_SYNTHETIC_RECORDS, le=L.MAX_SYNTHETIC_RECORDS)
    n_members: int = Field(1200, ge=L.MIN_SYNTHETIC_RECORDS, le=L.MAX_SYNTHETIC_RECORDS)
    n_non_members: int = Field(1200, ge=L.MIN_SYNTHETIC_RECORDS, le=L.MAX_SYNTHETIC_RECORDS)
    n_population: int = Field(1200, ge=L.MIN_SYNTHETIC_RECORDS, le=L.MAX_SYNTHETIC_RECORDS)
    n_public_heldout: int = Field(300, ge=L.MIN_SYNTHETIC_RECORDS, le=L.MAX_SYNTHETIC_RECORDS)  # generic public text never trained on: forgetting is measured on it
    phi_fraction: float = Field(0.8, ge=0.0, le=1.0)  # of the private splits: house-style notes (the rest generic text)
    public_phi_fraction: float = Field(0.5, ge=0.0, le=1.0)
    repeat_fraction: float = Field(0.1, ge=0.0, le=1.0)  # patients with several notes (repeated PII)
    repeat_visits: tuple[int, ...] = (2, 4, 8)

    @field_validator("repeat_visits")
    @classmethod
    def _visits(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        if not v or any(not 2 <= x <= L.MAX_REPEATS for x in v):
            raise ValueError(f"repeat_visits must be a non-empty list of integers from 2 to {L.MAX_REPEATS}")
        return v


class DataConfig(_Strict):
    path: str | None = None  # None: the synthetic clinical corpus
    text_field: str = "text"
    group_field: str | None = None  # the person/group of each record (user data); one split per group
    client_field: str | None = None  # the federated client (clinic, site) of each record (user data)
    format: Literal["jsonl", "csv", "text", "hf"] | None = None
    split: tuple[float, float, float] = (0.5, 0.25, 0.25)
    plant_canaries: bool = False
    # Text the user may train on at no privacy cost (their domain's public documents): the
    # embedded base model's tokenizer and weights are pre-trained on it instead of the
    # synthetic public split. Choosing the DP recipe on it costs no privacy either.
    public: str | None = None
    synthetic: SyntheticConfig = SyntheticConfig()

    @field_validator("text_field", "group_field", "client_field")
    @classmethod
    def _field_named(cls, v: str | None, info: Any) -> str | None:
        if v is not None and not v.strip():
            what = {"text_field": "the text", "group_field": "each record's person or group",
                    "client_field": "each record's federated client"}[info.field_name]
            raise ValueError(f"is empty; name the field of your data that holds {what}, or leave it out")
        return v

    @model_validator(mode="after")
    def _client_field_needs_data(self) -> "DataConfig":
        if self.client_field is not None and self.path is None:
            raise ValueError("client_field names a field of your corpus (--data); the synthetic corpus is split "
                             "into federated.clients clinics instead — drop --client-field or pass --data")
        return self

    @field_validator("split")
    @classmethod
    def _split_sums_to_one(cls, v: tuple[float, float, float]) -> tuple[float, float, float]:
        if any(f <= 0 for f in v) or abs(sum(v) - 1.0) > 1e-6:
            raise ValueError("split fractions (members, non_members, population) must be positive and sum to 1")
        return v


class CanaryConfig(_Strict):
    repeats: tuple[int, ...] = (1, 2, 4, 8, 16)
    per_repeat: int = Field(3, ge=1, le=L.MAX_REPEATS)
    candidates: int = Field(10_000, ge=100, le=L.MAX_RECORDS)

    @field_validator("repeats")
    @classmethod
    def _positive(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        if not v or any(r < 1 or r > L.MAX_REPEATS for r in v):
            raise ValueError(f"canary repeats must be a non-empty list of integers from 1 to {L.MAX_REPEATS}")
        return v


class EmbeddedModelConfig(_Strict):
    vocab_size: int = Field(2048, ge=300, le=L.MAX_VOCAB)
    n_layer: int = Field(2, ge=1, le=L.MAX_LAYERS)
    n_embd: int = Field(128, ge=16, le=L.MAX_EMBD)
    n_head: int = Field(4, ge=1, le=L.MAX_HEADS)
    epochs: float = Field(6.0, gt=0, le=L.MAX_EPOCHS)
    batch_size: int = Field(32, ge=1, le=L.MAX_BATCH)
    lr: float = Field(2e-3, gt=0, le=L.MAX_LR)

    @model_validator(mode="after")
    def _heads_divide(self) -> "EmbeddedModelConfig":
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head})")
        return self


class ModelConfig(_Strict):
    base: str | None = None  # None: the embedded model; else a HF id or local directory
    max_length: int = Field(160, ge=8, le=L.MAX_LENGTH)
    embedded: EmbeddedModelConfig = EmbeddedModelConfig()
    # How texts are framed when a model is scored or prompted (models.batching): the format the model was
    # trained in. auto: privleak (<eos> text <eos>) for the models `run` trains, plain (tokenizer(text)) for a
    # model `privleak attack` audits. `run` trains its arms in its own format, so it takes auto or privleak only.
    text_format: Literal["auto", "privleak", "plain", "plain+eos"] = "auto"


class TrainConfig(_Strict):
    """Non-private fine-tuning (the baseline arm)."""

    # The baseline must memorise as small-data fine-tuning does (its job is to show what leaks): the larger
    # step and 20 epochs separate members from population records by per-record loss where 10 epochs or 1e-3
    # reach the same population loss but separate far less (docs/results/2026-11-25-figures-from-code.md).
    epochs: float = Field(20.0, gt=0, le=L.MAX_EPOCHS)
    batch_size: int = Field(16, ge=1, le=L.MAX_BATCH)
    lr: float = Field(3e-3, gt=0, le=L.MAX_LR)
    weight_decay: float = Field(0.0, ge=0, le=L.MAX_LR)
    # The top N decoder layers only (None: every weight), for the arms on this recipe or best's (baseline,
    # best, the data defences, retrain, unlearn-sisa, dpw): embeddings, head and the layers below frozen and run once per record
    # (models.frozen_prefix) — the smollm2 profile's way to fine-tune a 135 M model on a CPU.
    layers: int | None = Field(None, ge=1, le=L.MAX_LAYERS)


class DPConfig(_Strict):
    """DP-SGD arms. They differ from the baseline only where DP-SGD needs it:
    a large expected batch (the noise is averaged over it), epochs counted in
    privacy, and frozen embedding tables (noise grows with √d; the public
    split covers the vocabulary)."""

    epsilons: tuple[float, ...] = (1.0, 4.0, 8.0)
    delta: float | None = None  # None: 1 / (10 n), below 1/n as DP requires
    max_grad_norm: float = Field(1.0, gt=0, le=1e6)
    epochs: int | None = Field(None, ge=1, le=L.MAX_EPOCHS)  # None: the recipe's
    batch_size: int | None = Field(None, ge=1, le=L.MAX_BATCH)  # None: the recipe's
    # What an unset batch_size / epochs (and arm_options.dp-user's) resolve to, from the arm's own unit count:
    # sgd — policy.dp_recipe (q ≈ 0.2, 15-30 epochs: the embedded model); pretrained —
    # policy.pretrained_dp_recipe (LoRA on a pretrained checkpoint: q ≈ 1/12 and 20 epochs, past ≈ 384 units a
    # batch of 32 and ≈ 240 steps), the smollm2 profile's.
    recipe: Literal["sgd", "pretrained"] = "sgd"
    # 3e-3: chosen on the population split (never the members) among 1e-3 / 3e-3 / 1e-2 and LoRA at 5e-3
    # (docs/results/2026-11-25-figures-from-code.md). Adam's step is ~lr whatever the noise, so past 3e-3 the noise walk wins.
    lr: float = Field(3e-3, gt=0, le=L.MAX_LR)
    train_embeddings: bool = False
    # true: the output layer trains too (untied from the frozen input embedding). Off by default: it buys
    # utility but lets a record-level DP arm learn the 16×-repeated exposure canaries (docs/results/2026-11-25-figures-from-code.md).
    train_output: bool = False
    micro_batch_tokens: int = Field(4096, ge=16, le=2**24)
    accountant: Literal["prv", "rdp"] = "prv"
    # Per-sample clipping: "bk" book-keeping (Bu et al. 2023; fastest here, exact),
    # "ghost" (Opacus ghost clipping), "hooks" (Opacus per-sample gradients, the reference).
    clipping: Literal["hooks", "ghost", "bk"] = "bk"
    # The +lora arms (e.g. dp-8+lora): rank-r adapters on attention and MLP, merged after training.
    lora_rank: int = Field(8, ge=1, le=L.MAX_EMBD)
    lora_alpha: float = Field(16.0, gt=0, le=1e6)
    lora_lr: float = Field(5e-3, gt=0, le=L.MAX_LR)  # adapters start at zero: a larger step than full fine-tuning
    # Module names, or auto: the architecture's attention and MLP projections (GPT-2 c_attn/c_proj/c_fc,
    # GPT-NeoX/Pythia query_key_value/dense/…, Llama/Mistral/Qwen2 q/k/v/o_proj and gate/up/down_proj).
    lora_targets: tuple[str, ...] | Literal["auto"] = "auto"
    # Adapters in the top N decoder layers only (None: every layer). The frozen layers below are run once per
    # record and kept (models.frozen_prefix): what makes many DP epochs affordable on a CPU (policy.py).
    lora_layers: int | None = Field(None, ge=1, le=L.MAX_LAYERS)
    qlora: bool = False  # the +lora arms on a 4-bit NF4 base (QLoRA; bitsandbytes on CUDA only)
    # The +lora arms' frozen base held in bf16 (models.lora.bf16_base; adapters, clipping and noise stay fp32).
    # auto: where the device multiplies bf16 in hardware (CUDA with bf16, CPUs with AVX-512 BF16 / AMX), else fp32.
    lora_base: Literal["auto", "fp32", "bf16"] = "auto"
    # Public-data-assisted DP (models.public_grad): each step of the dp-ε and dp-user-ε arms adds
    # public_weight · ∇(mean NLL of public_batch_size public records) after the noise — no privacy cost, ε
    # unchanged. Off by default: not yet chosen on public / population data (bench/bench_user_dp.py "+pub").
    public_weight: float = Field(0.0, ge=0, le=100)
    public_batch_size: int = Field(64, ge=1, le=L.MAX_BATCH)
    # White-box gradient canaries per DP arm (models.gradient_canaries): each on a coordinate no record touches,
    # clipped and noised by the arm's own step and read back every step, so the audit checks the step's clipping
    # and noise against σ and C directly (audit.whitebox.whitebox_alarm_test). 0: off. Costs m numbers per step.
    gradient_canaries: int = Field(1000, ge=0, le=1_000_000)
    # Debugging the audit itself, deliberately undocumented in --help: arm name → "no_noise" | "no_clip"
    # breaks that DP arm's step while it still reports its target ε; the one-run audit must catch it.
    debug_break: dict[str, Literal["no_noise", "no_clip"]] = {}

    @field_validator("epsilons")
    @classmethod
    def _eps_valid(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        for e in v:
            if not (L.MIN_EPSILON <= e <= L.MAX_EPSILON):
                raise ValueError(f"every ε must be from {L.MIN_EPSILON:g} to {L.MAX_EPSILON:g}, got {e} (above "
                                 f"{L.MAX_EPSILON:g} a DP guarantee certifies nothing; below {L.MIN_EPSILON:g} the "
                                 "accountant's error margin swamps it)")
        return v

    @field_validator("gradient_canaries")
    @classmethod
    def _canaries_valid(cls, v: int) -> int:
        if 0 < v < 3:
            raise ValueError(f"gradient_canaries must be 0 (off) or at least 3 (the check estimates the noise from "
                             f"them), got {v}")
        return v

    @field_validator("delta")
    @classmethod
    def _delta_valid(cls, v: float | None) -> float | None:
        if v is not None and not (0.0 < v < 1.0):
            raise ValueError(f"δ must satisfy 0 < δ < 1, got {v}")
        return v


class DPWeightsConfig(_Strict):
    """The ``dpw-σ`` arms (DP-Weights, θ + N(0, σ²I) on the baseline's weights): no formal ε, audited
    empirically. Empty in ``quick``; the ``full`` profile sweeps the σ below (see README for the choice)."""

    sigmas: tuple[float, ...] = ()

    @field_validator("sigmas")
    @classmethod
    def _sigma_valid(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        for x in v:
            if not (0 < x <= MAX_WEIGHT_SIGMA):
                raise ValueError(f"every DP-Weights σ must be in (0, {MAX_WEIGHT_SIGMA:g}], got {x}")
        return v


class FederatedConfig(_Strict):
    """The federated arms (``fedavg``, ``fed-dp-ε``) on Flower's simulation engine.

    ``clients``: K clinics the synthetic members are split over (uneven sizes, a patient's notes in one clinic;
    :mod:`privleak.data.clients`); user data: ``data.client_field`` names each record's client instead. Each
    round a ``sample_rate`` share of the clients trains ``local_steps`` AdamW steps of ``batch_size`` records
    from the global model (FedAvg: that fraction, a fixed number, without replacement; DP-FedAvg: each client
    independently with probability ``sample_rate``, Poisson, which is what its accountant assumes). ``clip``:
    C, the bound on one client's update norm (DP-FedAvg), chosen a priori, never on the members. With tens of
    clinics no C learns: the summed signal has norm ≤ C·(clients in the round) while the noise has norm σC√d —
    the ratio does not depend on C (the fed-dp arms warn, :meth:`privleak.arms.federated.FedAvg.warnings`).
    C only sets how far the noise walks the weights, √T·σC/(qK) per weight; a smaller C keeps the model
    nearer the base (G → 0), never above it (docs/results/2026-11-25-figures-from-code.md). ``drop``:
    fault injection for tests, [round, client index] pairs whose client fails halfway through its local steps.
    """

    clients: int = Field(20, ge=2, le=1000)
    rounds: int = Field(30, ge=1, le=10_000)
    sample_rate: float = Field(0.5, gt=0.0, le=1.0)
    local_steps: int = Field(8, ge=1, le=100_000)
    batch_size: int = Field(16, ge=1, le=L.MAX_BATCH)
    lr: float = Field(1e-3, gt=0, le=L.MAX_LR)
    clip: float = Field(0.05, gt=0, le=1e6)
    parallel_clients: int = Field(1, ge=1, le=1000)
    round_timeout_s: float = Field(600.0, gt=0, le=86_400)
    drop: tuple[tuple[int, int], ...] = ()


class ReleaseConfig(_Strict):
    """What the audit releases about the members under DP (nothing by default).

    ``summary_epsilon``: the data summary (units, counts per PII type and per condition, systolic BP mean and
    histogram clipped to ``bp_range``) under central (ε, δ)-DP, δ as the DP arms'. ``ldp_terms_epsilon``: the
    members' frequent terms learned under ε-local DP (one report per member record), candidates from the
    public split only."""

    summary_epsilon: float | None = None
    bp_range: tuple[float, float] = (70.0, 200.0)
    ldp_terms_epsilon: float | None = None
    ldp_method: Literal["cms", "hcms"] = "cms"
    ldp_top: int = Field(50, ge=1, le=L.MAX_RECORDS)
    ldp_k: int = Field(128, ge=1, le=L.MAX_SKETCH_ROWS)
    ldp_m: int = Field(1024, ge=2, le=L.MAX_SKETCH_COLS)

    @field_validator("summary_epsilon", "ldp_terms_epsilon")
    @classmethod
    def _eps(cls, v: float | None) -> float | None:
        if v is not None and not (0 < v <= L.MAX_EPSILON):
            raise ValueError(f"ε must be in (0, {L.MAX_EPSILON:g}], got {v}")
        return v

    @field_validator("bp_range")
    @classmethod
    def _range(cls, v: tuple[float, float]) -> tuple[float, float]:
        if not (math.isfinite(v[0]) and math.isfinite(v[1]) and v[1] > v[0]):
            raise ValueError(f"bp_range must be [low, high] with high > low, got {list(v)}")
        return v

    @model_validator(mode="after")
    def _hadamard(self) -> "ReleaseConfig":
        if self.ldp_method == "hcms" and self.ldp_m & (self.ldp_m - 1):
            raise ValueError(f"ldp_m must be a power of two for hcms, got {self.ldp_m}")
        return self


class ScrubConfig(_Strict):
    """The ``scrub`` arms: members are PII-scrubbed before training.

    Pseudonyms by default: a training corpus should still read like the original. Masks (``<NAME>``) also
    change the words around every value; on the default audit masking kept G = 0.89 outside PII spans against
    pseudonyms' 1.00, with the same verdict (docs/results/2026-11-28-round4.md). ``mask`` is the paper's
    setting (Lukas et al. 2023 scrub with tags) and one line away.
    """

    mode: Literal["mask", "tag", "pseudonym"] = "pseudonym"
    entities: tuple[str, ...] | None = None  # None: the default set (docs/guide/scrubbing.md)

    @field_validator("entities")
    @classmethod
    def _known_types(cls, v: tuple[str, ...] | None) -> tuple[str, ...] | None:
        """The PII types by PrivLeak's names (Presidio's accepted, any case), checked here at load — not when the
        scrub arm starts, after the splits and the base model were made."""
        if v is None:
            return None
        from ..core.errors import UserError
        from ..defenses.pii.labels import parse_labels  # no Presidio, no spaCy

        try:
            return parse_labels(list(v), {})
        except UserError as exc:
            raise ValueError(f"{exc} (docs/guide/scrubbing.md lists them; null = the default set)") from None


class DedupConfig(_Strict):
    """The ``dedup`` arms: exact and near duplicates removed before training."""

    method: Literal["exact", "near", "both"] = "both"
    threshold: float = Field(0.8, gt=0.0, le=1.0)  # Jaccard of character 5-grams
    num_perm: int = Field(128, ge=16, le=L.MAX_NUM_PERM)


class DefenceConfig(_Strict):
    scrub: ScrubConfig = ScrubConfig()
    dedup: DedupConfig = DedupConfig()


class ShadowConfig(_Strict):
    """LiRA / RMIA shadow models: each trained like the arm it attacks, on a
    random half of members ∪ population. Off in ``quick`` (each shadow is a
    training run); the ``full`` profile trains 4 per arm."""

    enabled: bool = False
    n_shadows: int = Field(4, ge=0, le=256)
    arms: tuple[str, ...] | None = None  # None: every trained arm
    global_variance: bool = True  # the paper's advice below ~64 shadows

    @model_validator(mode="after")
    def _enough(self) -> "ShadowConfig":
        if self.enabled and self.n_shadows < 2:
            raise ValueError(
                f"LiRA needs at least 2 shadow models (so every example is IN one and OUT of another), got {self.n_shadows}; "
                "use 4–8, or set shadows.enabled = false"
            )
        return self


class OneRunConfig(_Strict):
    """The one-run DP audit (Steinke et al. 2023) with LM audit canaries (Panda et al. 2025): ``canaries``
    random rare-word sequences, each added to every trained model's training data with probability ½
    (0 = no one-run audit)."""

    canaries: int = Field(1000, ge=0, le=L.MAX_RECORDS)
    prefix_words: int = Field(4, ge=1, le=64)
    # 2, not 8: shorter canaries put more of each clipped per-sample gradient on each word, and cost half the
    # training text (docs/results/2026-11-25-figures-from-code.md).
    secret_words: int = Field(2, ge=1, le=64)
    # The reconstruction game (attacks/one_run_canaries.py) gives the model a canary's first query_words words
    # and decodes the rest: one of |pool|^(prefix + secret − query) values, so a right guess is strong evidence.
    # Queries are unique across the canaries (the words after them stay uniform and independent).
    query_words: int = Field(2, ge=1, le=64)
    fdp: bool = True  # also the μ-GDP lower bound (Mahloujifar et al. 2024): a μ, not an ε

    @model_validator(mode="after")
    def _query_leaves_words(self) -> "OneRunConfig":
        if self.query_words >= self.prefix_words + self.secret_words:
            raise ValueError(f"one_run.query_words ({self.query_words}) must be below prefix_words + secret_words "
                             f"({self.prefix_words + self.secret_words}): the reconstruction game decodes the words after it")
        return self


class ExecutorConfig(_Strict):
    """How the task graph runs — not what the audit is: kept out of ``config.json``, ``results.json`` and
    every cache key, so a sequential and a Ray run of one config are the same audit (and resume each other)."""

    # auto: local worker processes ("processes") on a CPU machine with ≥ 2 cores, else one task after another
    # ("sequential"); PRIVLEAK_EXECUTOR names the kind auto stands for (e.g. sequential, in tests).
    kind: Literal["auto", "sequential", "processes", "ray"] = "auto"
    # None: start a local Ray on this machine; "auto" (the cluster this machine belongs to) or "ray://host:port".
    ray_address: str | None = None
    workers: int | None = Field(None, ge=1, le=4096)  # processes or local Ray: tasks at once (default: CPUs ÷ cpus_per_task)
    cpus_per_task: int = Field(1, ge=1, le=1024)  # also each task's torch threads
    gpus_per_task: float = Field(0.0, ge=0.0, le=64.0)  # training and evaluation tasks (data tasks ask for none)
    memory_gib: float | None = Field(None, gt=0.0, le=1e6)  # per model task; None: estimated from the model's size
    max_retries: int = Field(3, ge=0, le=100)  # Ray re-runs a task whose worker died this many times

    @field_validator("ray_address")
    @classmethod
    def _address(cls, v: str | None) -> str | None:
        if v is not None and v != "auto" and not re.fullmatch(r"(ray://)?[\w.\-\[\]:]+:\d{1,5}", v):
            raise ValueError(f"'{v}' is not a Ray address; use auto or ray://host:port (default port 10001)")
        return v

    @model_validator(mode="after")
    def _ray_only(self) -> "ExecutorConfig":
        if self.ray_address is not None and self.kind != "ray":
            raise ValueError("ray_address applies to the Ray executor; add --executor ray")
        if self.kind == "sequential" and self.workers is not None:
            raise ValueError("workers applies to --executor processes or ray; drop it or name one of them")
        if self.ray_address is not None and self.workers is not None:
            raise ValueError("workers sizes a local Ray; with a ray_address the cluster's size decides (drop workers)")
        return self


class BestConfig(_Strict):
    """The best non-private reference (arm ``best``): what fine-tuning can gain without forgetting.

    Plain fine-tuning on the members with public records mixed in (rehearsal:
    ``replay`` public records per training record, drawn from the public split
    the base model learned from), early-stopped on ``validate_records``
    population records. Without rehearsal a small model fine-tuned on one
    institution's notes forgets the public formats it knew, and G would
    measure against a model no one should deploy. Chosen on the population
    and public splits only: 6 epochs at 10⁻³ with 1:1 rehearsal reach the
    baseline's population loss with generic text better than the base
    model's (figures: docs/results/2026-11-25-figures-from-code.md).
    """

    epochs: float = Field(6.0, gt=0, le=L.MAX_EPOCHS)
    lr: float = Field(1e-3, gt=0, le=L.MAX_LR)
    replay: float = Field(1.0, ge=0, le=100)  # public records per training record; 0 = members only
    validate_records: int = Field(300, ge=10, le=L.MAX_RECORDS)  # population records the early stopping validates on
    patience: int = Field(2, ge=1, le=L.MAX_EPOCHS)


class UnlearnGAConfig(_Strict):
    """The ``unlearn-ga`` arm: the baseline's model with the forget set unlearned by NPO (or gradient difference)
    and a retain term (:mod:`privleak.models.unlearn`), stopped when the forget set's mean NLL reaches the
    population's (records never trained on). None: the choice in :func:`privleak.policy.unlearn_recipe`."""

    method: Literal["npo", "gd"] = "npo"
    lr: float | None = Field(None, gt=0, le=L.MAX_LR)
    max_epochs: float | None = Field(None, gt=0, le=L.MAX_EPOCHS)  # passes over the forget set, at most
    # NPO's β (Zhang et al. 2024 use 0.1): its loss (2/β)·log(1 + (π/π_ref)^β) is gradient ascent as β → 0 and
    # a hinge on log(π/π_ref) as β grows, so past 100 a larger β changes nothing but the overflow (β = inf gave
    # NaN weights after 50 s, issue 39).
    beta: float = Field(0.1, gt=0, le=100)
    retain_weight: float = Field(1.0, ge=0, le=100)  # λ on the retain set's NLL (bounded as best.replay)
    batch_size: int = Field(8, ge=1, le=L.MAX_BATCH)  # forget records per step, and as many retain records


class SisaConfig(_Strict):
    """The ``unlearn-sisa`` arm (Bourtoule et al. 2021): ``shards`` person-shards, one baseline-recipe model each,
    weights averaged. None: :func:`privleak.policy.sisa_shards`."""

    shards: int | None = Field(None, ge=2, le=256)


class UnlearningConfig(_Strict):
    """The forget set of the unlearning arms (``retrain``, ``unlearn-ga``, ``unlearn-sisa``): a seeded sample of
    the members' persons (``forget_fraction`` of them, or ``forget_count``) and ``canary_fraction`` of the planted
    canaries (:func:`privleak.data.unlearning.draw_forget_set`). None: the choice in
    :func:`privleak.policy.forget_plan`; ``seed`` None: the audit's seed."""

    forget_fraction: float | None = Field(None, gt=0, lt=1)
    forget_count: int | None = Field(None, ge=1, le=L.MAX_SYNTHETIC_RECORDS)  # persons; the members decide below
    canary_fraction: float | None = Field(None, ge=0, le=1)
    seed: int | None = Field(None, ge=0, le=MAX_SEED)
    ga: UnlearnGAConfig = UnlearnGAConfig()
    sisa: SisaConfig = SisaConfig()

    @model_validator(mode="after")
    def _one_size(self) -> "UnlearningConfig":
        if self.forget_fraction is not None and self.forget_count is not None:
            raise ValueError("give forget_fraction or forget_count, not both")
        return self


class RecommendationConfig(_Strict):
    """The recommendation: which arm meets ``require`` (:class:`~privleak.config.requirement.Requirement`; default
    ε ≤ 10 per person) with the most utility (:mod:`privleak.audit.recommend`).

    Training noise: when the eligible arms' utility intervals cannot tell the best from others (the
    contenders), each contender is retrained on up to ``seeds`` extra training seeds — training and held-out
    utility, and the attacks too under an empirical requirement, which must hold on every seed — and the tie rule
    reads G's spread across seeds with t quantiles. Each extra seed costs one more training of each contender (a
    DP arm's joins the privacy-budget ledger); 0 never retrains. ``arms``: retrain these on ``seeds`` extra seeds
    whatever the contenders (the measurement of training noise itself)."""

    require: Requirement = Requirement()
    seeds: int = Field(2, ge=0, le=8)
    arms: tuple[str, ...] | None = None  # (`seeds: true` is refused by the one rule for numbers: Choices)


class ComputeConfig(_Strict):
    """How the models compute on the chosen ``device`` (see :mod:`privleak.models.device`)."""

    # auto: train under bf16 autocast where the device multiplies bf16 natively (CUDA, a CPU with AVX-512 BF16 or
    # AMX), evaluate under bf16 on CUDA only; fp32 everywhere else. native: train and evaluate under bf16 wherever
    # the device multiplies bf16 natively (exposure ranks stay fp32).
    precision: Literal["auto", "native", "fp32", "bf16"] = "auto"
    gradient_checkpointing: bool = False  # recompute activations in backward: less memory, ~30 % slower (non-DP training)
    memory_fraction: float = Field(0.8, ge=0.05, le=1.0)  # of the free CUDA memory a micro-batch may fill
