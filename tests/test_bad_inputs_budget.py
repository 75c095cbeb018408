"""`privleak budget`'s bad inputs (issue 39's ledger rows), through the real console script.

Each refusal: exit 2, exactly one ``error:`` line naming the problem and the fix, no traceback, no raw
control character, nothing created, changed or removed in the scratch directory, and torch never imported
(every refusal took 7–10 s while torch loaded first); a ledger refused before its first line's ε is checked is
refused without the accountants too (dp_accounting and scipy: 1.5 s of a 2.2 s refusal on a slow host). The
same checks as ``tests/test_bad_inputs.py``'s matrix, in a file of its own (that matrix is being restructured);
the hostile files are built here. The valid cases beside them (``--release`` across units, long ledgers) must
give the right result.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_harness import snapshot

from privleak.accountants import epsilon_prv
from privleak.data.records import Record
from privleak.pipeline import ledger as L

ROOT = Path(__file__).resolve().parents[1]
CASE_TIMEOUT = float(os.environ.get("PRIVLEAK_CASE_TIMEOUT", "120"))
DELTA = 1e-5
DP, USER = (0.05, 0.9, 200), (0.2, 1.1, 60)

# The console script, reporting on exit which of torch and dp_accounting were ever imported (to a file outside the
# scratch dir).
WRAPPER = ("import atexit, json, os, sys\n"
           "atexit.register(lambda: open(os.environ['TORCH_FLAG'], 'w').write(json.dumps(\n"
           "    {m: m in sys.modules for m in ('torch', 'dp_accounting')})))\n"
           "from privleak.cli import main\nmain(sys.argv[1:])\n")
#: The budget refusals that come after a line's ε is checked against its σ (the accountants compute it): those
#: of that check, and those of the people files and of an arm --release does not find, which come after the
#: valid lines are read. Every other case here breaks the whole file or its first line, and is refused before
#: the accountants load (a bad line after a good one would load them: lines are checked as they are read).
NEEDS_ACCOUNTANTS = {"sigma-tiny-eps-inf", "sigma-tiny", "epsilon-edited", "people-missing", "people-edited",
                     "release-unknown"}


def _write_run(run: Path, arms=(("dp-8", "record", DP), ("dp-user-8", "person", USER))) -> Path:
    run.mkdir(parents=True, exist_ok=True)
    records = [Record(f"note {v} of P{p}", meta={"kind": "phi", "person_id": f"P{p}"}) for p in range(6) for v in range(2)]
    people = L.training_people(records)
    for arm, unit, (q, s, t) in arms:
        eps = epsilon_prv(sample_rate=q, noise_multiplier=s, steps=t, delta=DELTA)
        e = L.entry_for(L.members_hash(records), arm, run, {"arm": arm}, {"sample_rate": q, "sigma": s, "steps": t,
                        "delta": DELTA, "epsilon": eps, "unit": unit, "accountant": "prv"}, people)
        L.record_training(run, e, people)
    return run / "budget" / "ledger.jsonl"


def _edit_first_line(ledger: Path, **edit) -> None:
    lines = ledger.read_text().splitlines()
    lines[0] = json.dumps({**json.loads(lines[0]), **edit})
    ledger.write_text("\n".join(lines) + "\n")


def _inputs(d: Path, cid: str) -> None:
    """The hostile input of case ``cid`` under ``d`` (each case its own copy)."""
    ledger = _write_run(d / "run")
    if cid == "non-utf8":
        ledger.write_bytes(ledger.read_bytes()[:20] + b"\xff\xfe\x80" + ledger.read_bytes()[20:])
    elif cid == "sigma-tiny-eps-inf":
        _edit_first_line(ledger, sigma=1e-9, epsilon=float("inf"))
    elif cid == "sigma-tiny":
        _edit_first_line(ledger, sigma=1e-9)
    elif cid == "epsilon-edited":
        _edit_first_line(ledger, epsilon=0.001)
    elif cid == "unit-galaxy":
        _edit_first_line(ledger, unit="galaxy")
    elif cid == "not-json":
        ledger.write_text("{this is not json\n")
    elif cid == "deep-json":
        ledger.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    elif cid == "ledger-folder":
        os.remove(ledger)
        ledger.mkdir()
    elif cid == "ledger-fifo":
        os.remove(ledger)
        os.mkfifo(ledger)
    elif cid == "ledger-symlink-loop":
        os.remove(ledger)
        ledger.symlink_to(ledger)
    elif cid == "people-missing":
        for p in (ledger.parent / "people").iterdir():
            p.unlink()
    elif cid == "people-edited":
        [p] = list((ledger.parent / "people").iterdir())
        p.write_text(json.dumps({"records": {"0123456789abcdef": 1}}))
    elif cid == "no-ledger":
        os.remove(ledger)
    elif cid.startswith("group-id-"):  # a --group-field whose values name no one
        value = {"group-id-list": ["x"], "group-id-dict": {"id": 1}, "group-id-bool": True}[cid]
        (d / "groups.jsonl").write_text("".join(json.dumps({"text": f"note {i}", "author": value}) + "\n"
                                                for i in range(40)))


# (case id, argv with {d} = the case's scratch directory, text the error line must contain)
CASES: list[tuple[str, str, str]] = [
    ("non-utf8", "budget {d}/run --no-cache", "not UTF-8 text"),
    ("sigma-tiny-eps-inf", "budget {d}/run --no-cache", "line 1"),
    ("sigma-tiny", "budget {d}/run --no-cache", "no training the accountants can state an ε for"),
    ("epsilon-edited", "budget {d}/run --no-cache", "does not follow from its σ"),
    ("unit-galaxy", "budget {d}/run --no-cache", "unit"),
    ("not-json", "budget {d}/run --no-cache", "line 1 is not a ledger entry"),
    ("deep-json", "budget {d}/run --no-cache", "nested more than"),
    ("ledger-folder", "budget {d}/run --no-cache", "is a directory"),
    ("ledger-fifo", "budget {d}/run --no-cache", "named pipe"),
    ("ledger-symlink-loop", "budget {d}/run --no-cache", "symbolic link loop"),
    ("people-missing", "budget {d}/run --no-cache", "people file a ledger line names is missing"),
    ("people-edited", "budget {d}/run --no-cache", "not a people file privleak wrote"),
    ("release-unknown", "budget {d}/run --no-cache --release dp-9", "--release dp-9"),
    ("release-empty", "budget {d}/run --no-cache --release ,", "--release"),
    ("no-ledger", "budget {d}/run --no-cache", "no DP training is recorded"),
    ("not-a-run-dir", "budget {d}/nowhere --no-cache", "not a run directory"),
    # list / object / boolean group ids were read as text and refused later as "0 independent group units"
    ("group-id-list", "run --data {d}/groups.jsonl --group-field author --out {d}/out", "has a list in field"),
    ("group-id-dict", "run --data {d}/groups.jsonl --group-field author --out {d}/out", "has an object in field"),
    ("group-id-bool", "run --data {d}/groups.jsonl --group-field author --out {d}/out", "has true/false in field"),
]


def _run(argv: str, d: Path, flag: Path, cache: Path) -> tuple[subprocess.CompletedProcess | None, dict | None]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PRIVLEAK_PROGRESS": "0", "COLUMNS": "200",
           "PRIVLEAK_CRASH_DIR": str(flag.parent / "crashes"), "TORCH_FLAG": str(flag), "PRIVLEAK_CACHE": str(cache)}
    args = [a.replace("{d}", str(d)) for a in argv.split(" ")]
    try:
        proc = subprocess.run([sys.executable, "-c", WRAPPER, *args], capture_output=True, text=True, env=env,
                              timeout=CASE_TIMEOUT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None, None
    return proc, json.loads(flag.read_text()) if flag.exists() else None


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = {}
    for cid, argv, _ in CASES:
        d = tmp_path_factory.mktemp(cid)
        _inputs(d, cid)
        aux = tmp_path_factory.mktemp(f"{cid}-aux")
        before = snapshot(d)
        proc, loaded = _run(argv, d, aux / "torch", aux / "cache")
        out[cid] = (proc, loaded, before, snapshot(d), aux)
    return out


@pytest.mark.parametrize("cid,argv,needle", CASES, ids=[c[0] for c in CASES])
def test_refused_in_one_line_before_torch(results, cid, argv, needle):
    proc, loaded, before, after, aux = results[cid]
    assert proc is not None, f"{argv!r} hung: no answer in {CASE_TIMEOUT} s"
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, (argv, proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-2000:]
    assert needle in lines[0], (needle, lines[0])
    assert not any(ch in proc.stderr + proc.stdout for ch in "\x1b\x07\r"), repr(lines[0])
    assert before == after  # nothing created, changed or removed (the FIFO, the link loop: as they were)
    assert not (aux / "crashes").exists()
    if argv.startswith("budget"):
        assert loaded is not None, "the console script did not report what it imported"
        assert loaded["torch"] is False, "torch was imported before the refusal"
        if cid not in NEEDS_ACCOUNTANTS:
            assert loaded["dp_accounting"] is False, "the accountants were imported before the refusal"


def test_release_across_units_and_hostile_names_are_processed(tmp_path):
    """Issue 39 row 1 through the console script: `--release dp-8` on a run with dp-8 and dp-user-8 gives the
    composed figure (exit 0); an arm name with control characters is printed escaped, never obeyed."""
    _write_run(tmp_path / "run")
    flag, cache = tmp_path / "torch", tmp_path / "cache"
    proc, loaded = _run("budget {d}/run --no-cache --release dp-8,dp-user-8 --json", tmp_path, flag, cache)
    assert proc.returncode == 0, proc.stderr
    [group] = json.loads(proc.stdout)
    together = next(x for x in group["lines"] if x["what"] == "released together")
    assert together["arms"] == ["dp-8", "dp-user-8"] and together["epsilon_person"] > together["epsilon"] > 0
    assert loaded is not None and loaded["torch"] is False
    _edit_first_line(tmp_path / "run" / "budget" / "ledger.jsonl", arm="dp-8\x1b[2J\x07")
    proc, _ = _run("budget {d}/run --no-cache", tmp_path, flag, cache)
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout + proc.stderr and "\\x1b[2J" in proc.stdout
    assert "ε per person" in proc.stdout and "dp-user-8" in proc.stdout
