r"""User-level DP-SGD: the person, not the record, is the unit of sampling, clipping and accounting.

Record-level DP-SGD protects one line; a patient with eight notes repeating
the same identifiers is protected at about eight times the ε (see
:func:`privleak.accountants.group_epsilon`). Two ways to protect people
(Chua et al. 2024, "Mind the Privacy Unit!", arXiv 2406.14322; Charles et al.
2024, "Fine-Tuning LLMs with User-Level DP", arXiv 2407.07737):

**ULS** (user-level sampling, :func:`train_user_dp`, the default). Each step:

1. Poisson-sample *people*: each of the P people joins with probability
   q = B / P (B = ``expected_batch_size`` people), independently.
2. For each sampled person, a seeded random subset of at most
   k = ``records_per_person`` of their records (a fresh subset every step).
3. The person's update is the gradient of the **mean** loss over those
   records, ``g_P = (1/k_P) Σ_{i∈S_P} ∇ℓ_i``, clipped to norm C as one vector
   (``person_clip``: book-keeping with the person as the sample).
4. ``(Σ_P clip(g_P) + N(0, σ²C²·I)) / B`` is the private gradient.

Adding or removing a person moves the sum by ≤ C whatever their number of
records, so the accountant of record-level DP-SGD applies unchanged at the
person level: σ is calibrated for (q, T = steps actually taken, δ) with the
arm's accountant (PRV), cross-checked with dp_accounting's PLD. Mean, not sum:
after clipping both have norm ≤ C, and when the person's gradient exceeds C
(as a person's does here) they clip to the same vector; below C the mean keeps
a person's weight independent of how many notes they have — a person with
eight records is not eight times as loud — and matches Chua et al.'s
user-wise DP-SGD. (``reduction="sum"`` is there for the hand check in the
tests and for comparison.)

ε per record of a ULS arm: a person with one record is that record (ε per
person); removing one record of a person with others *replaces* the person's
contribution, accounted as replace-one
(:func:`privleak.accountants.record_epsilon`, the replace-one accounting that
DP-FedAvg's record inside a client uses: the same relation).

**ELS** (example-level sampling, :func:`train_els`): keep a seeded random
subset of at most k records per person, once, then record-level DP-SGD
(:func:`dp_train.train_dp`) with σ calibrated so that the *person-level* ε
of a person with k records — the mixture-of-Gaussians accountant of Charles
et al. (:func:`privleak.accountants.group_epsilon_direct`; σ from
:func:`privleak.accountants.calibrate_group_sigma`) — meets the target.

Which, with which cap: see :func:`user_dp_recipe` (measured on population
data only). Public data (``public=``, ``public_weight``): :mod:`public_grad`.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import torch
from transformers import PreTrainedModel

from ..core.errors import UserError
from ..core.progress import progress_bar
from ..data.records import Record
from ..data.splits import unit_of
from ..accountants import (calibrate_group_sigma, epsilon_pld, epsilon_prv, epsilon_rdp, group_epsilon_direct,
    record_epsilon, steps_for)
from .batching import Encoded, head_trainable, pad_batch, sequence_nll
from .book_keeping import unsupported_layers
from .device import autocast, current, model_device, oom_as_error, training_kernels
from .frozen_prefix import frozen_prefix
from .gradient_canaries import GradientCanaries
from .dp_sigma import calibrated_sigma, public_sample_rate
from .dp_train import DPSettings, dp_token_budget, prepare_trainable, train_dp
from .lora import AUTO, merge_lora
from .person_clip import PersonBookKeeping
from .public_grad import PublicTerm
from .train import TrainLog, lr_at, make_optimizer

__all__ = ["UserDPLog", "UserDPSettings", "group_records", "person_labels", "records_per_person", "train_els",
           "train_user_dp", "user_dp_recipe"]


@dataclass(frozen=True)
class UserDPSettings:
    """One user-level DP arm. ``expected_batch_size``: people per step (ULS) or records per step (ELS)."""

    target_epsilon: float  # per person
    delta: float
    max_grad_norm: float
    epochs: int  # ULS: passes over the people (q·T = epochs); ELS: over the capped records
    expected_batch_size: int
    lr: float
    records_per_person: int = 4  # k: the cap on a person's records per step (ULS) or in all (ELS)
    method: Literal["uls", "els"] = "uls"
    reduction: Literal["mean", "sum"] = "mean"  # ULS: the person's loss over their records
    weight_decay: float = 0.0
    warmup_fraction: float = 0.05
    seed: int = 0
    accountant: Literal["prv", "rdp"] = "prv"
    micro_batch_tokens: int = 4096
    train_output: bool = False
    lora_rank: int | None = None
    lora_alpha: float = 16.0
    lora_targets: tuple[str, ...] | str = AUTO
    lora_layers: int | None = None  # adapters in the top N decoder layers only (dp_train.DPSettings.lora_layers)
    public_weight: float = 0.0  # with public=: w · ∇L_pub joins each step outside the noised sum
    public_batch_size: int = 64
    # White-box gradient canaries (``gradient_canaries``; each a one-record person in ULS); 0: none.
    gradient_canaries: int = 0
    # The unit count q is computed from (ULS: people; ELS: kept records): the members' own, which the split fixes,
    # plus the one-run audit canaries a training is expected to include (½ m) — never the realised count, which
    # moves with the canaries' random inclusion (issue 37 item 6). None: the realised count (direct callers).
    public_units: int | None = None


@dataclass
class UserDPLog(TrainLog):
    """What the arm's privacy block reports: ε per person and per record, and how people were used."""

    method: str = "uls"
    sigma: float = 0.0
    sample_rate: float = 0.0  # per person (ULS) or per record (ELS)
    epsilon: float = 0.0  # per person, by ``accountant``
    epsilon_pld: float = 0.0  # per person, dp_accounting PLD (cross-check; ELS: the mixture-of-Gaussians PLD)
    epsilon_rdp: float | None = None  # per person (ULS only: RDP has no mixture-of-Gaussians form here)
    epsilon_record: float = 0.0  # per record
    accountant: str = ""
    delta: float = 0.0
    max_grad_norm: float = 0.0
    records_per_person: int = 0  # the cap k
    people: int = 0
    expected_people_per_step: float = 0.0
    people_per_step: float = 0.0  # the mean over the steps taken
    records_per_step: float = 0.0
    empty_batches: int = 0
    records_used: int = 0  # ELS: records kept after the cap; ULS: all records are candidates
    records_per_person_distribution: dict[int, int] = field(default_factory=dict)  # {records: people}, before the cap
    public_weight: float = 0.0
    gradient_canaries: dict | None = None  # the white-box canaries' statistics (dp_train.DPTrainLog's)


