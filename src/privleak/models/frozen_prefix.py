r"""Train the top of a model over its frozen bottom, run once per record ("frozen prefix").

When every trainable weight sits in decoder layers ``k…L−1`` — LoRA adapters on the top layers only
(``lora_layers``), or a fine-tune of the top layers (``train.layers``) — layers ``0…k−1`` and the embedding
are the same function of a record at every step. Their output, the hidden state that enters layer ``k``, is
computed the first time a record is seen and kept; every later pass over that record runs layers ``k…L−1``,
the final norm and the head only::

    h_k(x) = layers[0:k](embed(x))          once per record (no gradient: nothing there trains)
    loss(x) = ℓ(head(norm(layers[k:L](h_k(x)))), x)   every step

The same arithmetic as the full forward, in another grouping of batches (float tolerance;
``tests/test_frozen_prefix.py``). Under DP-SGD nothing changes: a record's per-sample gradient is the
gradient of the same loss with respect to the same trainable weights, and h_k is a fixed function of the
record alone, as the embedding is. What it saves on SmolLM2 (30 layers) with the top 8 adapted: the forward
of 22 layers and their activation gradients on every pass after the first.

Supported where ``inputs_embeds`` enters layer 0 unchanged and a layer reads nothing by its index
(:func:`layers_of`): Llama, Mistral, and Qwen2/3 whose layers share one attention type. Elsewhere — and when
the embeddings, the head or a bottom layer train — :func:`frozen_prefix` changes nothing.

Memory: one (length, width) tensor per distinct record, e.g. 64 × 576 fp32 = 147 kB on SmolLM2. The kept
states outlive one training: they are keyed by a digest of the bottom layers' weights (and the autocast
precision), so two arms that adapt the same base in one process — dp-8+lora and dp-user-10+lora, or the
candidates of a recipe search — compute each record's prefix once. At most :data:`MAX_CACHE_BYTES` are kept
in a process (the oldest base's states go first; records past the bound run the full forward, as before).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections import OrderedDict
from collections.abc import Iterator

import torch
from torch import nn

from .decoders import decoder_and_head

#: Past this many bytes of kept hidden states in a process a record's prefix is computed each time.
MAX_CACHE_BYTES = 1024**3

#: (digest of the bottom layers and embedding, k, autocast dtype) → {record tokens: h_k}, oldest first.
_STORES: OrderedDict[tuple, dict[tuple[int, ...], torch.Tensor]] = OrderedDict()


def _bytes(store: dict) -> int:
    return sum(t.numel() * t.element_size() for t in store.values())


def bottom_digest(decoder: nn.Module, layers: nn.ModuleList, k: int) -> str:
    """SHA-256 over every weight h_k depends on: the embedding and layers 0…k−1 (names, dtypes, values)."""
    h = hashlib.sha256()
    parts = [("embed", decoder.get_input_embeddings())] + [(f"layer{i}", layers[i]) for i in range(k)]
    for name, module in parts:
        for pname, p in module.named_parameters():
            t = p.detach()
            h.update(f"{name}.{pname}:{t.dtype}:{tuple(t.shape)}".encode())
            h.update((t.float() if t.dtype == torch.bfloat16 else t).contiguous().cpu().numpy().tobytes())
    return h.hexdigest()


def layers_of(decoder: nn.Module) -> nn.ModuleList | None:
    """The decoder's layer list when it is one :func:`frozen_prefix` can run from the middle, else None."""
    cfg = getattr(decoder, "config", None)
    kind = getattr(cfg, "model_type", None)
    layers = getattr(decoder, "layers", None)
    if not isinstance(layers, nn.ModuleList) or not hasattr(decoder, "norm"):
        return None
    if kind in ("llama", "mistral"):
        return layers
    # Qwen2/3 index config.layer_types by a layer's position in the loop: one type for all, or not at all.
    if kind in ("qwen2", "qwen3") and len(set(getattr(cfg, "layer_types", None) or ["one"])) == 1:
        return layers
    return None


