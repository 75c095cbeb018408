"""The one batched scoring pass every score-based attack reads from.

For each (model, text set) it keeps, per text and per predicted token t:

* ``logprob``  log p(x_t | x_<t)
* ``mu``       μ_t  = Σ_v p_v log p_v            (min-k%++, Zhang et al. 2024)
* ``var``      σ_t² = Σ_v p_v (log p_v)² − μ_t²

so LOSS, zlib, min-k%, min-k%++ and reference attacks cost one forward
pass. Texts are sorted by length and batched up to a token budget (little
padding), run under ``torch.inference_mode``, and the result is cached as a
flat ``.npz`` (no pickle) with per-text offsets.

μ and σ² cost a softmax and two vocabulary-wide sums per token (a fifth of
the embedded model's pass); only min-k%++ reads them, on the members and
non-members, so a pass whose texts no min-k%++ score reads (population,
held-out public text, PII windows, sampled texts) asks for ``moments=False``
and gets log p alone, through ``logsumexp``: the same log p.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from transformers import PreTrainedModel

from ..core.io import atomic_path
from ..core.progress import progress_bar
from ..models.batching import encode, pad_batch, position_ids_for
from ..models.decoders import decoder_and_head
from ..models.device import (activation_bytes_per_token, autocast, evaluation_model, model_device, oom_as_error,
                             token_budget)
from ..models.handle import ModelHandle


@dataclass
class TokenScores:
    """Flat per-token arrays; text i owns ``[offsets[i], offsets[i+1])``."""

    logprob: np.ndarray
    mu: np.ndarray  # empty when the pass ran without moments (``has_moments``)
    var: np.ndarray
    offsets: np.ndarray

    @property
    def has_moments(self) -> bool:
        return len(self.mu) == len(self.logprob)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def tokens(self, i: int) -> slice:
        return slice(int(self.offsets[i]), int(self.offsets[i + 1]))

    def nll(self) -> np.ndarray:
        """NLL(x) = mean over tokens of −log p(x_t | x_<t), one value per text."""
        # Cumulative sums, not reduceat: a text can have no predicted token (one token, nothing before it, in the
        # plain format of a tokenizer that adds no BOS), and reduceat misreads empty segments.
        cum = np.concatenate([[0.0], np.cumsum(self.logprob.astype(np.float64))])
        sums = cum[self.offsets[1:]] - cum[self.offsets[:-1]]
        counts = np.diff(self.offsets)
        return -sums / np.maximum(counts, 1)

    def save(self, path: str | os.PathLike[str], key: str = "") -> None:
        """Write a flat ``.npz`` (no pickle), atomically; ``key`` names what the scores are of (see :func:`cached_scores`)."""
        with atomic_path(path, suffix=".npz") as tmp:
            np.savez(tmp, logprob=self.logprob, mu=self.mu, var=self.var, offsets=self.offsets, key=np.array(key))

    @classmethod
    def load(cls, path: str | os.PathLike[str], key: str | None = None) -> "TokenScores | None":
        """The scores at ``path``; with ``key``, None unless they were saved under that key."""
        with np.load(path, allow_pickle=False) as z:
            if key is not None and ("key" not in z or str(z["key"]) != key):
                return None
            return cls(logprob=z["logprob"], mu=z["mu"], var=z["var"], offsets=z["offsets"])


def _batches_by_length(lengths: list[int], max_tokens: int) -> list[list[int]]:
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches, cur, width = [], [], 0
    for i in order:
        w = max(width, lengths[i])
        if cur and w * (len(cur) + 1) > max_tokens:
            batches.append(cur)
            cur, w = [], lengths[i]
        cur.append(i)
        width = w
    if cur:
        batches.append(cur)
    return batches


def _vocab_moments(logits: torch.Tensor, target: torch.Tensor, moments: bool = True
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """log p of ``target``, μ = Σ_v p_v log p_v and σ² = Σ_v p_v (log p_v)² − μ² for each row of ``logits``
    (``moments=False``: log p only, μ and σ² empty)."""
    if not moments:
        logits = logits.float()
        tok = logits.gather(-1, target.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)
        empty = tok.new_zeros(0)
        return tok, empty, empty
    logp = torch.log_softmax(logits.float(), dim=-1)
    p = logp.exp()
    mu = (p * logp).sum(-1)
    var = ((p * logp.square()).sum(-1) - mu.square()).clamp_min(0.0)
    return logp.gather(-1, target.unsqueeze(-1)).squeeze(-1), mu, var


def _flat_token_stats(
    model: PreTrainedModel, ids: torch.Tensor, mask: torch.Tensor, rows: int = 256, moments: bool = True
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-token (log p, μ, σ²) of the real (non-padding) predicted tokens, row-major, for a model whose logits
    are ``head(decoder(...))`` (:func:`~privleak.models.decoders.decoder_and_head`).

    The LM head runs only on positions that predict a real token (no padding,
    no last position), ``rows`` at a time, so the (rows, vocab) logits and
    their log-softmax stay in cache instead of making several passes over a
    (batch, length, vocab) array — on SmolLM2, 8,192 tokens × 49,152 fp32
    logits were 1.6 GB per copy, and the moments made four.
    """
    decoder, head = decoder_and_head(model)
    hidden = decoder(input_ids=ids, attention_mask=mask, position_ids=position_ids_for(mask),
                     use_cache=False).last_hidden_state
    keep = mask[:, 1:].bool()
    hidden = hidden[:, :-1][keep]
    target = ids[:, 1:][keep]
    parts = [_vocab_moments(head(hidden[r : r + rows]), target[r : r + rows], moments)
             for r in range(0, len(target), rows)]
    if not parts:
        empty = torch.zeros(0, device=ids.device)
        return empty, empty, empty
    tok, mu, var = (torch.cat(x) for x in zip(*parts))
    return tok, mu, var


