"""DP-SGD step ÷ non-private step: time and peak memory, same model, same batch.

Paths (``DPSettings.grad_sample_mode``): ``hooks`` (the reference: Opacus
materialises every per-sample gradient), ``ghost`` (ghost clipping, Li et al.
2022: per-sample norms only, then a second backward pass), ``bk``
(book-keeping, Bu et al. 2023: norms and clipped sum from one backward pass
that computes no weight gradients), and DP-LoRA (rank-r adapters, Yu et al.
2022) with each. Each DP path is compared with the non-private step
that trains the same weights over the same micro-batches: full fine-tuning
(embeddings frozen, as the audit's DP arms; ``--train-embeddings`` to train
them too) against plain AdamW, LoRA-DP against plain LoRA.

Models: ``embedded`` — the audit's base architecture (2 layers, vocab 2048,
128 wide, ≤ 160 tokens) on a batch of the synthetic clinical corpus at its
natural mix of lengths, micro-batched as the audit does (4096 tokens);
``gpt2-small`` — GPT-2 small's architecture (124 M, random init, nothing
downloaded) on random 128-token sequences. Defaults: ``embedded`` on CPU,
``gpt2-small`` on CUDA (``--device cuda`` skips cleanly without a GPU).

Noise is on (σ = 1); Poisson sampling is replaced by a fixed batch so every
variant processes the same records.

* Time: all variants live in one process and their steps are interleaved
  (A B C … A B C …); ms/step is the median over ``--steps`` rounds after a
  warm-up. On CPU it is the process's CPU time with one thread (``--threads``),
  which counts the work done and not the neighbours on a shared machine; wall
  time is printed beside it. On CUDA it is synchronised wall time.
* Memory: each variant runs alone in a fresh subprocess. CUDA: peak
  allocated bytes (``torch.cuda.max_memory_allocated``, weights included).
  CPU: peak resident set size during the steps minus the resident size just
  before the first step (optimiser state, gradients, activations, per-sample
  tensors: what the step costs; the interpreter and libraries are excluded).

Prints a table and, last, the fast path's (``bk``) time and memory ratios.

On CUDA both the DP and the non-private steps run under the audit's compute
policy (``--precision auto``: bf16 autocast where supported; DP norms,
clipping and noise in fp32). ``--tiny`` is a smoke check for a machine
without a GPU (a 2-layer, 64-wide GPT-2, 8 records, 2 rounds):

    python bench/bench_dp_step.py --device cuda            # GPT-2 small, the GPU figures
    python bench/bench_dp_step.py --device cpu --tiny      # runs here in seconds
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

os.environ.setdefault("PRIVLEAK_PROGRESS", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
warnings.filterwarnings("ignore")

import torch
from torch.utils.data import DataLoader, TensorDataset
from transformers import GPT2Config, GPT2LMHeadModel

from privleak.models.base import BaseModelSpec, build_model
from privleak.models.batching import per_sequence_nll, position_ids_for
from privleak.models.device import autocast, current, make_policy, use_policy
from privleak.models.dp_train import (
    DPSettings,
    _logical_step,
    make_private,
    micro_batches,
    prepare_trainable,
)

# name: (DP mode or None for non-private, LoRA?) — each DP variant's baseline is the plain one with the same LoRA flag.
VARIANTS = {
    "plain": (None, False),
    "hooks": ("hooks", False),
    "ghost": ("ghost", False),
    "bk": ("bk", False),
    "plain-lora": (None, True),
    "lora-hooks": ("hooks", True),
    "lora-ghost": ("ghost", True),
    "lora-bk": ("bk", True),
}
FAST_PATH = "bk"


def make_data(args) -> dict:
    """The batch every variant processes, plus what is needed to build the model."""
    torch.manual_seed(0)
    if args.model in ("gpt2-small", "tiny"):
        ids = torch.randint(0, 50257 if args.model == "gpt2-small" else 512, (args.batch, args.seq))
        return {"ids": ids, "mask": torch.ones_like(ids), "eos": int(ids.max())}
    from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus
    from privleak.models.batching import encode, pad_batch
    from privleak.models.tokenizer import train_tokenizer

    spec = BaseModelSpec()
    corpus = generate_corpus(ClinicalCorpusConfig(n_public=800, n_members=args.batch, n_non_members=10, n_population=10, canary_repeats=()))
    tok = train_tokenizer([r.text for r in corpus.splits["public"]], spec.vocab_size)
    data = encode(tok, [r.text for r in corpus.splits["members"]][: args.batch], spec.max_length)
    ids, mask = pad_batch(data.ids, tok.pad_token_id)
    return {"ids": ids, "mask": mask, "eos": tok.eos_token_id}


def build(args, eos: int):
    if args.model == "gpt2-small":
        torch.manual_seed(0)
        cfg = GPT2Config(n_positions=max(1024, args.seq), resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        return GPT2LMHeadModel(cfg)
    if args.model == "tiny":
        torch.manual_seed(0)
        return GPT2LMHeadModel(GPT2Config(vocab_size=512, n_positions=max(64, args.seq), n_embd=64, n_layer=2, n_head=2,
                                          resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
    return build_model(BaseModelSpec(), eos)


def make_step(name: str, args, data: dict):
    """A closure running one logical step of ``name`` on the batch, and the trainable-weight count."""
    mode, lora = VARIANTS[name]
    dev = torch.device(args.device)
    ids, mask = data["ids"].to(dev), data["mask"].to(dev)
    settings = DPSettings(
        target_epsilon=8.0, delta=1e-5, max_grad_norm=1.0, epochs=1, expected_batch_size=len(ids), lr=1e-4,
        micro_batch_tokens=args.max_tokens, train_embeddings=args.train_embeddings and not lora,
        grad_sample_mode=mode or "hooks", lora_rank=args.lora_rank if lora else None,
    )
    model = prepare_trainable(build(args, data["eos"]).to(dev), settings).train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4)
    n_trainable = sum(p.numel() for p in params)
    if mode is None:
        lengths = mask.sum(1).tolist()
        parts = micro_batches(lengths, args.max_tokens)

        def plain() -> None:
            opt.zero_grad(set_to_none=True)
            for rows in parts:
                w = max(lengths[r] for r in rows)
                i, mk = ids[rows, :w], mask[rows, :w]
                with autocast(dev):  # as the DP step: the policy's precision for the forward pass
                    out = model(input_ids=i, attention_mask=mk, position_ids=position_ids_for(mk).to(dev)).logits
                (per_sequence_nll(out, i, mk).sum() / len(ids)).backward()
            opt.step()

        return plain, n_trainable
    loader = DataLoader(TensorDataset(ids.cpu(), mask.cpu()), batch_size=len(ids))
    private, opt, criterion, _, _ = make_private(model, opt, loader, 1.0, settings)

    def dp() -> None:
        opt.zero_grad(set_to_none=True)
        _logical_step(private, opt, ids, mask, args.max_tokens, criterion)

    return dp, n_trainable


def sync(args) -> None:
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def rss_bytes() -> int:
    return _status_kib("VmRSS") * 1024


def reset_peak_rss() -> None:
    """Restart the kernel's high-water mark (VmHWM) at the current RSS (Linux ≥ 4.0).

    Not ``getrusage().ru_maxrss``: across fork + exec it keeps the parent's
    peak, so every worker would report the parent's size.
    """
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass  # VmHWM then counts from process start; the setup before the step is small


def peak_rss_bytes() -> int:
    return _status_kib("VmHWM") * 1024


def measure_memory(name: str, args, data_path: str) -> None:
    """Worker: run ``name`` alone for a few steps; print its peak memory as JSON."""
    data = torch.load(data_path, weights_only=True)
    step, _ = make_step(name, args, data)
    sync(args)
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    base = rss_bytes()
    reset_peak_rss()
    for _ in range(2):
        step()
    sync(args)
    if args.device.startswith("cuda"):
        peak = torch.cuda.max_memory_allocated()
    else:
        peak = peak_rss_bytes() - base
    print(json.dumps({"peak": peak}))


def memory_of(name: str, args, data_path: str) -> float:
    cmd = [sys.executable, __file__, "--memory-worker", name, "--data", data_path, "--device", args.device,
           "--precision", args.precision, "--model", args.model, "--seq", str(args.seq), "--max-tokens", str(args.max_tokens), "--lora-rank", str(args.lora_rank)]
    if args.train_embeddings:
        cmd.append("--train-embeddings")
    # A fixed mmap threshold turns off glibc's adaptive one, so every large tensor is
    # mapped and unmapped and RSS tracks live memory instead of the allocator's history.
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "65536"}
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return float(json.loads(out.strip().splitlines()[-1])["peak"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    ap.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16"],
                    help="auto: bf16 autocast on CUDA that supports it, fp32 elsewhere (the audit's policy)")
    ap.add_argument("--model", choices=["embedded", "gpt2-small", "tiny"], help="default: embedded on CPU, gpt2-small on CUDA")
    ap.add_argument("--tiny", action="store_true", help="smoke check: --model tiny, 8 records of 32 tokens, 2 rounds")
    ap.add_argument("--batch", type=int, help="records per logical batch (default 128 embedded, 32 gpt2-small)")
    ap.add_argument("--seq", type=int, default=128, help="sequence length for gpt2-small")
    ap.add_argument("--max-tokens", type=int, help="micro-batch budget in padded tokens (default: the audit's 4096; gpt2-small: one micro-batch)")
    ap.add_argument("--steps", type=int, default=5, help="timed rounds (median reported)")
    ap.add_argument("--mem-repeats", type=int, default=3, help="subprocess memory measurements per variant (median)")
    ap.add_argument("--lora-rank", type=int, default=8)
    ap.add_argument("--train-embeddings", action="store_true", help="full fine-tuning includes the embeddings (ghost unties lm_head)")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated subset of " + ", ".join(VARIANTS))
    ap.add_argument("--threads", type=int, default=1, help="CPU threads (0: torch's default)")
    ap.add_argument("--memory-worker", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("bench_dp_step: --device cuda but no CUDA device is available; skipped.")
        return
    if args.tiny:
        args.model, args.batch, args.seq = "tiny", args.batch or 8, 32
        args.steps, args.mem_repeats = min(args.steps, 2), 1
    with use_policy(make_policy(args.device, args.precision)):
        _run(ap, args)


def _run(ap, args) -> None:
    if args.device == "cpu" and args.threads:
        # One thread: CPU time then counts work, not OpenMP spin-waits, and neighbours cannot skew the split.
        torch.set_num_threads(args.threads)
    args.model = args.model or ("gpt2-small" if args.device.startswith("cuda") else "embedded")
    args.batch = args.batch or (32 if args.model == "gpt2-small" else 128)
    args.max_tokens = args.max_tokens or (args.batch * args.seq if args.model in ("gpt2-small", "tiny")
                                          else DPSettings.micro_batch_tokens)
    if args.memory_worker:
        measure_memory(args.memory_worker, args, args.data)
        return

    names = [n for n in args.variants.split(",") if n]
    unknown = set(names) - set(VARIANTS)
    if unknown:
        ap.error(f"unknown variants {sorted(unknown)}")
    if args.train_embeddings:  # book-keeping clips Conv1D/Linear/LayerNorm only
        names = [n for n in names if n != "bk"]
    for n in list(names):  # every DP variant needs its non-private baseline
        base = "plain-lora" if VARIANTS[n][1] else "plain"
        if base not in names:
            names.insert(0, base)
    data = make_data(args)
    width = int(data["mask"].sum(1).max())
    data["ids"], data["mask"] = data["ids"][:, :width], data["mask"][:, :width]

    steps, sizes = {}, {}
    for n in names:
        steps[n], sizes[n] = make_step(n, args, data)
    times = {n: [] for n in names}
    walls = {n: [] for n in names}
    for n in names:  # warm-up (allocator, kernels, Opacus hooks)
        steps[n]()
    sync(args)
    for _ in range(args.steps):
        for n in names:
            t0, c0 = time.perf_counter(), time.process_time()
            steps[n]()
            sync(args)
            walls[n].append(time.perf_counter() - t0)
            times[n].append(walls[n][-1] if args.device.startswith("cuda") else time.process_time() - c0)
    ms = {n: statistics.median(times[n]) * 1e3 for n in names}
    wall_ms = {n: statistics.median(walls[n]) * 1e3 for n in names}
    del steps

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "batch.pt")
        torch.save(data, path)
        mem = {n: statistics.median(memory_of(n, args, path) for _ in range(args.mem_repeats)) for n in names}

    cuda = args.device.startswith("cuda")
    threads = torch.get_num_threads() if not cuda else None
    clock = "wall ms (synchronised)" if cuda else "CPU ms of this process (robust to a shared machine)"
    what = "peak allocated" if cuda else "peak RSS growth during the step"
    print(f"model {args.model} on {args.device}{f' ({threads} threads)' if threads else ''}: batch {len(data['ids'])}, "
          f"max length {width}, micro-batch budget {args.max_tokens} tokens, "
          f"embeddings {'trained' if args.train_embeddings else 'frozen'}, LoRA rank {args.lora_rank}, "
          f"precision {current().precision}; "
          f"time = {clock}; memory = {what}; median of {args.steps} interleaved rounds")
    print(f"{'variant':<12} {'trainable':>11} {'ms/step':>9} {'wall ms':>9} {'MiB':>9} {'time ×':>7} {'mem ×':>7}")
    ratios = {}
    for n in names:
        base = "plain-lora" if VARIANTS[n][1] else "plain"
        ratios[n] = (ms[n] / ms[base], mem[n] / mem[base])
        print(f"{n:<12} {sizes[n]:>11,} {ms[n]:>9.0f} {wall_ms[n]:>9.0f} {mem[n] / 2**20:>9.1f} {ratios[n][0]:>7.2f} {ratios[n][1]:>7.2f}")
    fast = FAST_PATH if FAST_PATH in names else names[-1]
    print(f"DP step / non-private step ({fast}): time {ratios[fast][0]:.2f}x, peak memory {ratios[fast][1]:.2f}x")


if __name__ == "__main__":
    main()
