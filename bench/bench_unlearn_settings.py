"""Choosing the unlearning arms' settings on population data only (never the members).

The default corpus's population split stands in for a private dataset of its
own: its records are shuffled (seeded) into pseudo-members M (half), a
held-out set H (a quarter) and the unlearner's validation set V (a quarter).
A forget set F of 10 % of M's persons is drawn as the audit draws it. Then:

* ``source``: the baseline recipe (``train``) on M — what is unlearned from;
* ``retrain``: the same recipe on M − F — the gold standard;
* ``npo`` / ``gd`` at several learning rates: unlearning F from the source
  with the retain term, stopped when F's mean NLL reaches V's (the stopping
  rule of the ``unlearn-ga`` arm), at most ``--max-epochs`` passes over F;
* ``sisa-S``: S person-shards of M, the recipe on each, retrain the shards
  holding F, average the weights.

For each model: LOSS AUC of F against H (all records; retrain's is the
target), the gap to retrain's (MUSE's PrivLeak = gap / retrain's AUC), mean
token NLL on F, M − F and H, and seconds. Nothing here reads the audit's
members, non-members or canaries.

    PYTHONPATH=src python bench/bench_unlearn_settings.py [--lrs 1e-4,3e-4,1e-3] [--shards 2,4] [--scale 1.0]

``--scale`` shrinks the population used (and the model, below 1) for a smoke run.
"""

from __future__ import annotations

import argparse
import json
import random
import time

import numpy as np
import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lrs", default="1e-4,3e-4,1e-3")
    ap.add_argument("--methods", default="npo,gd")
    ap.add_argument("--shards", default="2,4")
    ap.add_argument("--max-epochs", type=float, default=10.0)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from privleak.attacks.scoring import score_texts
    from privleak.config import build_config
    from privleak.core.metrics import mia_metrics
    from privleak.data.clinical import generate_corpus
    from privleak.data.unlearning import draw_forget_set, shard_by_person
    from privleak.models.base import default_base_model
    from privleak.models.batching import encode
    from privleak.models.handle import ModelHandle, clone_model
    from privleak.models.sisa import average_weights, sisa
    from privleak.models.train import TrainSettings, train
    from privleak.models.unlearn import UnlearnSettings, unlearn
    from privleak.pipeline.data import base_spec, synthetic_config

    over = {} if args.scale >= 1 else {"model": {"embedded": {"n_layer": 1, "n_embd": 32, "n_head": 2,
                                                               "vocab_size": 400, "epochs": 1}}}
    cfg = build_config({"device": "cpu", "seed": args.seed, **over})
    corpus = generate_corpus(synthetic_config(cfg))
    pop = list(corpus.splits["population"])
    random.Random(args.seed).shuffle(pop)
    pop = pop[: max(40, int(len(pop) * min(1.0, args.scale)))]
    n = len(pop)
    members, held, valid = pop[: n // 2], pop[n // 2: 3 * n // 4], pop[3 * n // 4:]
    forget = draw_forget_set(members, fraction=0.1, canary_fraction=0.0, seed=args.seed)
    f_recs, r_recs = forget.split(members)
    print(f"population {n}: M {len(members)} ({forget.n_member_persons} persons with PII), F {len(f_recs)} records "
          f"of {forget.n_persons} persons, H {len(held)}, V {len(valid)}", flush=True)

    t0 = time.perf_counter()
    base, _ = default_base_model(base_spec(cfg), [r.text for r in corpus.splits["public"]])
    print(f"base model ready ({time.perf_counter() - t0:.0f} s)", flush=True)
    tok, L, pad = base.tokenizer, cfg.model.max_length, base.pad_id
    enc = lambda recs: encode(tok, [r.text for r in recs], L)  # noqa: E731
    recipe = lambda seed: TrainSettings(epochs=cfg.train.epochs, batch_size=cfg.train.batch_size,  # noqa: E731
                                        lr=cfg.train.lr, weight_decay=cfg.train.weight_decay, seed=seed)

    def nll(model, recs):
        h = ModelHandle(model=model, tokenizer=tok, max_length=L)
        return score_texts(h, [r.text for r in recs], desc="score").nll()

    def row(name, model, seconds, extra=""):
        f, r, h = nll(model, f_recs), nll(model, r_recs), nll(model, held)
        m = mia_metrics(-f, -h, bootstrap=200, seed=0)
        return {"model": name, "auc": m.auc, "auc_ci95": m.auc_ci95, "nll_forget": float(f.mean()),
                "nll_retain": float(r.mean()), "nll_held": float(h.mean()), "seconds": round(seconds, 1), "note": extra}

    rows = []
    t = time.perf_counter()
    source = clone_model(base.model)
    train(source, enc(members), recipe(args.seed), pad, desc="source")
    rows.append(row("source", source, time.perf_counter() - t))
    print(rows[-1], flush=True)
    t = time.perf_counter()
    retrain = clone_model(base.model)
    train(retrain, enc(r_recs), recipe(args.seed), pad, desc="retrain")
    rows.append(row("retrain", retrain, time.perf_counter() - t))
    print(rows[-1], flush=True)
    target = rows[-1]["auc"]

    v_texts = valid

    def stop(model) -> bool:
        return float(nll(model, f_recs).mean()) >= float(nll(model, v_texts).mean())

    for method in args.methods.split(","):
        for lr in [float(x) for x in args.lrs.split(",")]:
            model = clone_model(source)
            s = UnlearnSettings(method=method, epochs=args.max_epochs, lr=lr, batch_size=8,
                                check_every=max(1, len(f_recs) // 8 // 2), seed=args.seed)
            t = time.perf_counter()
            log = unlearn(model, enc(f_recs), enc(r_recs), s, pad, stop=stop, desc=f"{method} {lr:g}")
            rows.append(row(f"{method} lr={lr:g}", model, time.perf_counter() - t,
                            f"{log.steps} steps, {'stopped by the rule' if log.stopped else 'ran out of epochs'}"))
            print(rows[-1], flush=True)

    for S in [int(x) for x in args.shards.split(",") if x]:
        shards = shard_by_person(members, S, args.seed)
        data = [enc([members[i] for i in ix]) for ix in shards]
        flags = [[forget.holds(members[i]) for i in ix] for ix in shards]
        run = sisa(base.model, data, flags, lambda s: recipe(args.seed + s), pad, desc=f"SISA-{S}")
        avg = average_weights(run.models)
        shard_h = [float(nll(m, held).mean()) for m in run.models]
        rows.append(row(f"sisa-{S}", avg, run.seconds_unlearn,
                        f"fit {run.seconds_fit:.0f} s, retrained {len(run.affected)}/{S} shards; shard models' H NLL "
                        f"{np.mean(shard_h):.3f} (averaged model's is the row's)"))
        print(rows[-1], flush=True)

    print(f"\n{'model':<16} {'AUC F vs H':>18} {'PrivLeak':>9} {'NLL F':>7} {'NLL M−F':>8} {'NLL H':>7} {'s':>7}  note")
    for r in rows:
        ci = r["auc_ci95"] or (float("nan"), float("nan"))
        print(f"{r['model']:<16} {r['auc']:.3f} [{ci[0]:.3f},{ci[1]:.3f}] {(r['auc'] - target) / target:+9.3f} "
              f"{r['nll_forget']:7.3f} {r['nll_retain']:8.3f} {r['nll_held']:7.3f} {r['seconds']:7.1f}  {r['note']}")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
