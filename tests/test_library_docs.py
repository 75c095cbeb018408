"""docs/guide/library.md is a session that runs: every ```python block of the page, in order, in one namespace.

The blocks run in a directory holding what the page loads — ``finetune/`` (a tiny GPT-2 fine-tuned with plain
``transformers`` code on ``train.jsonl``), ``start/`` (the checkpoint it started from, trained on other
records) and ``heldout.jsonl`` — so the page shows a user's notebook, not a test's setup. A block preceded by
``<!-- docs-test: skip (why) -->`` is not run (the comment says which test runs its recipe).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch
from test_attack_cmd import _tokenizer, _train

PAGE = Path(__file__).resolve().parents[1] / "docs" / "guide" / "library.md"
BLOCK = re.compile(r"(<!-- docs-test: skip[^>]*-->\s*\n)?```python\n(.*?)```", re.S)


def blocks(text: str) -> list[tuple[bool, str]]:
    """(run it, the code) for every Python block of ``text``."""
    return [(m.group(1) is None, m.group(2)) for m in BLOCK.finditer(text)]


def _world(root: Path) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus

    corpus = generate_corpus(ClinicalCorpusConfig(n_public=0, n_members=50, n_non_members=50, n_population=30,
                                                  n_public_heldout=0, phi_fraction=0.5, canary_repeats=(),
                                                  seed=11))
    train, heldout, other = ([r.text for r in corpus.splits[s]] for s in ("members", "non_members", "population"))
    for name, texts in (("train", train), ("heldout", heldout)):
        (root / f"{name}.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    tok = _tokenizer(train + other)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_positions=256, n_embd=32, n_layer=1, n_head=2,
                                       bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id))
    _train(model, tok, other, epochs=2)
    model.save_pretrained(root / "start")
    tok.save_pretrained(root / "start")
    _train(model, tok, train, epochs=8)
    model.save_pretrained(root / "finetune")
    tok.save_pretrained(root / "finetune")


def test_the_page_has_a_session_and_skips_only_what_it_names():
    found = blocks(PAGE.read_text(encoding="utf-8"))
    assert sum(run for run, _ in found) >= 4
    text = PAGE.read_text(encoding="utf-8")
    assert all("tests/test_" in m.group(0) for m in re.finditer(r"<!-- docs-test: skip[^>]*-->", text))


def test_the_library_page_runs(tmp_path, monkeypatch, capsys):
    _world(tmp_path)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "library_md"}
    for run, code in blocks(PAGE.read_text(encoding="utf-8")):
        if run:
            exec(compile(code, str(PAGE), "exec"), namespace)
    printed = capsys.readouterr().out
    assert "strongest membership attack:" in printed and "control's AUC:" in printed
    assert "stages reused" in printed and "no-such-file.jsonl" in printed
    assert (tmp_path / "runs" / "finetune" / "results.json").exists()
    assert (tmp_path / "runs" / "finetune" / "report.html").exists()
    assert namespace["results"].arms["target"].verdict is not None
    assert any("(cached)" in line for line in namespace["lines"])  # the second call with the same out= resumed
