"""The DP recipe for a pretrained checkpoint (SmolLM2-135M), chosen on POPULATION data only (issue 47).

The ``smollm2`` profile's corpus (seed 0) is generated with a larger population split; with the same sizes
for the splits drawn before it, the members and non-members are the profile's own and the population a
superset (``generate_corpus`` draws the splits in order). The population's people are split in two, never a
person on both sides: ``--train`` records to fine-tune on (the size of the profile's member split, so q, σ
and the steps are the ones the profile's arms get) and ``--heldout`` records to measure. No member or
non-member record is read, so choosing among these figures costs no privacy.

Every candidate fine-tunes the pretrained checkpoint on the training people and reports the token-weighted
mean NLL (nats) on the held-out people, and G = (L_base − L) / (L_base − L_best) against

* ``base`` — no fine-tuning, and
* ``best`` — the profile's ``best`` recipe (full fine-tuning, early-stopped on held-out loss), computed once.

Candidates (``--run``, one or more; results appended to ``--out`` as JSON lines, done ones skipped):

    base | best
    dp-<ε>-b<B>-e<E>-lr<lr>-c<C>-r<rank>-l<layers>      DP-LoRA (record-level, book-keeping)
    uls-<ε>-b<B>-e<E>-lr<lr>-c<C>-r<rank>-l<layers>-k<k>  user-level DP-LoRA (people per step B)

``l0`` = every layer. The frozen bottom layers of top-layer candidates are computed once per process and
shared (``models.frozen_prefix``), so run the candidates of one placement in one process. ``--table`` prints
what ``--out`` holds. Seconds are wall and process CPU ÷ threads.

    python bench/bench_dp_recipe_smollm2.py --out /tmp/recipe.jsonl --run base best dp-8-b64-e10-lr3e-3-c0.1-r8-l8
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("PRIVLEAK_PROGRESS", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402
import copy  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import torch  # noqa: E402

warnings.filterwarnings("ignore")

NAME = re.compile(r"^(dp|uls)-(?P<eps>[\d.]+)-b(?P<b>\d+)-e(?P<e>\d+)-lr(?P<lr>[\d.e-]+)-c(?P<c>[\d.e-]+)"
                  r"-r(?P<r>\d+)-l(?P<l>\d+)(?:-k(?P<k>\d+))?(?:-a(?P<a>[\d.]+))?$")


#: Population records the ``best`` run early-stops on (the profile's best.validate_records), apart from the
#: held-out records measured.
VALIDATE = 16


def population_sets(n_train: int, n_heldout: int, max_length: int):
    """(train, held-out, validation) records from the smollm2 profile corpus's enlarged population split, each
    person on one side only."""
    from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus
    from privleak.data.splits import unit_of
    from privleak.policy import PROFILES

    sizes = PROFILES["smollm2"]["data"]["synthetic"]
    corpus = generate_corpus(ClinicalCorpusConfig(
        n_public=sizes["n_public"], n_members=sizes["n_members"], n_non_members=sizes["n_non_members"],
        n_population=2 * (n_train + n_heldout), n_public_heldout=0, seed=0,
        canary_repeats=tuple(PROFILES["smollm2"].get("canaries", {}).get("repeats", (1, 2, 4, 8, 16)))))
    train, held, val, seen = [], [], [], {}
    for r in corpus.splits["population"]:
        person = unit_of(r)
        side = seen.setdefault(person, "train" if len(train) < n_train else
                               "held" if len(held) < n_heldout else "val")
        for name, bucket, cap in (("train", train, n_train), ("held", held, n_heldout), ("val", val, VALIDATE)):
            if side == name and len(bucket) < cap:
                bucket.append(r)
    return train, held, val


def heldout_nll(handle, texts) -> float:
    from privleak.attacks.scoring import score_texts
    from privleak.audit.utility import mean_nll

    return float(mean_nll(score_texts(handle, texts, moments=False, desc="held-out")))


def run_one(name: str, handle, train_recs, held_texts, val_texts, max_length: int) -> dict:
    from privleak.models.batching import encode
    from privleak.models.handle import ModelHandle

    enc = encode(handle.tokenizer, [r.text for r in train_recs], max_length)
    w, c = time.perf_counter(), time.process_time()
    info: dict = {}
    if name == "base":
        model = handle.model
    elif name == "best":
        model = _best(handle, enc, val_texts, max_length, info)
    else:
        m = NAME.match(name)
        if not m:
            raise SystemExit(f"unknown run {name!r}")
        model = _dp(m, handle, enc, train_recs, max_length, info)
    secs = time.perf_counter() - w, (time.process_time() - c) / torch.get_num_threads()
    nll = heldout_nll(ModelHandle(model=model, tokenizer=handle.tokenizer, max_length=max_length), held_texts)
    return {"run": name, "heldout_nll": nll, "train_wall_s": secs[0], "train_cpu_s": secs[1], **info}


def _best(handle, enc, val_texts, max_length, info):
    """The profile's best recipe: train.*/best.* of PROFILES["smollm2"], early-stopped on held-out loss."""
    from privleak.models.batching import encode, pad_batch, sequence_nll
    from privleak.models.train import EarlyStopping, TrainSettings, train
    from privleak.policy import PROFILES

    prof = PROFILES["smollm2"]
    best = prof["best"]
    val = encode(handle.tokenizer, val_texts[: best["validate_records"]], max_length)
    ids, mask = pad_batch(val.ids, handle.pad_id)

    def validate(model) -> float:
        with torch.no_grad():
            return float(sequence_nll(model, ids, mask).mean())

    model = copy.deepcopy(handle.model)
    bs = prof["train"]["batch_size"]
    s = TrainSettings(epochs=best["epochs"], batch_size=bs, lr=best["lr"])
    log = train(model, enc, s, pad_id=handle.pad_id,
                early_stopping=EarlyStopping(validate, every=max(1, len(enc) // bs // 2), patience=best["patience"]))
    info.update(steps=log.steps, best_step=log.best_step)
    return model


def _dp(m, handle, enc, train_recs, max_length, info):
    from privleak.models.dp_train import DPSettings, train_dp
    from privleak.models.user_dp import UserDPSettings, person_labels, train_user_dp

    eps, b, e, lr, c, r, layers = (float(m["eps"]), int(m["b"]), int(m["e"]), float(m["lr"]), float(m["c"]),
                                   int(m["r"]), int(m["l"]) or None)
    alpha = float(m["a"]) if m["a"] else 2.0 * r
    n = len(enc)
    delta = 1.0 / (10 * n)
    if m.group(1) == "dp":
        s = DPSettings(target_epsilon=eps, delta=delta, max_grad_norm=c, epochs=e, expected_batch_size=b, lr=lr,
                       lora_rank=r, lora_alpha=alpha, lora_layers=layers, grad_sample_mode="bk", data_size=n)
        model, log = train_dp(copy.deepcopy(handle.model), enc, s, pad_id=handle.pad_id, max_length=max_length)
        info.update(sigma=log.sigma, q=log.sample_rate, steps=log.steps, epsilon=log.epsilon)
    else:
        persons = person_labels(train_recs)
        s = UserDPSettings(target_epsilon=eps, delta=delta, max_grad_norm=c, epochs=e, expected_batch_size=b, lr=lr,
                           records_per_person=int(m["k"] or 4), lora_rank=r, lora_alpha=alpha, lora_layers=layers)
        model, log = train_user_dp(copy.deepcopy(handle.model), enc, s, pad_id=handle.pad_id, max_length=max_length,
                                   persons=persons)
        info.update(sigma=log.sigma, q=log.sample_rate, steps=log.steps, epsilon_person=log.epsilon,
                    epsilon_record=log.epsilon_record, people=log.people)
    info["losses"] = [round(x, 4) for x in log.losses]
    return model


def table(path: str) -> None:
    rows = [json.loads(x) for x in open(path) if x.strip()]
    by = {r["run"]: r for r in rows}
    lb, lbest = by.get("base", {}).get("heldout_nll"), by.get("best", {}).get("heldout_nll")
    print("| run | held-out NLL | G | steps | σ | train s (wall / CPU) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        g = (lb - r["heldout_nll"]) / (lb - lbest) if lb is not None and lbest is not None and lb > lbest else None
        print(f"| {r['run']} | {r['heldout_nll']:.4f} | {'—' if g is None else f'{g:.2f}'} | {r.get('steps', '—')} | "
              f"{r.get('sigma', float('nan')):.3f} | {r['train_wall_s']:.0f} / {r['train_cpu_s']:.0f} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--run", nargs="*", default=[])
    ap.add_argument("--train", type=int, default=300)
    ap.add_argument("--heldout", type=int, default=100)
    ap.add_argument("--max-length", type=int, default=None)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--table", action="store_true")
    args = ap.parse_args()
    if args.table:
        return table(args.out)
    from privleak.core.threads import intra_op_threads
    from privleak.models.handle import check_model_ref, load_handle
    from privleak.models.smollm2 import locate
    from privleak.policy import PROFILES

    torch.set_num_threads(args.threads or intra_op_threads())
    max_length = args.max_length or PROFILES["smollm2"]["model"]["max_length"]
    done = set()
    if os.path.exists(args.out):
        done = {json.loads(x)["run"] for x in open(args.out) if x.strip()}
    handle = load_handle(check_model_ref(locate()), max_length)
    train_recs, held, val = population_sets(args.train, args.heldout, max_length)
    held_texts, val_texts = [r.text for r in held], [r.text for r in val]
    print(f"{len(train_recs)} training records, {len(held)} held-out, {len(val)} validation (population people, "
          "disjoint)", flush=True)
    for name in args.run:
        if name in done:
            continue
        row = run_one(name, handle, train_recs, held_texts, val_texts, max_length)
        with open(args.out, "a") as fh:
            fh.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)
    table(args.out)


if __name__ == "__main__":
    main()
