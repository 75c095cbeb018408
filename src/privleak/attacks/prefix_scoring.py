"""Scoring many continuations of shared prefixes, each distinct (path, next token) pair once.

Canary exposure ranks a secret among 10⁴–10⁵ candidates that share the canary's prefix and often their
leading tokens; the PII attacks score a slot's window with each of up to 100 candidate values, which share
the window's left context. Both are sums of log p over token paths that share prefixes: the texts' token
sequences are merged into a trie (:class:`_Trie`) and, for a GPT-2 in fp32, every trie node is run once
through the blocks with one query attending to the shared prefix's cached keys/values and to its own path's
(:func:`_tree_forward`) — the same sums as a full forward pass per text, to float tolerance
(``tests/test_exposure.py``, ``tests/test_prefix_scoring.py``). The Llama family (Llama, Mistral, Qwen2:
SmolLM2 is a Llama) takes the same pass through its own blocks (:func:`_llama_chunk_hidden`: RMSNorm, rotary
positions, grouped key/value heads). Other models take a batched pass with the prefix's key/value cache
repeated (:func:`_batched_forward`) or the plain scoring pass.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from transformers import GPT2LMHeadModel, PreTrainedModel
from transformers.models.llama.modeling_llama import rotate_half

from ..core.progress import progress_bar
from ..models.batching import encode, token_ids
from ..models.decoders import decoder_and_head
from ..models.device import current, model_device, oom_as_error, use_policy
from ..models.handle import ModelHandle


def continuation_ids(handle: ModelHandle, prefix: str, continuations: list[str]) -> tuple[list[int], list[list[int]]]:
    """Token ids of ``<lead> prefix`` (the handle's text format) and of each continuation, tokenised separately."""
    tok = handle.tokenizer
    p_ids = handle.lead_ids() + tok(prefix, add_special_tokens=False)["input_ids"]
    conts = token_ids(tok, continuations)
    longest = len(p_ids) + max((len(c) for c in conts), default=0)
    if longest > handle.max_length:
        raise ValueError(f"canary of {longest} tokens exceeds the model's context of {handle.max_length}; shorten the frame")
    return p_ids, conts


@dataclass
class _Trie:
    """The continuations' token sequences merged on shared leading tokens.

    Node 0 is the root (the last prefix token); every other node is one
    distinct token path, numbered depth by depth. ``path[c, j]`` is the node
    continuation c reaches with its token j (−1 past its end), so Σ_j
    log p(node path[c, j]) is the continuation's log-likelihood.
    """

    parent: np.ndarray  # (n_nodes,) parent node, −1 for the root
    token: np.ndarray  # (n_nodes,) token on the edge into the node
    depth: np.ndarray  # (n_nodes,) 0 for the root
    path: np.ndarray  # (n_continuations, longest)

    @classmethod
    def build(cls, seqs: list[list[int]]) -> _Trie:
        lengths = np.array([len(s) for s in seqs], dtype=np.int64)
        longest = int(lengths.max(initial=0))
        grid = np.zeros((len(seqs), longest), dtype=np.int64)
        for r, s in enumerate(seqs):
            grid[r, : len(s)] = s
        base = int(grid.max(initial=0)) + 1
        path = np.full((len(seqs), longest), -1, dtype=np.int64)
        parent, token, depth = [np.array([-1])], [np.array([-1])], [np.array([0])]
        at = np.zeros(len(seqs), dtype=np.int64)  # every continuation starts at the root
        n_nodes = 1
        for j in range(longest):
            alive = lengths > j
            # One node per distinct (parent node, token) pair.
            keys, inverse = np.unique(at[alive] * base + grid[alive, j], return_inverse=True)
            ids = n_nodes + np.arange(len(keys))
            parent.append(keys // base)
            token.append(keys % base)
            depth.append(np.full(len(keys), j + 1))
            at[alive] = ids[inverse.reshape(-1)]
            path[alive, j] = at[alive]
            n_nodes += len(keys)
        return cls(np.concatenate(parent), np.concatenate(token), np.concatenate(depth), path)

    def sums(self, node_logp: np.ndarray) -> np.ndarray:
        """Σ over each continuation's path of the per-node log p, in float64."""
        if self.path.shape[1] == 0:
            return np.zeros(len(self.path), dtype=np.float64)
        vals = node_logp.astype(np.float64)[np.maximum(self.path, 0)]
        return np.where(self.path >= 0, vals, 0.0).sum(axis=1)


#: ``…ForCausalLM`` classes whose decoder layer is Llama's — pre-RMSNorm, q/k/v projections, rotary positions
#: on q and k, grouped key/value heads, o_proj, post-RMSNorm and an MLP — so :func:`_llama_chunk_hidden` is
#: their forward pass. Mistral's sliding window is wider than any canary; Qwen3 (q/k norms) is not here.
_LLAMA_LIKE = frozenset({"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM"})


def _prefix_pass(model: PreTrainedModel, p_ids: list[int]) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
    """Final hidden states (after the final norm) of every prefix token, (P, width), and every layer's prefix
    keys/values (heads, P, hd) as the cache holds them (for the Llama family: after the rotary, key/value heads)."""
    ids = torch.tensor([p_ids], device=model_device(model))
    decoder = model.transformer if isinstance(model, GPT2LMHeadModel) else model.model
    out = decoder(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=True)
    cache = out.past_key_values
    layers = [(layer.keys[0], layer.values[0]) for layer in cache.layers] if hasattr(cache, "layers") else [(k[0], v[0]) for k, v in cache]
    return out.last_hidden_state[0], layers  # both decoders apply their final norm


def _tree_supported(model: PreTrainedModel) -> bool:
    """Whether :func:`_tree_forward` reproduces ``model``'s forward pass: a float32 GPT-2, or a float32 model of
    :data:`_LLAMA_LIKE` (a PEFT wrapper is not: its adapters would have to be walked too)."""
    cfg = model.config
    if next(model.parameters()).dtype != torch.float32:
        return False
    if isinstance(model, GPT2LMHeadModel):
        return not getattr(cfg, "add_cross_attention", False)
    return type(model).__name__ in _LLAMA_LIKE and getattr(cfg, "model_type", None) in {"llama", "mistral", "qwen2"}


def _attention_scale(attn: torch.nn.Module, layer_idx: int) -> float:
    scaling = getattr(attn, "scaling", None)
    if scaling is not None:
        return float(scaling)
    scale = attn.head_dim**-0.5 if attn.scale_attn_weights else 1.0
    return scale / (layer_idx + 1) if attn.scale_attn_by_inverse_layer_idx else scale


def _ancestor_rows(trie: _Trie, row_of: np.ndarray, ids: np.ndarray, d: int) -> np.ndarray:
    """(len(ids), d) cache rows of each node's ancestors at depths 1..d−1, then the node itself."""
    rows = np.empty((len(ids), d), dtype=np.int64)
    cur = ids
    for k in range(d - 1, -1, -1):
        rows[:, k] = row_of[cur]
        cur = trie.parent[cur]
    return rows


def _tree_attention(
    q: torch.Tensor, prefix: tuple[torch.Tensor, torch.Tensor], keys: torch.Tensor, values: torch.Tensor, scale: float
) -> torch.Tensor:
    """softmax(q·[K_prefix; K_path] · scale) [V_prefix; V_path] for one query per node.

    q (n, H, hd); prefix K/V (H, P, hd), shared by all nodes; keys/values
    (n, d, H, hd), the node's own path through the trie (itself last). The
    same causal attention a full forward pass over ``prefix + path`` does.
    """
    kp, vp = prefix
    n_prefix = kp.shape[1]
    s_prefix = torch.matmul(q.transpose(0, 1), kp.transpose(1, 2)).permute(1, 0, 2)  # (n, H, P)
    # A path is a few keys per node: multiply-and-sum beats n·H tiny matmuls.
    s_path = (keys * q.unsqueeze(1)).sum(-1).transpose(1, 2)  # (n, H, d)
    w = torch.softmax(torch.cat([s_prefix, s_path], dim=-1) * scale, dim=-1)
    out = torch.matmul(w[..., :n_prefix].transpose(0, 1), vp).transpose(0, 1)  # (n, H, hd)
    return out + (w[..., n_prefix:].transpose(1, 2).unsqueeze(-1) * values).sum(1)


def _grouped_tree_attention(
    q: torch.Tensor, prefix: tuple[torch.Tensor, torch.Tensor], keys: torch.Tensor, values: torch.Tensor, scale: float
) -> torch.Tensor:
    """:func:`_tree_attention` with grouped key/value heads, never repeated: (n, heads, hd) out.

    q (n, n_kv, groups, hd), query head h = kv·groups + g reading key/value head kv (``repeat_kv``'s order);
    prefix K/V (n_kv, P, hd); keys/values (n, d, n_kv, hd). Batched matrix products per (node, key head)
    instead of the (n, d, heads, hd) products a repeat would materialise.
    """
    kp, vp = prefix
    n, n_kv, groups, hd = q.shape
    n_prefix = kp.shape[1]
    qk = q.permute(1, 0, 2, 3).reshape(n_kv, n * groups, hd)
    s_prefix = torch.matmul(qk, kp.transpose(1, 2)).view(n_kv, n, groups, n_prefix).permute(1, 0, 2, 3)
    k_path = keys.permute(0, 2, 3, 1)  # (n, n_kv, hd, d)
    s_path = torch.matmul(q, k_path)  # (n, n_kv, groups, d)
    w = torch.softmax(torch.cat([s_prefix, s_path], dim=-1) * scale, dim=-1)
    w_prefix = w[..., :n_prefix].permute(1, 0, 2, 3).reshape(n_kv, n * groups, n_prefix)
    out = torch.matmul(w_prefix, vp).view(n_kv, n, groups, hd).permute(1, 0, 2, 3)
    out = out + torch.matmul(w[..., n_prefix:], values.permute(0, 2, 1, 3))
    return out.reshape(n, n_kv * groups, hd)


def _children_logp(
    trie: _Trie, model: PreTrainedModel, hidden: torch.Tensor, ids: np.ndarray, node_logp: np.ndarray, rows: int = 1024
) -> None:
    """log p of every child of the nodes ``ids`` (ascending), from their final hidden states.

    log p = logit − logsumexp(logits): log_softmax's value at the child's
    token. Logits are made ``rows`` nodes at a time so the (rows, vocab)
    block stays in cache for the logsumexp, and never all at once.
    """
    # Nodes are numbered depth by depth in (parent, token) order, so
    # ``parent`` is sorted and the children of ids[0]..ids[-1] are one slice;
    # every parent in that slice is in ids (a chunk holds all nodes with
    # children between its ends).
    lo, hi = np.searchsorted(trie.parent, [ids[0], ids[-1] + 1], side="left")
    if lo == hi:
        return
    kids = np.arange(lo, hi)
    local = np.searchsorted(ids, trie.parent[kids])
    picked = np.empty(len(kids), dtype=np.float32)
    bounds = np.searchsorted(local, np.arange(0, len(ids) + rows, rows))
    for r0, k0, k1 in zip(range(0, len(ids), rows), bounds[:-1], bounds[1:]):
        if k0 == k1:
            continue
        logits = model.lm_head(hidden[r0 : r0 + rows]).float()
        at = torch.from_numpy(local[k0:k1] - r0).to(logits.device)
        lse = torch.logsumexp(logits, dim=-1)
        tok = torch.from_numpy(trie.token[kids[k0:k1]]).to(logits.device)
        picked[k0:k1] = (logits[at, tok] - lse[at]).cpu().numpy()
    node_logp[kids] = picked


def _chunk_hidden(
    model: GPT2LMHeadModel,
    tokens: np.ndarray,
    position: int,
    rows: np.ndarray,
    store: list[tuple[torch.Tensor, torch.Tensor]],
    prefix_kv: list[tuple[torch.Tensor, torch.Tensor]],
) -> torch.Tensor:
    """Final hidden states (after ln_f) of one chunk of same-depth trie nodes.

    ``rows`` (n, d): cache rows of each node's path, itself last; a chunk's
    own rows are consecutive. Writes the chunk's keys/values into ``store``.
    """
    tr = model.transformer
    n, d = rows.shape
    heads = tr.h[0].attn.num_heads
    width = tr.embed_dim // heads
    own = slice(int(rows[0, -1]), int(rows[0, -1]) + n)
    dev = model_device(model)
    path = torch.from_numpy(rows.reshape(-1)).to(dev)
    # The first block's input depends only on (token, position): run its
    # ln_1 + q/k/v projection once per distinct token of the chunk.
    uniq, inverse = np.unique(tokens, return_inverse=True)
    inverse = torch.from_numpy(inverse.reshape(-1)).to(dev)
    x_uniq = tr.wte(torch.from_numpy(uniq).to(dev)) + tr.wpe.weight[position]
    x = x_uniq.index_select(0, inverse)
    qkv = tr.h[0].attn.c_attn(tr.h[0].ln_1(x_uniq)).index_select(0, inverse)
    for i, (block, (ks, vs), kv) in enumerate(zip(tr.h, store, prefix_kv)):
        if i:
            qkv = block.attn.c_attn(block.ln_1(x))
        q, k, v = qkv.view(n, 3, heads, width).unbind(1)
        ks[own], vs[own] = k, v
        path_k = ks.index_select(0, path).view(n, d, heads, width)
        path_v = vs.index_select(0, path).view(n, d, heads, width)
        att = _tree_attention(q, kv, path_k, path_v, _attention_scale(block.attn, i))
        x = x + block.attn.c_proj(att.reshape(n, -1))
        x = x + block.mlp(block.ln_2(x))
    return tr.ln_f(x)


def _llama_chunk_hidden(
    model: PreTrainedModel,
    tokens: np.ndarray,
    position: int,
    rows: np.ndarray,
    store: list[tuple[torch.Tensor, torch.Tensor]],
    prefix_kv: list[tuple[torch.Tensor, torch.Tensor]],
) -> torch.Tensor:
    """:func:`_chunk_hidden` for the Llama family: the same one-query-per-node pass through Llama's blocks.

    A node's query and key take the rotary of its position (one position per chunk, so one cos/sin pair);
    keys are stored after the rotary, as the cache stores the prefix's; each of the ``n_kv`` stored key/value
    heads serves ``heads / n_kv`` query heads (``repeat_kv``'s order: query head h reads key head h // groups).
    """
    dec = model.model
    n, d = rows.shape
    own = slice(int(rows[0, -1]), int(rows[0, -1]) + n)
    dev = model_device(model)
    path = torch.from_numpy(rows.reshape(-1)).to(dev)
    x = dec.embed_tokens(torch.from_numpy(np.ascontiguousarray(tokens)).to(dev))
    cos, sin = dec.rotary_emb(x, torch.tensor([[position]], device=dev))
    cos, sin = cos[0].to(x.dtype), sin[0].to(x.dtype)  # (1, hd): broadcast over (n, heads, hd)
    for layer, (ks, vs), (kp, vp) in zip(dec.layers, store, prefix_kv):
        attn = layer.self_attn
        hd, groups = attn.head_dim, attn.num_key_value_groups
        h = layer.input_layernorm(x)
        q = attn.q_proj(h).view(n, -1, hd)
        k = attn.k_proj(h).view(n, -1, hd)
        q = q * cos + rotate_half(q) * sin
        ks[own], vs[own] = k * cos + rotate_half(k) * sin, attn.v_proj(h).view(n, -1, hd)
        n_kv = ks.shape[1]
        path_k = ks.index_select(0, path).view(n, d, n_kv, hd)
        path_v = vs.index_select(0, path).view(n, d, n_kv, hd)
        att = _grouped_tree_attention(q.view(n, n_kv, groups, hd), (kp, vp), path_k, path_v, attn.scaling)
        x = x + attn.o_proj(att.reshape(n, -1))
        x = x + layer.mlp(layer.post_attention_layernorm(x))
    return dec.norm(x)


def _tree_forward(model: PreTrainedModel, p_ids: list[int], trie: _Trie, chunk: int,
                  prefix: tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]] | None = None) -> np.ndarray:
    """log p of the edge into every trie node, running each internal node once.

    Depth by depth, a chunk of nodes goes through the blocks with one query
    each, attending to the shared prefix cache and to its own path's cached
    keys/values. Leaves are never run: only their parent's logits are needed.
    ``prefix``: :func:`_prefix_pass` of ``p_ids``, when the caller already ran it.
    """
    node_logp = np.zeros(len(trie.parent), dtype=np.float32)
    prefix_hidden, prefix_kv = prefix if prefix is not None else _prefix_pass(model, p_ids)
    _children_logp(trie, model, prefix_hidden[-1:], np.zeros(1, dtype=np.int64), node_logp)
    has_child = np.zeros(len(trie.parent), dtype=bool)
    has_child[trie.parent[1:]] = True
    has_child[0] = False  # the root is the prefix pass
    inner = np.flatnonzero(has_child)
    row_of = np.full(len(trie.parent), -1, dtype=np.int64)
    row_of[inner] = np.arange(len(inner))
    store = [(torch.empty(len(inner), *k.transpose(0, 1).shape[1:], device=k.device, dtype=k.dtype),
              torch.empty(len(inner), *v.transpose(0, 1).shape[1:], device=v.device, dtype=v.dtype)) for k, v in prefix_kv]
    start_pos = len(p_ids) - 1  # the root's position; depth d sits at start_pos + d
    chunk_hidden = _chunk_hidden if isinstance(model, GPT2LMHeadModel) else _llama_chunk_hidden
    for d in range(1, int(trie.depth.max(initial=0)) + 1):
        level = inner[trie.depth[inner] == d]
        for c0 in range(0, len(level), chunk):
            ids = level[c0 : c0 + chunk]
            rows = _ancestor_rows(trie, row_of, ids, d)
            hidden = chunk_hidden(model, trie.token[ids], start_pos + d, rows, store, prefix_kv)
            _children_logp(trie, model, hidden, ids, node_logp)
    return node_logp


