"""Ordinary (non-private) training of a causal LM, read top to bottom.

Used for pre-training the embedded base model on the public split and for
the non-DP arms (``baseline``, and later ``scrub``, ``dedup``). The DP loop in
``dp_train.py`` mirrors this one and differs only where DP-SGD requires it.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from transformers import PreTrainedModel

from ..core.progress import progress_bar
from .batching import Encoded, pad_batch, sequence_nll
from .frozen_prefix import frozen_prefix
from .device import activation_bytes_per_token, autocast, current, model_device, oom_as_error, token_budget, training_kernels


@dataclass(frozen=True)
class TrainSettings:
    epochs: float
    batch_size: int
    lr: float
    weight_decay: float = 0.0
    warmup_fraction: float = 0.05
    seed: int = 0


@dataclass
class TrainLog:
    steps: int = 0
    losses: list[float] = field(default_factory=list)  # mean loss per epoch
    val_losses: list[tuple[int, float]] = field(default_factory=list)  # (step, validation loss) when early-stopping
    best_step: int | None = None  # the step whose weights were kept (early stopping)


@dataclass(frozen=True)
class EarlyStopping:
    """Validate every ``every`` steps; keep the weights with the lowest
    validation loss; stop after ``patience`` validations without improvement."""

    validate: Callable[[PreTrainedModel], float]
    every: int
    patience: int = 3


def lr_at(step: int, total: int, base_lr: float, warmup_fraction: float) -> float:
    """Linear warm-up, then linear decay to 10 % of the base rate."""
    warmup = max(1, int(total * warmup_fraction))
    if step < warmup:
        return base_lr * (step + 1) / warmup
    frac = (step - warmup) / max(1, total - warmup)
    return base_lr * (1.0 - 0.9 * frac)


def bucketed_batches(lengths: list[int], batch_size: int, gen: torch.Generator, pool: int = 50) -> list[list[int]]:
    """One epoch of shuffled batches of similar-length sequences.

    Shuffle, cut into pools of ``pool`` batches, sort each pool by length,
    slice it into batches, then shuffle the batch order. Random batches of
    mixed lengths pad every row to the longest; bucketing keeps the
    randomness of SGD while padding little (3× fewer tokens on the clinical
    corpus, where 15 % of records are long notes).
    """
    order = torch.randperm(len(lengths), generator=gen).tolist()
    batches: list[list[int]] = []
    span = batch_size * pool
    for start in range(0, len(order), span):
        chunk = sorted(order[start : start + span], key=lambda i: lengths[i])
        batches.extend(chunk[k : k + batch_size] for k in range(0, len(chunk), batch_size))
    perm = torch.randperm(len(batches), generator=gen).tolist()
    return [batches[i] for i in perm]


#: Devices whose fused AdamW kernel torch ships (torch.optim.AdamW(fused=True)).
_FUSED_ADAMW = ("cpu", "cuda", "mps")


def make_optimizer(model: PreTrainedModel, lr: float, weight_decay: float, fused: bool = True) -> torch.optim.Optimizer:
    """AdamW over the trainable weights (Loshchilov & Hutter 2019), as one fused kernel where torch has one.

    On a CPU torch's default AdamW is a loop of a dozen elementwise ops per tensor: for SmolLM2's 135 M weights
    0.31 s a step against 0.09 fused, a fifth of a full fine-tuning step of 8 records (``bench/bench_smollm2.py``).
    The update is the same; only the rounding order differs.

    ``fused=False`` for an optimizer Opacus wraps (``dp_train``): under its ``DPOptimizer`` the fused kernel
    did not learn — SmolLM2 DP-LoRA at the chosen recipe went from a loss of 4.8 to 6.3 in 20 epochs where the
    per-tensor AdamW went to 2.6 (2026-12-06, docs/results/2026-12-06-deciding-size.md); the cause is not found.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    fused = fused and bool(params) and all(p.device.type in _FUSED_ADAMW and p.is_floating_point() for p in params)
    return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, fused=fused or None)


