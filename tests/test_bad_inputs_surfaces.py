"""Issue 39's new surfaces as bad inputs: one line, exit 2, nothing written — in-process.

Round 3 added ``privleak budget``, the unlearning arms and their settings, the dp-user arms, ``.gguf`` / ``.whl``
model inputs and ``attack --format``; a hostile tester found 31 of 183 inputs mishandled. Each case here is one
of them, with the hostile file built by the test itself (a decompression bomb, an 8 GB sparse file, a
hand-edited ``results.json``, a tokenizer that names code shipped with the model, …). A case is
``(id, argv, files to build, the fragment the error line must contain)``: ``{d}`` in the argv is the case's
scratch directory, ``{model}`` a tiny saved model. Every case runs ``privleak.cli.main`` in this process and
checks: exit code 2, exactly one line on stderr starting ``error:`` with the fragment, no traceback, no crash
report, and nothing created, changed or removed in the scratch directory — which holds the model cache too
(``PRIVLEAK_CACHE``), so a member unpacked before the refusal would show. Where "before any work" means "before
a named step", the step is replaced by one that fails the test (``FORBIDDEN``): the 8 GB file is never hashed, the
bomb never unpacked. The ledger and ``privleak budget`` cases are another helper's (``units``).
"""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from pathlib import Path
from typing import Callable

import pytest
from cli_harness import snapshot

from privleak.cli import main

Build = Callable[[Path, Path], None]  # (scratch directory, tiny model directory)


# --------------------------------------------------------------------------- the hostile files

def results_json() -> dict:
    """The smallest valid results.json (schema 2): one DP arm, judged and recommended, no control."""
    return {
        "schema_version": "2", "tool": {"name": "privleak", "version": "0"}, "config": {},
        "data": {"source": "synthetic-clinical", "n_public": 10, "n_members": 10, "n_canary_records": 0,
                 "n_non_members": 10, "n_population": 10, "mia_records_per_side": 10, "n_canaries": 0,
                 "canary_chance_exposure": None},
        "base_model": None,
        "arms": {"dp-8": {"kind": "dp", "utility": {"ppl_members": 10.0, "ppl_non_members": 12.0},
                          "privacy": {"target_epsilon": 8.0, "epsilon": 7.99, "accountant": "prv", "delta": 1e-5,
                                      "sigma": 0.6, "sample_rate": 0.1, "steps": 100, "max_grad_norm": 1.0,
                                      "epsilon_rdp": 9.0, "epsilon_pld": 7.98, "epsilon_prv": 7.99},
                          "verdict": {"level": "chance", "label": "NEAR CHANCE", "text": "Near chance.",
                                      "findings": [], "figures": []}}},
        "recommendation": {"arm": "dp-8", "text": "Recommended arm: dp-8.",
                           "requirement": {"kind": "formal", "epsilon": 8.0, "unit": "record"},
                           "standings": [{"arm": "dp-8", "meets": True, "epsilon": 7.99, "delta": 1e-5, "unit": "record"}],
                           "eligible": ["dp-8"], "contenders": ["dp-8"]},
    }


def _edited(**privacy) -> Build:
    def build(d: Path, _: Path) -> None:
        r = results_json()
        r["arms"]["dp-8"]["privacy"].update(privacy)
        (d / "edited").mkdir()
        (d / "edited" / "results.json").write_text(json.dumps(r))
        # A second, unedited run for compare (a run compared with itself is refused first).
        (d / "other").mkdir()
        (d / "other" / "results.json").write_text(json.dumps(results_json()))
    return build


def _bomb(name: str = "bomb.whl", size: int = 128 * 1024**2, head: bytes = b"GGUF\x03\x00\x00\x00") -> Build:
    """A package file of about 128 KB whose one .gguf member unpacks to ``size`` bytes (zeros after ``head``)."""
    def build(d: Path, _: Path) -> None:
        with zipfile.ZipFile(d / name, "w", zipfile.ZIP_DEFLATED) as zf, zf.open("llm_bomb/model.gguf", "w") as fh:
            fh.write(head)
            block = b"\0" * (1 << 20)
            left = size - len(head)
            while left > 0:
                fh.write(block[:left])
                left -= len(block)
    return build