def _batched_forward(model: PreTrainedModel, p_ids: list[int], conts: list[list[int]], batch_size: int, pad_id: int,
                     rows: int = 256) -> np.ndarray:
    """Σ log p of each continuation for any causal LM: the prefix's key/value
    cache repeated over a batch of continuations, every token run.

    The fallback for models :func:`_tree_forward` does not implement. Where
    the logits are ``head(decoder(...))`` (Llama, SmolLM2: a 49,152-token
    head) the head runs on the continuations' real tokens, ``rows`` at a
    time, instead of a (batch, length, vocab) array.
    """
    out = np.zeros(len(conts), dtype=np.float64)
    head, last = p_ids[:-1], p_ids[-1]
    for b0 in range(0, len(conts), batch_size):
        chunk = conts[b0 : b0 + batch_size]
        width = max(len(c) for c in chunk)
        bsz = len(chunk)
        # Feed the last prefix token with each continuation so logits at
        # position j predict continuation token j.
        ids_np = np.full((bsz, width + 1), pad_id, dtype=np.int64)
        mask_np = np.zeros((bsz, width + 1), dtype=np.int64)
        ids_np[:, 0], mask_np[:, 0] = last, 1
        for r, c in enumerate(chunk):
            ids_np[r, 1 : 1 + len(c)] = c
            mask_np[r, 1 : 1 + len(c)] = 1
        dev = model_device(model)
        ids, mask = torch.from_numpy(ids_np).to(dev), torch.from_numpy(mask_np).to(dev)
        if head:
            cache = model(input_ids=torch.tensor([head], device=dev), use_cache=True).past_key_values
            cache.batch_repeat_interleave(bsz)
            full_mask = torch.cat([torch.ones((bsz, len(head)), dtype=torch.long, device=dev), mask], dim=1)
        else:
            cache, full_mask = None, mask
        pos = torch.arange(len(head), len(head) + width + 1, device=dev).unsqueeze(0).expand(bsz, -1)
        kwargs = dict(input_ids=ids, attention_mask=full_mask, position_ids=pos, past_key_values=cache,
                      use_cache=cache is not None)
        split = decoder_and_head(model)
        if split is not None:  # the head on the real continuation tokens alone, `rows` at a time (scoring's way)
            decoder, lm_head = split
            keep = mask[:, 1:].bool()
            hidden = decoder(**kwargs).last_hidden_state[:, :-1][keep]
            target = ids[:, 1:][keep]
            tok = torch.cat([_token_logp(lm_head(hidden[r : r + rows]).float(), target[r : r + rows])
                             for r in range(0, len(target), rows)]) if len(target) else hidden.new_zeros(0)
            sums = torch.zeros(bsz, dtype=torch.float64, device=dev).index_add(0, keep.nonzero()[:, 0], tok.double())
            out[b0 : b0 + bsz] = sums.cpu().numpy()
            continue
        logits = model(**kwargs).logits[:, :-1].float()
        target = ids[:, 1:].unsqueeze(-1)
        logp = (logits.gather(-1, target).squeeze(-1) - torch.logsumexp(logits, dim=-1)) * mask[:, 1:]
        out[b0 : b0 + bsz] = logp.double().sum(1).cpu().numpy()
    return out


