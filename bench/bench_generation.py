"""Generation throughput: batched ``generate`` ÷ one prompt at a time.

The extraction attacks continue many prompts. ``privleak.attacks.generation.generate``
sorts prompts by length, left-pads them into batches and decodes each batch
with a key/value cache; the baseline is the obvious loop calling it with one
prompt per call (batch size 1). Same model (the embedded base architecture,
random init; throughput does not depend on the weights), same prompts (the
first words of synthetic clinical notes), greedy, fixed-length continuations.

Both variants run in one process, alternating, ``--rounds`` times; the
throughput is the median over rounds. Also reports how many greedy
continuations are identical between the two (left padding can flip a near-tie
in float arithmetic). Prints the throughput ratio last.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings

os.environ.setdefault("PRIVLEAK_PROGRESS", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
warnings.filterwarnings("ignore")

import torch

from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus
from privleak.models.base import BaseModelSpec, build_model
from privleak.models.generation import GenerationSettings, generate
from privleak.models.handle import ModelHandle
from privleak.models.tokenizer import train_tokenizer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--prompt-words", type=int, default=8)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--batch", type=int, default=GenerationSettings.batch_size)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    spec = BaseModelSpec()
    corpus = generate_corpus(ClinicalCorpusConfig(n_public=800, n_members=args.prompts, n_non_members=10, n_population=10, canary_repeats=()))
    tok = train_tokenizer([r.text for r in corpus.splits["public"]], spec.vocab_size)
    tok.model_max_length = spec.max_length
    handle = ModelHandle(model=build_model(spec, tok.eos_token_id).eval(), tokenizer=tok, max_length=spec.max_length)
    prompts = [" ".join(r.text.split()[: args.prompt_words]) for r in corpus.splits["members"]][: args.prompts]

    batched = GenerationSettings(max_new_tokens=args.new_tokens, batch_size=args.batch)
    single = GenerationSettings(max_new_tokens=args.new_tokens, batch_size=1)
    generate(handle, prompts[:2], batched)  # warm-up

    rates = {"batched": [], "per-prompt": []}
    outs = {}
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        outs["batched"] = generate(handle, prompts, batched)
        rates["batched"].append(len(prompts) * args.new_tokens / (time.perf_counter() - t0))
        t0 = time.perf_counter()
        outs["per-prompt"] = [generate(handle, [p], single)[0] for p in prompts]
        rates["per-prompt"].append(len(prompts) * args.new_tokens / (time.perf_counter() - t0))
    same = sum(a == b for a, b in zip(outs["batched"], outs["per-prompt"]))
    tps = {k: statistics.median(v) for k, v in rates.items()}
    print(f"{len(prompts)} prompts × {args.new_tokens} new tokens, greedy, batch {args.batch}, "
          f"CPU threads {torch.get_num_threads()}, median of {args.rounds} rounds")
    for k, v in tps.items():
        print(f"{k:<11} {v:8.0f} tokens/s")
    print(f"identical continuations: {same}/{len(prompts)}")
    print(f"generation throughput batched / per-prompt: {tps['batched'] / tps['per-prompt']:.1f}x")


if __name__ == "__main__":
    main()
