"""Scoring throughput: the batched pass ÷ a per-record loop (the PrivAI-Leak way).

Both compute the same per-token log-probabilities on the same texts with the
same model (the embedded architecture, random init — speed does not depend
on the weights). Also times the previous batched pass (full (batch, length,
vocab) logits, kept here as ``full_logits_pass``) against the current one,
which runs the LM head on real positions only, in cache-sized chunks.
Prints records/s of each and, last, the batched ÷ per-record ratio.
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("PRIVLEAK_PROGRESS", "0")

import numpy as np
import torch

from privleak.attacks.scoring import _batches_by_length, score_texts
from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus
from privleak.models.base import BaseModelSpec, build_model
from privleak.models.batching import encode, pad_batch, position_ids_for
from privleak.models.handle import ModelHandle
from privleak.models.tokenizer import train_tokenizer


def per_record(handle: ModelHandle, texts: list[str]) -> list[np.ndarray]:
    out = []
    with torch.inference_mode():
        for ids in encode(handle.tokenizer, texts, handle.max_length).ids:
            x = torch.tensor([ids])
            logp = torch.log_softmax(handle.model(input_ids=x).logits[0, :-1].float(), -1)
            out.append(logp[torch.arange(len(ids) - 1), x[0, 1:]].numpy())
    return out


def full_logits_pass(handle: ModelHandle, texts: list[str], max_tokens: int = 8192) -> list[np.ndarray]:
    """The previous batched pass: log-softmax, μ and σ² over the full (batch, length, vocab) logits."""
    enc = encode(handle.tokenizer, texts, handle.max_length)
    out: list[np.ndarray] = [np.zeros(0)] * len(texts)
    with torch.inference_mode():
        for idx in _batches_by_length([len(s) for s in enc.ids], max_tokens):
            ids, mask = pad_batch([enc.ids[i] for i in idx], handle.pad_id)
            logits = handle.model(input_ids=ids, attention_mask=mask, position_ids=position_ids_for(mask)).logits[:, :-1].float()
            logp = torch.log_softmax(logits, dim=-1)
            p = logp.exp()
            mu = (p * logp).sum(-1)
            var = ((p * logp.square()).sum(-1) - mu.square()).clamp_min(0.0)  # noqa: F841 (timed, like the pass)
            tok = logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
            for row, i in enumerate(idx):
                out[i] = tok[row, : len(enc.ids[i]) - 1].numpy()
    return out


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 600
    corpus = generate_corpus(ClinicalCorpusConfig(n_public=1000, n_members=n, n_non_members=10, n_population=10, canary_repeats=()))
    texts = [r.text for r in corpus.splits["members"]]
    spec = BaseModelSpec()
    tok = train_tokenizer([r.text for r in corpus.splits["public"]], spec.vocab_size)
    handle = ModelHandle(model=build_model(spec, tok.eos_token_id).eval(), tokenizer=tok, max_length=spec.max_length)
    score_texts(handle, texts[:32])  # warm-up
    t0 = time.perf_counter()
    batched = score_texts(handle, texts)
    t_batched = time.perf_counter() - t0
    t0 = time.perf_counter()
    previous = full_logits_pass(handle, texts)
    t_previous = time.perf_counter() - t0
    t0 = time.perf_counter()
    looped = per_record(handle, texts)
    t_loop = time.perf_counter() - t0
    worst = max(float(np.abs(batched.logprob[batched.tokens(i)] - looped[i]).max()) for i in range(len(texts)))
    print(f"records: {len(texts)}  max |Δ log p| batched vs loop: {worst:.2e}")
    worst_prev = max(float(np.abs(batched.logprob[batched.tokens(i)] - previous[i]).max()) for i in range(len(texts)))
    print(f"max |Δ log p| current vs previous batched pass: {worst_prev:.2e}")
    print(f"batched pass: {len(texts) / t_batched:.0f} records/s (also computes min-k%++ moments)")
    print(f"previous batched pass (full logits): {len(texts) / t_previous:.0f} records/s")
    print(f"batched pass speed-up over the previous one: {t_previous / t_batched:.2f}x")
    print(f"per-record loop: {len(texts) / t_loop:.0f} records/s")
    print(f"scoring speed-up (batched / per-record): {t_loop / t_batched:.2f}x")


if __name__ == "__main__":
    main()
