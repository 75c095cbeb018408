"""Issue 48's outside-model agreement: ``privleak.attack`` on a model object vs ``privleak attack`` on its directory.

A model trained without PrivLeak (plain ``transformers`` code, tests/test_attack_cmd.py's recipe at a larger
size: 4 layers, 128 dims, 600 member notes), or the model directory given with ``--target``, is attacked twice
with the same member / non-member files and seed: by the command line on the saved directory, and by the library
on the model loaded in memory with its tokenizer. Prints one JSON line: every membership attack's AUC by both
doors, the largest difference (the issue asks ≤ 0.02; the same computation should give 0) and each door's time.

    python bench/library_agreement.py --out /tmp/agreement [--target DIR --members M.jsonl --non-members N.jsonl]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def _world(out: Path) -> tuple[Path, Path, Path]:
    import torch
    from test_attack_cmd import _tokenizer, _train
    from transformers import GPT2Config, GPT2LMHeadModel

    from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus, write_corpus

    corpus = generate_corpus(ClinicalCorpusConfig(n_public=0, n_members=600, n_non_members=600, n_population=0,
                                                  n_public_heldout=0, phi_fraction=0.5, canary_repeats=(), seed=21))
    write_corpus(corpus, out / "data")
    texts = [r.text for r in corpus.splits["members"]]
    tok = _tokenizer(texts)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_positions=256, n_embd=128, n_layer=4, n_head=4,
                                       bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id))
    _train(model, tok, texts, epochs=6)
    model.save_pretrained(out / "model", safe_serialization=True)
    tok.save_pretrained(out / "model")
    return out / "model", out / "data" / "members.jsonl", out / "data" / "non_members.jsonl"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--target", type=Path)
    ap.add_argument("--members", type=Path)
    ap.add_argument("--non-members", type=Path)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    target, members, non_members = (a.target, a.members, a.non_members) if a.target else _world(a.out)

    import privleak
    from privleak.report.schema import load_results
    from transformers import AutoModelForCausalLM, AutoTokenizer

    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "privleak", "attack", "--target", str(target), "--members", str(members),
                    "--non-members", str(non_members), "--seed", str(a.seed), "--out", str(a.out / "cli")],
                   check=True, capture_output=True)
    t_cli = time.perf_counter() - t0
    cli = load_results(a.out / "cli").arms["target"].membership()

    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(target)
    tokenizer = AutoTokenizer.from_pretrained(target)
    lib = privleak.attack(model, members, non_members, tokenizer=tokenizer, seed=a.seed,
                          out=a.out / "lib").arms["target"].membership()
    t_lib = time.perf_counter() - t0

    aucs = {name: [round(cli[name].auc, 6), round(lib[name].auc, 6)] for name in cli if name in lib}
    diff = max(abs(c - l) for c, l in aucs.values())
    print(json.dumps({"auc_cli_lib": aucs, "max_abs_diff": diff, "within_0.02": diff <= 0.02,
                      "cli_s": round(t_cli, 1), "library_s": round(t_lib, 1)}))


if __name__ == "__main__":
    main()
