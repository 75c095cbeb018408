"""``privleak attack``: a model trained outside PrivLeak, audited with the pipeline's own battery.

The model here is trained with plain ``transformers`` code (no PrivLeak
training code) as a new user trains one — ``tokenizer(text)``, no special
tokens added by hand — on the members of a small synthetic corpus with two
planted canaries. ``privleak attack`` scores it in that format by default
(``plain``): its LOSS AUC and canary exposures must be those of the
pipeline's own evaluation stages run on the same model and splits in the
same format, and its LOSS and reference AUCs those computed here directly
with ``transformers``; a PEFT adapter, a hub id from the local cache and tiny random Llama /
GPT-NeoX / Qwen2 models go through the command; bad input is one line and
exit 2; an interrupted audit resumes without redoing finished attacks; a
shifted member / non-member split is flagged.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from privleak.cli import main
from privleak.report.schema import load_results

SMALL_ATTACKS = ("canaries: {candidates: 200}\n"
                 "attacks: {bootstrap: 10, extraction_samples: 20, prefix_records: 20, phi_records: 10}\n")
EOS = "<|endoftext|>"


# --------------------------------------------------------------------------- a model trained outside PrivLeak

def _tokenizer(texts: list[str]):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=400, special_tokens=[EOS], show_progress=False,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=EOS, eos_token=EOS, pad_token=EOS)


def _train(model, tok, texts: list[str], epochs: int = 15) -> None:
    """Plain causal-LM fine-tuning: ``tokenizer(text)`` (this tokenizer adds no special token), AdamW, batches of
    8, loss on every real token."""
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    enc = [tok(t)["input_ids"][:160] for t in texts]
    gen = torch.Generator().manual_seed(0)
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(enc), generator=gen).tolist()
        for i in range(0, len(order), 8):
            batch = [enc[j] for j in order[i:i + 8]]
            width = max(map(len, batch))
            ids = torch.full((len(batch), width), tok.eos_token_id)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for k, s in enumerate(batch):
                ids[k, :len(s)] = torch.tensor(s)
                mask[k, :len(s)] = 1
            loss = model(input_ids=ids, attention_mask=mask, labels=ids.masked_fill(mask == 0, -100)).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The corpus files (PrivLeak JSONL with PII spans + canaries.json) and a tiny GPT-2 trained on the members."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus, write_corpus

    root = tmp_path_factory.mktemp("attack-world")
    corpus = generate_corpus(ClinicalCorpusConfig(n_public=0, n_members=80, n_non_members=80, n_population=30,
                                                  n_public_heldout=0, phi_fraction=0.5, canary_repeats=(1, 8),
                                                  canaries_per_repeat=1, seed=3))
    write_corpus(corpus, root / "data")
    texts = [r.text for r in corpus.splits["members"]]  # canary copies included: the model trains on them
    tok = _tokenizer(texts)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_positions=256, n_embd=64, n_layer=1, n_head=2,
                                       bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id))
    # The "pretrained checkpoint": briefly trained on the population split, which the target never sees —
    # the reference a fine-tune is audited against.
    _train(model, tok, [r.text for r in corpus.splits["population"]], epochs=3)
    model.save_pretrained(root / "start", safe_serialization=True)
    tok.save_pretrained(root / "start")
    _train(model, tok, texts)
    model.save_pretrained(root / "model", safe_serialization=True)
    tok.save_pretrained(root / "model")
    (root / "small.yaml").write_text(SMALL_ATTACKS)
    return root


def _args(world: Path, out: Path, *extra: str) -> list[str]:
    d = world / "data"
    return ["attack", "--target", str(world / "model"), "--members", str(d / "members.jsonl"),
            "--non-members", str(d / "non_members.jsonl"), "--out", str(out), "--seed", "3",
            "-c", str(world / "small.yaml"), *extra]


def _attack(argv: list[str]) -> None:
    try:
        main(argv)
    except SystemExit as exc:  # typer's standalone exit on success
        assert exc.code in (0, None), exc.code


@pytest.fixture(scope="module")
def full_run(world, tmp_path_factory):
    """The whole battery on the externally trained model (no reference: no control)."""
    out = tmp_path_factory.mktemp("attack-full") / "run"
    d = world / "data"
    _attack(_args(world, out, "--population", str(d / "population.jsonl"), "--canaries", str(d / "canaries.json")))
    return out


def test_results_and_report(full_run):
    res = load_results(full_run)
    assert res.base_model is None  # no --reference: no control
    assert list(res.arms) == ["target"]
    arm = res.arms["target"]
    assert arm.kind == "external" and arm.details is not None and not arm.details.adapter
    # Every attack that needs no training and has its inputs ran; those needing a reference did not.
    for name in ("loss", "zlib", "min_k", "min_k_pp", "exposure", "canary_extraction", "prefix_extraction",
                 "sampling_extraction", "phi_extraction", "pii_extraction", "pii_reconstruction", "pii_inference"):
        assert name in arm.attacks, name
    assert "reference" not in arm.attacks and "rmia" not in arm.attacks
    assert any("not run: the reference attack and RMIA" in w for w in res.warnings)
    assert arm.attacks["loss"].auc > 0.7  # the model memorised its members
    assert arm.verdict is not None and arm.verdict.level in ("some", "leaks")
    assert res.recommendation is None
    html = (full_run / "report.html").read_text()
    assert "target" in html and "LOSS" in html


def test_same_loss_auc_and_exposure_as_the_pipeline(world, full_run, tmp_path):
    """The pipeline's own evaluation stages on the same model and splits give the same figures."""
    from privleak.config import build_config
    from privleak.data.canaries import load_canaries
    from privleak.data.clinical import read_corpus
    from privleak.data.records import write_jsonl
    from privleak.data.canaries import save_canaries
    from privleak.attacks.inputs import MODEL
    from privleak.pipeline.audit import SPLITS, Audit, ModelInfo
    from privleak.pipeline.evaluate import family_input, read_stage
    from privleak.pipeline.rundir import RunDir

    # Only the two attacks compared: the hand-built audit has no base model, which DC-PDD's token table and the
    # neighbours are made with (privleak attack gives them one only with --reference).
    cfg = build_config({"canaries": {"candidates": 200}, "attacks": {"bootstrap": 10, "select": ["loss", "exposure"]}},
                       {"seed": 3, "one_run": {"canaries": 0}, "model": {"text_format": "plain"}})
    run = RunDir.open(tmp_path / "pipe")
    corpus = read_corpus(world / "data")
    (run.root / "splits").mkdir()
    for name in SPLITS:
        write_jsonl(run.path("splits", f"{name}.jsonl"), corpus.splits.get(name, []) if name not in ("public", "public_heldout") else [])
    save_canaries(run.path("splits", "canaries.json"), load_canaries(world / "data" / "canaries.json"))
    audit = Audit(cfg=cfg, run=run, notify=lambda s: None)
    audit.inputs.models["baseline"] = ModelInfo("baseline", "provided", model_dir=str(world / "model"))
    audit.inputs.fix(MODEL, "baseline", value="k")
    audit.inputs.produce(family_input("membership"), "baseline")
    audit.inputs.produce(family_input("canaries"), "baseline")
    pipe = {**read_stage(audit, "baseline", "membership").results, **read_stage(audit, "baseline", "canaries").results}

    ours = load_results(full_run).arms["target"].attacks
    assert ours["loss"].auc == pytest.approx(pipe["loss"].auc, abs=1e-12)
    assert ours["loss"].n_members == pipe["loss"].n_members
    mine = {c.canary_id: c.exposure for c in ours["exposure"].canaries}
    theirs = {c.canary_id: c.exposure for c in pipe["exposure"].canaries}
    assert mine and mine == pytest.approx(theirs, abs=1e-9)


