"""The one batched scoring pass every score-based attack reads from.

For each (model, text set) it keeps, per text and per predicted token t:

* ``logprob``  log p(x_t | x_<t)
* ``mu``       μ_t  = Σ_v p_v log p_v            (min-k%++, Zhang et al. 2024)
* ``var``      σ_t² = Σ_v p_v (log p_v)² − μ_t²

so LOSS, zlib, min-k%, min-k%++ and reference attacks cost one forward
pass. Texts are sorted by length and batched up to a token budget (little
padding), run under ``torch.inference_mode``, and the result is cached as a
flat ``.npz`` (no pickle) with per-text offsets.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..models.batching import encode, pad_batch, position_ids_for
from ..models.handle import ModelHandle
from ..progress import progress_bar


@dataclass
class TokenScores:
    """Flat per-token arrays; text i owns ``[offsets[i], offsets[i+1])``."""

    logprob: np.ndarray
    mu: np.ndarray
    var: np.ndarray
    offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def tokens(self, i: int) -> slice:
        return slice(int(self.offsets[i]), int(self.offsets[i + 1]))

    def nll(self) -> np.ndarray:
        """NLL(x) = mean over tokens of −log p(x_t | x_<t), one value per text."""
        sums = np.add.reduceat(self.logprob.astype(np.float64), self.offsets[:-1]) if len(self.logprob) else np.zeros(len(self))
        counts = np.diff(self.offsets)
        # reduceat misreads empty segments; texts always have ≥ 1 token (the EOS after BOS).
        return -sums / np.maximum(counts, 1)

    def save(self, path: str | os.PathLike[str]) -> None:
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp.npz")
        np.savez(tmp, logprob=self.logprob, mu=self.mu, var=self.var, offsets=self.offsets)
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "TokenScores":
        with np.load(path, allow_pickle=False) as z:
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


@torch.inference_mode()
def score_texts(handle: ModelHandle, texts: list[str], max_tokens: int = 8192, desc: str = "scoring") -> TokenScores:
    """Run the scoring pass over ``texts`` (see module docstring)."""
    enc = encode(handle.tokenizer, texts, handle.max_length)
    lengths = [len(s) for s in enc.ids]
    n_pred = [max(0, n - 1) for n in lengths]
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(n_pred)
    total = int(offsets[-1])
    out_lp = np.zeros(total, dtype=np.float32)
    out_mu = np.zeros(total, dtype=np.float32)
    out_var = np.zeros(total, dtype=np.float32)
    model = handle.model
    model.eval()
    batches = _batches_by_length(lengths, max_tokens)
    with progress_bar(desc, total=len(texts)) as advance:
        for idx in batches:
            ids, mask = pad_batch([enc.ids[i] for i in idx], handle.pad_id)
            logits = model(input_ids=ids, attention_mask=mask, position_ids=position_ids_for(mask)).logits[:, :-1].float()
            logp = torch.log_softmax(logits, dim=-1)
            p = logp.exp()
            mu = (p * logp).sum(-1)
            var = ((p * logp.square()).sum(-1) - mu.square()).clamp_min(0.0)
            tok = logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
            for row, i in enumerate(idx):
                k = n_pred[i]
                sl = slice(int(offsets[i]), int(offsets[i]) + k)
                out_lp[sl] = tok[row, :k].numpy()
                out_mu[sl] = mu[row, :k].numpy()
                out_var[sl] = var[row, :k].numpy()
            advance(len(idx))
    return TokenScores(logprob=out_lp, mu=out_mu, var=out_var, offsets=offsets)


def cached_scores(handle: ModelHandle, texts: list[str], path: str | os.PathLike[str], desc: str = "scoring") -> TokenScores:
    """Scores from ``path`` when present, else computed and saved there."""
    path = Path(path)
    if path.exists():
        scores = TokenScores.load(path)
        if len(scores) == len(texts):
            return scores
    scores = score_texts(handle, texts, desc=desc)
    path.parent.mkdir(parents=True, exist_ok=True)
    scores.save(path)
    return scores
