"""Issue 45: the new membership attacks (ReCaLL, Con-ReCall, DC-PDD) beside the old (LOSS, zlib, min-k%, min-k%++)
on a real tokenizer — SmolLM2-135M's 49,152-token byte-level BPE, the suite's real-tokenizer fixture
(``tests/test_real_tokenizer.py``: a tiny random Llama over that vocabulary, fine-tuned on the members), at a
larger size than the test's so the AUCs mean something.

    python bench/bench_attacks_real_tokenizer.py [--members 150] [--seed 5]

Prints each attack's AUC and TPR at 1 % FPR from one ``privleak attack`` run over the same model and splits, so
the comparison is within one run. Skips (exit 0) without SmolLM2's package file, as the tests do.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ATTACKS = ("loss", "zlib", "min_k", "min_k_pp", "recall", "con_recall", "dc_pdd")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--members", type=int, default=150)
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args()

    import pytest

    from privleak.cli import main as cli
    from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus, write_corpus
    from privleak.report.schema import load_results
    from tests import test_real_tokenizer as rt

    class _Factory:  # the fixture's tmp_path_factory, outside pytest
        def __init__(self, root: Path):
            self.root = root

        def mktemp(self, name: str) -> Path:
            p = self.root / name
            p.mkdir()
            return p

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        try:
            tok = rt.tok.__wrapped__(_Factory(root))
        except pytest.skip.Exception as exc:
            print(f"skipped: {exc}")
            return 0
        n = args.members
        corpus = generate_corpus(ClinicalCorpusConfig(
            n_public=0, n_members=n, n_non_members=n, n_population=max(40, n // 3), n_public_heldout=0,
            phi_fraction=0.6, canary_repeats=(1, 8), canaries_per_repeat=1, seed=args.seed))
        write_corpus(corpus, root / "data")
        t0 = time.perf_counter()
        rt._tiny_llama_on(tok, [r.text for r in corpus.splits["members"]], root / "model")
        t_train = time.perf_counter() - t0
        select = ", ".join(ATTACKS)
        (root / "cfg.yaml").write_text(f"profile: smoke\nattacks: {{select: [{select}], extraction: false, pii: false, "
                                       "bootstrap: 200}\n")
        d = root / "data"
        t0 = time.perf_counter()
        try:
            cli(["attack", "--target", str(root / "model"), "--members", str(d / "members.jsonl"), "--non-members",
                 str(d / "non_members.jsonl"), "--population", str(d / "population.jsonl"), "--canaries",
                 str(d / "canaries.json"), "--out", str(root / "run"), "-c", str(root / "cfg.yaml"),
                 "--seed", str(args.seed), "--format", "plain"])
        except SystemExit as exc:
            if exc.code not in (0, None):
                return int(exc.code)
        t_attack = time.perf_counter() - t0
        arm = load_results(root / "run").arms["target"]
        print(f"\nreal tokenizer (SmolLM2, {len(tok)} tokens), tiny Llama, {n} members / {n} non-members, "
              f"seed {args.seed}: trained {t_train:.1f} s, attacked {t_attack:.1f} s")
        print(f"{'attack':<12} {'AUC':>6} {'95% CI':>15} {'TPR@1%':>7}")
        for name in ATTACKS:
            a = arm.attacks.get(name)
            if a is None:
                print(f"{name:<12} (not run)")
                continue
            ci = a.auc_ci95
            ci_s = f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""
            print(f"{name:<12} {a.auc:6.3f} {ci_s:>15} {a.tpr_at_1pct_fpr:7.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
