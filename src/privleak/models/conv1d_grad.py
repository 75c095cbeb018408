"""Per-sample gradients of Hugging Face's ``Conv1D`` for Opacus.

GPT-2 implements its attention and MLP projections as
``transformers.pytorch_utils.Conv1D``: ``y = x @ W + b`` with ``W`` of shape
(in, out), i.e. a transposed ``nn.Linear``. Opacus has no grad sampler for
it and would fall back to functorch (a second, slower forward per batch).
For activations ``A`` (n, …, in) and output gradients ``B`` (n, …, out)::

    dL_i/dW = Σ_t A_i,t ⊗ B_i,t        (in, out)
    dL_i/db = Σ_t B_i,t                 (out,)

Importing this module registers the sampler (idempotent).
"""

from __future__ import annotations

import torch
from opacus.grad_sample.utils import register_grad_sampler
from transformers.pytorch_utils import Conv1D


@register_grad_sampler(Conv1D)
def conv1d_grad_sample(
    layer: Conv1D, activations: list[torch.Tensor], backprops: torch.Tensor
) -> dict[torch.nn.Parameter, torch.Tensor]:
    a = activations[0]
    out: dict[torch.nn.Parameter, torch.Tensor] = {}
    if layer.weight.requires_grad:
        out[layer.weight] = torch.einsum("n...i,n...j->nij", a, backprops)
    if layer.bias is not None and layer.bias.requires_grad:
        out[layer.bias] = torch.einsum("n...j->nj", backprops)
    return out