def person_labels(records: Sequence[Record]) -> list[str]:
    """The privacy unit of each record: :func:`data.splits.unit_of`, the one definition every arm uses
    (``arms.common.person_sizes`` and ``person_privacy`` read the same), stamped from the raw data before any
    defence: a planted canary's id (all its copies are one made-up person), ``meta.person_id`` (synthetic),
    ``meta.group`` (``--group-field``), else the raw record's normalised text — identical texts with nobody
    named count as one person, the cautious reading; a scrubbed copy stays its raw record's person."""
    return [":".join(unit_of(r)) for r in records]


def records_per_person(persons: Sequence[Hashable]) -> dict[int, int]:
    """The distribution of records per person: {records: people with that many}, ascending."""
    counts = Counter(Counter(persons).values())
    return dict(sorted(counts.items()))


def group_records(persons: Sequence[Hashable], n: int) -> list[list[int]]:
    """Record indices of each person, people in order of first appearance; checks one label per record."""
    if len(persons) != n:
        raise UserError(f"{len(persons)} person labels for {n} records: give exactly one person label per record")
    index: dict[Hashable, list[int]] = {}
    for i, p in enumerate(persons):
        if p is None:
            raise UserError(f"record {i} has no person label; every record needs one (its own id if it has no person)")
        index.setdefault(p, []).append(i)
    return list(index.values())


