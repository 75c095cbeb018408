r"""Public data in DP training: a public gradient added *outside* the noised private sum.

Each DP step's update direction becomes::

    g_t = (Σ_{units} clip(∇_unit) + N(0, σ²C²)) / B   +   w · ∇ L_pub(θ_t; public mini-batch_t)
          └──────────── the private mechanism ─────┘       └────── public term ──────┘

with ``L_pub`` the mean per-sequence NLL of a mini-batch drawn from the
public split (its own seeded generator) and ``w`` the public weight.

Why it costs no privacy: the mechanism the accountant covers is the noised
private sum at each step. Everything else in the update — θ_t (itself a
function of earlier noised sums and public data), the public mini-batch
(public records, drawn with a generator that never sees private data), and
the optimiser — is post-processing of released outputs and of public data,
and adaptive composition allows each step's input θ_t to depend on all of
them. The private sum, its clipping, sampling and noise are unchanged
(``tests/test_user_dp.py`` checks the private part is identical for w = 0
and w > 0), so σ, q, T and ε are too. The public records must really be
public: text the model may reveal (the embedded base model is pre-trained on
the same split).

This is the simplest form of public-data-assisted DP-SGD (a weighted sum of
the private and public gradients, the baseline that Amid et al. 2022, "Public
data-assisted mirror descent for private model training", build on): the
public gradient keeps the model near what it knew, which the noise walks it
away from.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import nullcontext

import torch

from ..core.errors import UserError
from .batching import Encoded, pad_batch, per_sequence_nll, position_ids_for
from .device import autocast, model_device


class PublicTerm:
    """``w · ∇ L_pub`` on a fresh public mini-batch per call, added to ``p.grad`` of the given parameters.

    ``quiet`` is a context manager factory that switches off any per-sample
    machinery for the public pass (Opacus's hooks); the gradient is taken with
    ``torch.autograd.grad``, so nothing but ``p.grad`` (by ``+= w·g``) changes.
    """

    def __init__(self, model: torch.nn.Module, data: Encoded, weight: float, batch_size: int, seed: int,
                 pad_id: int, max_length: int, quiet: Callable[[], object] | None = None) -> None:
        if not (weight >= 0 and weight == weight) or weight == float("inf"):
            raise UserError(f"public weight {weight!r} must be a finite number >= 0 (0: no public gradient)")
        if batch_size < 1:
            raise UserError(f"public batch size {batch_size!r} must be >= 1")
        if len(data) == 0:
            raise UserError("a public gradient needs public records; the public split is empty")
        self.model, self.weight, self.batch_size = model, float(weight), int(batch_size)
        self.seqs = [s[:max_length] for s in data.ids]
        self.pad_id = pad_id
        self.quiet = quiet or nullcontext
        self.gen = torch.Generator().manual_seed(seed)
        self.calls = 0

    def _batch(self) -> list[list[int]]:
        idx = torch.randint(len(self.seqs), (self.batch_size,), generator=self.gen).tolist()
        return [self.seqs[i] for i in idx]

    def apply(self, params: Sequence[torch.nn.Parameter]) -> None:
        """Add ``w · ∇ L_pub(θ)`` to each ``p.grad`` (the private part must be in ``p.grad`` already)."""
        batch = self._batch()  # drawn even at w = 0, so the public stream does not depend on w
        self.calls += 1
        if self.weight == 0:
            return
        dev = model_device(self.model)
        ids, mask = pad_batch(batch, self.pad_id)
        ids, mask = ids.to(dev), mask.to(dev)
        with self.quiet():
            with autocast(dev, training=True):
                logits = self.model(input_ids=ids, attention_mask=mask, position_ids=position_ids_for(mask)).logits
            loss = per_sequence_nll(logits, ids, mask).mean()
            grads = torch.autograd.grad(loss, list(params), allow_unused=True)
        for p, g in zip(params, grads):
            if g is None:
                continue
            g = self.weight * g.float()
            if p.grad is None:
                p.grad = g.to(p.dtype)
            else:
                p.grad.add_(g.to(p.grad.dtype))