@pytest.mark.parametrize("reference", [False, True], ids=["alone", "with-reference"])
def test_loss_auc_matches_a_direct_computation(world, tmp_path, reference):
    """Distinct plain-text records (each its own unit, every one evaluated): LOSS AUC = sklearn's AUC of the
    negative mean token NLL computed here with transformers as a user would (``model(ids, labels=ids).loss`` on
    ``tokenizer(text)``), with and without the starting checkpoint as ``--reference``; with it, the reference
    attack's AUC = that of NLL_reference − NLL_target."""
    from sklearn.metrics import roc_auc_score
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from privleak.data.clinical import read_corpus

    corpus = read_corpus(world / "data")
    mem = [r.text for r in corpus.splits["members"] if r.kind != "canary"][:30]
    non = [r.text for r in corpus.splits["non_members"]][:30]
    (tmp_path / "m.txt").write_text("\n".join(t.replace("\n", " ") for t in mem) + "\n")
    (tmp_path / "n.txt").write_text("\n".join(t.replace("\n", " ") for t in non) + "\n")
    out = tmp_path / "run"
    _attack(["attack", "--target", str(world / "model"), "--members", str(tmp_path / "m.txt"),
             "--non-members", str(tmp_path / "n.txt"), "--out", str(out), "-c", str(world / "small.yaml"),
             *(["--reference", str(world / "start")] if reference else [])])
    res = load_results(out)
    attacks = res.arms["target"].attacks
    loss = attacks["loss"]
    if loss.n_members != 30:  # near-duplicate notes merged: the direct computation would compare other sets
        pytest.skip(f"{30 - loss.n_members} near-duplicate records merged")
    assert res.arms["target"].details.text_format == "plain"
    tok = AutoTokenizer.from_pretrained(world / "model")

    def nll(model_dir: Path) -> list[float]:
        model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
        out = []
        for text in mem + non:
            ids = torch.tensor([tok(" ".join(text.split()))["input_ids"][:160]])
            with torch.no_grad():
                out.append(float(model(input_ids=ids, labels=ids).loss))
        return out

    y = [1] * 30 + [0] * 30
    target = nll(world / "model")
    direct = roc_auc_score(y, [-x for x in target])
    assert loss.auc == pytest.approx(direct, abs=1e-6)  # the issue asks within 0.01; the same computation gives 1e-6
    assert loss.auc > 0.8  # the model memorised its members: the check is not between two chance-level figures
    if reference:
        start = nll(world / "start")
        direct_ref = roc_auc_score(y, [s - t for s, t in zip(start, target)])
        assert attacks["reference"].auc == pytest.approx(direct_ref, abs=1e-6)
        assert res.base_model is not None  # the starting checkpoint is the control
    else:
        assert "reference" not in attacks