def _generic_token_stats(model: PreTrainedModel, ids: torch.Tensor, mask: torch.Tensor, moments: bool = True
                         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """As :func:`_flat_token_stats` for any causal LM, through its full logits."""
    logits = model(input_ids=ids, attention_mask=mask, position_ids=position_ids_for(mask)).logits[:, :-1]
    keep = mask[:, 1:].bool()
    return _vocab_moments(logits[keep], ids[:, 1:][keep], moments)


@torch.inference_mode()
def score_texts(handle: ModelHandle, texts: list[str], max_tokens: int | None = None, desc: str = "scoring",
                moments: bool = True) -> TokenScores:
    """Run the scoring pass over ``texts`` (see module docstring); ``moments=False``: log p only.

    ``max_tokens`` padded tokens per batch; None: 8192 off CUDA, on CUDA as
    many as the free device memory holds (:mod:`privleak.models.device`).
    """
    enc = encode(handle.tokenizer, texts, handle.max_length, handle.text_format)
    lengths = [len(s) for s in enc.ids]
    n_pred = [max(0, n - 1) for n in lengths]
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(n_pred)
    total = int(offsets[-1])
    out_lp = np.zeros(total, dtype=np.float32)
    out_mu = np.zeros(total if moments else 0, dtype=np.float32)
    out_var = np.zeros(total if moments else 0, dtype=np.float32)
    model = evaluation_model(handle.model)
    model.eval()
    stats = _flat_token_stats if decoder_and_head(model) is not None else _generic_token_stats
    dev = model_device(model)
    if max_tokens is None:
        max_tokens = token_budget(dev, activation_bytes_per_token(model, max(lengths, default=1), training=False), 8192)
    batches = _batches_by_length(lengths, max_tokens)
    with progress_bar(desc, total=len(texts)) as advance, oom_as_error(desc, "compute.memory_fraction"):
        for idx in batches:
            ids, mask = pad_batch([enc.ids[i] for i in idx], handle.pad_id)
            ids, mask = ids.to(dev), mask.to(dev)
            # Real tokens come out row by row, so text idx[j] owns the next n_pred[idx[j]] values.
            with autocast(dev, model=model):
                stats_out = stats(model, ids, mask, moments=moments)
            tok, mu, var = (x.float().cpu().numpy() for x in stats_out)
            at = 0
            for i in idx:
                k = n_pred[i]
                sl = slice(int(offsets[i]), int(offsets[i]) + k)
                out_lp[sl] = tok[at : at + k]
                if moments:
                    out_mu[sl], out_var[sl] = mu[at : at + k], var[at : at + k]
                at += k
            advance(len(idx))
    return TokenScores(logprob=out_lp, mu=out_mu, var=out_var, offsets=offsets)


def cached_scores(handle: ModelHandle, texts: list[str], path: str | os.PathLike[str], key: str,
                  desc: str = "scoring", moments: bool = True) -> TokenScores:
    """Scores from ``path`` when they were saved under ``key``, else computed and saved there.

    ``key`` must name the model and the texts (the pipeline passes the
    model's stage key and the split): a retrained model or a changed split
    never reads stale scores. Saved scores without the moments a caller asks
    for are computed again.
    """
    path = Path(path)
    if path.exists():
        scores = TokenScores.load(path, key)
        if scores is not None and len(scores) == len(texts) and (scores.has_moments or not moments):
            return scores
    scores = score_texts(handle, texts, desc=desc, moments=moments)
    path.parent.mkdir(parents=True, exist_ok=True)
    scores.save(path, key)
    return scores