def user_dp_recipe(n_people: int, epsilon: float) -> tuple[int, int]:
    """(expected people per step, epochs) of a ULS arm: :func:`config.dp_recipe`'s rule read over people.

    The same reasoning as the record-level recipe (q ≈ 0.2, B ≤ 256; 30 epochs
    at ε ≥ 4, 15 below) with the person as the unit; one epoch = each person
    sampled once in expectation.
    """
    return max(16, min(256, n_people // 5)), (30 if epsilon >= 4 else 15)


def _check(settings: UserDPSettings, n_people: int) -> None:
    s = settings
    if s.method not in ("uls", "els"):
        raise UserError(f"user-level DP method {s.method!r} is unknown; use 'uls' or 'els'")
    if s.reduction not in ("mean", "sum"):
        raise UserError(f"reduction {s.reduction!r} is unknown; use 'mean' or 'sum'")
    if isinstance(s.records_per_person, bool) or not isinstance(s.records_per_person, int) or s.records_per_person < 1:
        raise UserError(f"records_per_person={s.records_per_person!r} must be a whole number >= 1 (e.g. 4)")
    if not s.max_grad_norm > 0:
        raise UserError(f"max_grad_norm={s.max_grad_norm!r} must be > 0")
    if s.expected_batch_size < 1 or (s.method == "uls" and s.expected_batch_size > n_people):
        raise UserError(f"expected_batch_size={s.expected_batch_size} must be between 1 and the {n_people} people")
    if not (s.public_weight >= 0 and math.isfinite(s.public_weight)):
        raise UserError(f"public_weight={s.public_weight!r} must be a finite number >= 0")


def _dp_settings(s: UserDPSettings, **over) -> DPSettings:
    """The record-level settings with the same model preparation (frozen embeddings, LoRA, book-keeping)."""
    kw = dict(target_epsilon=s.target_epsilon, delta=s.delta, max_grad_norm=s.max_grad_norm, epochs=s.epochs,
              expected_batch_size=s.expected_batch_size, lr=s.lr, weight_decay=s.weight_decay,
              warmup_fraction=s.warmup_fraction, seed=s.seed, accountant=s.accountant,
              micro_batch_tokens=s.micro_batch_tokens, train_output=s.train_output, grad_sample_mode="bk",
              lora_rank=s.lora_rank, lora_alpha=s.lora_alpha, lora_targets=s.lora_targets, lora_layers=s.lora_layers,
              public_weight=s.public_weight, public_batch_size=s.public_batch_size,
              gradient_canaries=s.gradient_canaries)
    kw.update(over)
    return DPSettings(**kw)


def pack_people(people: list[list[int]], lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Indices into ``people`` (each a list of record rows) packed into micro-batches of ≤ ``max_tokens`` padded tokens.

    A person never straddles two micro-batches (their norm needs all their
    tokens at once); one person over the budget gets a micro-batch alone.
    People sorted by their number of records, then their longest record, so a
    micro-batch pads little and mixes few people of different sizes (the
    stacked ghost norm pads every person to the largest one's records).
    """
    widths = [max(lengths[r] for r in rows) for rows in people]
    order = sorted(range(len(people)), key=lambda p: (len(people[p]), widths[p]))
    out: list[list[int]] = []
    cur: list[int] = []
    rows = width = 0
    for p in order:
        w, k = max(width, widths[p]), rows + len(people[p])
        if cur and w * k > max_tokens:
            out.append(cur)
            cur, rows, width = [], 0, 0
            w, k = widths[p], len(people[p])
        cur.append(p)
        rows, width = k, w
    if cur:
        out.append(cur)
    return out


def clipped_person_sum(model: torch.nn.Module, pbk: PersonBookKeeping, seqs: list[list[int]], people: list[list[int]],
                       pad_id: int, reduction: str, max_tokens: int, params: list[torch.nn.Parameter]) -> tuple[dict, float]:
    """Σ_P clip_C(g_P) over the sampled ``people`` (lists of indices into ``seqs``), fp32, no noise.

    g_P is the gradient of the person's mean (or summed) per-sequence NLL over
    their rows. Returns ({param: clipped sum}, summed per-person loss).
    """
    total = {p: torch.zeros_like(p, dtype=torch.float32) for p in params}
    loss_sum = 0.0
    dev = model_device(model)
    lengths = [len(s) for s in seqs]
    flat_head = not head_trainable(model)  # before capture(), which freezes the trainable weights
    for part in pack_people(people, lengths, max_tokens):
        rows = [r for p in part for r in people[p]]
        groups = torch.tensor([g for g, p in enumerate(part) for _ in people[p]], dtype=torch.long)
        weights = torch.tensor([1.0 / len(people[p]) if reduction == "mean" else 1.0 for p in part for _ in people[p]])
        ids, mask = pad_batch([seqs[r] for r in rows], pad_id)
        ids, mask = ids.to(dev), mask.to(dev)
        with pbk.capture():
            with autocast(dev, training=True):  # the forward only: norms, clipping and noise are fp32
                per_seq = sequence_nll(model, ids, mask, flat_head=flat_head) * weights.to(dev)
            per_seq.sum().backward()  # row i's output gradients carry w_i: the person's gradient is Σ_{i∈P} of them
        pbk.write_clipped_sum(groups.to(dev), len(part))
        for p in params:
            total[p] += p.grad.float()
            p.grad = None
        loss_sum += float(per_seq.detach().sum())
    return total, loss_sum


def train_user_dp(model: PreTrainedModel, data: Encoded, settings: UserDPSettings, pad_id: int, max_length: int,
                  persons: Sequence[Hashable], desc: str = "dp-user-train",
                  public: Encoded | None = None) -> tuple[PreTrainedModel, UserDPLog]:
    """User-level DP fine-tuning; ``persons[i]`` is record i's person. ULS or ELS by ``settings.method``.

    Returns the trained model and a :class:`UserDPLog`. ``public``: records
    whose gradient joins each step outside the noised sum (``public_weight``).
    """
    people = group_records(persons, len(data))
    _check(settings, len(people))
    if public is None and settings.public_weight > 0:
        raise UserError(f"public_weight={settings.public_weight:g} needs public records; pass public= or set it to 0")
    if settings.method == "els":
        return train_els(model, data, settings, pad_id, max_length, persons, desc=desc, public=public)
    s = settings
    seqs = [list(x[:max_length]) for x in data.ids]
    n_people = len(people)
    q = public_sample_rate(s.expected_batch_size, s.public_units or n_people)
    steps = steps_for(sample_rate=q, epochs=s.epochs)
    sigma = calibrated_sigma(s.target_epsilon, s.delta, q, steps, s.accountant)
    torch.manual_seed(s.seed)
    model = prepare_trainable(model, _dp_settings(s))
    if bad := unsupported_layers(model):
        raise UserError(f"user-level DP clips Conv1D/Linear/LayerNorm weights only, not {', '.join(bad[:3])}; "
                        "freeze those layers (train_embeddings off) or use record-level DP")
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = make_optimizer(model, s.lr, s.weight_decay)
    pbk = PersonBookKeeping(model, s.max_grad_norm)
    dev = model_device(model)
    mean_len = max(1, sum(len(x) for x in seqs) // max(1, len(seqs)))
    max_tokens = dp_token_budget(model, _dp_settings(s), mean_len)
    sampling = torch.Generator().manual_seed(s.seed)
    picking = torch.Generator().manual_seed(s.seed + 3)
    noise_gen = torch.Generator(device=dev).manual_seed(s.seed + 1)
    term = (PublicTerm(model, public, s.public_weight, s.public_batch_size, s.seed + 2, pad_id, max_length)
            if public is not None else None)
    canaries = (GradientCanaries(s.gradient_canaries, q, s.max_grad_norm, s.seed + 5, device=dev)
                if s.gradient_canaries else None)

    def privatised(total: torch.Tensor) -> torch.Tensor:
        """(Σ clipped + N(0, σ²C²)) / B: the step's noise, the same draw for the weights and the canaries."""
        noise = torch.normal(0.0, sigma * s.max_grad_norm, size=total.shape, generator=noise_gen, device=dev)
        return (total + noise) / s.expected_batch_size

    log = UserDPLog(method="uls", sigma=float(sigma), sample_rate=float(q), accountant=s.accountant, delta=s.delta,
                    max_grad_norm=s.max_grad_norm, records_per_person=s.records_per_person, people=n_people,
                    expected_people_per_step=float(s.expected_batch_size), records_used=len(seqs),
                    records_per_person_distribution=records_per_person(persons), public_weight=s.public_weight)
    per_epoch = max(1, steps // s.epochs)
    people_seen = records_seen = 0
    epoch_losses: list[float] = []
    lower = ("compute.memory_fraction (now {:g})".format(current().memory_fraction) if dev.type == "cuda"
             else f"dp.micro_batch_tokens (now {s.micro_batch_tokens})")
    try:
        with progress_bar(desc, total=steps) as advance, oom_as_error(desc, lower), training_kernels(model), \
                frozen_prefix(model):
            for step in range(steps):
                for group in optimizer.param_groups:
                    group["lr"] = lr_at(step, steps, s.lr, s.warmup_fraction)
                chosen = torch.nonzero(torch.rand(n_people, generator=sampling) < q).flatten().tolist()
                batch = [_pick(people[p], s.records_per_person, picking) for p in chosen]
                sums, loss = clipped_person_sum(model, pbk, seqs, batch, pad_id, s.reduction, max_tokens, params)
                for p in params:
                    p.grad = privatised(sums[p].view_as(p)).to(p.dtype)
                if canaries is not None:  # clipped at the bound the people were, noised by the same draw
                    canaries.observe(privatised(canaries.contribution(pbk.max_grad_norm)) * s.expected_batch_size)
                if term is not None:
                    term.apply(params)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                people_seen += len(chosen)
                records_seen += sum(len(b) for b in batch)
                log.empty_batches += not chosen
                if chosen:
                    epoch_losses.append(loss / len(chosen))
                advance(1, loss=epoch_losses[-1] if epoch_losses else 0.0)
                if (step + 1) % per_epoch == 0 or step + 1 == steps:
                    log.losses.append(sum(epoch_losses) / max(1, len(epoch_losses)))
                    epoch_losses = []
    finally:
        pbk.remove()
    log.steps = steps
    log.gradient_canaries = canaries.stats().as_dict() if canaries is not None else None
    log.people_per_step = people_seen / steps
    log.records_per_step = records_seen / steps
    run = dict(sample_rate=q, noise_multiplier=sigma, steps=steps, delta=s.delta)
    log.epsilon = float({"prv": epsilon_prv, "rdp": epsilon_rdp}[s.accountant](**run))
    log.epsilon_pld, log.epsilon_rdp = epsilon_pld(**run), epsilon_rdp(**run)
    several = max(log.records_per_person_distribution) > 1
    log.epsilon_record = (record_epsilon(sample_rate=q, noise_multiplier=sigma, rounds=steps, delta=s.delta)
                          if several else log.epsilon)
    if s.lora_rank is not None:
        model = merge_lora(model)
    model.eval()
    return model, log


def _pick(rows: list[int], cap: int, gen: torch.Generator) -> list[int]:
    """At most ``cap`` of a person's rows: all when they have that few, else a seeded random subset."""
    if len(rows) <= cap:
        return rows
    return [rows[i] for i in sorted(torch.randperm(len(rows), generator=gen)[:cap].tolist())]


def els_sample_rate(n_records: int, batch: int) -> float:
    """q exactly as :func:`dp_train.train_dp` derives it (Opacus: 1 / batches per epoch)."""
    return 1 / math.ceil(n_records / batch)


def train_els(model: PreTrainedModel, data: Encoded, settings: UserDPSettings, pad_id: int, max_length: int,
              persons: Sequence[Hashable], desc: str = "dp-user-train",
              public: Encoded | None = None) -> tuple[PreTrainedModel, UserDPLog]:
    """ELS: at most k records per person (a seeded subset, fixed), then record-level DP-SGD at the σ that
    makes the person-level ε (mixture of Gaussians, k records) meet the target.

    ``train_dp`` calibrates σ from a record-level target, so we hand it the
    record-level ε of a σ a hair (2·tol) above the person-level σ: its
    calibration (to tol) lands at or above the person-level σ, and the
    person-level ε is then recomputed with the σ it really used.
    """
    people = group_records(persons, len(data))
    _check(dataclasses.replace(settings, method="els"), len(people))
    s = settings
    gen = torch.Generator().manual_seed(s.seed + 4)
    capped = [_pick(rows, s.records_per_person, gen) for rows in people]
    kept = sorted(r for rows in capped for r in rows)
    k = min(s.records_per_person, max(len(rows) for rows in people))
    subset = Encoded([data.ids[i] for i in kept])
    q = (public_sample_rate(s.expected_batch_size, s.public_units) if s.public_units
         else els_sample_rate(len(kept), s.expected_batch_size))
    steps = steps_for(sample_rate=q, epochs=s.epochs)
    person_sigma = calibrate_group_sigma(target_epsilon=s.target_epsilon, delta=s.delta, sample_rate=q, steps=steps,
                                         group_size=k)
    record_target = epsilon_prv(sample_rate=q, noise_multiplier=person_sigma * (1 + 2e-3), steps=steps, delta=s.delta)
    model, dlog = train_dp(model, subset, _dp_settings(s, target_epsilon=record_target, accountant="prv",
                                                       data_size=s.public_units), pad_id,
                           max_length, desc=desc, public=public)
    if abs(dlog.sample_rate - q) > 1e-12 or dlog.steps != steps:
        raise RuntimeError(f"ELS planned q={q}, T={steps}; train_dp ran q={dlog.sample_rate}, T={dlog.steps}")
    eps_person = group_epsilon_direct(sample_rate=q, noise_multiplier=dlog.sigma, steps=steps, delta=s.delta,
                                      group_size=k)
    if eps_person > s.target_epsilon * (1 + 1e-9):
        raise RuntimeError(f"ELS person-level ε {eps_person:.4f} exceeds the target {s.target_epsilon}")
    # A person is in a step when any of their kept records is: 1 − (1 − q)^{k_P}, in expectation.
    people_per_step = sum(1 - (1 - q) ** len(rows) for rows in capped)
    log = UserDPLog(method="els", sigma=dlog.sigma, sample_rate=q, epsilon=eps_person, epsilon_pld=eps_person,
                    epsilon_rdp=None, epsilon_record=dlog.epsilon, accountant="pld (mixture of Gaussians)",
                    delta=s.delta, max_grad_norm=s.max_grad_norm, records_per_person=k, people=len(people),
                    expected_people_per_step=people_per_step, people_per_step=people_per_step,
                    records_per_step=q * len(kept), empty_batches=dlog.empty_batches, records_used=len(kept),
                    records_per_person_distribution=records_per_person(persons), public_weight=s.public_weight)
    log.steps, log.losses = dlog.steps, dlog.losses
    log.gradient_canaries = dlog.gradient_canaries
    return model, log