def _token_logp(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """log p of each row's target: the logit minus the row's logsumexp (log_softmax's value there)."""
    return logits.gather(-1, target.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)


@torch.inference_mode()
def continuation_loglik(
    handle: ModelHandle, prefix: str, continuations: list[str], batch_size: int = 4096, tree: bool | None = None
) -> np.ndarray:
    """Σ_j log p(c_j | <start> prefix c_<j) for each continuation c.

    Continuations are merged into a token trie (they share leading tokens,
    e.g. a secret's first digits), and each distinct (path, next token) pair
    is scored once: the same sums as a full forward pass per continuation.
    ``batch_size`` bounds the trie nodes (in the fallback, continuations,
    at most 1024) run at once; ``tree=False`` forces the per-continuation fallback that
    non-GPT-2 models use.
    """
    model = handle.model
    p_ids, conts = continuation_ids(handle, prefix, continuations)
    if not conts:
        return np.zeros(0, dtype=np.float64)
    if tree is None:
        tree = _tree_supported(model)
    # fp32 on every device (no autocast): a canary's rank among 10⁴–10⁵ candidates turns on log-likelihood
    # differences that bf16's 8-bit mantissa would round into ties.
    with oom_as_error("ranking canary candidates", "canaries.candidates"):
        if not tree:
            # The fallback holds (batch, length, vocab) logits: keep its batches at most 1024.
            return _batched_forward(model, p_ids, conts, min(batch_size, 1024), handle.pad_id)
        trie = _Trie.build(conts)
        return trie.sums(_tree_forward(model, p_ids, trie, batch_size))


def _prefix_logp_sum(model: PreTrainedModel, hidden: torch.Tensor, p_ids: list[int]) -> float:
    """Σ log p(p_ids[t] | p_ids[<t]) for t ≥ 1, from the prefix pass's final hidden states."""
    if len(p_ids) < 2:
        return 0.0
    logits = model.lm_head(hidden[:-1]).float()
    target = torch.tensor(p_ids[1:], device=logits.device)
    logp = logits.gather(-1, target.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)
    return float(logp.double().sum())


def _common_length(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for k in range(n):
        if a[k] != b[k]:
            return k
    return n


#: Texts a call of :func:`shared_prefix_nll` needs for its trie pass; narrower calls run dense.
MIN_TREE_TEXTS = 32


@torch.inference_mode()
def shared_prefix_nll(handle: ModelHandle, texts: Sequence[str], max_nodes: int = 60_000,
                      desc: str = "scoring", groups: Sequence[Sequence[int]] | None = None) -> np.ndarray:
    """NLL(x) = mean token −log p, for every text — exactly what ``score_texts(handle, texts).nll()`` gives,
    to float tolerance — with every shared token prefix run once.

    The texts are framed as the scoring pass frames them (the handle's text format) and scored call by call:
    a call's texts (one of ``groups``, e.g. the windows of one PII slot — by default all texts —, cut where
    the first token changes or past ``max_nodes`` tokens) share their longest common token prefix, which
    runs once as a dense prefix pass (its own log p counted once for every text), and the rest of each text
    merges into a trie below it, every distinct path one node. Keeping the shared prefix out of the trie
    keeps the trie's paths short (each node attends to its path one key at a time). A call of fewer than
    :data:`MIN_TREE_TEXTS` texts, and every call on a model the tree pass does not implement, goes through the
    plain scoring pass, in fp32 as the trie whatever the compute policy.
    """
    from .scoring import score_texts

    def dense(some: list[str]) -> np.ndarray:  # the plain pass, fp32 as the trie whatever the policy
        with use_policy(dataclasses.replace(current(), precision="fp32")):
            return score_texts(handle, some, desc=desc, moments=False).nll()

    model = handle.model
    texts = list(texts)
    if not texts:
        return np.zeros(0)
    enc = encode(handle.tokenizer, texts, handle.max_length, handle.text_format)
    if any(len(ids) == 0 for ids in enc.ids) or not _tree_supported(model):
        return dense(texts)
    ids = enc.ids
    out = np.zeros(len(texts), dtype=np.float64)
    calls: list[list[int]] = []
    for group in (groups if groups is not None else [range(len(texts))]):
        # In sorted order, texts sharing a prefix are neighbours, and a call's common prefix is that of its
        # first and last text.
        tokens = 0
        for k, i in enumerate(sorted(group, key=lambda i: ids[i])):
            n = len(ids[i]) - 1
            if k == 0 or tokens + n > max_nodes or ids[calls[-1][0]][0] != ids[i][0]:
                calls.append([])
                tokens = 0
            calls[-1].append(i)
            tokens += n
    # A narrow call's trie has a few rows per depth level, and each level is a pass through every layer: there
    # the dense pass over its texts, batched with the other narrow calls', is the faster (SmolLM2, one thread:
    # PII inference's 40 slots of 10 windows took 94.6 s in the trie against 35.6 s dense; 8 slots of 45 windows
    # 19.5 s against 26.0). Dense in fp32, as the trie is, whatever the policy.
    narrow = [i for idx in calls if len(idx) < MIN_TREE_TEXTS for i in idx]
    calls = [idx for idx in calls if len(idx) >= MIN_TREE_TEXTS]
    if narrow:
        out[narrow] = dense([texts[i] for i in narrow])
    with progress_bar(desc, total=len(texts) - len(narrow)) as advance, oom_as_error(desc, "attacks.pii_sizes"):
        for idx in calls:
            shared = max(1, _common_length(ids[idx[0]], ids[idx[-1]]))
            p_ids = list(ids[idx[0]][:shared])
            prefix = _prefix_pass(model, p_ids)
            trie = _Trie.build([list(ids[i][shared:]) for i in idx])
            sums = trie.sums(_tree_forward(model, p_ids, trie, 4096, prefix)) + _prefix_logp_sum(model, prefix[0], p_ids)
            counts = np.array([max(1, len(ids[i]) - 1) for i in idx], dtype=np.float64)
            out[idx] = -sums / counts
            advance(len(idx))
    return out