def train(model: PreTrainedModel, data: Encoded, settings: TrainSettings, pad_id: int, desc: str = "train",
          early_stopping: EarlyStopping | None = None) -> TrainLog:
    """Mini-batch AdamW on the mean per-sequence NLL, length-bucketed batches reshuffled each epoch (seeded).

    With ``early_stopping`` the learning-rate schedule still spans
    ``settings.epochs`` (so the run is the one that would have happened), but
    training stops once validation stops improving and the best weights are
    restored.
    """
    gen = torch.Generator().manual_seed(settings.seed)
    n = len(data)
    per_epoch = math.ceil(n / settings.batch_size)
    total = max(1, int(round(settings.epochs * per_epoch)))
    opt = make_optimizer(model, settings.lr, settings.weight_decay)
    log = TrainLog()
    model.train()
    step = 0
    lengths = [len(s) for s in data.ids]
    best_loss, best_state, stale = math.inf, None, 0
    stop = False
    dev = model_device(model)
    # Off CUDA a batch is one forward pass, as always; on CUDA it is split when free memory asks for it.
    budget = token_budget(dev, activation_bytes_per_token(model, max(lengths, default=1), training=True), default=0)
    checkpointing = current().gradient_checkpointing and _checkpointing(model, True)
    with progress_bar(desc, total=total) as advance, oom_as_error(
            desc, f"train.batch_size (now {settings.batch_size}) or compute.memory_fraction (now "
                  f"{current().memory_fraction}), or set compute.gradient_checkpointing: true"), training_kernels(model), \
            frozen_prefix(model):
        while step < total and not stop:
            epoch_losses = []
            for idx in bucketed_batches(lengths, settings.batch_size, gen):
                if step >= total:
                    break
                for group in opt.param_groups:
                    group["lr"] = lr_at(step, total, settings.lr, settings.warmup_fraction)
                opt.zero_grad(set_to_none=True)
                loss = _batch_backward(model, [data.ids[i] for i in idx], pad_id, dev, budget)
                opt.step()
                epoch_losses.append(loss)
                step += 1
                advance(1, loss=epoch_losses[-1])
                if early_stopping is not None and (step % early_stopping.every == 0 or step == total):
                    model.eval()
                    with torch.no_grad():
                        val = float(early_stopping.validate(model))
                    model.train()
                    log.val_losses.append((step, val))
                    if val < best_loss:
                        best_loss, stale, log.best_step = val, 0, step
                        best_state = copy.deepcopy(model.state_dict())
                    else:
                        stale += 1
                        if stale >= early_stopping.patience:
                            stop = True
                            break
            log.losses.append(sum(epoch_losses) / max(1, len(epoch_losses)))
    log.steps = step
    if checkpointing:
        _checkpointing(model, False)
    if best_state is not None:
        model.load_state_dict(best_state)
    model.eval()
    return log


def _checkpointing(model: PreTrainedModel, on: bool) -> bool:
    """Switch activation (gradient) checkpointing; False where the model has none.

    transformers 5 renamed ``gradient_checkpointing_*`` to ``activation_checkpointing_*``.
    """
    verb = "enable" if on else "disable"
    for prefix in ("activation", "gradient"):
        fn = getattr(model, f"{prefix}_checkpointing_{verb}", None)
        if fn is not None and getattr(model, "supports_gradient_checkpointing", False):
            if on:  # non-reentrant: the recommended form, and the one that keeps parameter hooks sane
                fn(**{f"{prefix}_checkpointing_kwargs": {"use_reentrant": False}})
            else:
                fn()
            return True
    return False


def _batch_backward(model: PreTrainedModel, seqs: list[list[int]], pad_id: int, dev: torch.device, budget: int) -> float:
    """Backward of the batch's mean per-sequence NLL; returns the loss.

    ``budget`` 0 (off CUDA): one forward pass, exactly as always. Otherwise
    the batch is cut into length-sorted micro-batches of at most ``budget``
    padded tokens whose losses ``Σ_i ℓ_i / B`` add up to the same gradient.
    """
    if budget and len(seqs) > 1 and max(map(len, seqs)) * len(seqs) > budget:
        order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
        parts, cur = [], []
        for i in order:
            if cur and len(seqs[i]) * (len(cur) + 1) > budget:
                parts.append(cur)
                cur = []
            cur.append(i)
        parts.append(cur)
    else:
        parts = [list(range(len(seqs)))]
    total = 0.0
    for rows in parts:
        ids, mask = pad_batch([seqs[i] for i in rows], pad_id)
        ids, mask = ids.to(dev), mask.to(dev)
        with autocast(dev, training=True):
            per_seq = sequence_nll(model, ids, mask)
        loss = per_seq.mean() if len(parts) == 1 else per_seq.sum() / len(seqs)
        loss.backward()
        total += loss.item()
    return total