def test_privleak_format_understates_a_plain_trained_model(world, tmp_path):
    """Scoring the plain-trained model in PrivLeak's own format (<eos> text <eos>, --format privleak) is scoring
    it in a format it never saw: its results say so, and they differ from the default's."""
    d = world / "data"
    args = ["--target", str(world / "model"), "--members", str(d / "members.jsonl"), "--non-members",
            str(d / "non_members.jsonl"), "-c", str(tmp_path / "cfg.yaml")]
    (tmp_path / "cfg.yaml").write_text("attacks: {bootstrap: 10, select: [membership]}\n")
    _attack(["attack", *args, "--out", str(tmp_path / "p"), "--format", "privleak"])
    _attack(["attack", *args, "--out", str(tmp_path / "d")])
    p, dflt = (load_results(tmp_path / x).arms["target"] for x in ("p", "d"))
    assert p.details.text_format == "privleak" and p.details.text_frame.startswith("privleak: <|endoftext|> before")
    assert dflt.details.text_format == "plain"
    assert p.attacks["loss"].auc != pytest.approx(dflt.attacks["loss"].auc, abs=1e-9)


# --------------------------------------------------------------------------- other targets

def test_peft_adapter_target(world, tmp_path):
    """A LoRA adapter on --base gives the figures of the merged model, and differs from the base."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base = AutoModelForCausalLM.from_pretrained(world / "model")
    peft_model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["c_attn"], fan_in_fan_out=True,
                                                 task_type="CAUSAL_LM"))
    torch.manual_seed(1)
    with torch.no_grad():
        for n, p in peft_model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.3)  # a trained adapter is not the identity
    peft_model.save_pretrained(tmp_path / "adapter")
    merged = peft_model.merge_and_unload()
    merged.save_pretrained(tmp_path / "merged", safe_serialization=True)
    AutoTokenizer.from_pretrained(world / "model").save_pretrained(tmp_path / "merged")
    (tmp_path / "cfg.yaml").write_text("attacks: {bootstrap: 10, select: [membership]}\n")
    d = world / "data"
    common = ["--members", str(d / "members.jsonl"), "--non-members", str(d / "non_members.jsonl"),
              "--reference", str(world / "model"), "-c", str(tmp_path / "cfg.yaml")]
    _attack(["attack", "--target", str(tmp_path / "adapter"), "--base", str(world / "model"),
             "--out", str(tmp_path / "a"), *common])
    _attack(["attack", "--target", str(tmp_path / "merged"), "--out", str(tmp_path / "m"), *common])
    a, m = load_results(tmp_path / "a"), load_results(tmp_path / "m")
    arm = a.arms["target"]
    assert arm.details.adapter and arm.details.base == str(world / "model")
    assert a.base_model is not None and "reference" in arm.attacks  # the reference is the control too
    assert arm.attacks["loss"].auc == pytest.approx(m.arms["target"].attacks["loss"].auc, abs=1e-6)
    assert arm.attacks["reference"].auc == pytest.approx(m.arms["target"].attacks["reference"].auc, abs=1e-6)
    assert arm.utility.ppl_non_members != pytest.approx(a.base_model.utility.ppl_non_members, rel=1e-3)


@pytest.mark.parametrize("arch", ["llama", "gpt_neox", "qwen2"])
def test_tiny_architectures(world, tmp_path, arch):
    """Randomly initialised tiny Llama / GPT-NeoX / Qwen2 models, built here from configs, go through attack."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(world / "model")
    size = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                max_position_embeddings=256, vocab_size=len(tok), bos_token_id=tok.eos_token_id,
                eos_token_id=tok.eos_token_id)
    if arch != "gpt_neox":
        size["num_key_value_heads"] = 2
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(arch, **size))
    model.save_pretrained(tmp_path / "m", safe_serialization=True)
    tok.save_pretrained(tmp_path / "m")
    (tmp_path / "cfg.yaml").write_text("canaries: {candidates: 100}\nattacks: {bootstrap: 5, select: [membership, "
                                       "canaries, prefix_extraction], prefix_records: 5}\n")
    d = world / "data"
    _attack(["attack", "--target", str(tmp_path / "m"), "--members", str(d / "members.jsonl"),
             "--non-members", str(d / "non_members.jsonl"), "--canaries", str(d / "canaries.json"),
             "--reference", str(tmp_path / "m"), "--out", str(tmp_path / "run"), "-c", str(tmp_path / "cfg.yaml")])
    arm = load_results(tmp_path / "run").arms["target"]
    assert {"loss", "min_k_pp", "reference", "exposure", "prefix_extraction"} <= set(arm.attacks)
    assert 0.0 <= arm.attacks["loss"].auc <= 1.0
    assert arm.attacks["reference"].auc == pytest.approx(0.5)  # target = reference: the scores tie everywhere


