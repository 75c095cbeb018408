"""The plug-in contract for inputs (issue 46): a new input, a kind needing it and an attack needing it plus the
scores, all declared in a test module (``contract_toy.py``) with no edit to ``src/``, become tasks of the plan
in the right order and run through assembly, the verdicts and the generated schema — without torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    import contract_toy

    return contract_toy.run(tmp_path_factory.mktemp("toy") / "run")


def test_the_new_input_is_one_task_that_its_readers_wait_for(toy):
    tasks = toy["tasks"]
    assert tasks["toy-token-frequencies"] == ("data",)
    # The kind declared it: its training waits for it; the attack declared it and the scores: so does its stage.
    assert "toy-token-frequencies" in tasks["train/toy-counting"]
    assert {"toy-token-frequencies", "scores/toy-counting"} <= set(tasks["extraction/toy-counting"])
    # A model whose attacks do not read the table does not wait for it: the control's membership stage.
    assert "toy-token-frequencies" not in tasks["membership/base"]
    order = list(tasks)
    assert order.index("toy-token-frequencies") < order.index("train/toy-counting")


def test_the_kind_and_the_attack_read_it_and_the_results_carry_them(toy):
    from collections import Counter

    import contract_toy

    freq = Counter(w for r in contract_toy.records(30, "q") for w in r.text.lower().split())
    top = sorted(freq, key=lambda w: (-freq[w], w))[:3]
    arm = toy["results"]["arms"]["toy-counting"]
    assert arm["details"] == {"kind": "toy-counting", "top_words": top}
    assert arm["training"]["settings"] == {"kind": "toy-counting", "top": 3}  # the typed settings, dumped
    attack = arm["attacks"]["toy_frequency"]
    assert attack["table_words"] == len(freq) and attack["loss_gap"] > 0  # the fake model "saw" its members
    assert f"toy top words: {', '.join(top)}" in arm["verdict"]["figures"]
    assert any("toy_frequency: loss gap" in f for f in arm["verdict"]["figures"])
    control = toy["results"]["base_model"]["attacks"]
    assert {"loss", "toy_frequency"} <= set(arm["attacks"]) and {"loss", "toy_frequency"} <= set(control)


def test_the_results_validate_against_the_schema_generated_with_them(toy):
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(toy["results"], toy["schema"])


def test_it_runs_without_torch(tmp_path):
    """In a fresh interpreter: planning, running on the fakes, assembling and judging import no torch."""
    code = ("import sys, time, json; sys.path.insert(0, sys.argv[1]); import contract_toy; t = time.perf_counter(); "
            "contract_toy.run(__import__('pathlib').Path(sys.argv[2])); "
            "print(json.dumps({'seconds': time.perf_counter() - t, "
            "'loaded': sorted(m for m in ('torch', 'transformers') if m in sys.modules)}))")
    out = subprocess.run([sys.executable, "-c", code, str(ROOT / "tests"), str(tmp_path / "run")], capture_output=True,
                         text=True, env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["loaded"] == [], report
    print(f"toy plan run, assembled and judged in {report['seconds']:.2f} s")  # the figure: bench, not an assert
