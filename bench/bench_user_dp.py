"""User-level DP (ULS / ELS), caps and the public-gradient option, measured on POPULATION data only.

The default synthetic corpus (seed 0) is generated with a larger population
split (2,600 records; the public split, hence the embedded base model, is
the default audit's). Its people are split in two, never a person on both
sides: the first people up to 1,293 records (the default members' size, canaries
included) are the training set, the rest the held-out set. Every run fine-tunes
the default base model on the training set and reports the token-weighted
mean NLL (nats) on the held-out set — no member record is ever read, so the
choices made from these figures cost no privacy.

Runs (``--run NAME``, one per process, results appended to ``--out``):

    base                 no fine-tuning
    dp-8, dp-1           record-level DP-SGD (train_dp, bk), the audit's recipe (dp_recipe)
    uls-8-k4             ULS at person-level ε = 8, at most 4 records per person per step
    els-8-k2             ELS at person-level ε = 8, 2 records per person kept
    …+pub0.25            any of the above with the public gradient at weight 0.25
    …+sum                ULS with the person's summed (not mean) loss

``--table`` prints what ``--out`` holds. Times are wall seconds and process
CPU seconds at ``--threads`` (on a shared machine compare CPU seconds).

    PRIVLEAK_CACHE=... python bench/bench_user_dp.py --out /tmp/udp.jsonl --run uls-8-k4 --threads 2
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
import warnings

os.environ.setdefault("PRIVLEAK_PROGRESS", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
warnings.filterwarnings("ignore")

import torch

from privleak.accountants import group_epsilon_direct
from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus
from privleak.data.splits import unit_of
from privleak.models.base import BaseModelSpec, default_base_model
from privleak.models.batching import encode, pad_batch, position_ids_for
from privleak.models.dp_train import DPSettings, train_dp
from privleak.models.handle import clone_model
from privleak.models.user_dp import UserDPSettings, train_user_dp, user_dp_recipe
from privleak.policy import dp_recipe

N_TRAIN = 1293  # the default members: 1,200 records + 93 canary copies
LR = 3e-3  # DPConfig.lr
NAME = re.compile(r"^(base|dp|uls|els)(?:-(\d+(?:\.\d+)?))?(?:-k(\d+))?((?:\+(?:pub[\d.]+|sum))*)$")


def population_sets():
    corpus = generate_corpus(ClinicalCorpusConfig(n_population=2600, seed=0))
    pop = corpus.splits["population"]
    people: dict[tuple, list] = {}
    for r in pop:
        people.setdefault(unit_of(r), []).append(r)
    train, held, persons = [], [], []
    for unit, records in people.items():
        if len(train) < N_TRAIN:
            train += records
            persons += [unit] * len(records)
        else:
            held += records
    return corpus.splits["public"], train, persons, held


@torch.no_grad()
def held_out_nll(model, data, pad_id: int) -> float:
    """Token-weighted mean NLL (the audit's utility figure, ``audit.utility.mean_nll``)."""
    model.eval()
    total, count = 0.0, 0
    for i in range(0, len(data.ids), 32):
        ids, mask = pad_batch(data.ids[i:i + 32], pad_id)
        logits = model(input_ids=ids, attention_mask=mask, position_ids=position_ids_for(mask)).logits
        logp = torch.log_softmax(logits[:, :-1].float(), -1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
        m = mask[:, 1:].float()
        total += float(-(logp * m).sum())
        count += int(m.sum())
    return total / count


def run(name: str, threads: int) -> dict:
    m = NAME.match(name)
    if not m:
        sys.exit(f"bad run name {name!r}")
    method, eps, cap, extras = m.group(1), float(m.group(2) or 0), int(m.group(3) or 4), m.group(4) or ""
    pub = re.search(r"pub([\d.]+)", extras)
    weight = float(pub.group(1)) if pub else 0.0
    torch.set_num_threads(threads)
    public, train, persons, held = population_sets()
    handle, _ = default_base_model(BaseModelSpec(seed=0), [r.text for r in public])
    tok, L = handle.tokenizer, handle.max_length
    data = encode(tok, [r.text for r in train], L)
    heldout = encode(tok, [r.text for r in held], L)
    public_data = encode(tok, [r.text for r in public], L) if weight > 0 else None
    delta = 1.0 / (10.0 * len(train))
    model = clone_model(handle.model)
    out: dict = {"run": name, "threads": threads, "train_records": len(train), "people": len(set(persons)),
                 "heldout_records": len(held), "delta": delta}
    t0, c0 = time.time(), time.process_time()
    if method == "dp":
        batch, epochs = dp_recipe(len(train), eps)
        s = DPSettings(target_epsilon=eps, delta=delta, max_grad_norm=1.0, epochs=epochs, expected_batch_size=batch, lr=LR,
                       grad_sample_mode="bk", public_weight=weight)
        model, log = train_dp(model, data, s, handle.pad_id, L, desc=name, public=public_data)
        largest = max(persons.count(p) for p in set(persons))
        out.update(sigma=log.sigma, q=log.sample_rate, steps=log.steps, epsilon_record=log.epsilon, batch=batch, epochs=epochs,
                   largest_person=largest,
                   epsilon_person=group_epsilon_direct(sample_rate=log.sample_rate, noise_multiplier=log.sigma,
                                                       steps=log.steps, delta=delta, group_size=largest))
    elif method in ("uls", "els"):
        n_people = len(set(persons))
        if method == "uls":
            batch, epochs = user_dp_recipe(n_people, eps)
        else:
            kept = sum(min(cap, persons.count(p)) for p in set(persons))
            batch, epochs = dp_recipe(kept, eps)
        s = UserDPSettings(target_epsilon=eps, delta=delta, max_grad_norm=1.0, epochs=epochs, expected_batch_size=batch,
                           lr=LR, records_per_person=cap, method=method, public_weight=weight,
                           reduction="sum" if "+sum" in extras else "mean")
        model, log = train_user_dp(model, data, s, handle.pad_id, L, persons, desc=name, public=public_data)
        out.update(sigma=log.sigma, q=log.sample_rate, steps=log.steps, epsilon_person=log.epsilon,
                   epsilon_person_pld=log.epsilon_pld, epsilon_record=log.epsilon_record, batch=batch, epochs=epochs,
                   cap=log.records_per_person, people_per_step=log.people_per_step, records_per_step=log.records_per_step,
                   records_used=log.records_used)
    out["train_wall_s"] = round(time.time() - t0, 1)
    out["train_cpu_s"] = round(time.process_time() - c0, 1)
    out["heldout_nll"] = held_out_nll(model, heldout, handle.pad_id)
    return out


def table(path: str) -> None:
    rows = [json.loads(line) for line in open(path)]
    print(f"{'run':<22}{'held-out NLL':>13}{'ε person':>10}{'ε record':>10}{'σ':>8}{'q':>8}{'T':>5}"
          f"{'wall s':>8}{'cpu s':>8}")
    for r in rows:
        f = lambda k, fmt: format(r[k], fmt) if isinstance(r.get(k), (int, float)) and not math.isnan(r[k]) else "—"  # noqa: E731
        print(f"{r['run']:<22}{f('heldout_nll', '13.4f')}{f('epsilon_person', '10.2f')}{f('epsilon_record', '10.2f')}"
              f"{f('sigma', '8.3f')}{f('q', '8.3f')}{f('steps', '5d')}{f('train_wall_s', '8.0f')}{f('train_cpu_s', '8.0f')}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--run", action="append", default=[])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--table", action="store_true")
    args = ap.parse_args()
    for name in args.run:
        result = run(name, args.threads)
        with open(args.out, "a") as fh:
            fh.write(json.dumps(result) + "\n")
        print(json.dumps(result), flush=True)
    if args.table:
        table(args.out)


if __name__ == "__main__":
    main()