def _fake_hub_cache(root: Path, repo: str, model_dir: Path) -> Path:
    """The local Hugging Face cache layout (models--org--name/snapshots/<rev>, refs/main) holding ``model_dir``."""
    rev = "0" * 40
    entry = root / ("models--" + repo.replace("/", "--"))
    snap = entry / "snapshots" / rev
    shutil.copytree(model_dir, snap)
    (entry / "refs").mkdir(parents=True)
    (entry / "refs" / "main").write_text(rev)
    return snap


def test_hub_id_from_the_local_cache(world, tmp_path, monkeypatch):
    from privleak.models.external import check_target

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    snap = _fake_hub_cache(tmp_path / "hub", "someone/tiny", world / "model")
    ref = check_target("someone/tiny", None)
    assert Path(ref.path).resolve() == snap.resolve() and ref.ref == "someone/tiny"


# --------------------------------------------------------------------------- bad input

def _one_line(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert exc.value.code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def _bad_inputs(world: Path, tmp: Path) -> dict[str, tuple[list[str], str]]:
    d = world / "data"
    (tmp / "empty.jsonl").write_text("")
    (tmp / "bad.jsonl").write_text('{"text": "fine"}\n{"text": broken\n')
    lines = (d / "non_members.jsonl").read_text().splitlines()
    (tmp / "overlap.jsonl").write_text("\n".join(lines[:20] + [(d / "members.jsonl").read_text().splitlines()[0]]) + "\n")
    (tmp / "notmodel").mkdir()
    (tmp / "notmodel" / "weights.txt").write_text("x")
    shutil.copytree(world / "model", tmp / "automap")
    cfg = json.loads((tmp / "automap" / "config.json").read_text())
    cfg["auto_map"] = {"AutoModelForCausalLM": "modeling_evil.EvilLM"}
    (tmp / "automap" / "config.json").write_text(json.dumps(cfg))
    (tmp / "adapter").mkdir()
    (tmp / "adapter" / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA",
                                                                      "base_model_name_or_path": "gpt2"}))
    (tmp / "adapter" / "adapter_model.safetensors").write_bytes(b"")
    (tmp / "three.txt").write_text("one record\nanother record\na third one\n")
    (tmp / "deep.jsonl").write_text('{"text": "fine"}\n' + "[" * 200_000 + "]" * 200_000 + "\n")
    (tmp / "bignum.jsonl").write_text('{"text": "fine", "n": ' + "7" * 100_000 + "}\n")
    (tmp / "deep-privleak.jsonl").write_text('{"text": "fine", "pii": [], "meta": {}}\n'
                                             + '{"text": "x", "pii": ' + "[" * 200_000 + "]" * 200_000 + "}\n")
    (tmp / "deep-canaries.json").write_text('{"canaries": ' + "[" * 200_000 + "]" * 200_000 + "}")
    m, n = str(d / "members.jsonl"), str(d / "non_members.jsonl")
    model = str(world / "model")
    base = ["attack", "--out", str(tmp / "out")]
    return {
        "missing members": (base + ["--target", model, "--members", str(tmp / "nope.jsonl"), "--non-members", n],
                            "--members"),
        "empty members": (base + ["--target", model, "--members", str(tmp / "empty.jsonl"), "--non-members", n],
                          "empty"),
        "bad JSONL": (base + ["--target", model, "--members", m, "--non-members", str(tmp / "bad.jsonl")], "line 2"),
        "overlap": (base + ["--target", model, "--members", m, "--non-members", str(tmp / "overlap.jsonl")],
                    "also in --members"),
        "not a model": (base + ["--target", str(tmp / "notmodel"), "--members", m, "--non-members", n],
                        "config.json"),
        "auto_map": (base + ["--target", str(tmp / "automap"), "--members", m, "--non-members", n], "auto_map"),
        "adapter without base": (base + ["--target", str(tmp / "adapter"), "--members", m, "--non-members", n],
                                 "--base"),
        "base on a full model": (base + ["--target", model, "--base", model, "--members", m, "--non-members", n],
                                 "drop --base"),
        "hub id not cached": (base + ["--target", "nobody/absent-model", "--members", m, "--non-members", n],
                              "not in the local Hugging Face cache"),
        "missing canaries": (base + ["--target", model, "--members", m, "--non-members", n, "--canaries",
                                     str(tmp / "c.json")], "--canaries"),
        "too few records": (base + ["--target", model, "--members", m, "--non-members", str(tmp / "three.txt")],
                            "need ≥ 5"),
        "device": (base + ["--target", model, "--members", m, "--non-members", n, "--device", "tpu"], "--device"),
        # issue 30: JSON past the limits is one line, not a RecursionError or ValueError
        "deep JSONL": (base + ["--target", model, "--members", m, "--non-members", str(tmp / "deep.jsonl")],
                       "nested more than 64 levels"),
        "huge number": (base + ["--target", model, "--members", m, "--non-members", str(tmp / "bignum.jsonl")],
                        "a number of 100,000 characters"),
        "deep PrivLeak JSONL": (base + ["--target", model, "--members", str(tmp / "deep-privleak.jsonl"),
                                        "--non-members", n], "nested more than 64 levels"),
        "deep canaries": (base + ["--target", model, "--members", m, "--non-members", n, "--canaries",
                                  str(tmp / "deep-canaries.json")], "nested more than 64 levels"),
        # issue 30: a flag that cannot take effect is refused, not ignored
        "text field on PrivLeak JSONL": (base + ["--target", model, "--members", m, "--non-members", n,
                                                 "--text-field", "nope"], "--text-field nope"),
        "format": (base + ["--target", model, "--members", m, "--non-members", n, "--format", "chatml"],
                   "--format chatml: unknown text format"),
    }


