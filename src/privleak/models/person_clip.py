r"""Per-**person** clipped gradient sums in one backward pass (book-keeping over groups of records).

User-level DP-SGD clips a person's whole contribution ``g_P = Σ_{i∈P} w_i ∇ℓ_i``
(``w_i`` the person's reduction weight: 1 for a sum, 1/k_P for a mean) to norm
C as one vector. Book-keeping (Bu et al. 2023, :mod:`book_keeping`) already
keeps each trainable layer's input activations ``A_i`` and output gradients
``B_i`` (of the backward of ``Σ_i w_i ℓ_i``, so ``B_i`` carries ``w_i``); per
layer the person's gradient is a sum over *all* tokens of *all* their records::

    ∇W_P = Σ_{i∈P} A_iᵀ B_i = A_Pᵀ B_P        (A_P, B_P: the person's records' tokens stacked)
    ‖∇W_P‖²_F = Σ_{t,t'∈P} (a_t·a_t')(b_t·b_t')    the ghost norm with the person as one sample
    ∇b_P = Σ_{t∈P} b_t                          (bias; LayerNorm likewise: Σ_t x̂_t ⊙ b_t, Σ_t b_t)

so the per-person norm is :func:`ghost_norms.weight_grad_norms` applied to the
stacked tokens where the ghost form is the cheaper one (wide layers), and for
narrow layers each record's explicit (in × out) gradient added per person
(``index_add``); the clipped
sum needs no new arithmetic: with ``c_P = min(1, C / (‖g_P‖ + 1e-6))``
(Opacus's flat clipping factor) each row i gets ``c_{P(i)}`` and the sum is
``Σ_i c_{P(i)} A_iᵀ B_i`` — one matrix product per layer. A person's records
must all be in the same backward pass (the caller packs whole people into a
micro-batch); padded positions have zero output gradient and drop out.

With one record per person this is exactly per-sample book-keeping (tested
against :class:`book_keeping.BookKeeping`).
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.pytorch_utils import Conv1D

from .book_keeping import BookKeeping
from .ghost_norms import use_ghost_form, weight_grad_norms


def _group_sum(x: torch.Tensor, groups: torch.Tensor, n_groups: int) -> torch.Tensor:
    """Rows of ``x`` (n, …) added per group: (n_groups, …)."""
    out = torch.zeros((n_groups, *x.shape[1:]), dtype=x.dtype, device=x.device)
    return out.index_add_(0, groups, x)


def _stacked(x: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
    """(n, T, d) → (G, k·T, d): each group's rows end to end (``slots`` (G, k): row indices, n for "none")."""
    padded = torch.cat([x, x.new_zeros((1, *x.shape[1:]))])
    g, k = slots.shape
    return padded[slots].reshape(g, k * x.shape[1], x.shape[2])


def group_slots(groups: torch.Tensor, n_groups: int) -> torch.Tensor:
    """(G, k_max) row indices of each group, padded with n (the index of an all-zero row)."""
    n = groups.numel()
    sizes = torch.bincount(groups, minlength=n_groups)
    k = int(sizes.max()) if n else 1
    slots = torch.full((n_groups, k), n, dtype=torch.long, device=groups.device)
    order = torch.argsort(groups, stable=True)
    starts = torch.cumsum(sizes, 0) - sizes
    pos = torch.arange(n, device=groups.device) - starts[groups[order]]
    slots[groups[order], pos] = order
    return slots


class PersonBookKeeping(BookKeeping):
    """:class:`BookKeeping` whose clipping unit is a group of rows (a person), not a row.

    Use: ``with pbk.capture(): (w · ℓ).sum().backward()``, then
    ``pbk.write_clipped_sum(groups, n_groups)`` sets ``p.grad = Σ_P c_P g_P``
    and returns the per-group norms (not private: tests and debugging only).
    """

    def _per_group(self, module: nn.Module, a: torch.Tensor, b: torch.Tensor, groups: torch.Tensor,
                   slots: torch.Tensor, n_groups: int):
        """(squared norm per group, clipped-sum function of the per-row factors c) for one layer."""
        if a.dim() == 2:
            a, b = a.unsqueeze(1), b.unsqueeze(1)
        a, b = a.float(), b.float()  # DP arithmetic in fp32, whatever the forward's precision
        sq = torch.zeros(n_groups, dtype=b.dtype, device=b.device)
        trainable = self._trainable
        if isinstance(module, nn.LayerNorm):
            xhat = nn.functional.layer_norm(a, module.normalized_shape, eps=module.eps)
            rows = {}
            if module.weight is not None and module.weight in trainable:
                rows[module.weight] = (xhat * b).sum(1)
            if module.bias is not None and module.bias in trainable:
                rows[module.bias] = b.sum(1)
            for g in rows.values():
                sq += _group_sum(g, groups, n_groups).pow(2).sum(1)

            def clipped(c: torch.Tensor) -> dict:
                return {p: torch.einsum("n,nd->d", c, g) for p, g in rows.items()}

            return sq, clipped
        if module.weight in trainable:
            if use_ghost_form(a.shape[1], a.shape[2], b.shape[2]):
                sq += weight_grad_norms(_stacked(a, slots), _stacked(b, slots)).pow(2)
            else:
                # Narrow layer: each row's explicit (in, out) gradient, added per person — no zero slots to
                # multiply, which the stacked form pays for when people with 1 and 4 records share a batch.
                per_row = torch.bmm(a.transpose(1, 2), b)
                sq += _group_sum(per_row, groups, n_groups).reshape(n_groups, -1).pow(2).sum(1)
        has_bias = module.bias is not None and module.bias in trainable
        if has_bias:
            sq += _group_sum(b.sum(1), groups, n_groups).pow(2).sum(1)

        def clipped(c: torch.Tensor) -> dict:
            out = {}
            if module.weight in trainable:
                ac = (a * c.view(-1, 1, 1)).reshape(-1, a.shape[-1])
                w = ac.t() @ b.reshape(-1, b.shape[-1])  # (in, out)
                out[module.weight] = w if isinstance(module, Conv1D) else w.t()
            if has_bias:
                out[module.bias] = torch.einsum("n,ntd->d", c, b)
            return out

        return sq, clipped

    def write_clipped_sum(self, groups: torch.Tensor | None = None, n_groups: int | None = None) -> torch.Tensor:
        """Set ``p.grad = Σ_P c_P Σ_{i∈P} g_i``; ``groups`` (n,) maps each row to its group 0…n_groups−1.

        Without ``groups`` every row is its own group (plain book-keeping).
        """
        if groups is None:
            return super().write_clipped_sum()
        self._trainable = set(self.params)
        groups = groups.to(self.params[0].device)
        n_groups = int(n_groups if n_groups is not None else int(groups.max()) + 1)
        slots = group_slots(groups, n_groups)
        total = torch.zeros(n_groups, dtype=torch.float32, device=groups.device)
        parts = []
        for module in self.layers:
            entry = self._saved.get(module)
            if entry is None or entry[1] is None:
                raise RuntimeError(f"no activations/gradients captured for {type(module).__name__}: run forward and backward inside capture()")
            sq, clipped = self._per_group(module, entry[0], entry[1], groups, slots, n_groups)
            total = total + sq
            parts.append(clipped)
        return self._clip_into_grads(parts, total, index=groups)
