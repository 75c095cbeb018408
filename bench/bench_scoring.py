"""Scoring throughput: the batched pass ÷ a per-record loop (the PrivAI-Leak way).

Both compute the same per-token log-probabilities on the same texts with the
same model (the embedded architecture, random init — speed does not depend
on the weights). Also times the previous batched pass (full (batch, length,
vocab) logits, kept here as ``full_logits_pass``) against the current one,
which runs the LM head on real positions only, in cache-sized chunks.
Prints records/s of each and, last, the batched ÷ per-record ratio.

Devices: ``--device cpu`` (default) times the embedded architecture; ``--device
cuda`` (or ``cuda:N``) times GPT-2 small's architecture (124 M, random init)
under the run's compute policy (bf16 autocast where supported, batches sized
from free memory), the per-record loop under the same autocast, synchronised.
``--tiny`` is a smoke check (a few records, a tiny model) for machines without a GPU:

    python bench/bench_scoring.py --device cuda            # the GPU figure
    python bench/bench_scoring.py --device cpu --tiny      # runs here, in seconds
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("PRIVLEAK_PROGRESS", "0")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import numpy as np
import torch

from privleak.attacks.scoring import _batches_by_length, score_texts
from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus
from privleak.models.base import BaseModelSpec, build_model
from privleak.models.batching import encode, pad_batch, position_ids_for
from privleak.models.device import autocast, make_policy, model_device, use_policy
from privleak.models.handle import ModelHandle
from privleak.models.tokenizer import train_tokenizer


def per_record(handle: ModelHandle, texts: list[str]) -> list[np.ndarray]:
    out = []
    dev = model_device(handle.model)
    with torch.inference_mode():
        for ids in encode(handle.tokenizer, texts, handle.max_length).ids:
            x = torch.tensor([ids], device=dev)
            with autocast(dev):
                logits = handle.model(input_ids=x).logits
            logp = torch.log_softmax(logits[0, :-1].float(), -1)
            out.append(logp[torch.arange(len(ids) - 1, device=dev), x[0, 1:]].cpu().numpy())
    return out


def full_logits_pass(handle: ModelHandle, texts: list[str], max_tokens: int = 8192) -> list[np.ndarray]:
    """The previous batched pass: log-softmax, μ and σ² over the full (batch, length, vocab) logits."""
    enc = encode(handle.tokenizer, texts, handle.max_length)
    out: list[np.ndarray] = [np.zeros(0)] * len(texts)
    dev = model_device(handle.model)
    with torch.inference_mode():
        for idx in _batches_by_length([len(s) for s in enc.ids], max_tokens):
            ids, mask = pad_batch([enc.ids[i] for i in idx], handle.pad_id)
            ids, mask = ids.to(dev), mask.to(dev)
            with autocast(dev):
                logits = handle.model(input_ids=ids, attention_mask=mask, position_ids=position_ids_for(mask)).logits
            logits = logits[:, :-1].float()
            logp = torch.log_softmax(logits, dim=-1)
            p = logp.exp()
            mu = (p * logp).sum(-1)
            var = ((p * logp.square()).sum(-1) - mu.square()).clamp_min(0.0)  # noqa: F841 (timed, like the pass)
            tok = logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
            for row, i in enumerate(idx):
                out[i] = tok[row, : len(enc.ids[i]) - 1].cpu().numpy()
    return out


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("n", nargs="?", type=int, help="records scored (default 600; 2000 on CUDA; 24 with --tiny)")
    ap.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    ap.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16"])
    ap.add_argument("--model", choices=["embedded", "gpt2-small"], help="default: embedded on CPU, gpt2-small on CUDA")
    ap.add_argument("--tiny", action="store_true", help="smoke check: a 1-layer 32-wide model, a few records")
    args = ap.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("bench_scoring: --device cuda but no CUDA device is available; skipped.")
        return
    policy = make_policy(args.device, args.precision)
    model_kind = args.model or ("gpt2-small" if policy.device.type == "cuda" else "embedded")
    n = args.n or (24 if args.tiny else 2000 if policy.device.type == "cuda" else 600)
    corpus = generate_corpus(ClinicalCorpusConfig(n_public=200 if args.tiny else 1000, n_members=n, n_non_members=10,
                                                  n_population=10, canary_repeats=()))
    texts = [r.text for r in corpus.splits["members"]][:n]
    spec = BaseModelSpec(n_layer=1, n_embd=32, n_head=2, vocab_size=400) if args.tiny else BaseModelSpec()
    if model_kind == "gpt2-small" and not args.tiny:
        spec = BaseModelSpec(vocab_size=50257, n_layer=12, n_embd=768, n_head=12, max_length=256)
    tok = train_tokenizer([r.text for r in corpus.splits["public"]], min(spec.vocab_size, 2048))
    with use_policy(policy):
        model = build_model(spec, tok.eos_token_id).eval().to(policy.device)
        handle = ModelHandle(model=model, tokenizer=tok, max_length=spec.max_length)
        score_texts(handle, texts[:32])  # warm-up (kernels, allocator)
        per_record(handle, texts[:4])
        _sync(policy.device)
        t0 = time.perf_counter()
        batched = score_texts(handle, texts)
        _sync(policy.device)
        t_batched = time.perf_counter() - t0
        t0 = time.perf_counter()
        previous = full_logits_pass(handle, texts)
        _sync(policy.device)
        t_previous = time.perf_counter() - t0
        t0 = time.perf_counter()
        looped = per_record(handle, texts)
        _sync(policy.device)
        t_loop = time.perf_counter() - t0
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model {model_kind}{' (tiny)' if args.tiny else ''}: {n_params / 1e6:.1f} M parameters on {policy.device}, "
          f"precision {policy.precision}, {torch.get_num_threads()} CPU threads")
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
