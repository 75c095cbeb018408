"""Canary exposure (Carlini et al. 2019, "The Secret Sharer").

For a canary with secret s in a frame, rank s among a candidate set R of
secrets drawn uniformly from the same space (R contains s) by the model's
log-likelihood of the canary continuation:

    exposure(s) = log2 |R| − log2 rank(s)

rank 1 (the model prefers the true secret to every other) gives the maximum
log2 |R|; a model that never saw the canary gives a uniformly random rank,
whose expected exposure is log2|R| − E[log2 U{1..|R|}] ≈ 1/ln 2 ≈ 1.44 bits.

Beyond |R|, exposure is extrapolated as −log2 P(X ≥ x_s) with X the
skew-normal fitted to the candidates' log-likelihoods (Carlini et al. §4.3),
capped at log2 of the whole secret space.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict
from scipy import stats
from transformers import GPT2LMHeadModel, PreTrainedModel

from ..core.progress import progress_bar
from ..core.stats import bootstrap_mean_ci
from ..data.canaries import Canary, sample_candidates
from ..models.batching import token_ids
from ..models.device import model_device, oom_as_error
from ..models.handle import ModelHandle
from ..core.present import Block, Example, Plot, Table, n, num, t
from .base import AttackContext, AttackResult, Figure, Finding, Policy, PresentContext, Runs
from .exposure_stats import exposure_test


class CanaryExposure(BaseModel):
    model_config = ConfigDict(extra="forbid")

    canary_id: str
    repeats: int
    exposure: float
    max_exposure: float
    rank: float
    n_candidates: int
    exposure_extrapolated: float


class ExposureResult(AttackResult):
    """Exposure of every planted canary; ``chance_exposure``: what a model that never saw a canary scores on average."""

    kind: Literal["exposure"] = "exposure"
    title: ClassVar[str] = "canary exposure"

    canaries: list[CanaryExposure]
    chance_exposure: float

    def by_repeats(self) -> dict[int, float]:
        """Mean exposure per repetition count."""
        groups: dict[int, list[float]] = {}
        for c in self.canaries:
            groups.setdefault(c.repeats, []).append(c.exposure)
        return {r: sum(v) / len(v) for r, v in sorted(groups.items())}

    @property
    def mean_exposure(self) -> float | None:
        return sum(c.exposure for c in self.canaries) / len(self.canaries) if self.canaries else None

    @property
    def n_ranked_first(self) -> int:
        return sum(c.rank <= 1 for c in self.canaries)

    @staticmethod
    def _with_canaries(runs: Runs) -> list[tuple[str, ExposureResult]]:
        return [(m, r) for rs in runs.values() for m, r in rs if isinstance(r, ExposureResult) and r.canaries]

    @classmethod
    def present(cls, runs: Runs, ctx: PresentContext) -> list[Block]:
        """Exposure by repetition count: a figure and a table, one row per model."""
        exps = cls._with_canaries(runs)
        if not exps:
            return []
        reps = sorted({c.repeats for _, e in exps for c in e.canaries})
        first = exps[0][1]
        size = first.canaries[0].n_candidates
        series = {m: [(c.repeats, c.exposure) for c in e.canaries] for m, e in exps}
        rows = [[m, *[n(e.by_repeats().get(r), ".2f") for r in reps], t(f"{e.n_ranked_first}/{len(e.canaries)}"),
                 n(max(c.exposure_extrapolated for c in e.canaries), ".1f")] for m, e in exps]
        return [Plot("canary_exposure", (series, first.canaries[0].max_exposure, first.chance_exposure),
                     f"Exposure = log2(candidates) − log2(rank of the true secret among {size:,}). At the red line "
                     "the secret is the model's top guess among the candidates; the dotted line is what a model "
                     "that never saw it scores on average."),
                Table(["model", *[f"{r}×" for r in reps], f"ranked first of {size:,}", "max extrapolated exposure (bits)"],
                      rows, caption="Mean exposure (bits) by repetition count. Extrapolated exposure: the skew-normal "
                                    "tail beyond the candidates (Carlini et al. 2019 §4.3), capped at the secret space.")]

    @classmethod
    def console(cls, runs: Runs, ctx: PresentContext) -> list[Table]:
        exps = cls._with_canaries(runs)
        if not exps:
            return []
        repeats = sorted({c.repeats for _, e in exps for c in e.canaries})
        first = exps[0][1]
        rows = [[m, *[num(e.by_repeats().get(r), ".1f") for r in repeats], f"{e.n_ranked_first}/{len(e.canaries)}"]
                for m, e in exps]
        return [Table(["arm", *[f"{r}×" for r in repeats], "ranked first"], rows,  # type: ignore[list-item]
                      console_title=f"Canary exposure in bits by repetition count (max "
                                    f"{first.canaries[0].max_exposure:.1f}, chance ≈ {first.chance_exposure:.1f}); "
                                    f"secrets ranked first of {first.canaries[0].n_candidates:,}")]

    def scorecard(self) -> list[Figure]:
        if not self.canaries:
            return []
        ci = bootstrap_mean_ci(np.array([c.exposure for c in self.canaries]), 0.05, seed=0)
        return [Figure("mean exposure (bits)", self.mean_exposure, "bits", chance=self.chance_exposure, ci=ci),
                Figure("secrets ranked first", self.n_ranked_first, "count", k=self.n_ranked_first, n=len(self.canaries))]

    def leakage_bits(self) -> float | None:
        return self.mean_exposure

    def quotes(self, ctx: PresentContext) -> list[Example]:
        out = []
        for c in self.canaries:
            if c.rank <= 1:
                text = ctx.canary_text(c.canary_id) or "(canary text not available: render with the run directory)"
                out.append(Example("canary ranked first", ctx.mask(text), c.repeats,
                                   f"rank {c.rank:g} of {c.n_candidates:,}"))
        return out

    def headline(self) -> list[Figure]:
        out = [Figure(f"{r}× (bits)", v, "bits", chance=self.chance_exposure) for r, v in self.by_repeats().items()]
        out.append(Figure("ranked first", self.n_ranked_first, "count", k=self.n_ranked_first, n=len(self.canaries)))
        return out

    def assess(self, attack: str, control: AttackResult | None, policy: Policy) -> Finding:
        """Leaks when :func:`exposure_test` says the planted secrets rank better than chance (and,
        when the control's own ranks are not uniform, better than the control's), at ``policy.alpha``.

        Replaces a fixed "+1 bit over the floor" line on the mean of a dozen canaries, which flipped
        with noise (2.41 vs 2.47 bits for one unchanged arm, issue 26): the verdict is now a test with
        a stated error rate, and the figure carries the mean difference with its interval."""
        if not self.canaries:
            return Finding(attack, None, "")
        ctrl = control if isinstance(control, ExposureResult) and control.canaries else None
        test = exposure_test(self, ctrl, policy.alpha, margin=policy.exposure_margin)
        mexp, n, n_first = self.mean_exposure, len(self.canaries), self.n_ranked_first
        size = self.canaries[0].n_candidates
        lo, hi = test.mean_diff_ci
        figure = (f"canaries: mean exposure {mexp:.2f} bits (chance {self.chance_exposure:.2f}"
                  + (f", control {ctrl.mean_exposure:.2f}" if ctrl else "")
                  + f"), {n_first}/{n} secrets ranked first of {size:,}; {test.mean_diff:+.2f} bits vs "
                  + f"{test.versus} [95% CI {lo:+.2f}, {hi:+.2f}], p = {test.p_chance:.2g} vs chance")
        reason = ""
        if test.leaks and n_first:
            reps = sorted({c.repeats for c in self.canaries if c.rank <= 1})
            first = [c for c in self.canaries if c.rank <= 1]
            ext = sum(c.exposure_extrapolated for c in first) / len(first)
            reason = (f"{n_first} of {n} planted secrets rank first among {size:,} sampled candidates (repeated "
                      f"{', '.join(map(str, reps))}× in training); extrapolated over the whole secret space their "
                      f"exposure is {ext:.1f} bits on average — measured ranks, not a recovery: greedy canary "
                      "extraction says whether the model also generates them")
        elif test.leaks:
            reason = (f"planted secrets rank better than chance (mean exposure {mexp:.2f} bits, "
                      f"{test.mean_diff:+.2f} vs {test.versus}; p = {test.p_chance:.2g})")
        return Finding(attack, test.leaks, figure, reason, p_leak=test.p_leak, equivalence=test.equivalence,
                       items="canaries",
                       margin=f"mean exposure within ±{policy.exposure_margin:g} bit of "
                              + ("the control's" if test.versus == "control" else "a uniform rank's"))


def chance_exposure(n_candidates: int) -> float:
    """Expected exposure of a secret whose rank is uniform on 1..|R|."""
    ranks = np.arange(1, n_candidates + 1, dtype=np.float64)
    return float(math.log2(n_candidates) - np.log2(ranks).mean())


def exposure_from_rank(rank: float, n_candidates: int) -> float:
    return math.log2(n_candidates) - math.log2(rank)


def _split_point(canary: Canary) -> tuple[str, str]:
    """Prefix without trailing space, and the continuation that carries the secret.

    Byte-level BPE attaches a space to the word after it, so splitting
    before the space tokenizes prefix and continuation exactly as the whole
    training text was tokenized.
    """
    prefix = canary.prefix.rstrip()
    return prefix, canary.text()[len(prefix) :]


def _continuation_ids(handle: ModelHandle, prefix: str, continuations: list[str]) -> tuple[list[int], list[list[int]]]:
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


def _prefix_pass(model: PreTrainedModel, p_ids: list[int]) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
    """Final hidden state (after ln_f) of the last prefix token, and every layer's prefix keys/values (H, P, hd)."""
    ids = torch.tensor([p_ids], device=model_device(model))
    out = model.transformer(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=True)
    cache = out.past_key_values
    layers = [(layer.keys[0], layer.values[0]) for layer in cache.layers] if hasattr(cache, "layers") else [(k[0], v[0]) for k, v in cache]
    return out.last_hidden_state[0, -1:], layers  # GPT2Model applies ln_f


