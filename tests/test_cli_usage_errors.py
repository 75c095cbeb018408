"""Bad input through the console entry point: exit 2, one line on stderr, no traceback.

Every case calls the console script's ``main`` in this process (``cli_harness.run_cli``: what a subprocess would
print, file descriptors included; what the command line sets is put back after each case). The cases cover
every sub-command and every kind of usage error: typer / click parsing (wrong type, unknown option, missing
option or argument, an option without its value, out-of-range values), pydantic validation of the config, and
PrivLeak's own pre-checks (model directory, corpus encoding, output path, PII types). ``run`` cases also check
that a refused run leaves no ``--out`` directory behind. A few cases also run the installed ``privleak`` console
script (or ``python -m privleak`` where none is installed) as a real process, with ``PYTHONPATH`` pointing at
this checkout's ``src`` so the code under test is the code that runs.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_harness import expand, run_cli, run_console_script


# (case id, argv with {d} = a scratch directory holding the files below, text the error line must contain)
CASES: list[tuple[str, str, str]] = [
    # the top level
    ("no-command", "", "no command given"),
    ("data-no-subcommand", "data", "no command given"),
    ("unknown-command", "audit", "audit"),
    # run: typer parsing
    ("run-seed-float", "run --seed 1.5 --out {d}/run", "--seed"),
    ("run-seed-negative", "run --seed -1 --out {d}/run", "--seed"),
    ("run-seed-too-big", "run --seed 4294967296 --out {d}/run", "--seed"),
    ("run-unknown-option", "run --bogus-flag --out {d}/run", "--bogus-flag"),
    ("run-option-without-value", "run --out {d}/run --seed", "--seed"),
    ("run-delta-not-a-number", "run --delta abc --out {d}/run", "--delta"),
    # run: our checks and the config's
    ("run-epsilon-not-a-number", "run --epsilons 1,abc --out {d}/run", "--epsilons"),
    ("run-delta-out-of-range", "run --delta 2 --out {d}/run", "--delta"),
    ("run-unknown-profile", "run --profile fast --out {d}/run", "--profile"),
    ("run-unknown-arm", "run --arms baseline,bogus --out {d}/run", "bogus"),
    ("run-config-seed-negative", "run --config {d}/seed.yaml --out {d}/run", "seed"),
    ("run-config-unknown-key", "run --config {d}/typo.yaml --out {d}/run", "not a known option"),
    ("run-dp-summary-zero", "run --dp-summary 0 --out {d}/run", "--dp-summary"),
    ("run-dp-summary-not-a-number", "run --dp-summary abc --out {d}/run", "--dp-summary"),
    ("run-ldp-terms-inf", "run --ldp-terms inf --out {d}/run", "--ldp-terms"),
    ("run-dpw-without-baseline", "run --arms dpw-0.01 --out {d}/run", "baseline"),
    ("run-dpw-bad-sigma", "run --arms baseline,dpw-0 --out {d}/run", "dpw-0"),
    ("run-out-below-a-file", "run --out {d}/good.jsonl/run", "--out"),
    ("run-model-auto-map", "run --model {d}/automap --out {d}/run", "auto_map"),
    ("run-model-pickle-only", "run --model {d}/pickled --out {d}/run", "safetensors"),
    ("run-model-custom-type", "run --model {d}/custom --out {d}/run", "model_type"),
    ("run-data-nul-byte", "run --data {d}/nul.csv --out {d}/run", "NUL"),
    ("run-data-utf16-no-bom", "run --data {d}/utf16.txt --out {d}/run", "UTF-16"),
    ("run-data-latin1", "run --data {d}/latin1.txt --out {d}/run", "iconv"),
    # scrub
    ("scrub-missing-arguments", "scrub", "IN"),
    ("scrub-unknown-type", "scrub {d}/good.jsonl {d}/o.jsonl --types NAME,SHOE_SIZE", "--types"),
    ("scrub-threshold-range", "scrub {d}/good.jsonl {d}/o.jsonl --score-threshold 1.5", "--score-threshold"),
    ("scrub-threshold-type", "scrub {d}/good.jsonl {d}/o.jsonl --score-threshold high", "--score-threshold"),
    ("scrub-unknown-mode", "scrub {d}/good.jsonl {d}/o.jsonl --mode blur", "--mode"),
    ("scrub-unknown-format", "scrub {d}/good.jsonl {d}/o.jsonl --format xml", "--format"),
    ("scrub-seed-negative", "scrub {d}/good.jsonl {d}/o.jsonl --seed -3", "--seed"),
    ("scrub-seed-32-bits", "scrub {d}/good.jsonl {d}/o.jsonl --mode pseudonym --seed 4294967295", "32 hexadecimal"),
    ("scrub-record-too-long", "scrub {d}/good.jsonl {d}/o.jsonl --max-record-chars 10", "--max-record-chars 32"),
    ("scrub-max-record-chars-zero", "scrub {d}/good.jsonl {d}/o.jsonl --max-record-chars 0", "--max-record-chars"),
    ("scrub-nul-byte", "scrub {d}/nul.csv {d}/o.csv", "NUL"),
    ("scrub-missing-input", "scrub {d}/nothere.jsonl {d}/o.jsonl", "no such file"),
    # dedup
    ("dedup-num-perm-type", "dedup {d}/good.jsonl {d}/o.jsonl --num-perm abc", "--num-perm"),
    ("dedup-num-perm-range", "dedup {d}/good.jsonl {d}/o.jsonl --num-perm 4", "--num-perm"),
    ("dedup-threshold-zero", "dedup {d}/good.jsonl {d}/o.jsonl --threshold 0", "--threshold"),
    ("dedup-unknown-method", "dedup {d}/good.jsonl {d}/o.jsonl --method fuzzy", "--method"),
    ("dedup-utf16-no-bom", "dedup {d}/utf16.txt {d}/o.txt", "UTF-16"),
    ("dedup-nul-byte", "dedup {d}/nul.csv {d}/o.csv", "NUL"),
    # report / compare
    ("report-missing-argument", "report", "RUN_DIR"),
    ("report-no-such-run", "report {d}/no-run", "no such file"),
    ("compare-one-run", "compare {d}/no-run", "at least two"),
    ("compare-out-without-value", "compare {d}/a {d}/b --out", "--out"),
    # accountant
    ("accountant-missing-steps", "accountant -q 0.01 --delta 1e-5 --sigma 1", "--steps"),
    ("accountant-steps-type", "accountant -q 0.01 --steps ten --delta 1e-5 --sigma 1", "--steps"),
    ("accountant-q-zero", "accountant -q 0 --steps 10 --delta 1e-5 --sigma 1", "--sample-rate"),
    ("accountant-q-above-one", "accountant -q 1.5 --steps 10 --delta 1e-5 --sigma 1", "--sample-rate"),
    ("accountant-sigma-negative", "accountant -q 0.01 --steps 10 --delta 1e-5 --sigma -1", "--sigma"),
    ("accountant-neither", "accountant -q 0.01 --steps 10 --delta 1e-5", "--sigma"),
    # ldp
    ("ldp-missing-file", "ldp", "FILE"),
    ("ldp-no-such-file", "ldp {d}/nothere.jsonl", "no such file"),
    ("ldp-epsilon-not-a-number", "ldp {d}/good.jsonl --epsilons 1,x", "--epsilons"),
    ("ldp-epsilon-zero", "ldp {d}/good.jsonl --epsilons 0", "--epsilons"),
    ("ldp-epsilon-empty", "ldp {d}/good.jsonl --epsilons ,", "--epsilons"),
    ("ldp-unknown-method", "ldp {d}/good.jsonl --methods rappor", "--methods"),
    ("ldp-m-not-power-of-two", "ldp {d}/good.jsonl --m 1000", "--m"),
    ("ldp-top-zero", "ldp {d}/good.jsonl --top 0", "--top"),
    ("ldp-ngram-range", "ldp {d}/good.jsonl --ngram 9", "--ngram"),
    ("ldp-unknown-format", "ldp {d}/good.jsonl --format xml", "--format"),
    ("ldp-nul-byte", "ldp {d}/nul.csv", "NUL"),
    ("ldp-missing-dictionary", "ldp {d}/good.jsonl --dictionary {d}/nothere.txt", "--dictionary"),
    # data generate
    ("data-generate-missing-out", "data generate", "--out"),
    ("data-generate-phi-range", "data generate --out {d}/corpus --phi-fraction 2", "--phi-fraction"),
    ("data-generate-out-below-file", "data generate --out {d}/good.jsonl/corpus", "--out"),
    # guard build / check / serve
    ("guard-build-missing-train", "guard build --out {d}/idx", "--train"),
    ("guard-build-threshold", "guard build --train {d}/good.jsonl --out {d}/idx --threshold 3", "--threshold"),
    ("guard-build-nul-byte", "guard build --train {d}/nul.csv --out {d}/idx", "NUL"),
    ("guard-build-out-is-file", "guard build --train {d}/good.jsonl --out {d}/good.jsonl", "--out"),
    ("guard-check-missing-index", "guard check {d}/good.jsonl", "--index"),
    ("guard-check-unknown-type", "guard check --index {d}/no-idx --types SHOE_SIZE {d}/good.jsonl", "--types"),
    ("guard-check-no-index", "guard check --index {d}/no-idx {d}/good.jsonl", "--index"),
    ("guard-check-bad-policy", "guard check --index {d}/no-idx --policy pii=explode {d}/good.jsonl", "explode"),
    ("guard-serve-port", "guard serve --index {d}/no-idx --port 70000", "--port"),
    ("guard-serve-port-type", "guard serve --index {d}/no-idx --port http", "--port"),
    ("guard-serve-max-bytes", "guard serve --index {d}/no-idx --max-bytes 10", "--max-bytes"),
    ("guard-serve-workers-zero", "guard serve --index {d}/no-idx --workers 0", "--workers 0"),
    ("guard-serve-queue-negative", "guard serve --index {d}/no-idx --queue -1", "--queue -1"),
    ("guard-serve-timeout-zero", "guard serve --index {d}/no-idx --timeout 0", "--timeout 0"),
    ("guard-serve-timeout-nan", "guard serve --index {d}/no-idx --timeout nan", "--timeout nan"),
]
RUN_OUT = "{d}/run"


def _write_inputs(d: Path) -> None:
    (d / "good.jsonl").write_text(json.dumps({"text": "A short note about nothing much."}) + "\n")
    (d / "nul.csv").write_bytes(b"id,text\n1,first note\n2,second\x00note\n")
    (d / "utf16.txt").write_bytes("first record\nsecond record\n".encode("utf-16-le"))  # no BOM
    (d / "latin1.txt").write_bytes(b"first record\nsecond caf\xe9 record\n")
    (d / "seed.yaml").write_text("seed: -1\n")
    (d / "typo.yaml").write_text("seeed: 3\n")
    for name, config, files in (
        ("automap", {"model_type": "gpt2", "auto_map": {"AutoModelForCausalLM": "modeling_evil.EvilLM"}},
         ("model.safetensors", "tokenizer.json")),
        ("pickled", {"model_type": "gpt2"}, ("pytorch_model.bin", "tokenizer.json")),
        ("custom", {"model_type": "my_own_lm"}, ("model.safetensors", "tokenizer.json")),
    ):
        m = d / name
        m.mkdir()
        (m / "config.json").write_text(json.dumps(config))
        for f in files:
            (m / f).write_bytes(b"")


def _run_case(argv: str, d: Path) -> subprocess.CompletedProcess:
    return run_cli(expand(argv, d=d), env={"PRIVLEAK_PROGRESS": "0", "COLUMNS": "200"})


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, tuple[subprocess.CompletedProcess, Path]]:
    out = {}
    for cid, argv, _ in CASES:
        d = tmp_path_factory.mktemp(cid)
        _write_inputs(d)
        out[cid] = (_run_case(argv, d), d)
    return out


def test_matrix_is_large_and_covers_every_command():
    assert len(CASES) >= 30
    commands = {argv.split()[0] if argv else "" for _, argv, _ in CASES}
    assert {"run", "scrub", "dedup", "report", "compare", "accountant", "data", "guard", "ldp"} <= commands
    guard = {argv.split()[1] for _, argv, _ in CASES if argv.startswith("guard")}
    assert guard == {"build", "check", "serve"}


@pytest.mark.parametrize("cid,argv,needle", CASES, ids=[c[0] for c in CASES])
def test_one_line_exit_2(results, cid, argv, needle):
    proc, d = results[cid]
    _check(proc, argv, needle, d)


def _check(proc: subprocess.CompletedProcess, argv: str, needle: str, d: Path) -> None:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, (argv, proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr[-2000:]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: "), lines[0]
    assert needle in lines[0], (needle, lines[0])
    if argv.startswith("run"):
        # refused before any work: the run directory was never created
        assert not Path(RUN_OUT.replace("{d}", str(d))).exists()


def test_help_is_not_an_error():
    proc = _run_case("run --help", Path("."))
    assert proc.returncode == 0 and "--seed" in proc.stdout and proc.stderr == ""


# The installed console script itself, as a real process: its start-up, its help, and usage errors of the
# parser, the config and our own checks.
SCRIPT_CASES = ["no-command", "run-seed-float", "run-unknown-arm", "run-config-unknown-key", "scrub-unknown-type",
                "guard-serve-port"]


@pytest.mark.parametrize("cid", SCRIPT_CASES)
def test_the_console_script_refuses_in_one_line(tmp_path, cid):
    argv, needle = next((a, n) for c, a, n in CASES if c == cid)
    _write_inputs(tmp_path)
    proc, _ = run_console_script(expand(argv, d=tmp_path))
    assert proc is not None, f"{argv!r} hung"
    _check(proc, argv, needle, tmp_path)


def test_the_console_script_help_is_not_an_error():
    proc, _ = run_console_script(["run", "--help"])
    assert proc is not None and proc.returncode == 0 and "--seed" in proc.stdout and proc.stderr == ""
