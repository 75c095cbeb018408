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
from dataclasses import asdict, dataclass

import numpy as np
import torch
from scipy import stats

from ..data.canaries import Canary, sample_candidates
from ..models.handle import ModelHandle
from ..progress import progress_bar


@dataclass(frozen=True)
class CanaryExposure:
    canary_id: str
    repeats: int
    exposure: float
    max_exposure: float
    rank: float
    n_candidates: int
    exposure_extrapolated: float

    def to_json(self) -> dict:
        return asdict(self)


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


@torch.inference_mode()
def continuation_loglik(handle: ModelHandle, prefix: str, continuations: list[str], batch_size: int = 1024) -> np.ndarray:
    """Σ log p(continuation tokens | prefix) for each continuation.

    The prefix is run once per batch and its key/value cache repeated over the
    batch, so each candidate costs only its own few tokens.
    """
    tok = handle.tokenizer
    model = handle.model
    start = tok.eos_token_id if tok.eos_token_id is not None else tok.bos_token_id
    p_ids = ([start] if start is not None else []) + tok(prefix, add_special_tokens=False)["input_ids"]
    conts = tok(continuations, add_special_tokens=False)["input_ids"]
    out = np.zeros(len(conts), dtype=np.float64)
    head, last = p_ids[:-1], p_ids[-1]
    longest = len(p_ids) + max((len(c) for c in conts), default=0)
    if longest > handle.max_length:
        raise ValueError(f"canary of {longest} tokens exceeds the model's context of {handle.max_length}; shorten the frame")
    for b0 in range(0, len(conts), batch_size):
        chunk = conts[b0 : b0 + batch_size]
        width = max(len(c) for c in chunk)
        bsz = len(chunk)
        # Feed the last prefix token with each continuation so logits at
        # position j predict continuation token j.
        ids_np = np.full((bsz, width + 1), handle.pad_id, dtype=np.int64)
        mask_np = np.zeros((bsz, width + 1), dtype=np.int64)
        ids_np[:, 0], mask_np[:, 0] = last, 1
        for r, c in enumerate(chunk):
            ids_np[r, 1 : 1 + len(c)] = c
            mask_np[r, 1 : 1 + len(c)] = 1
        ids, mask = torch.from_numpy(ids_np), torch.from_numpy(mask_np)
        if head:
            cache = model(input_ids=torch.tensor([head]), use_cache=True).past_key_values
            cache.batch_repeat_interleave(bsz)
            full_mask = torch.cat([torch.ones((bsz, len(head)), dtype=torch.long), mask], dim=1)
        else:
            cache, full_mask = None, mask
        pos = torch.arange(len(head), len(head) + width + 1).unsqueeze(0).expand(bsz, -1)
        logits = model(
            input_ids=ids, attention_mask=full_mask, position_ids=pos, past_key_values=cache, use_cache=cache is not None
        ).logits[:, :-1].float()
        # log p = logit − logsumexp: the same value as log_softmax + gather
        # without writing the full (batch, length, vocab) result.
        target = ids[:, 1:].unsqueeze(-1)
        logp = (logits.gather(-1, target).squeeze(-1) - torch.logsumexp(logits, dim=-1)) * mask[:, 1:]
        out[b0 : b0 + bsz] = logp.sum(1).double().numpy()
    return out


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
    handle: ModelHandle, canaries: list[Canary], n_candidates: int = 10_000, seed: int = 0, desc: str = "exposure"
) -> list[CanaryExposure]:
    """Exposure of every canary against ``n_candidates`` − 1 random other secrets (|R| = n_candidates)."""
    if n_candidates < 2:
        raise ValueError("exposure needs at least 2 candidates")
    results = []
    with progress_bar(desc, total=len(canaries)) as advance:
        for k, canary in enumerate(canaries):
            rng = np.random.default_rng([seed, k])
            others = sample_candidates(canary, n_candidates - 1, rng)
            prefix, cont = _split_point(canary)
            conts = [cont] + [canary.text(s)[len(prefix) :] for s in others]
            ll = continuation_loglik(handle, prefix, conts)
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