CASES = ["missing members", "empty members", "bad JSONL", "overlap", "not a model", "auto_map", "adapter without base",
         "base on a full model", "hub id not cached", "missing canaries", "too few records", "device",
         "deep JSONL", "huge number", "deep PrivLeak JSONL", "deep canaries", "text field on PrivLeak JSONL", "format"]


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_one_line_exit_2(world, tmp_path, capsys, monkeypatch, case):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    argv, needle = _bad_inputs(world, tmp_path)[case]
    line = _one_line(argv, capsys)
    assert needle in line, line
    assert not (tmp_path / "out").exists()  # refused before any work


# --------------------------------------------------------------------------- resume and shift

def test_resume_after_interruption_does_not_redo_finished_attacks(world, tmp_path, monkeypatch, capsys):
    import privleak.pipeline.evaluate as ext  # the attack graph's stages are the run graph's (one orchestrator)

    real = ext.run_stage
    calls: list[tuple[str, str]] = []

    def interrupted(view, family):
        if family == "extraction":
            raise KeyboardInterrupt
        calls.append((family, view.model))
        return real(view, family)

    (tmp_path / "cfg.yaml").write_text("attacks: {bootstrap: 10, select: [membership, prefix_extraction], "
                                       "prefix_records: 5}\n")
    d = world / "data"
    argv = ["attack", "--target", str(world / "model"), "--members", str(d / "members.jsonl"), "--non-members",
            str(d / "non_members.jsonl"), "--out", str(tmp_path / "run"), "-c", str(tmp_path / "cfg.yaml")]
    monkeypatch.setattr(ext, "run_stage", interrupted)
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 130
    assert calls == [("membership", "target")]
    assert not (tmp_path / "run" / "results.json").exists()

    def counting(view, family):
        calls.append((family, view.model))
        return real(view, family)

    calls.clear()
    monkeypatch.setattr(ext, "run_stage", counting)
    _attack(argv)
    assert calls == [("extraction", "target")]  # membership was finished: not redone
    assert "membership/target (cached)" in capsys.readouterr().err
    res = load_results(tmp_path / "run")
    assert {"loss", "prefix_extraction"} <= set(res.arms["target"].attacks)