def _sparse_gguf(d: Path, _: Path) -> None:
    with open(d / "big.gguf", "wb") as fh:
        fh.truncate(8 * 1024**3)  # 8 GB of holes: no disk used, but hashing it reads 8 GB


def _not_gguf_member(d: Path, _: Path) -> None:
    with zipfile.ZipFile(d / "notgguf.whl", "w") as zf:
        zf.writestr("llm_x/model.gguf", b"PK not a model at all, just text" * 64)


def _tokenizer_auto_map(d: Path, model: Path) -> None:
    shutil.copytree(model, d / "tokmap")
    p = d / "tokmap" / "tokenizer_config.json"
    cfg = json.loads(p.read_text()) if p.exists() else {}
    cfg["auto_map"] = {"AutoTokenizer": ["tokenization_evil.EvilTokenizer", None]}
    p.write_text(json.dumps(cfg))


def _adapter_tokenizer_auto_map(d: Path, _: Path) -> None:
    a = d / "adapter"
    a.mkdir()
    (a / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "base_model_name_or_path": "x"}))
    (a / "adapter_model.safetensors").write_bytes(b"")
    (a / "tokenizer_config.json").write_text(json.dumps({"auto_map": {"AutoTokenizer": ["evil.Tok", None]}}))


def _config(name: str, text: str) -> Build:
    def build(d: Path, _: Path) -> None:
        (d / name).write_text(text)
    return build


WORDS = ("clinic", "visit", "patient", "follow", "dose", "pressure", "review", "plan", "lab", "result", "note",
         "stable", "pain", "sleep", "diet", "walk", "refer", "scan", "chest", "knee", "cough", "rash", "fever", "heart")


def _texts(d: Path, _: Path) -> None:
    """Member and non-member text files that pass every check of their own: 40 records a side, no two alike (so
    an old build got past them to the model it should have refused)."""
    import random

    rng = random.Random(39)
    lines = [" ".join(rng.choice(WORDS) for _ in range(12)) + f" ({i})." for i in range(80)]
    (d / "mem.txt").write_text("\n".join(lines[:40]) + "\n")
    (d / "non.txt").write_text("\n".join(lines[40:]) + "\n")


def _privleak_jsonl_latin1(d: Path, _: Path) -> None:
    """PrivLeak's own record format whose 201st line holds Latin-1 bytes (not UTF-8): past the first 8 KB, so the
    format is recognised from the lines before it (a bad byte in the first block was already refused)."""
    good = b"".join(json.dumps({"text": f"Patient {i} seen on Monday, nothing to report.", "pii": [],
                                "meta": {}}).encode() + b"\n" for i in range(200))
    bad = b'{"text": "Caf\xe9 visit, patient J\xfcrgen", "pii": [], "meta": {}}\n'
    (d / "members.jsonl").write_bytes(good + bad)
    _texts(d, _)


