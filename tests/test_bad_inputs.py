"""Issue 30's failures, each as a bad input through the console entry point: one line, exit 2, nothing written.

Every case calls the console script's ``main`` on fresh scratch files (in this process: ``cli_harness.run_cli``,
which captures what a subprocess would print, file descriptors included, and puts back what the command line
sets) and checks: exit code 2, exactly one line on stderr starting ``error:`` and naming what is wrong, no
traceback and no raw control character in anything printed, no crash report, and nothing created, changed or
removed in the scratch directory (a FIFO, a character device or a symlink given as the output is still what it
was). "Before any work" is checked by that snapshot, not by a clock: a case that started work would have created
its run directory. A handful of cases (``SUBPROCESS_CASES``) also run as real processes: the console script
itself, and the refusal made before torch or transformers was imported (a refusal that waits seconds for them
is issue 30's other half). ``CASE_TIMEOUT`` (120 s; ``PRIVLEAK_CASE_TIMEOUT``) only stops a hung case. The cases:

* numbers out of range, flags and config values (the 10⁸-permutation MinHash, the 2³⁰-column sketch, ε = 800);
* JSON past the limits (200,000 levels deep, a 100,000-digit number) in every reader of user JSON, and
  configs nested or numbered the same way;
* outputs that must not be replaced: a character device, a FIFO, a symlink, a directory, the input itself;
* flags that would not take effect (``run --epsilons`` beside a config's ``arms``, ``--seed`` for a mode that
  draws nothing, ``--text-field`` on plain text, the MinHash flags with ``--method exact``, …);
* a CSV whose quote never closes;
* ``guard serve`` start-up errors (a bad host, the port in use);
* control characters in what the user typed (they are shown escaped);
* a run directory another process holds.

Another file of cases reuses the harness: ``results = run_matrix(tmp_path_factory, CASES)`` in a module
fixture (its own ``write_inputs`` optional), then ``check_refusal(results, cid, argv, needle)`` per case.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
from cli_harness import CASE_TIMEOUT, ROOT, assert_one_line_refusal, expand, run_cli, run_console_script, snapshot

DEEP = "[" * 200_000 + "]" * 200_000
BIG = "7" * 100_000
SMALL_CFG = "arms: [baseline]\n"

# (case id, argv with {d} = the case's scratch directory, text the error line must contain)
CASES: list[tuple[str, str, str]] = [
    # ---- numbers out of range: flags
    ("ldp-k-huge", "ldp {d}/good.jsonl --k 100000000", "--k"),
    ("ldp-m-huge", "ldp {d}/good.jsonl --m 1073741824", "--m"),
    ("ldp-epsilon-800", "ldp {d}/good.jsonl --epsilons 800", "--epsilons"),
    ("ldp-epsilon-1e300", "ldp {d}/good.jsonl --epsilons 1e300", "--epsilons"),
    ("ldp-epsilon-nan", "ldp {d}/good.jsonl --epsilons nan", "--epsilons"),
    ("ldp-top-huge", "ldp {d}/good.jsonl --top 100000000", "--top"),
    ("ldp-ngram-zero", "ldp {d}/good.jsonl --ngram 0", "--ngram"),
    ("ldp-k-zero", "ldp {d}/good.jsonl --k 0", "--k"),
    ("generate-n-members-2e9", "data generate --out {d}/corpus --n-members 2000000000", "--n-members"),
    ("generate-n-public-negative", "data generate --out {d}/corpus --n-public -1", "--n-public"),
    ("generate-n-population-over", "data generate --out {d}/corpus --n-population 1000001", "--n-population"),
    ("generate-n-non-members-type", "data generate --out {d}/corpus --n-non-members 1e3", "--n-non-members"),
    ("dedup-num-perm-1e8", "dedup {d}/good.jsonl {d}/o.jsonl --num-perm 100000000", "--num-perm"),
    ("dedup-ngram-huge", "dedup {d}/good.jsonl {d}/o.jsonl --ngram 100000", "--ngram"),
    ("dedup-threshold-above-one", "dedup {d}/good.jsonl {d}/o.jsonl --threshold 1.5", "--threshold"),
    ("dedup-threshold-negative", "dedup {d}/good.jsonl {d}/o.jsonl --threshold -0.5", "--threshold"),
    ("guard-build-threshold-20-digits", "guard build --train {d}/good.jsonl --out {d}/idx --threshold 99999999999999999999",
     "--threshold"),
    ("guard-build-threshold-over-max", "guard build --train {d}/good.jsonl --out {d}/idx --threshold 2000000", "--threshold"),
    ("guard-serve-max-bytes-huge", "guard serve --index {d}/idx-ok --max-bytes 10000000000", "--max-bytes"),
    ("run-epsilon-800", "run --epsilons 800 --out {d}/run", "--epsilons"),
    ("run-epsilon-1e300", "run --epsilons 1,1e300 --out {d}/run", "--epsilons"),
    ("run-dp-summary-1e9", "run --dp-summary 1e9 --out {d}/run", "--dp-summary"),
    ("run-ldp-terms-800", "run --ldp-terms 800 --out {d}/run", "--ldp-terms"),
    ("run-workers-huge", "run --workers 100000 --executor processes --out {d}/run", "workers"),
    ("run-workers-zero", "run --workers 0 --out {d}/run", "--workers"),
    ("run-seed-20-digits", "run --seed 99999999999999999999 --out {d}/run", "--seed"),
    ("run-delta-underflow", "run --delta 1e-400 --out {d}/run", "--delta"),
    ("run-delta-nan", "run --delta nan --out {d}/run", "--delta"),
    ("scrub-score-threshold-nan", "scrub {d}/good.jsonl {d}/o.jsonl --score-threshold nan", "--score-threshold"),
    ("attack-max-length-huge", "attack --target {d}/m --members {d}/good.jsonl --non-members {d}/good.jsonl "
                               "--max-length 100000000 --out {d}/run", "--max-length"),
    # ---- numbers out of range: config values
    ("config-dp-epsilon-800", "run --config {d}/cfg-eps.yaml --out {d}/run", "dp.epsilons"),
    ("config-n-members-2e9", "run --config {d}/cfg-members.yaml --out {d}/run", "n_members"),
    ("config-n-layer-huge", "run --config {d}/cfg-layers.yaml --out {d}/run", "n_layer"),
    ("config-epochs-1e9", "run --config {d}/cfg-epochs.yaml --out {d}/run", "train.epochs"),
    ("config-candidates-1e12", "run --config {d}/cfg-candidates.yaml --out {d}/run", "candidates"),
    ("config-bootstrap-1e9", "run --config {d}/cfg-bootstrap.yaml --out {d}/run", "bootstrap"),
    ("config-max-length-1e7", "run --config {d}/cfg-maxlen.yaml --out {d}/run", "max_length"),
    ("config-ldp-k-1e9", "run --config {d}/cfg-ldpk.yaml --out {d}/run", "ldp_k"),
    ("config-num-perm-1e8", "run --config {d}/cfg-numperm.yaml --out {d}/run", "num_perm"),
    ("config-one-run-canaries-1e9", "run --config {d}/cfg-onerun.yaml --out {d}/run", "one_run.canaries"),
    ("config-rounds-1e9", "run --config {d}/cfg-rounds.yaml --out {d}/run", "rounds"),
    ("config-repeats-huge", "run --config {d}/cfg-repeats.yaml --out {d}/run", "repeats"),
    ("config-repeat-visits-zero", "run --config {d}/cfg-visits.yaml --out {d}/run", "repeat_visits"),
    ("config-summary-epsilon-1e9", "run --config {d}/cfg-summary.yaml --out {d}/run", "summary_epsilon"),
    ("config-memory-gib-huge", "run --config {d}/cfg-mem.yaml --out {d}/run", "memory_gib"),
    # ---- JSON past the limits, in every reader of user JSON
    ("run-data-deep", "run --data {d}/deep.jsonl --out {d}/run", "nested more than 64"),
    ("run-data-bignum", "run --data {d}/bignum.jsonl --out {d}/run", "100,000 characters"),
    ("run-data-deep-array", "run --data {d}/deep-array.json --out {d}/run", "nested more than 64"),
    ("scrub-deep", "scrub {d}/deep.jsonl {d}/o.jsonl", "nested more than 64"),
    ("scrub-bignum", "scrub {d}/bignum.jsonl {d}/o.jsonl", "100,000 characters"),
    ("dedup-deep", "dedup {d}/deep.jsonl {d}/o.jsonl", "nested more than 64"),
    ("dedup-bignum", "dedup {d}/bignum.jsonl {d}/o.jsonl", "100,000 characters"),
    ("ldp-deep", "ldp {d}/deep.jsonl", "nested more than 64"),
    ("guard-build-deep", "guard build --train {d}/deep.jsonl --out {d}/idx", "nested more than 64"),
    ("guard-build-deep-canaries", "guard build --train {d}/good.jsonl --out {d}/idx --canaries {d}/deep-canaries.json",
     "nested more than 64"),
    ("guard-check-deep-index", "guard check --index {d}/idx-deep {d}/good.jsonl", "nested more than 64"),
    ("report-deep-results", "report {d}/run-deep", "nested more than 64"),
    ("report-bignum-results", "report {d}/run-bignum", "100,000 characters"),
    ("compare-deep-results", "compare {d}/run-deep {d}/run-bignum --out {d}/c.html", "nested more than 64"),
    ("config-yaml-deep", "run --config {d}/deep.yaml --out {d}/run", "nested too deeply"),
    ("config-toml-deep", "run --config {d}/deep.toml --out {d}/run", "nested too deeply"),
    ("config-yaml-bigint", "run --config {d}/bigint.yaml --out {d}/run", "cannot be read"),
    # ---- outputs that must not be replaced
    ("scrub-out-char-device", "scrub {d}/good.jsonl /dev/null --no-ner", "character device"),
    ("scrub-out-fifo", "scrub {d}/good.jsonl {d}/fifo --no-ner", "FIFO"),
    ("scrub-out-symlink", "scrub {d}/good.jsonl {d}/link.jsonl --no-ner", "symbolic link"),
    ("scrub-out-is-in", "scrub {d}/good.jsonl {d}/good.jsonl --no-ner", "is the input file"),
    ("scrub-out-hardlink-to-in", "scrub {d}/good.jsonl {d}/hard.jsonl --no-ner", "is the input file"),
    ("scrub-out-directory", "scrub {d}/good.jsonl {d}/adir --no-ner", "is a directory"),
    ("scrub-out-missing-dir", "scrub {d}/good.jsonl {d}/nodir/o.jsonl --no-ner", "does not exist"),
    ("dedup-out-char-device", "dedup {d}/good.jsonl /dev/null", "character device"),
    ("dedup-out-fifo", "dedup {d}/good.jsonl {d}/fifo", "FIFO"),
    ("dedup-out-symlink", "dedup {d}/good.jsonl {d}/link.jsonl", "symbolic link"),
    ("dedup-out-is-in", "dedup {d}/good.jsonl {d}/good.jsonl", "is the input file"),
    ("compare-out-char-device", "compare {d}/run-deep {d}/run-bignum --out /dev/null", "character device"),
    ("compare-out-fifo", "compare {d}/run-deep {d}/run-bignum --out {d}/fifo", "FIFO"),
    ("compare-out-symlink", "compare {d}/run-deep {d}/run-bignum --out {d}/link.jsonl", "symbolic link"),
    ("compare-out-is-input", "compare {d}/run-deep {d}/run-bignum --out {d}/run-deep/results.json", "is the input file"),
    ("guard-build-out-symlink", "guard build --train {d}/good.jsonl --out {d}/dirlink", "symbolic link"),
    ("guard-build-out-busy-dir", "guard build --train {d}/good.jsonl --out {d}/adir", "holds other files"),
    ("guard-build-out-char-device", "guard build --train {d}/good.jsonl --out /dev/null", "is a file"),
    ("generate-out-char-device", "data generate --out /dev/null", "--out"),
    ("run-out-char-device", "run --out /dev/null", "--out"),
    # ---- flags that would not take effect
    ("run-epsilons-beside-config-arms", "run --config {d}/arms.yaml --epsilons 2 --out {d}/run", "--epsilons"),
    ("run-text-field-without-data", "run --text-field body --out {d}/run", "--text-field"),
    ("run-group-field-without-data", "run --group-field patient --out {d}/run", "--group-field"),
    ("run-plant-canaries-without-data", "run --plant-canaries --out {d}/run", "--plant-canaries"),
    ("run-delta-without-dp-arm", "run --delta 1e-5 --arms baseline --out {d}/run", "--delta"),
    ("run-workers-sequential", "run --workers 2 --executor sequential --out {d}/run", "workers"),
    ("scrub-seed-with-mask", "scrub {d}/good.jsonl {d}/o.jsonl --seed 3", "--seed"),
    ("scrub-text-field-on-text", "scrub {d}/notes.txt {d}/o.txt --text-field body", "--text-field"),
    ("dedup-num-perm-with-exact", "dedup {d}/good.jsonl {d}/o.jsonl --method exact --num-perm 64", "--num-perm"),
    ("dedup-threshold-with-exact", "dedup {d}/good.jsonl {d}/o.jsonl --method exact --threshold 0.5", "--threshold"),
    ("dedup-text-field-on-text", "dedup {d}/notes.txt {d}/o.txt --text-field body", "--text-field"),
    ("ldp-text-field-on-text", "ldp {d}/notes.txt --text-field body", "--text-field"),
    ("guard-build-text-field-on-text", "guard build --train {d}/notes.txt --out {d}/idx --text-field body",
     "--text-field"),
    ("guard-build-zero-windows", "guard build --train {d}/good.jsonl --out {d}/idx --threshold 100000", "--threshold"),
    ("guard-check-types-with-pii-off", "guard check --index {d}/idx-ok --policy pii=off --types NAME {d}/good.jsonl",
     "--types"),
    ("guard-serve-no-ner-with-pii-off", "guard serve --index {d}/idx-ok --policy pii=off --no-ner", "--no-ner"),
    # ---- a CSV whose quote never closes
    ("scrub-csv-open-quote", "scrub {d}/open-quote.csv {d}/o.csv", "never closed"),
    ("dedup-csv-open-quote", "dedup {d}/open-quote.csv {d}/o.csv", "never closed"),
    ("ldp-csv-open-quote", "ldp {d}/open-quote.csv", "never closed"),
    ("run-csv-open-quote", "run --data {d}/open-quote.csv --out {d}/run", "never closed"),
    ("guard-build-csv-open-quote", "guard build --train {d}/open-quote.csv --out {d}/idx", "never closed"),
    # ---- guard serve start-up
    ("guard-serve-bad-host", "guard serve --index {d}/idx-ok --host 256.1.1.1 --port 65000", "--host"),
    ("guard-serve-port-in-use", "guard serve --index {d}/idx-ok --port {busy_port}", "already in use"),
    # ---- control characters in what the user typed: shown as escapes
    ("escape-in-file-name", "scrub {d}/\x1b[2Jevil.jsonl {d}/o.jsonl", "\\x1b[2Jevil"),
    ("escape-in-arm-name", "run --arms baseline,\x1b]52;c;aGk=\x07x --out {d}/run", "\\x1b]52"),
    ("escape-in-profile", "run --profile \x1b[31mfast --out {d}/run", "\\x1b[31mfast"),
    # ---- a run directory another process holds
    ("run-dir-locked", "run --out {d}/locked --arms baseline", "PID"),
]


def _write_inputs(d: Path) -> None:
    from privleak.defenses.guard import Guard, ScanSettings

    (d / "good.jsonl").write_text(json.dumps({"text": "A short note about nothing much, seen on Monday."}) + "\n")
    (d / "notes.txt").write_text("first note\nsecond note\n")
    (d / "deep.jsonl").write_text(json.dumps({"text": "fine"}) + "\n" + DEEP + "\n")
    (d / "bignum.jsonl").write_text('{"text": "fine", "n": ' + BIG + "}\n")
    (d / "deep-array.json").write_text("[" + DEEP + "]")
    (d / "deep-canaries.json").write_text('{"canaries": ' + DEEP + "}")
    (d / "open-quote.csv").write_text('id,text\n1,"a note that never closes\n2,another\n3,more\n')
    (d / "arms.yaml").write_text(SMALL_CFG)
    (d / "deep.yaml").write_text("seed: " + DEEP + "\n")
    (d / "deep.toml").write_text("seed = " + DEEP + "\n")
    (d / "bigint.yaml").write_text("seed: " + BIG + "\n")
    for name, cfg in {"eps": {"dp": {"epsilons": [800]}},
                      "members": {"data": {"synthetic": {"n_members": 2_000_000_000}}},
                      "layers": {"model": {"embedded": {"n_layer": 100_000}}},
                      "epochs": {"train": {"epochs": 1e9}},
                      "candidates": {"canaries": {"candidates": 10**12}},
                      "bootstrap": {"attacks": {"bootstrap": 10**9}},
                      "maxlen": {"model": {"max_length": 10**7}},
                      "ldpk": {"release": {"ldp_k": 10**9}},
                      "numperm": {"defences": {"dedup": {"num_perm": 10**8}}},
                      "onerun": {"one_run": {"canaries": 10**9}},
                      "rounds": {"federated": {"rounds": 10**9}},
                      "repeats": {"canaries": {"repeats": [1, 100_000]}},
                      "visits": {"data": {"synthetic": {"repeat_visits": [0]}}},
                      "summary": {"release": {"summary_epsilon": 1e9}},
                      "mem": {"executor": {"kind": "processes", "memory_gib": 1e12}}}.items():
        (d / f"cfg-{name}.yaml").write_text(json.dumps(cfg))
    for run_dir, content in (("run-deep", DEEP), ("run-bignum", '{"schema_version": ' + BIG + "}")):
        (d / run_dir).mkdir()
        (d / run_dir / "results.json").write_text(content)
    (d / "m").mkdir()
    os.mkfifo(d / "fifo")
    (d / "elsewhere.jsonl").write_text("must stay as it is\n")
    (d / "link.jsonl").symlink_to(d / "elsewhere.jsonl")
    os.link(d / "good.jsonl", d / "hard.jsonl")
    (d / "adir").mkdir()
    (d / "adir" / "mine.txt").write_text("the user's own file")
    (d / "dirlink").symlink_to(d / "adir")
    Guard.build(["A public sentence long enough to make one window of fifty characters or more."],
                scan=ScanSettings(ner=False)).save(d / "idx-ok")
    (d / "idx-deep").mkdir()
    (d / "idx-deep" / "guard.json").write_text(DEEP)
    (d / "idx-deep" / "verbatim.npy").write_bytes(b"")
    (d / "locked").mkdir()


_snapshot = snapshot  # the name bench/bench_refusals.py and older case files use

HOLDER = ("import sys, time\nfrom privleak.pipeline.rundir import RunDir\nRunDir.open(sys.argv[1])\n"
          "print('held', flush=True)\ntime.sleep(3600)\n")


def _case_env(d: Path) -> dict[str, str]:
    return {"PRIVLEAK_PROGRESS": "0", "COLUMNS": "200", "PRIVLEAK_CRASH_DIR": str(d.parent / f"{d.name}-crashes")}


def _run_case(argv: str, d: Path, busy_port: int) -> tuple[subprocess.CompletedProcess | None, dict, dict]:
    """One case as a real process (``python -m privleak``): what bench/bench_refusals.py times."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), **_case_env(d)}
    args = expand(argv, d=d, busy_port=busy_port)
    before = _snapshot(d)
    try:
        proc = subprocess.run([sys.executable, "-m", "privleak", *args], capture_output=True, text=True, env=env,
                              timeout=CASE_TIMEOUT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        proc = None
    return proc, before, _snapshot(d)


def run_case_here(argv: str, d: Path, busy_port: int) -> tuple[subprocess.CompletedProcess | None, dict, dict]:
    """One case through ``main`` in this process (``cli_harness.run_cli``); the same (process, before, after)."""
    before = snapshot(d)
    proc = run_cli(expand(argv, d=d, busy_port=busy_port), env=_case_env(d))
    return (proc if proc.returncode is not None else None), before, snapshot(d)


@contextlib.contextmanager
def _busy_port_and_holders(dirs: dict[str, Path], cases) -> Iterator[int]:
    """A port something listens on ({busy_port}), and each case's {d}/locked held by another process."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    holders = []
    try:
        for cid, argv, _ in cases:
            if "{d}/locked" in argv:
                holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(dirs[cid] / "locked")],
                                          stdout=subprocess.PIPE, text=True,
                                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
                holders.append(holder)
                assert holder.stdout.readline().strip() == "held"
        yield listener.getsockname()[1]
    finally:
        listener.close()
        for h in holders:
            h.kill()
            h.wait()


def run_matrix(tmp_path_factory, cases, write_inputs=None) -> dict:
    """Every case of ``cases`` (id, argv, needle) in this process, one at a time, each on its own fresh scratch
    directory written by ``write_inputs`` (default: this module's): {id: ((process, before, after), dir)}."""
    write_inputs = write_inputs or _write_inputs
    dirs = {}
    for cid, _, _ in cases:
        d = tmp_path_factory.mktemp(cid)
        write_inputs(d)
        dirs[cid] = d
    with _busy_port_and_holders(dirs, cases) as busy_port:
        return {cid: (run_case_here(argv, dirs[cid], busy_port), dirs[cid]) for cid, argv, _ in cases}


def check_refusal(results: dict, cid: str, argv: str, needle: str) -> None:
    """What every case must show: one ``error:`` line naming ``needle``, exit 2, nothing written, no crash."""
    (proc, before, after), d = results[cid]
    assert_one_line_refusal(proc, needle, argv)
    assert before == after  # nothing created, changed or removed (a FIFO, a link, the input: all as they were)
    assert not (d.parent / f"{d.name}-crashes").exists()  # a refusal, not a crash
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return run_matrix(tmp_path_factory, CASES)


def test_the_matrix_is_large_and_covers_every_command():
    assert len(CASES) >= 80 and len({c[0] for c in CASES}) == len(CASES)
    commands = {argv.split(" ")[0] for _, argv, _ in CASES}
    assert {"run", "attack", "scrub", "dedup", "report", "compare", "ldp", "data", "guard"} <= commands


@pytest.mark.parametrize("cid,argv,needle", CASES, ids=[c[0] for c in CASES])
def test_refused_in_one_line_with_nothing_written(results, cid, argv, needle):
    check_refusal(results, cid, argv, needle)


# One case per command and kind of check, as real processes: the console script's own start-up, and a refusal
# that never imported torch or transformers (the in-process cases cannot show that: this process has them).
SUBPROCESS_CASES = ["run-epsilon-800", "config-dp-epsilon-800", "escape-in-arm-name", "run-dir-locked",
                    "attack-max-length-huge", "scrub-out-fifo", "dedup-deep", "report-deep-results",
                    "guard-serve-port-in-use"]


@pytest.fixture(scope="module")
def subprocess_results(tmp_path_factory):
    cases = [c for c in CASES if c[0] in SUBPROCESS_CASES]
    dirs = {}
    for cid, _, _ in cases:
        d = tmp_path_factory.mktemp(f"sub-{cid}")
        _write_inputs(d)
        dirs[cid] = d
    out = {}
    with _busy_port_and_holders(dirs, cases) as busy_port:
        for cid, argv, _ in cases:
            d = dirs[cid]
            before = snapshot(d)
            proc, imported = run_console_script(expand(argv, d=d, busy_port=busy_port), env=_case_env(d),
                                                imports=True)
            out[cid] = ((proc, before, snapshot(d)), d), imported
    return out


@pytest.mark.parametrize("cid", SUBPROCESS_CASES)
def test_refused_by_a_real_process_before_torch_is_imported(subprocess_results, cid):
    argv, needle = next((a, n) for c, a, n in CASES if c == cid)
    result, imported = subprocess_results[cid]
    check_refusal({cid: result}, cid, argv, needle)
    assert imported == [], f"{cid}: refused only after importing {imported}"
