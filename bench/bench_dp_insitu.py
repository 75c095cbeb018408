"""DP-SGD training ÷ plain training in tokens per CPU second, as the audit trains them, in one process.

The audit's own loops (:func:`privleak.models.train.train` with the baseline's
recipe, :func:`privleak.models.dp_train.train_dp` with dp-8's: Poisson batches
of ≈ n/5 records, book-keeping clipping, frozen embeddings) on the default
corpus's members plus the one-run audit canaries, the default base
architecture (2 layers, 128 wide, vocabulary 2,048, 160 tokens), one torch
thread. Randomly initialised weights: a step's cost does not depend on them.
The two loops alternate ``--rounds`` times (plain, DP, plain, DP …) so a
neighbour's load falls on both; tokens are records × epochs run, as
``train.json`` counts them. ``--cprofile`` writes the DP loop's profile.

``--precision`` runs the loops' forward passes in fp32, in bf16 autocast
(norms, clipping, noise and optimiser state stay fp32), or both, alternating
in each round, and prints the table of tokens per CPU second: plain and DP
at each precision, DP ÷ plain, bf16 ÷ fp32. ``auto`` is what an audit on
this machine uses (bf16 where the CPU multiplies bf16 in hardware).

    python bench/bench_dp_insitu.py                 # ≈ 1 epoch each, 2 rounds, this machine's precision
    python bench/bench_dp_insitu.py --precision both
    python bench/bench_dp_insitu.py --scale 0.25 --cprofile /tmp/dp.prof
"""

from __future__ import annotations

import argparse
import cProfile
import os
import resource
import statistics
import sys
import time

os.environ.setdefault("PRIVLEAK_PROGRESS", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch

from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus
from privleak.models.base import BaseModelSpec, build_model
from privleak.models.batching import encode
from privleak.models.device import ComputePolicy, resolve_train_precision, use_policy
from privleak.accountants import steps_for
from privleak.models.dp_sigma import calibrated_sigma as _calibrated_sigma
from privleak.models.dp_train import DPSettings, train_dp
from privleak.models.handle import clone_model
from privleak.models.tokenizer import train_tokenizer
from privleak.models.train import TrainSettings, train
from privleak.policy import dp_recipe


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=float, default=1.0, help="corpus × this (default 1: 1,200 members)")
    ap.add_argument("--epochs", type=float, default=1.0, help="epochs per loop and round")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--audit-canaries", type=int, default=500, help="included one-run canaries (default ≈ ½ of 1,000)")
    ap.add_argument("--cprofile", help="write the DP loop's cProfile stats here")
    ap.add_argument("--precision", choices=("auto", "fp32", "bf16", "both"), default="auto",
                    help="the training loops' forward precision (default auto: what an audit here uses)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    n = max(10, int(1200 * args.scale))
    corpus = generate_corpus(ClinicalCorpusConfig(n_public=max(50, int(3000 * args.scale)), n_members=n,
                                                  n_non_members=10, n_population=10, n_public_heldout=10))
    spec = BaseModelSpec()
    tok = train_tokenizer([r.text for r in corpus.splits["public"]], spec.vocab_size)
    texts = [r.text for r in corpus.splits["members"]]
    rng = torch.Generator().manual_seed(0)
    words = [w for w in tok.get_vocab() if w.startswith("Ġ") and w[1:].isalpha()][:500]
    for _ in range(int(args.audit_canaries * args.scale)):  # random-word canaries, as the one-run audit's
        idx = torch.randint(0, len(words), (6,), generator=rng).tolist()
        texts.append("".join(words[i] for i in idx).replace("Ġ", " ").strip())
    data = encode(tok, texts, spec.max_length)
    tokens = sum(len(s) for s in data.ids)
    base = build_model(spec, tok.eos_token_id)
    batch, _ = dp_recipe(n, 8.0)
    print(f"{len(texts)} records, {tokens:,} tokens per epoch; plain batch 16, DP expected batch {batch}; "
          f"{args.threads} thread(s)")
    # σ is calibrated once per (ε, δ, q, T) and remembered in the model cache: warm it, so the DP figures are
    # the step's cost, not a once-per-arm search (PRV takes seconds).
    q = 1 / -(-len(texts) // batch)
    _calibrated_sigma(8.0, 1e-5, q, steps_for(sample_rate=q, epochs=max(1, int(args.epochs))), "rdp")
    here = resolve_train_precision(torch.device("cpu"), "auto")
    precisions = {"auto": [here], "both": ["fp32", "bf16"]}.get(args.precision, [args.precision])
    rates: dict[tuple[str, str], list[float]] = {(k, p): [] for p in precisions for k in ("plain", "dp")}
    prof = cProfile.Profile() if args.cprofile else None
    for r in range(args.rounds):
        for prec in precisions:
            with use_policy(ComputePolicy(train_precision=prec)):
                m = clone_model(base)
                c0, w0 = cpu(), time.perf_counter()
                log = train(m, data, TrainSettings(epochs=args.epochs, batch_size=16, lr=3e-3, seed=r), tok.pad_token_id)
                c, w = cpu() - c0, time.perf_counter() - w0
                rates["plain", prec].append(tokens * log.steps / -(-len(texts) // 16) / c)
                print(f"round {r + 1} {prec} plain: {log.steps} steps, {c:.1f} CPU s, {w:.1f} wall s, "
                      f"{rates['plain', prec][-1]:,.0f} tok/CPU-s")
                m = clone_model(base)
                settings = DPSettings(target_epsilon=8.0, delta=1e-5, max_grad_norm=1.0, epochs=max(1, int(args.epochs)),
                                      expected_batch_size=batch, lr=3e-3, seed=r, grad_sample_mode="bk", accountant="rdp")
                c0, w0 = cpu(), time.perf_counter()
                if prof is not None:
                    prof.enable()
                _, dlog = train_dp(m, data, settings, tok.pad_token_id, spec.max_length)
                if prof is not None:
                    prof.disable()
                c, w = cpu() - c0, time.perf_counter() - w0
                rates["dp", prec].append(tokens * dlog.sample_rate * dlog.steps / c)
                print(f"round {r + 1} {prec} dp:    {dlog.steps} steps, {c:.1f} CPU s, {w:.1f} wall s, "
                      f"{rates['dp', prec][-1]:,.0f} tok/CPU-s")
    med = {k: statistics.median(v) for k, v in rates.items()}
    print(f"\n| precision | plain tok/CPU-s | DP (bk) tok/CPU-s | DP ÷ plain |")
    print("|---|---|---|---|")
    for prec in precisions:
        p, d = med["plain", prec], med["dp", prec]
        print(f"| {prec} | {p:,.0f} | {d:,.0f} | {d / p:.2f} |")
    if len(precisions) == 2:
        print(f"\nbf16 ÷ fp32: plain {med['plain', 'bf16'] / med['plain', 'fp32']:.2f}, "
              f"DP {med['dp', 'bf16'] / med['dp', 'fp32']:.2f}")
    if prof is not None:
        prof.dump_stats(args.cprofile)
        print(f"cProfile of the DP loop: {args.cprofile}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