def test_shifted_split_is_flagged(world, tmp_path):
    """Non-members from another source: the blind baseline tells the files apart, and the results say that the
    membership AUCs are not evidence of leakage."""
    other = [f"Weekly bulletin {i}: the cafeteria serves {food} on {day}; parking lot {chr(65 + i % 5)} is closed."
             for i, (food, day) in enumerate([("soup", "Monday"), ("pasta", "Tuesday"), ("curry", "Friday"),
                                               ("salad", "Thursday")] * 10)]
    (tmp_path / "other.txt").write_text("\n".join(other) + "\n")
    (tmp_path / "cfg.yaml").write_text("attacks: {bootstrap: 20, select: [membership]}\n")
    _attack(["attack", "--target", str(world / "model"), "--members", str(world / "data" / "members.jsonl"),
             "--non-members", str(tmp_path / "other.txt"), "--out", str(tmp_path / "run"), "-c",
             str(tmp_path / "cfg.yaml")])
    res = load_results(tmp_path / "run")
    assert res.blind_baseline is not None and res.blind_baseline.shifted and res.blind_baseline.auc > 0.9
    warning = next(w for w in res.warnings if "shifted split" in w)
    assert "NOT evidence of leakage" in warning and "DP guarantee" in warning
    assert res.arms["target"].empirical_epsilon is None  # no ε bound from non-exchangeable sets
    assert not res.data.membership_design.available
    assert "not evidence" in res.arms["target"].verdict.text
    assert "Distribution shift" in (tmp_path / "run" / "report.html").read_text()


def test_exchangeable_split_is_not_flagged(full_run):
    res = load_results(full_run)
    assert not res.blind_baseline.shifted
    assert not any("shifted split" in w for w in res.warnings)
    assert res.arms["target"].empirical_epsilon is not None
