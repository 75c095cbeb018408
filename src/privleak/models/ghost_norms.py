r"""Per-sample gradient *norms* of Hugging Face's ``Conv1D`` without the gradients.

Ghost clipping (Li, Tramèr, Liang & Hashimoto 2022, "Large language models
can be strong differentially private learners", §4) computes DP-SGD's clipping
factors ``min(1, C / ‖g_i‖)`` from per-sample gradient norms alone, then gets
the clipped sum ``Σ_i min(1, C/‖g_i‖)·g_i`` from a second, ordinary backward
pass of the re-weighted loss ``Σ_i c_i·ℓ_i``. Per-sample gradients never exist
in memory, which is what makes DP-SGD cost about what plain training costs.

For ``y = x @ W + b`` (GPT-2's ``Conv1D``: ``W`` is (in, out)), activations
``A_i`` (T, in) and output gradients ``B_i`` (T, out) of sample ``i``::

    ∇W_i = A_iᵀ B_i                    ‖∇W_i‖²_F = ⟨A_i A_iᵀ, B_i B_iᵀ⟩_F      (the "ghost norm")
    ∇b_i = Σ_t B_i,t                   ‖∇b_i‖²   = ‖Σ_t B_i,t‖²

The ghost form costs T²·(in + out) multiply-adds and T² memory per sample;
the explicit form ``‖A_iᵀ B_i‖_F`` costs T·in·out and in·out. Both are exact,
so we pick per layer and per micro-batch the one with fewer operations, ghost
iff ``T·(in + out) < in·out`` — a "mixed ghost norm" in the spirit of Bu,
Mao & Xu 2022 ("Scalable and efficient training of large convolutional neural
networks with differential privacy"), who choose by memory (``2T² < in·out``).
Where the two criteria differ, the explicit form's in·out floats per sample
are small anyway (narrow layers). Long sequences through narrow layers (the
embedded 128-wide model at T ≈ 150) take the explicit form; GPT-2 small
(768-wide and wider, T = 128) and short micro-batches take the ghost form.

The result is the same quantity Opacus's per-sample gradients give (see
``conv1d_grad``); ``tests/test_dp_fast.py`` checks they agree to float
tolerance. Importing this module registers the sampler with Opacus
(idempotent); ``nn.Linear`` (LoRA factors, an untied ``lm_head``) and
``nn.Embedding`` use Opacus's own norm samplers.
"""

from __future__ import annotations

import torch
from opacus.grad_sample.utils import register_norm_sampler
from transformers.pytorch_utils import Conv1D


def use_ghost_form(seq_len: int, fan_in: int, fan_out: int) -> bool:
    """Ghost (T×T Gram matrices) or explicit (in×out gradient) norm: whichever needs fewer operations."""
    return seq_len * (fan_in + fan_out) < fan_in * fan_out


def weight_grad_norms(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """‖A_iᵀ B_i‖_F for each sample i; ``a`` (n, T, in), ``b`` (n, T, out)."""
    n, t, fan_in = a.shape
    if use_ghost_form(t, fan_in, b.shape[-1]):
        aat = torch.bmm(a, a.transpose(1, 2))  # (n, T, T)
        bbt = torch.bmm(b, b.transpose(1, 2))
        # Rounding can push a tiny squared norm below zero; the true value is ≥ 0.
        return (aat * bbt).sum((1, 2)).clamp_min(0).sqrt()
    return torch.bmm(a.transpose(1, 2), b).reshape(n, -1).norm(2, dim=1)


@register_norm_sampler(Conv1D)
def conv1d_norm_sample(
    layer: Conv1D, activations: list[torch.Tensor], backprops: torch.Tensor
) -> dict[torch.nn.Parameter, torch.Tensor]:
    a = activations[0].to(backprops.dtype)
    b = backprops
    if a.dim() == 2:  # (n, in): one position per sample, the norm factorises
        a, b = a.unsqueeze(1), b.unsqueeze(1)
    elif a.dim() > 3:  # (n, …, in): every middle axis is a "position"
        a, b = a.flatten(1, -2), b.flatten(1, -2)
    out: dict[torch.nn.Parameter, torch.Tensor] = {}
    if layer.weight.requires_grad:
        out[layer.weight] = weight_grad_norms(a, b)
    if layer.bias is not None and layer.bias.requires_grad:
        out[layer.bias] = b.sum(1).norm(2, dim=1)
    return out
