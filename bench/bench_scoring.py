"""Scoring throughput: the batched pass ÷ a per-record loop (the PrivAI-Leak way).

Both compute the same per-token log-probabilities on the same texts with the
same model (the embedded architecture, random init — speed does not depend
on the weights). Prints records/s of each and, last, the ratio.
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("PRIVLEAK_PROGRESS", "0")

import numpy as np
import torch

from privleak.attacks.scoring import score_texts
from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus
from privleak.models.base import BaseModelSpec, build_model
from privleak.models.batching import encode
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
    looped = per_record(handle, texts)
    t_loop = time.perf_counter() - t0
    worst = max(float(np.abs(batched.logprob[batched.tokens(i)] - looped[i]).max()) for i in range(len(texts)))
    print(f"records: {len(texts)}  max |Δ log p| batched vs loop: {worst:.2e}")
    print(f"batched pass: {len(texts) / t_batched:.0f} records/s (also computes min-k%++ moments)")
    print(f"per-record loop: {len(texts) / t_loop:.0f} records/s")
    print(f"scoring speed-up (batched / per-record): {t_loop / t_batched:.2f}x")


if __name__ == "__main__":
    main()