# (case id, argv, files to build, fragment of the error line)
CASES: list[tuple[str, str, list[Build], str]] = [
    # ---- row 6: a hand-edited results.json is refused, as the docs promise
    ("report-epsilon-negative", "report {d}/edited", [_edited(epsilon=-5.0)], "privacy.epsilon"),
    ("report-delta-two", "report {d}/edited", [_edited(delta=2.0)], "privacy.delta"),
    ("report-epsilon-and-delta", "report {d}/edited", [_edited(epsilon=-5.0, delta=2.0)], "privacy.epsilon"),
    ("report-sample-rate-above-one", "report {d}/edited", [_edited(sample_rate=3.0)], "privacy.sample_rate"),
    ("report-epsilon-nan", "report {d}/edited", [_edited(epsilon_pld=float("nan"))], "privacy.epsilon_pld"),
    ("compare-edited", "compare {d}/other {d}/edited --out {d}/c.html", [_edited(delta=2.0)], "privacy.delta"),
    # ---- row 7: archives checked by their declared sizes before anything is unpacked; a .gguf by its magic
    ("run-model-bomb-whl", "run --model {d}/bomb.whl --out {d}/run", [_bomb()], "decompression bomb"),
    ("attack-reference-bomb-whl", "attack --target {model} --reference {d}/bomb.whl --members {d}/mem.txt "
                                  "--non-members {d}/non.txt --out {d}/run", [_bomb(), _texts], "decompression bomb"),
    ("attack-target-bomb-whl", "attack --target {d}/bomb.whl --members {d}/mem.txt --non-members {d}/non.txt "
                               "--out {d}/run", [_bomb(), _texts], "--target"),
    ("run-model-whl-member-not-gguf", "run --model {d}/notgguf.whl --out {d}/run", [_not_gguf_member],
     "does not start with the GGUF magic"),
    ("run-model-sparse-gguf-8gb", "run --model {d}/big.gguf --out {d}/run", [_sparse_gguf],
     "does not start with the GGUF magic"),
    ("attack-reference-sparse-gguf-8gb", "attack --target {model} --reference {d}/big.gguf --members {d}/mem.txt "
                                         "--non-members {d}/non.txt --out {d}/run", [_sparse_gguf, _texts],
     "--reference"),
    ("run-model-gguf-truncated-header", "run --model {d}/short.gguf --out {d}/run",
     [_config("short.gguf", "GGUF\x03\x00")], "ends inside its header"),
    ("run-model-gguf-version-99", "run --model {d}/v99.gguf --out {d}/run",
     [_config("v99.gguf", "GGUFc\x00\x00\x00" + "\x00" * 16)], "version 99"),
    # ---- row 8: auto_map refused wherever transformers reads it
    ("run-model-tokenizer-auto-map", "run --model {d}/tokmap --out {d}/run", [_tokenizer_auto_map],
     "tokenizer_config.json's auto_map"),
    ("attack-target-tokenizer-auto-map", "attack --target {d}/tokmap --members {d}/mem.txt --non-members "
                                         "{d}/non.txt --out {d}/run", [_tokenizer_auto_map, _texts],
     "--target"),
    ("attack-adapter-tokenizer-auto-map", "attack --target {d}/adapter --base {model} --members {d}/mem.txt "
                                          "--non-members {d}/non.txt --out {d}/run",
     [_adapter_tokenizer_auto_map, _texts], "tokenizer_config.json's auto_map"),
    # ---- row 9: arm parameters bounded like --epsilons, flag or config
    ("run-arms-dp-user-1e300", "run --arms baseline,dp-user-1e300 --out {d}/run", [], "dp-user-1e300"),
    ("run-arms-dp-1e-300", "run --arms baseline,dp-1e-300 --out {d}/run", [], "from 0.01 to 100"),
    ("run-arms-fed-dp-1e-9", "run --arms fed-dp-1e-9 --out {d}/run", [], "fed-dp-1e-9"),
    ("run-arms-dpw-1e9", "run --arms baseline,dpw-1e9 --out {d}/run", [], "at most 1000"),
    ("run-arms-dp-user-lora-huge", "run --arms baseline,dp-user-800+lora --out {d}/run", [], "dp-user-800"),
    ("config-arms-dp-1e-300", "run --config {d}/arms.yaml --out {d}/run",
     [_config("arms.yaml", "arms: [baseline, dp-1e-300]\n")], "dp-1e-300"),
    ("config-arms-dp-user-1e300", "run --config {d}/arms.yaml --out {d}/run",
     [_config("arms.yaml", "arms: [baseline, dp-user-1e300]\n")], "dp-user-1e300"),
    ("run-epsilons-1e-300", "run --epsilons 1e-300 --out {d}/run", [], "--epsilons"),
    ("config-dp-epsilons-1e-300", "run --config {d}/eps.yaml --out {d}/run",
     [_config("eps.yaml", "dp: {epsilons: [1.0e-300]}\n")], "dp.epsilons"),
    # ---- rows 10 and 11: the unlearning section bounded like the others, refused at the door
    ("config-unlearn-lr-inf", "run --config {d}/u.yaml --arms baseline,retrain,unlearn-ga --out {d}/run",
     [_config("u.yaml", "unlearning: {ga: {lr: .inf}}\n")], "unlearning.ga.lr"),
    ("config-unlearn-max-epochs-1e12", "run --config {d}/u.yaml --arms baseline,retrain,unlearn-ga --out {d}/run",
     [_config("u.yaml", "unlearning: {ga: {max_epochs: 1.0e+12}}\n")], "unlearning.ga.max_epochs"),
    ("config-unlearn-beta-inf", "run --config {d}/u.yaml --arms baseline,retrain,unlearn-ga --out {d}/run",
     [_config("u.yaml", "unlearning: {ga: {beta: .inf}}\n")], "unlearning.ga.beta"),
    ("config-unlearn-retain-weight-inf", "run --config {d}/u.yaml --arms baseline,retrain,unlearn-ga --out {d}/run",
     [_config("u.yaml", "unlearning: {ga: {retain_weight: .inf}}\n")], "unlearning.ga.retain_weight"),
    ("config-unlearn-batch-size-1e9", "run --config {d}/u.yaml --arms baseline,retrain,unlearn-ga --out {d}/run",
     [_config("u.yaml", "unlearning: {ga: {batch_size: 1000000000}}\n")], "unlearning.ga.batch_size"),
    ("config-unlearn-lr-nan", "run --config {d}/u.yaml --arms baseline,retrain,unlearn-ga --out {d}/run",
     [_config("u.yaml", "unlearning: {ga: {lr: .nan}}\n")], "unlearning.ga.lr"),
    ("config-forget-count-1e9", "run --config {d}/u.yaml --arms baseline,retrain --out {d}/run",
     [_config("u.yaml", "unlearning: {forget_count: 1000000000}\n")], "unlearning.forget_count"),
    ("config-forget-count-all-members", "run --profile smoke --config {d}/u.yaml --arms baseline,retrain --out {d}/run",
     [_config("u.yaml", "unlearning: {forget_count: 150}\n")], "forget_count = 150"),
    ("config-sisa-shards-1e6", "run --config {d}/u.yaml --arms baseline,retrain,unlearn-sisa --out {d}/run",
     [_config("u.yaml", "unlearning: {sisa: {shards: 1000000}}\n")], "unlearning.sisa.shards"),
    # ---- row 12: PrivLeak's own JSONL with bytes that are not UTF-8
    ("attack-members-privleak-jsonl-latin1", "attack --target {model} --members {d}/members.jsonl --non-members "
                                             "{d}/non.txt --out {d}/run", [_privleak_jsonl_latin1],
     "line 201 is not valid UTF-8"),
    # ---- minor: YAML duplicate keys (PyYAML keeps the last one without a word)
    ("config-yaml-duplicate-section", "run --config {d}/dup.yaml --out {d}/run",
     [_config("dup.yaml", "dp: {epsilons: [1]}\narms: [baseline, dp-1]\ndp: {epsilons: [8]}\n")],
     "'dp' is given twice"),
    ("config-yaml-duplicate-field", "run --config {d}/dup.yaml --out {d}/run",
     [_config("dup.yaml", "train:\n  epochs: 2\n  lr: 0.01\n  epochs: 200\n")], "line 4: 'epochs' is given twice"),
]

