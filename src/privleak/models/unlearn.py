"""Unlearning a forget set from a fine-tuned causal LM, with a term that keeps the retained data.

Two objectives, minimised with AdamW over batches of the forget set F, each
step beside an equally large batch of the retain set R (seeded draws):

* **NPO** (Zhang, Lin, Bai & Mei 2024, "Negative Preference Optimization"),
  with the retain term of their NPO-RT::

      L = (2/β) · E_F[ log(1 + (π_θ(y)/π_ref(y))^β) ] + λ · E_R[ NLL_θ(y) ]

  π(y) the probability of the whole sequence (Σ of its token log-probs),
  π_ref the model before unlearning (its log-probs are computed once). The
  forget term's gradient is gradient ascent on log π_θ weighted by
  σ(β·log(π_θ/π_ref)), which vanishes once the sequence is much less likely
  than before: unlike plain gradient ascent it cannot run away.
* **gradient difference** ("gd"; Liu, Liu & Stone 2022; Maini et al. 2024's
  TOFU baseline): ``L = −E_F[NLL_θ] + λ · E_R[NLL_θ]`` — unbounded, so it
  leans on the stopping rule.

NLL is the mean token NLL of a sequence (:func:`~.batching.per_sequence_nll`).
Training stops after ``epochs`` passes over F or, with ``stop``, at the first
check where ``stop(model)`` is true (checked before the first step too); the
caller's rule says when F "looks unseen".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import torch
from transformers import PreTrainedModel

from ..core.progress import progress_bar
from .batching import Encoded, pad_batch, per_sequence_nll, position_ids_for
from .device import autocast, model_device, oom_as_error
from .train import lr_at, make_optimizer


@dataclass(frozen=True)
class UnlearnSettings:
    method: Literal["npo", "gd"]
    epochs: float  # at most this many passes over the forget set
    lr: float
    beta: float = 0.1  # NPO's inverse temperature (Zhang et al. use 0.1)
    retain_weight: float = 1.0  # λ
    batch_size: int = 8  # forget records per step (and as many retain records)
    check_every: int = 1  # steps between two looks at the stopping rule
    weight_decay: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.method not in ("npo", "gd"):
            raise ValueError(f"unlearning method {self.method!r}: use npo or gd")
        for name in ("epochs", "lr", "beta", "batch_size", "check_every"):
            if not getattr(self, name) > 0:
                raise ValueError(f"unlearning {name} must be > 0, got {getattr(self, name)}")
        if self.retain_weight < 0:
            raise ValueError(f"unlearning retain_weight must be ≥ 0, got {self.retain_weight}")


@dataclass
class UnlearnLog:
    steps: int = 0
    losses: list[float] = field(default_factory=list)  # mean objective per pass over F
    checks: list[tuple[int, bool]] = field(default_factory=list)  # (step, whether the stopping rule held)
    stopped: bool = False  # stopped by the rule (False: ran out of epochs)


def _forward(model: PreTrainedModel, seqs: list[list[int]], pad_id: int, dev: torch.device
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean token NLL, Σ token log-prob) per sequence."""
    ids, mask = pad_batch(seqs, pad_id)
    ids, mask = ids.to(dev), mask.to(dev)
    with autocast(dev, training=True):
        logits = model(input_ids=ids, attention_mask=mask, position_ids=position_ids_for(mask)).logits
    nll = per_sequence_nll(logits, ids, mask)
    return nll, -nll * (mask[:, 1:].sum(1).to(nll.dtype))


@torch.no_grad()
def sequence_logprobs(model: PreTrainedModel, data: Encoded, pad_id: int, batch_size: int = 32) -> torch.Tensor:
    """Σ_t log p(x_t | x_<t) of every sequence (the NPO reference, computed once)."""
    dev = model_device(model)
    was = model.training
    model.eval()
    out = [_forward(model, data.ids[i:i + batch_size], pad_id, dev)[1].float().cpu()
           for i in range(0, len(data), batch_size)]
    model.train(was)
    return torch.cat(out) if out else torch.zeros(0)


def unlearn(model: PreTrainedModel, forget: Encoded, retain: Encoded, s: UnlearnSettings, pad_id: int, *,
            stop: Callable[[PreTrainedModel], bool] | None = None, desc: str = "unlearn") -> UnlearnLog:
    """Run ``s.method`` on ``model`` in place (see the module docstring); the model ends in eval mode."""
    if not len(forget):
        raise ValueError("nothing to unlearn: the forget set is empty")
    gen = torch.Generator().manual_seed(s.seed)
    dev = model_device(model)
    ref = sequence_logprobs(model, forget, pad_id).to(dev) if s.method == "npo" else None
    per_epoch = math.ceil(len(forget) / s.batch_size)
    total = max(1, int(round(s.epochs * per_epoch)))
    opt = make_optimizer(model, s.lr, s.weight_decay)
    log = UnlearnLog()

    def look() -> bool:
        model.eval()
        with torch.no_grad():
            done = bool(stop(model))  # type: ignore[misc]
        model.train()
        log.checks.append((log.steps, done))
        return done

    model.train()
    with progress_bar(desc, total=total) as advance, oom_as_error(desc, "unlearning.ga.batch_size"):
        if stop is not None and look():
            log.stopped = True
        while log.steps < total and not log.stopped:
            losses = []
            for idx in torch.randperm(len(forget), generator=gen).split(s.batch_size):
                if log.steps >= total:
                    break
                for group in opt.param_groups:
                    group["lr"] = lr_at(log.steps, total, s.lr, 0.05)
                opt.zero_grad(set_to_none=True)
                nll_f, lp_f = _forward(model, [forget.ids[i] for i in idx.tolist()], pad_id, dev)
                if s.method == "npo":
                    forget_term = (2.0 / s.beta) * torch.nn.functional.softplus(s.beta * (lp_f - ref[idx.to(dev)])).mean()
                else:
                    forget_term = -nll_f.mean()
                loss = forget_term
                if s.retain_weight > 0 and len(retain):
                    r_idx = torch.randint(len(retain), (len(idx),), generator=gen).tolist()
                    nll_r, _ = _forward(model, [retain.ids[i] for i in r_idx], pad_id, dev)
                    loss = loss + s.retain_weight * nll_r.mean()
                loss.backward()
                opt.step()
                log.steps += 1
                losses.append(float(loss.item()))
                advance(1, loss=losses[-1])
                if stop is not None and log.steps % s.check_every == 0 and look():
                    log.stopped = True
                    break
            log.losses.append(sum(losses) / max(1, len(losses)))
    model.eval()
    return log