def _tree_supported(model: PreTrainedModel) -> bool:
    """Whether :func:`_tree_forward` reproduces ``model``'s forward pass (plain float32 GPT-2)."""
    cfg = model.config
    return (
        isinstance(model, GPT2LMHeadModel)
        and not getattr(cfg, "add_cross_attention", False)
        and next(model.parameters()).dtype == torch.float32
    )


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


def _tree_forward(model: GPT2LMHeadModel, p_ids: list[int], trie: _Trie, chunk: int) -> np.ndarray:
    """log p of the edge into every trie node, running each internal node once.

    Depth by depth, a chunk of nodes goes through the blocks with one query
    each, attending to the shared prefix cache and to its own path's cached
    keys/values. Leaves are never run: only their parent's logits are needed.
    """
    node_logp = np.zeros(len(trie.parent), dtype=np.float32)
    root_hidden, prefix_kv = _prefix_pass(model, p_ids)
    _children_logp(trie, model, root_hidden, np.zeros(1, dtype=np.int64), node_logp)
    has_child = np.zeros(len(trie.parent), dtype=bool)
    has_child[trie.parent[1:]] = True
    has_child[0] = False  # the root is the prefix pass
    inner = np.flatnonzero(has_child)
    row_of = np.full(len(trie.parent), -1, dtype=np.int64)
    row_of[inner] = np.arange(len(inner))
    store = [(torch.empty(len(inner), *k.transpose(0, 1).shape[1:], device=k.device),
              torch.empty(len(inner), *v.transpose(0, 1).shape[1:], device=v.device)) for k, v in prefix_kv]
    start_pos = len(p_ids) - 1  # the root's position; depth d sits at start_pos + d
    for d in range(1, int(trie.depth.max(initial=0)) + 1):
        level = inner[trie.depth[inner] == d]
        for c0 in range(0, len(level), chunk):
            ids = level[c0 : c0 + chunk]
            rows = _ancestor_rows(trie, row_of, ids, d)
            hidden = _chunk_hidden(model, trie.token[ids], start_pos + d, rows, store, prefix_kv)
            _children_logp(trie, model, hidden, ids, node_logp)
    return node_logp


