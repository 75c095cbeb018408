"""SISA training and exact unlearning (Bourtoule et al. 2021, "Machine Unlearning"), one slice per shard.

The training data is split into S disjoint shards (whole persons each:
:func:`privleak.data.unlearning.shard_by_person`); one model per shard is
fine-tuned from the same base with the same recipe, and the released model
aggregates them. To forget a set of records, only the shards that hold one
are retrained — from the base, on the shard without them, with the shard's
own seed — so the result is exactly the model that would have been trained
had those records never been there: no aggregate input ever saw them.

Aggregation (:func:`average_weights`): the uniform average of the shard
models' weights. Any aggregate that is a function of the shard models alone
keeps the unlearning exact, so the choice is about utility and about what
the audit can attack: weight averaging of fine-tunes of one shared base
keeps a single causal LM that every attack, the scorer and the generator
load unchanged (model soups, Wortsman et al. 2022, average fine-tunes of one
initialisation the same way), where the paper's vote — for an LM, the mean
of the shards' next-token distributions — costs S forward passes per token
and a wrapper around generation. Averaging is sound only while the shard
models stay in one basin: :class:`SisaRun` records the averaged model's
held-out loss beside the shards' so the audit can say when it is not.

Slicing (retraining from a checkpoint inside a shard) is not done: with a
forget set of many persons nearly every slice holds one of them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import PreTrainedModel

from .batching import Encoded
from .handle import clone_model
from .train import TrainSettings, train


@dataclass
class SisaRun:
    """The shard models after the request, which shards were retrained, and what each phase cost."""

    models: list[PreTrainedModel]
    shard_sizes: list[int]
    affected: list[int]  # shards that held a forgotten record (retrained)
    forgotten_per_shard: list[int]
    steps_fit: list[int] = field(default_factory=list)
    steps_unlearn: dict[int, int] = field(default_factory=dict)
    seconds_fit: float = 0.0  # every shard trained on all its records
    seconds_unlearn: float = 0.0  # the affected shards retrained without the forgotten records
    losses: list[list[float]] = field(default_factory=list)  # per shard (final model): mean loss per epoch


def _fit(base: PreTrainedModel, data: Encoded, settings: TrainSettings, pad_id: int, desc: str
         ) -> tuple[PreTrainedModel, Any]:
    model = clone_model(base)
    log = train(model, data, settings, pad_id, desc=desc)
    return model, log


def sisa(base: PreTrainedModel, shards: Sequence[Encoded], forgotten: Sequence[Sequence[bool]],
         settings: Callable[[int], TrainSettings], pad_id: int, desc: str = "SISA") -> SisaRun:
    """Train one model per shard on all its records (from ``base``, ``settings(s)`` — the recipe with shard s's
    seed), then retrain from ``base`` every shard with a forgotten record on its other records, same settings.
    ``forgotten[s][i]``: whether record i of shard s is forgotten."""
    if len(shards) != len(forgotten) or any(len(d) != len(f) for d, f in zip(shards, forgotten)):
        raise ValueError("one forgotten flag per record of every shard")
    run = SisaRun(models=[], shard_sizes=[len(d) for d in shards], affected=[],
                  forgotten_per_shard=[int(sum(f)) for f in forgotten])
    start = time.perf_counter()
    for s, data in enumerate(shards):
        model, log = _fit(base, data, settings(s), pad_id, f"{desc} shard {s + 1}/{len(shards)}")
        run.models.append(model)
        run.steps_fit.append(log.steps)
        run.losses.append(log.losses)
    run.seconds_fit = time.perf_counter() - start
    start = time.perf_counter()
    for s, (data, flags) in enumerate(zip(shards, forgotten)):
        if not any(flags):
            continue
        kept = Encoded([ids for ids, f in zip(data.ids, flags) if not f])
        if not len(kept):
            raise ValueError(f"shard {s + 1} holds only forgotten records; use fewer shards")
        run.affected.append(s)
        run.models[s], log = _fit(base, kept, settings(s), pad_id, f"{desc} retrain shard {s + 1}/{len(shards)}")
        run.steps_unlearn[s] = log.steps
        run.losses[s] = log.losses
    run.seconds_unlearn = time.perf_counter() - start
    return run


@torch.no_grad()
def average_weights(models: Sequence[PreTrainedModel]) -> PreTrainedModel:
    """A copy of ``models[0]`` whose floating-point parameters and buffers are the uniform mean of all the models'
    (accumulated in float64); integer buffers are taken from the first."""
    if not models:
        raise ValueError("nothing to average")
    out = clone_model(models[0])
    states = [m.state_dict() for m in models]
    for name, value in out.state_dict().items():
        if value.is_floating_point():
            mean = sum(st[name].double() for st in states) / len(states)
            value.copy_(mean.to(value.dtype))
    out.eval()
    return out
