r"""DP-SGD's per-sample arithmetic in fp32, whatever precision the forward pass ran in.

Under bf16 autocast a layer's saved input and its output gradient can be
bf16; Opacus's samplers would then form per-sample gradients, their norms
and hence the clipping factors ``min(1, C/‖g_i‖)`` in bf16 (8 bits of
mantissa: a norm off by ~0.4 % moves every clipped gradient). The guarantee
itself does not depend on that accuracy (clipping to any bound ≤ C is still
clipping), but the step should be the one fp32 training takes, so every
registered grad and norm sampler is wrapped to cast its floating inputs to
fp32 first. The clipped sum Opacus then forms, and the noise it adds (drawn
in the dtype of that sum), are fp32 too.

In fp32 runs ``Tensor.float()`` returns the tensor itself: the wrapped
samplers compute exactly what the originals did.
"""

from __future__ import annotations

import functools

import torch
from opacus.grad_sample.grad_sample_module import GradSampleModule
from opacus.grad_sample.grad_sample_module_fast_gradient_clipping import GradSampleModuleFastGradientClipping


def _fp32(t):
    return t.float() if isinstance(t, torch.Tensor) and t.is_floating_point() else t


def _wrap(fn):
    if getattr(fn, "_privleak_fp32", False):
        return fn

    @functools.wraps(fn)
    def sampler(layer, activations, backprops):
        return fn(layer, [_fp32(a) for a in activations], _fp32(backprops))

    sampler._privleak_fp32 = True  # type: ignore[attr-defined]
    return sampler


def ensure_fp32_samplers() -> None:
    """Wrap every registered Opacus grad / norm sampler (idempotent; new registrations are wrapped on the next call)."""
    for table in (GradSampleModule.GRAD_SAMPLERS, GradSampleModuleFastGradientClipping.GRAD_SAMPLERS,
                  GradSampleModuleFastGradientClipping.NORM_SAMPLERS):
        for key, fn in list(table.items()):
            table[key] = _wrap(fn)