#: Steps a refusal must come before: replaced by one that fails the test when a case reaches it.
FORBIDDEN = ("privleak.models.gguf.gguf_digest", "privleak.models.gguf._extract")


def run_case(argv: str, builders: list[Build], d: Path, model: Path, capsys, monkeypatch):
    """Build the case's files in ``d``, run ``privleak`` on ``argv`` in this process: (exit code, stderr, stdout,
    the snapshot before, the snapshot after)."""
    for build in builders:
        build(d, model)
    cache = d / "cache"
    cache.mkdir()
    monkeypatch.setenv("PRIVLEAK_CACHE", str(cache))
    monkeypatch.setenv("PRIVLEAK_CRASH_DIR", str(d.parent / f"{d.name}-crashes"))
    monkeypatch.setenv("COLUMNS", "200")

    def forbidden(*args, **kwargs):
        raise AssertionError("a refusal came after the work it should prevent (hashing or unpacking a model file)")

    for target in FORBIDDEN:
        monkeypatch.setattr(target, forbidden)
    args = [a.replace("{d}", str(d)).replace("{model}", str(model)) for a in argv.split(" ")]
    before = snapshot(d)
    capsys.readouterr()
    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.err, captured.out, before, snapshot(d)


def test_the_cases_are_distinct_and_cover_every_row():
    assert len({c[0] for c in CASES}) == len(CASES)
    needles = " ".join(c[3] for c in CASES)
    for row in ("privacy.delta", "decompression bomb", "GGUF magic", "tokenizer_config.json", "dp-user-1e300",
                "unlearning.ga.lr", "unlearning.forget_count", "not valid UTF-8", "given twice"):
        assert row in needles


