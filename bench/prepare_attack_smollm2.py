"""A 135 M fine-tune trained outside PrivLeak, and its record files, for timing ``privleak attack`` (issue 47).

Writes, under OUT (default ``/tmp/privleak-attack-smollm2``):

* ``members.jsonl``, ``non_members.jsonl``, ``population.jsonl`` — 120 / 120 / 120 synthetic clinical notes
  (seed 0, with PII spans), ``canaries.json`` — the canaries planted in the members;
* ``target/`` — SmolLM2-135M-Instruct fully fine-tuned on the members as plain ``transformers`` code would do it
  (``tokenizer(text)``, the ``plain`` format; 3 epochs, batch 8, AdamW at 1e-4, fp32), saved with
  ``save_pretrained``.

Then prints the command to time (run it through ``../shared/tools/measure``)::

    python bench/prepare_attack_smollm2.py [--out DIR] [--records 120]

Nothing here is timed: the fine-tune stands in for a user's model. Re-running reuses what is there.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/privleak-attack-smollm2")
    ap.add_argument("--records", type=int, default=120)
    ap.add_argument("--max-length", type=int, default=160)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    from privleak.data.canaries import save_canaries
    from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus
    from privleak.data.records import write_jsonl

    n = args.records
    corpus = generate_corpus(ClinicalCorpusConfig(n_public=0, n_members=n, n_non_members=n, n_population=n,
                                                  n_public_heldout=0, canary_repeats=(1, 4, 16),
                                                  canaries_per_repeat=1, seed=0))
    for split in ("members", "non_members", "population"):
        write_jsonl(out / f"{split}.jsonl", corpus.splits[split])
    save_canaries(out / "canaries.json", corpus.canaries)
    members = corpus.splits["members"]

    target = out / "target"
    if not (target / "config.json").exists():
        from privleak.models.batching import encode
        from privleak.models.handle import check_model_ref, load_handle, save_handle
        from privleak.models.smollm2 import locate
        from privleak.models.train import TrainSettings, train

        handle = load_handle(check_model_ref(locate()), args.max_length)
        data = encode(handle.tokenizer, [r.text for r in members], args.max_length, "plain")
        train(handle.model, data, TrainSettings(epochs=3.0, batch_size=8, lr=1e-4), pad_id=handle.pad_id,
              desc="fine-tune SmolLM2 on the members")
        save_handle(handle, target)
    print(f"{len(members)} members (canaries planted), {n} non-members, {n} population records under {out}")
    print("time with:\n  ../shared/tools/measure --label attack-smollm2 -- privleak attack "
          f"--target {target} --reference smollm2 --members {out}/members.jsonl "
          f"--non-members {out}/non_members.jsonl --population {out}/population.jsonl "
          f"--canaries {out}/canaries.json --format plain --out {out}/run")


if __name__ == "__main__":
    main()
