"""The LM head and its cross-entropy as one autograd step: the per-token NLL without a stored log-softmax.

A training step of a model with a wide vocabulary spends much of its time outside the matrix products, on the
(tokens, vocabulary) arrays between the head and the loss: SmolLM2's 49,152-entry head in a step of ~500 tokens
makes a 99 MB fp32 copy of the bf16 logits, a log-softmax, a zero-filled gradient of the same size for the
gather's backward, the log-softmax's backward and a cast back to bf16 — about a quarter of the CPU time of a
step that trains its top 8 layers (torch profiler, 2026-12-06).

:func:`linear_nll` computes the same NLL, ``logsumexp(z) − z_y`` with ``z = x Wᵀ + b`` in fp32, in row chunks,
and forms the gradient with respect to the logits, ``softmax(z) − onehot(y)``, in the forward pass (as Liger
Kernel's fused linear cross-entropy does on GPUs), stored in the products' dtype. The backward is then two
matrix products, the upstream gradient applied to their (tokens, width) sides:
``∂x = diag(g) (P − Y) W`` and ``∂W = (P − Y)ᵀ diag(g) x``. Under bf16 autocast the logits' gradient is rounded
to bf16 before the head's backward products, as autocast's own cast does, so the update is the one it was up
to the order of rounding.

Only for a plain :class:`torch.nn.Linear` head with no hooks: per-sample clipping (Opacus, book-keeping)
hooks a trainable head's module, and a hooked head runs through the module as before.
"""

from __future__ import annotations

import weakref

import torch
import torch.nn.functional as F
from torch import nn

#: Rows of logits normalised at once: a (rows, vocabulary) fp32 block of a few MB stays in cache.
CHUNK_ROWS = 16

#: bf16 copies of frozen head weights by id, kept while the weight lives and is not written (autocast recasts
#: every step). Tensors compare elementwise, so the weight is held by a weak reference beside its id.
_FROZEN: dict[int, tuple[weakref.ref, tuple, torch.Tensor]] = {}


def _cast(weight: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``weight`` in ``dtype``; a frozen weight's copy is made once and remade when the weight is written."""
    if weight.dtype == dtype or weight.requires_grad:
        return weight.to(dtype)
    stamp = (weight._version, weight.data_ptr(), dtype)
    kept = _FROZEN.get(id(weight))
    if kept is None or kept[0]() is not weight or kept[1] != stamp:
        key = id(weight)
        ref = weakref.ref(weight, lambda _r, key=key: _FROZEN.pop(key, None))
        kept = (ref, stamp, weight.detach().to(dtype))
        _FROZEN[key] = kept
    return kept[2]


def fusable(head: nn.Module) -> bool:
    """Whether ``head`` can run inside :func:`linear_nll`: a plain ``nn.Linear`` that nothing hooks."""
    if type(head) is not nn.Linear:
        return False
    hooks = (head._forward_hooks, head._forward_pre_hooks, head._backward_hooks, head._backward_pre_hooks)
    glob = nn.modules.module
    global_hooks = (glob._global_forward_hooks, glob._global_forward_pre_hooks, glob._global_backward_hooks,
                    glob._global_backward_pre_hooks)
    return not any(hooks) and not any(global_hooks)


def _compute_dtype(x: torch.Tensor, weight: torch.Tensor) -> torch.dtype:
    """The dtype ``head(x)`` would multiply in: autocast's where it is on for this device, else the weight's."""
    kind = x.device.type
    if torch.is_autocast_enabled(kind):
        return torch.get_autocast_dtype(kind)
    return weight.dtype


class _LinearNLL(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, targets: torch.Tensor,
                dtype: torch.dtype, want_grad: bool) -> torch.Tensor:
        w = _cast(weight, dtype)
        b = bias.to(dtype) if bias is not None else None
        xs = x.to(dtype)
        z = F.linear(xs, w, b)  # one product over every row: a wide one runs nearer the GEMM rate than chunks
        nll = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)
        for lo in range(0, x.shape[0], CHUNK_ROWS):
            hi = min(lo + CHUNK_ROWS, x.shape[0])
            zf = z[lo:hi].float()  # a block that stays in cache through the passes below
            y = targets[lo:hi, None]
            top = zf.amax(dim=1, keepdim=True)
            picked = zf.gather(1, y)
            zf.sub_(top).exp_()
            total = zf.sum(dim=1, keepdim=True)
            nll[lo:hi] = (top + total.log() - picked).squeeze(1)
            if want_grad:  # softmax − onehot, written over the block's logits
                zf.div_(total).scatter_add_(1, y, torch.full_like(picked, -1.0))
                z[lo:hi] = zf
        ctx.save_for_backward(xs, w, z if want_grad else None)
        ctx.has_bias = bias is not None
        ctx.dtypes = (x.dtype, weight.dtype, bias.dtype if bias is not None else None)
        return nll

    @staticmethod
    def backward(ctx, grad_nll: torch.Tensor):
        xs, w, grad_z = ctx.saved_tensors
        x_dtype, w_dtype, b_dtype = ctx.dtypes
        g = grad_nll.float()[:, None]  # applied in fp32 on the (tokens, width) sides: one rounding, as autocast's
        dx = dw = db = None
        if ctx.needs_input_grad[0]:
            dx = ((grad_z @ w).float() * g).to(x_dtype)
        if ctx.needs_input_grad[1]:
            dw = (grad_z.t() @ (xs.float() * g).to(grad_z.dtype)).to(w_dtype)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            db = (grad_z.t() @ g.to(grad_z.dtype)).squeeze(1).to(b_dtype)
        return dx, dw, db, None, None, None


def linear_nll(head: nn.Module, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Per-row NLL of ``targets`` under ``softmax(head(x))``, in fp32: ``cross_entropy(head(x).float(), targets,
    reduction="none")``, through :class:`_LinearNLL` where the head is :func:`fusable` (module docstring)."""
    if not fusable(head):
        return F.cross_entropy(head(x).float(), targets, reduction="none")
    want_grad = torch.is_grad_enabled() and (x.requires_grad or any(p.requires_grad for p in head.parameters()))
    dtype = _compute_dtype(x, head.weight)
    with torch.autocast(x.device.type, enabled=False):  # the dtypes are explicit inside
        return _LinearNLL.apply(x, head.weight, head.bias, targets, dtype, want_grad)