def first_trainable_layer(model: nn.Module, decoder: nn.Module, layers: nn.ModuleList) -> int:
    """k: the lowest layer with a trainable weight, when every trainable weight is in layers k…L−1 or the final
    norm; 0 (no frozen prefix) otherwise."""
    inside = {id(p): i for i, layer in enumerate(layers) for p in layer.parameters()}
    top = {id(p) for p in decoder.norm.parameters()}
    k = len(layers)
    for p in model.parameters():
        if not p.requires_grad:
            continue
        if id(p) in inside:
            k = min(k, inside[id(p)])
        elif id(p) not in top:
            return 0  # the embeddings, the head or anything else trains: the prefix is not fixed
    return k if k < len(layers) else 0


class FrozenPrefix:
    """The kept hidden states h_k of each record, keyed by its real tokens (padding is not part of a record)."""

    def __init__(self, model: nn.Module, decoder: nn.Module, layers: nn.ModuleList, k: int,
                 store: dict[tuple[int, ...], torch.Tensor] | None = None) -> None:
        self.model, self.decoder, self.layers, self.k = model, decoder, layers, k
        self.store: dict[tuple[int, ...], torch.Tensor] = {} if store is None else store
        self.hits = self.misses = 0

    @property
    def bytes(self) -> int:
        """Bytes of hidden states kept in this process (this prefix's own store included)."""
        total = sum(_bytes(s) for s in _STORES.values())
        return total if any(s is self.store for s in _STORES.values()) else total + _bytes(self.store)

    @contextlib.contextmanager
    def _only(self, layers: nn.ModuleList, norm: nn.Module) -> Iterator[None]:
        full, full_norm = self.decoder.layers, self.decoder.norm
        self.decoder.layers, self.decoder.norm = layers, norm
        try:
            yield
        finally:
            self.decoder.layers, self.decoder.norm = full, full_norm

    def _bottom(self, ids: torch.Tensor, mask: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        with torch.no_grad(), self._only(nn.ModuleList(list(self.layers)[: self.k]), nn.Identity()):
            return self.decoder(input_ids=ids, attention_mask=mask, position_ids=position_ids,
                                use_cache=False).last_hidden_state

    def hidden(self, ids: torch.Tensor, mask: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        """h_k for the batch (batch, length, width), padding rows zero: kept rows read, the others computed."""
        lengths = mask.sum(1).tolist()
        keys = [tuple(ids[r, : int(n)].tolist()) for r, n in enumerate(lengths)]
        missing = [r for r, key in enumerate(keys) if key not in self.store]
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        fresh = self._bottom(ids[missing], mask[missing], position_ids[missing]) if missing else None
        width = self.decoder.config.hidden_size
        dtype = fresh.dtype if fresh is not None else next(iter(self.store.values())).dtype
        out = torch.zeros(ids.shape[0], ids.shape[1], width, dtype=dtype, device=ids.device)
        room = MAX_CACHE_BYTES - self.bytes if missing else 0
        for j, r in enumerate(missing):
            n = int(lengths[r])
            out[r, :n] = fresh[j, :n]
            kept = fresh[j, :n].detach().clone()
            if kept.numel() * kept.element_size() <= room:
                self.store[keys[r]] = kept
                room -= kept.numel() * kept.element_size()
        computed = set(missing)
        for r, key in enumerate(keys):
            if r not in computed:
                out[r, : len(key)] = self.store[key].to(dtype)
        return out

    def top(self, hidden: torch.Tensor, mask: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        """The final hidden states (after the norm) from h_k: layers k…L−1 and the norm."""
        if torch.is_grad_enabled() and not any(p.requires_grad for p in self.decoder.parameters()):
            # Book-keeping freezes every weight for its forward and roots the graph at the embedding's output;
            # here that output is h_k, so the graph starts at h_k.
            hidden = hidden.detach().requires_grad_(True)
        with self._only(nn.ModuleList(list(self.layers)[self.k :]), self.decoder.norm):
            return self.decoder(inputs_embeds=hidden, attention_mask=mask, position_ids=position_ids,
                                use_cache=False).last_hidden_state


def decoder_layers(model: nn.Module) -> nn.ModuleList | None:
    """The decoder's block list of a causal LM (``layers`` for Llama-style decoders, ``h`` for GPT-2), or None."""
    split = decoder_and_head(model)
    decoder = split[0] if split is not None else None
    for name in ("layers", "h"):
        blocks = getattr(decoder, name, None)
        if isinstance(blocks, nn.ModuleList):
            return blocks
    return None


def train_top_layers(model: nn.Module, layers: int) -> int:
    """Freeze everything but the top ``layers`` decoder blocks and the final norm (embeddings and the head
    included, so a tied head stays the input embedding); returns the weights left trainable.

    The ``train.layers`` setting: fine-tuning of the top of a pretrained model, whose frozen bottom the
    trainer then runs once per record (:func:`frozen_prefix`). More layers than the model has is one line.
    """
    from ..core.errors import UserError

    blocks = decoder_layers(model)
    if blocks is None:
        raise UserError(f"train.layers: no decoder block list found in this {type(model).__name__}; unset "
                        "train.layers (every weight trains)")
    if not 1 <= layers <= len(blocks):
        raise UserError(f"train.layers {layers}: the model has {len(blocks)} decoder layers; use 1 to "
                        f"{len(blocks)}, or unset it")
    keep = {id(p) for block in list(blocks)[len(blocks) - layers:] for p in block.parameters()}
    decoder = decoder_and_head(model)[0]
    norm = next((m for m in (getattr(decoder, "norm", None), getattr(decoder, "ln_f", None)) if m is not None), None)
    if norm is not None:
        keep |= {id(p) for p in norm.parameters()}
    for p in model.parameters():
        p.requires_grad_(id(p) in keep)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


@contextlib.contextmanager
def top_layers_only(model: nn.Module, layers: int | None) -> Iterator[None]:
    """Within the block only the top ``layers`` train (:func:`train_top_layers`; None: nothing changes); after
    it every weight is trainable again, as in a freshly loaded model, whatever happened inside."""
    if not layers:
        yield
        return
    train_top_layers(model, layers)
    try:
        yield
    finally:
        for p in model.parameters():
            p.requires_grad_(True)


_ACTIVE: dict[int, FrozenPrefix] = {}


def _autocast_dtype() -> torch.dtype | None:
    """The dtype a training forward runs in here (``models.device``): bf16 and fp32 prefixes differ."""
    from .device import current

    return current().train_autocast_dtype


def active(model: nn.Module) -> FrozenPrefix | None:
    """The frozen prefix :func:`frozen_prefix` set up for ``model`` (or for the model a PEFT wrapper holds)."""
    hit = _ACTIVE.get(id(model))
    if hit is None and hasattr(model, "get_base_model"):
        hit = _ACTIVE.get(id(model.get_base_model()))
    return hit


@contextlib.contextmanager
def frozen_prefix(model: nn.Module) -> Iterator[FrozenPrefix | None]:
    """Within the block, :func:`privleak.models.batching.sequence_nll` on ``model`` runs the frozen bottom layers
    once per record (module docstring); None and nothing changes where the model does not qualify."""
    split = decoder_and_head(model)
    layers = layers_of(split[0]) if split is not None else None
    k = first_trainable_layer(model, split[0], layers) if layers is not None else 0
    if k == 0:
        yield None
        return
    key = (bottom_digest(split[0], layers, k), k, _autocast_dtype())
    store = _STORES.pop(key, None)
    if store is None:
        store = {}
        while _STORES and sum(_bytes(s) for s in _STORES.values()) > MAX_CACHE_BYTES // 2:
            _STORES.popitem(last=False)  # the oldest base's states make room for this one's
    _STORES[key] = store  # the newest last
    fp = FrozenPrefix(model, split[0], layers, k, store)
    _ACTIVE[id(model)] = fp
    try:
        yield fp
    finally:
        _ACTIVE.pop(id(model), None)
