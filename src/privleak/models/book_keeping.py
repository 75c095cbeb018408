r"""DP-SGD's clipped gradient sum in one backward pass ("book-keeping").

Ghost clipping (Li et al. 2022) needs two backward passes: one for the
per-sample gradient norms, a second of the re-weighted loss ``Σ_i c_i ℓ_i``
for the clipped sum. Book-keeping (Bu, Wang, Zha & Karypis 2023,
"Differentially private optimization on large model at small cost") keeps
what the first pass already has — each layer's input activations ``A_i`` and
output gradients ``B_i`` — and forms the clipped sum directly::

    ‖g_i‖² = Σ_layers ‖∇W_i‖²_F + ‖∇b_i‖²        (ghost or explicit norm, ``ghost_norms``)
    c_i    = min(1, C / (‖g_i‖ + 1e-6))          (Opacus's flat clipping factor, verbatim)
    Σ_i c_i ∇W_i = Σ_i c_i A_iᵀ B_i = (diag(c) A)ᵀ B      one matrix product per layer
    Σ_i c_i ∇b_i = Σ_{i,t} c_i B_i,t

Per layer, the norm comes one of two ways (:func:`keeps_grads`). Either the
explicit per-sample gradients ``G_i = A_iᵀ B_i`` (T·in·out per sample), kept,
so the clipped sum is ``Σ_i c_i G_i`` (in·out more); or the ghost norm
(T²·(in + out)) and then ``(diag(c) A)ᵀ B`` (T·in·out). The explicit way
costs less whenever in·out < T²·(in + out) — every layer of the embedded
model past a dozen tokens — so it is taken unless ``G`` would hold more than
twice the floats of ``A`` and ``B`` (wide layers on short sequences, GPT-2
small's case on a GPU). Biases reuse their per-sample ``Σ_t B_i,t``. Same
sums, added in another order: equal to float tolerance (``tests/test_dp_fast.py``).

The backward pass itself computes no weight gradients at all: the trainable
weights are switched to ``requires_grad=False`` for the forward and the graph
is rooted at the (frozen) embedding output instead, so autograd propagates
only activation gradients — the part every method needs. The cost over a
non-private step is the norms plus nothing else; the price is memory for the
output gradients ``B`` of the trainable layers until the step's end.

Supported trainable layers: ``Conv1D`` and ``nn.Linear`` (GPT-2's projections,
LoRA's factors) and ``nn.LayerNorm`` (per-sample gradients are tiny:
``Σ_t x̂_t ⊙ B_t`` and ``Σ_t B_t``). A model with any other trainable layer
(e.g. trained embeddings) is refused: use ``hooks`` or ``ghost`` there.
Every sequence's loss must depend only on its own row (true for per-sequence
losses without batch statistics), which is what makes ``B_i`` sample i's.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.pytorch_utils import Conv1D

from .ghost_norms import weight_grad_norms

_SUPPORTED = (Conv1D, nn.Linear, nn.LayerNorm)


def unsupported_layers(model: nn.Module) -> list[str]:
    """Names of layers with trainable weights that book-keeping cannot clip (empty: supported)."""
    return [
        f"{name} ({type(m).__name__})"
        for name, m in model.named_modules()
        if any(p.requires_grad for p in m.parameters(recurse=False)) and not isinstance(m, _SUPPORTED)
    ]


def clip_factors(norms: torch.Tensor, max_grad_norm: float) -> torch.Tensor:
    """DP-SGD's flat clipping factors c_i = min(1, C / (‖g_i‖ + 1e-6)) (Opacus's, verbatim): the one function that
    clips the records here and the white-box gradient canaries (:mod:`.gradient_canaries`), so those see the
    clipping the records get."""
    return (max_grad_norm / (norms + 1e-6)).clamp(max=1.0)


def keeps_grads(seq_len: int, fan_in: int, fan_out: int) -> bool:
    """Whether a layer's clipped sum comes from its explicit per-sample gradients (see the module docstring):
    they hold at most twice the floats of the layer's activations and output gradients, in·out ≤ 2T·(in + out),
    which for T ≥ 2 also makes them the cheaper way (T·in·out + in·out ≤ T²·(in + out) + T·in·out)."""
    return fan_in * fan_out <= 2 * seq_len * (fan_in + fan_out)


class BookKeeping:
    """Hooks on ``model`` that turn one backward pass of Σ_i ℓ_i into the clipped gradient sum.

    Use: ``with bk.capture(): loss = f(model(...)); loss.sum().backward()``, then
    ``bk.write_clipped_sum()`` sets ``p.grad = Σ_i c_i g_i`` for every trainable ``p``.
    """

    def __init__(self, model: nn.Module, max_grad_norm: float) -> None:
        self.max_grad_norm = float(max_grad_norm)
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.layers: list[nn.Module] = []
        for name, module in model.named_modules():
            own = [p for p in module.parameters(recurse=False) if p.requires_grad]
            if not own:
                continue
            if not isinstance(module, _SUPPORTED):
                raise TypeError(f"book-keeping clipping cannot clip {name} ({type(module).__name__}); use 'hooks' or 'ghost'")
            self.layers.append(module)
        if sum(len([p for p in m.parameters(recurse=False) if p.requires_grad]) for m in self.layers) != len(self.params):
            raise ValueError("a trainable parameter is shared between layers; book-keeping needs each used once")
        self._saved: dict[nn.Module, list] = {}
        self._handles = [m.register_forward_hook(self._on_forward) for m in self.layers]
        root = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
        if root is None:
            raise ValueError("book-keeping needs a model with get_input_embeddings() to root the graph at")
        self._handles.append(root.register_forward_hook(self._root_graph))
        self._active = False
        self.per_sample_norms: torch.Tensor | None = None

    def _root_graph(self, module, inputs, output):
        # Weights are frozen during the forward, so start the graph here: only activation gradients flow.
        if self._active and not output.requires_grad:
            return output.detach().requires_grad_(True)
        return None

    def _on_forward(self, module, inputs, output):
        if not self._active:
            return
        if module in self._saved:
            raise RuntimeError(f"{type(module).__name__} ran twice in one forward pass; book-keeping needs each layer once")
        entry = [inputs[0].detach(), None]
        self._saved[module] = entry

        def keep_grad(grad: torch.Tensor) -> None:
            entry[1] = grad.detach()

        output.register_hook(keep_grad)

    class _Capture:
        def __init__(self, bk: BookKeeping) -> None:
            self.bk = bk

        def __enter__(self):
            self.bk._saved.clear()
            self.bk._active = True
            for p in self.bk.params:
                p.requires_grad_(False)
            return self.bk

        def __exit__(self, *exc):
            self.bk._active = False
            for p in self.bk.params:
                p.requires_grad_(True)
            return False

    def capture(self) -> BookKeeping._Capture:
        """Context for the forward and the backward of ``Σ_i ℓ_i`` (a sum, so ``B_i`` is sample i's gradient)."""
        return BookKeeping._Capture(self)

    def _per_sample(self, module: nn.Module, a: torch.Tensor, b: torch.Tensor):
        """(squared norm per sample, clipped-sum function of c) for one layer."""
        if a.dim() == 2:
            a, b = a.unsqueeze(1), b.unsqueeze(1)
        # A forward under bf16 autocast leaves bf16 activations or output gradients: the per-sample weight
        # gradient is then the bf16 product (as the batch's weight gradient of a plain bf16 step is), made
        # fp32 before anything reads it. Norms, clipping factors and clipped sums are fp32 whatever the
        # forward's precision, and the norm and the clipped sum read the very same per-sample gradient.
        low = torch.bfloat16 if torch.bfloat16 in (a.dtype, b.dtype) else None
        explicit = (module.weight in self._trainable and not isinstance(module, nn.LayerNorm)
                    and keeps_grads(a.shape[1], a.shape[-1], b.shape[-1]))
        a_low, b_low = (a.to(low), b.to(low)) if explicit and low is not None else (None, None)
        # fp32 copies only of what is read in fp32: the explicit path's G_i comes from the bf16 copies.
        a = a if explicit and low is not None else a.float()
        b = b.float()
        sq = torch.zeros(b.shape[0], dtype=b.dtype, device=b.device)
        if isinstance(module, nn.LayerNorm):
            xhat = nn.functional.layer_norm(a, module.normalized_shape, eps=module.eps)
            g_w = (xhat * b).sum(1) if module.weight is not None else None
            g_b = b.sum(1) if module.bias is not None else None
            for p, g in ((module.weight, g_w), (module.bias, g_b)):
                if p is not None and p in self._trainable:
                    sq += g.pow(2).sum(1)

            def clipped(c: torch.Tensor) -> dict:
                out = {}
                for p, g in ((module.weight, g_w), (module.bias, g_b)):
                    if p is not None and p in self._trainable:
                        out[p] = torch.einsum("n,nd->d", c, g)
                return out

            return sq, clipped
        # Conv1D (W: in × out) and Linear (W: out × in): the same A_iᵀ B_i up to a transpose.
        grads = None  # the per-sample weight gradients, where the norm is the explicit one
        if module.weight in self._trainable:
            if keeps_grads(a.shape[1], a.shape[-1], b.shape[-1]):
                # (n, in, out): G_i, reused for the clipped sum
                grads = torch.bmm(a_low.transpose(1, 2), b_low).float() if low is not None else torch.bmm(a.transpose(1, 2), b)
                sq += grads.reshape(grads.shape[0], -1).norm(2, dim=1).pow(2)
            else:
                sq += weight_grad_norms(a, b).pow(2)
        bias_grads = None  # per-sample bias gradients Σ_t B_i,t, (n, out)
        if module.bias is not None and module.bias in self._trainable:
            bias_grads = b.sum(1)
            sq += bias_grads.pow(2).sum(1)

        def clipped(c: torch.Tensor) -> dict:
            out = {}
            if module.weight in self._trainable:
                if grads is not None:
                    w = (c @ grads.reshape(grads.shape[0], -1)).view(grads.shape[1:])  # (in, out)
                else:
                    ac = (a * c.view(-1, 1, 1)).reshape(-1, a.shape[-1])
                    w = ac.t() @ b.reshape(-1, b.shape[-1])  # (in, out)
                out[module.weight] = w if isinstance(module, Conv1D) else w.t()
            if bias_grads is not None:
                out[module.bias] = c @ bias_grads
            return out

        return sq, clipped

    def write_clipped_sum(self) -> torch.Tensor:
        """Set ``p.grad = Σ_i c_i g_i``; returns the per-sample gradient norms (not private: debugging only)."""
        self._trainable = set(self.params)
        total = None
        parts = []
        for module in self.layers:
            entry = self._saved.get(module)
            if entry is None or entry[1] is None:
                raise RuntimeError(f"no activations/gradients captured for {type(module).__name__}: run forward and backward inside capture()")
            sq, clipped = self._per_sample(module, entry[0], entry[1])
            total = sq if total is None else total + sq
            parts.append(clipped)
        return self._clip_into_grads(parts, total)

    def _clip_into_grads(self, parts: list, total_sq: torch.Tensor, index: torch.Tensor | None = None) -> torch.Tensor:
        """Norms from the summed squares, factors c = min(1, C/‖g‖) (gathered by ``index``: a person's factor for
        each of their records), and every layer's clipped sum written to ``p.grad``. Returns the norms."""
        norms = total_sq.clamp_min(0).sqrt()
        c = clip_factors(norms, self.max_grad_norm)
        if index is not None:
            c = c[index]
        for clipped in parts:
            for p, g in clipped(c).items():
                p.grad = g.to(p.dtype).view_as(p)
        self._saved.clear()
        self.per_sample_norms = norms
        return norms

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()
        self._saved.clear()