@pytest.mark.parametrize("cid,argv,builders,needle", CASES, ids=[c[0] for c in CASES])
def test_refused_in_one_line_before_any_work(cid, argv, builders, needle, tmp_path, tiny_model_dir, capsys,
                                            monkeypatch):
    d = tmp_path / "case"
    d.mkdir()
    code, err, out, before, after = run_case(argv, builders, d, tiny_model_dir, capsys, monkeypatch)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, (argv, code, err[-2000:])
    assert "Traceback" not in err + out, err[-2000:]
    assert len(lines) == 1 and lines[0].startswith("error: "), err[-2000:]
    assert needle in lines[0], (needle, lines[0])
    assert before == after  # nothing created, changed or removed — the model cache included
    assert not (d.parent / "case-crashes").exists()  # a refusal, not a crash


# --------------------------------------------------------------------------- valid input: processed correctly

def test_report_renders_a_valid_results_file_and_leaves_no_lock_file(tmp_path, capsys, monkeypatch):
    """A folder holding only a results.json (copied, or a run's output with its lock file removed): the report
    is written and no ``.privleak.lock`` is left behind; a run's own folder keeps the lock file it has."""
    d = tmp_path / "copied"
    d.mkdir()
    (d / "results.json").write_text(json.dumps(results_json()))
    monkeypatch.setenv("PRIVLEAK_CRASH_DIR", str(tmp_path / "crashes"))
    try:
        main(["report", str(d)])
    except SystemExit as exc:
        assert exc.code in (0, None), capsys.readouterr().err
    assert (d / "report.html").is_file()
    assert sorted(p.name for p in d.iterdir()) == ["report.html", "results.json"]
    (d / ".privleak.lock").write_text("")  # the (released) lock file a run leaves
    main(["report", str(d), "--out", str(tmp_path / "again.html")])
    assert (d / ".privleak.lock").read_text() == ""  # held while rendering, released after


def test_report_still_refuses_a_folder_a_run_holds(tmp_path, capsys, monkeypatch):
    import subprocess
    import sys

    d = tmp_path / "held"
    d.mkdir()
    (d / "results.json").write_text(json.dumps(results_json()))
    root = Path(__file__).resolve().parents[1]
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom privleak.pipeline.rundir import RunDir\n"
                               "RunDir.open(sys.argv[1])\nprint('held', flush=True)\ntime.sleep(600)\n", str(d)],
                              stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(root / "src")})
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(SystemExit) as exc:
            main(["report", str(d)])
        assert exc.value.code == 2 and "in use by another privleak" in capsys.readouterr().err
    finally:
        holder.kill()
        holder.wait()


def test_yaml_anchors_and_merge_keys_still_load(tmp_path):
    """Refusing duplicate keys must not refuse YAML's own way of repeating settings (a merge key overridden)."""
    from privleak.config import read_config_file

    p = tmp_path / "merge.yaml"
    p.write_text("common: &c {lr: 0.001, epochs: 2}\ntrain:\n  <<: *c\n  epochs: 4\n")
    assert read_config_file(p)["train"] == {"lr": 0.001, "epochs": 4}


def test_a_real_gguf_package_is_still_unpacked(tmp_path, monkeypatch):
    """The checks read a package's declared sizes; a package whose member is a GGUF file stored as pip stores it
    passes them (the conversion itself is tests/test_gguf.py's)."""
    from privleak.models import gguf as G

    header = b"GGUF" + (3).to_bytes(4, "little") + (0).to_bytes(8, "little") + (0).to_bytes(8, "little")
    whl = tmp_path / "llm_ok-0.1-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("llm_ok/model.gguf", header + os.urandom(4096))
    monkeypatch.setenv("PRIVLEAK_CACHE", str(tmp_path / "cache"))
    info = G._package_member(whl, str(whl), "--model")
    assert info.filename == "llm_ok/model.gguf" and info.file_size == len(header) + 4096


def test_unlearning_settings_in_range_are_accepted():
    from privleak.config import build_config

    cfg = build_config({"unlearning": {"forget_count": 20, "ga": {"lr": 1e-4, "max_epochs": 10, "beta": 0.1,
                                                                  "retain_weight": 1.0, "batch_size": 8}}})
    assert cfg.unlearning.ga.lr == 1e-4 and cfg.unlearning.forget_count == 20
