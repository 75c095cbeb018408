"""PrivLeak as a library (issue 48): ``privleak.attack`` / ``privleak.audit`` are the command line's own calls.

The model is a tiny GPT-2 trained here with plain ``transformers`` code on the members of a small synthetic corpus
(test_attack_cmd's recipe). Every door — ``privleak attack`` on the files, ``privleak.attack`` on the same files,
``privleak.attack`` on the model object and record lists — writes the same results.json for the same inputs and
seed; bad input is one :class:`privleak.PrivLeakError` carrying the line the command line prints, raised before
anything is created; nothing is printed unless asked; ``import privleak`` loads neither torch nor transformers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import comparable_results
from test_attack_cmd import _tokenizer, _train

import privleak
from privleak.cli import main

SRC = str(Path(privleak.__file__).resolve().parents[1])
ATTACKS = {"canaries": {"candidates": 200}, "attacks": {"bootstrap": 10, "select": ["membership", "canaries"]}}


def _python(code: str) -> str:
    env_path = SRC  # this checkout's sources first, as the suite imports them
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin", "PRIVLEAK_PROGRESS": "0"})
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


# --------------------------------------------------------------------------- the package

def test_import_loads_neither_torch_nor_transformers():
    out = _python("import sys, privleak\n"
                  "privleak.attack; privleak.DPClaim; privleak.PrivLeakError; privleak.AuditHook\n"
                  "print(callable(privleak.audit), callable(privleak.attack),\n"
                  "      sorted(m for m in ('torch', 'transformers', 'opacus', 'pydantic') if m in sys.modules))")
    assert out.split() == ["True", "True", "[]"]


@pytest.mark.parametrize("first", ["privleak", "privleak.audit.alarms"])
def test_audit_is_the_function_and_the_judging_package(first):
    """``privleak.audit(config)`` runs an audit and ``privleak.audit.alarms`` is a module of the judging layer,
    whichever is imported first (the import system sets a parent's attribute to the subpackage it imports)."""
    out = _python(f"import {first}\nimport privleak\nimport privleak.audit.alarms as a\n"
                  "from privleak.audit.one_run import steinke_epsilon\n"
                  "print(callable(privleak.audit), privleak.audit.alarms is a, callable(steinke_epsilon))")
    assert out.split() == ["True", "True", "True"]


# --------------------------------------------------------------------------- a model trained outside PrivLeak

@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The corpus files (PrivLeak JSONL with PII spans, canaries.json), a tiny GPT-2 trained on the members
    (in memory and saved), and the attack settings as a file."""
    import yaml
    from transformers import GPT2Config, GPT2LMHeadModel

    from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus, write_corpus

    root = tmp_path_factory.mktemp("library-world")
    corpus = generate_corpus(ClinicalCorpusConfig(n_public=0, n_members=60, n_non_members=60, n_population=0,
                                                  n_public_heldout=0, phi_fraction=0.5, canary_repeats=(1, 8),
                                                  canaries_per_repeat=1, seed=5))
    write_corpus(corpus, root / "data")
    texts = [r.text for r in corpus.splits["members"]]
    tok = _tokenizer(texts)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_positions=256, n_embd=32, n_layer=1, n_head=2,
                                       bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id))
    _train(model, tok, texts, epochs=10)
    model.save_pretrained(root / "model", safe_serialization=True)
    tok.save_pretrained(root / "model")
    (root / "attacks.yaml").write_text(yaml.safe_dump(ATTACKS))
    return {"root": root, "data": root / "data", "model": model, "tok": tok, "corpus": corpus}


def _normalised(out: Path, names: dict[str, str]) -> dict:
    """results.json less its wall times, with the paths that name where the inputs lay replaced by ``names``."""
    text = json.dumps(comparable_results(out))
    for value, name in sorted(names.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(json.dumps(value)[1:-1], name)
    return json.loads(text)


def _cli(argv: list[str], capsys) -> str:
    try:
        main(argv)
    except SystemExit as exc:
        assert exc.code in (0, None), capsys.readouterr().err[-2000:]
    return capsys.readouterr().err


def test_every_door_gives_the_same_results(world, tmp_path, capfd):
    """``privleak attack`` on files = ``privleak.attack`` on the same files = ``privleak.attack`` on the model
    object and lists of Records (PII spans kept): the same results.json, bar where the inputs lay."""
    d = world["data"]
    _cli(["attack", "--target", str(world["root"] / "model"), "--members", str(d / "members.jsonl"),
          "--non-members", str(d / "non_members.jsonl"), "--canaries", str(d / "canaries.json"), "--seed", "3",
          "-c", str(world["root"] / "attacks.yaml"), "--out", str(tmp_path / "cli")], capfd)
    assert (tmp_path / "cli" / "report.html").exists()

    files = privleak.attack(world["root"] / "model", d / "members.jsonl", d / "non_members.jsonl",
                            canaries=d / "canaries.json", seed=3, config=world["root"] / "attacks.yaml",
                            out=tmp_path / "lib")
    assert capfd.readouterr() == ("", "")  # no printing unless asked
    assert (tmp_path / "lib" / "report.html").exists()
    cli = _normalised(tmp_path / "cli", {str(tmp_path / "cli"): "<out>"})
    assert _normalised(tmp_path / "lib", {str(tmp_path / "lib"): "<out>"}) == cli
    assert files.to_json() == json.loads((tmp_path / "lib" / "results.json").read_text())

    corpus = world["corpus"]
    lines: list[str] = []
    objects = privleak.attack(world["model"], corpus.splits["members"], corpus.splits["non_members"],
                              tokenizer=world["tok"], canaries=d / "canaries.json", seed=3, config=ATTACKS,
                              out=tmp_path / "obj", progress=lines.append)
    assert capfd.readouterr() == ("", "")
    assert any(line.startswith("✓ attack/target") or "target" in line for line in lines)
    assert all("[green]" not in line for line in lines)  # a callable gets plain text, not rich markup
    inputs = tmp_path / "obj" / "inputs"
    (target,) = inputs.glob("target-*")
    ours = _normalised(tmp_path / "obj", {str(target): str(world["root"] / "model"),
                                          str(inputs / "members.jsonl"): str(d / "members.jsonl"),
                                          str(inputs / "non_members.jsonl"): str(d / "non_members.jsonl"),
                                          str(tmp_path / "obj"): "<out>",
                                          "<in-memory GPT2LMHeadModel>": str(world["root"] / "model")})
    assert ours == cli
    assert objects.arms["target"].attacks["loss"].auc > 0.6  # the model memorised: not two chance-level figures

    # No out=: the same results, nothing left behind.
    bare = privleak.attack(world["root"] / "model", d / "members.jsonl", d / "non_members.jsonl",
                           canaries=d / "canaries.json", seed=3, config=world["root"] / "attacks.yaml")
    assert bare.arms["target"].attacks["loss"].auc == files.arms["target"].attacks["loss"].auc
    assert bare.arms["target"].verdict == files.arms["target"].verdict


# --------------------------------------------------------------------------- errors

def _cli_error(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err
    return err.removeprefix("error: ")


def test_bad_input_is_one_exception_with_the_command_lines_line(world, tmp_path, capsys):
    d = world["data"]
    model = str(world["root"] / "model")
    cli = _cli_error(["attack", "--target", model, "--members", str(tmp_path / "nope.jsonl"), "--non-members",
                      str(d / "non_members.jsonl"), "--out", str(tmp_path / "a")], capsys)
    with pytest.raises(privleak.PrivLeakError) as exc:
        privleak.attack(model, tmp_path / "nope.jsonl", d / "non_members.jsonl", out=tmp_path / "b")
    assert str(exc.value) == cli and "--members" in cli
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()  # refused before anything is created

    cli = _cli_error(["run", "--arms", "baseline,nope", "--out", str(tmp_path / "c")], capsys)
    with pytest.raises(privleak.PrivLeakError) as exc:
        privleak.audit({"arms": ["baseline", "nope"]}, out=tmp_path / "d")
    assert str(exc.value) == cli
    assert not (tmp_path / "c").exists() and not (tmp_path / "d").exists()
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize("call, words", [
    (lambda w: privleak.attack(w["model"], ["a"] * 30, ["b"] * 30), "tokenizer=..."),
    (lambda w: privleak.attack(42, ["a"], ["b"], tokenizer=w["tok"]), "is not a transformers model"),
    (lambda w: privleak.attack(w["model"], "members", 7, tokenizer=w["tok"]), "give a file path, or a list"),
    (lambda w: privleak.attack(w["model"], [{"txt": "x"}], ["b"], tokenizer=w["tok"]), "record 1 has no string 'text'"),
    (lambda w: privleak.attack(w["model"], ["a"], ["b"], tokenizer=w["tok"], progress=3), "progress=3"),
    (lambda w: privleak.audit(3.5), "is not a config"),
    (lambda w: privleak.audit({"seed": "x"}), "config field 'seed'"),
], ids=["no-tokenizer", "not-a-model", "not-records", "no-text-field", "bad-progress", "bad-config", "bad-field"])
def test_bad_objects_are_one_line_naming_the_fix(world, tmp_path, call, words):
    with pytest.raises(privleak.PrivLeakError) as exc:
        call(world)
    message = str(exc.value)
    assert words in message and "\n" not in message


# --------------------------------------------------------------------------- privleak.audit

def test_audit_gives_the_results_privleak_run_gives(audits, tmp_path, capfd):
    """``privleak.audit(config, out=…)`` = ``privleak run --config FILE --out …``: the same results.json (bar
    where the run directory is) and the same report; the returned results are what results.json holds."""
    from conftest import SMALL

    cfg = {**SMALL, "arms": ["baseline"], "attacks": {**SMALL["attacks"], "select": ["membership", "canaries"]}}
    cli = audits.get(cfg, via="cli")
    capfd.readouterr()
    results = privleak.audit(cfg, out=tmp_path / "lib")
    assert capfd.readouterr() == ("", "")
    assert (tmp_path / "lib" / "report.html").exists()
    assert results.to_json() == json.loads((tmp_path / "lib" / "results.json").read_text())
    ours = _normalised(tmp_path / "lib", {str(tmp_path / "lib"): "<out>"})
    assert ours == _normalised(cli.out, {str(cli.out): "<out>"})