def _batched_forward(model: PreTrainedModel, p_ids: list[int], conts: list[list[int]], batch_size: int, pad_id: int) -> np.ndarray:
    """Σ log p of each continuation for any causal LM: the prefix's key/value
    cache repeated over a batch of continuations, every token run.

    The fallback for models :func:`_tree_forward` does not implement.
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
        logits = model(
            input_ids=ids, attention_mask=full_mask, position_ids=pos, past_key_values=cache, use_cache=cache is not None
        ).logits[:, :-1].float()
        target = ids[:, 1:].unsqueeze(-1)
        logp = (logits.gather(-1, target).squeeze(-1) - torch.logsumexp(logits, dim=-1)) * mask[:, 1:]
        out[b0 : b0 + bsz] = logp.double().sum(1).cpu().numpy()
    return out


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
    p_ids, conts = _continuation_ids(handle, prefix, continuations)
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


def _extrapolated(true_ll: float, cand_ll: np.ndarray, space_size: int) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a, loc, scale = stats.skewnorm.fit(cand_ll)
        tail = float(stats.skewnorm.sf(true_ll, a, loc, scale))
    cap = math.log2(space_size)
    if tail <= 0.0:
        return cap
    return float(min(cap, max(0.0, -math.log2(tail))))


def canary_exposure(
    handle: ModelHandle, canaries: list[Canary], n_candidates: int = 10_000, seed: int = 0, desc: str = "exposure",
    tree: bool | None = None,
) -> list[CanaryExposure]:
    """Exposure of every canary against ``n_candidates`` − 1 random other secrets (|R| = n_candidates).

    ``tree``: as in :func:`continuation_loglik` (``False`` forces the per-candidate pass).
    """
    if n_candidates < 2:
        raise ValueError("exposure needs at least 2 candidates")
    results = []
    with progress_bar(desc, total=len(canaries)) as advance:
        for k, canary in enumerate(canaries):
            rng = np.random.default_rng([seed, k])
            others = sample_candidates(canary, n_candidates - 1, rng)
            prefix, cont = _split_point(canary)
            conts = [cont] + [canary.text(s)[len(prefix) :] for s in others]
            ll = continuation_loglik(handle, prefix, conts, tree=tree)
            true_ll, cand = ll[0], ll[1:]
            # Mid-rank for exact ties: neither side of a tie is favoured.
            rank = 1.0 + float((cand > true_ll).sum()) + 0.5 * float((cand == true_ll).sum())
            results.append(
                CanaryExposure(
                    canary_id=canary.canary_id,
                    repeats=canary.repeats,
                    exposure=exposure_from_rank(rank, n_candidates),
                    max_exposure=math.log2(n_candidates),
                    rank=rank,
                    n_candidates=n_candidates,
                    exposure_extrapolated=_extrapolated(true_ll, cand, canary.space_size()),
                )
            )
            advance(1)
    return results


def exposure(target: ModelHandle, ctx: AttackContext) -> ExposureResult:
    """The registered attack: every canary against ``canary_candidates`` candidates."""
    n = ctx.settings.canary_candidates
    return ExposureResult(canaries=canary_exposure(target, ctx.canaries, n_candidates=n, seed=ctx.seed,
                                                   desc=f"exposure {target.name}".strip()),
                          chance_exposure=chance_exposure(n))
