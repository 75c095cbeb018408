"""Bad input: one line naming the problem and the fix, exit code 2, no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from privleak.cli import main


def _run(argv: list[str], capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    return int(exc.value.code), err


def _assert_one_line_error(code: int, err: str, *needles: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], (n, lines[0])


@pytest.fixture
def out_dir(tmp_path: Path) -> str:
    return str(tmp_path / "run")


def test_empty_file(tmp_path, out_dir, capsys):
    f = tmp_path / "empty.jsonl"
    f.write_text("")
    code, err = _run(["run", "--data", str(f), "--out", out_dir], capsys)
    _assert_one_line_error(code, err, "empty.jsonl")


def test_non_utf8_bytes(tmp_path, out_dir, capsys):
    f = tmp_path / "latin1.txt"
    f.write_bytes(b"first record\nsecond caf\xe9 record\n")
    code, err = _run(["run", "--data", str(f), "--out", out_dir], capsys)
    _assert_one_line_error(code, err, "latin1.txt", "line 2", "UTF-8")


def test_malformed_json_line(tmp_path, out_dir, capsys):
    f = tmp_path / "bad.jsonl"
    f.write_text(json.dumps({"text": "ok"}) + "\n{not json\n")
    code, err = _run(["run", "--data", str(f), "--out", out_dir], capsys)
    _assert_one_line_error(code, err, "bad.jsonl", "line 2")


def test_missing_text_field(tmp_path, out_dir, capsys):
    f = tmp_path / "notes.jsonl"
    f.write_text(json.dumps({"body": "a note"}) + "\n")
    code, err = _run(["run", "--data", str(f), "--out", out_dir], capsys)
    _assert_one_line_error(code, err, "notes.jsonl", "line 1", "--text-field")


@pytest.mark.parametrize("eps", ["0", "-1", "inf", "abc"])
def test_impossible_epsilon(eps, out_dir, capsys):
    code, err = _run(["run", "--epsilons", f"1,{eps}", "--out", out_dir], capsys)
    _assert_one_line_error(code, err, "--epsilons")


@pytest.mark.parametrize("delta", ["1", "1.5", "0", "-0.1"])
def test_impossible_delta(delta, out_dir, capsys):
    code, err = _run(["run", "--delta", delta, "--out", out_dir], capsys)
    _assert_one_line_error(code, err, "--delta")


def test_model_path_that_does_not_exist(tmp_path, out_dir, capsys):
    code, err = _run(["run", "--model", str(tmp_path / "no-such-model"), "--out", out_dir], capsys)
    _assert_one_line_error(code, err, "no-such-model", "does not exist")


def test_model_dir_without_config(tmp_path, out_dir, capsys):
    (tmp_path / "m").mkdir()
    code, err = _run(["run", "--model", str(tmp_path / "m"), "--out", out_dir], capsys)
    _assert_one_line_error(code, err, "config.json")


def test_unwritable_output_directory(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    # A directory below a regular file cannot be created, even by root.
    code, err = _run(["run", "--out", str(blocker / "run")], capsys)
    _assert_one_line_error(code, err, "--out", "cannot write")


def test_missing_data_file(tmp_path, out_dir, capsys):
    code, err = _run(["run", "--data", str(tmp_path / "nope.csv"), "--out", out_dir], capsys)
    _assert_one_line_error(code, err, "nope.csv", "does not exist")


def test_bad_config_field(tmp_path, out_dir, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("dp:\n  epsilons: [1, 0]\n")
    code, err = _run(["run", "--config", str(cfg), "--out", out_dir], capsys)
    _assert_one_line_error(code, err, "dp.epsilons")


def test_unknown_profile(out_dir, capsys):
    code, err = _run(["run", "--profile", "fast", "--out", out_dir], capsys)
    _assert_one_line_error(code, err, "--profile")


def test_accountant_bad_parameters(capsys):
    code, err = _run(["accountant", "-q", "1.5", "--steps", "10", "--delta", "1e-5", "--sigma", "1"], capsys)
    assert code == 2 and "Traceback" not in err
    code, err = _run(["accountant", "-q", "0.01", "--steps", "10", "--delta", "1e-5", "--sigma", "-1"], capsys)
    assert code == 2 and "Traceback" not in err


@pytest.mark.parametrize("body, needle", [
    ("attacks:\n  min_k_percent: 0\n", "attacks.min_k_percent"),
    ("attacks:\n  min_k_percent: 120\n", "attacks.min_k_percent"),
    ("shadows:\n  enabled: true\n  n_shadows: 0\n", "at least 2 shadow models"),
    ("attacks:\n  extraction_samples: 900000000000\n", "attacks.extraction_samples"),
    ("canaries:\n  candidates: 900000000000\n", "canaries.candidates"),
    ("arms: [guard]\n", "list baseline too"),
])
def test_bad_attack_configuration(tmp_path, out_dir, capsys, body, needle):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(body)
    code, err = _run(["run", "--config", str(cfg), "--out", out_dir], capsys)
    _assert_one_line_error(code, err, needle)
    assert not Path(out_dir).exists() or not any(Path(out_dir).iterdir())  # refused before any work


def test_arms_and_epsilons_together(out_dir, capsys):
    code, err = _run(["run", "--arms", "baseline,dp-8", "--epsilons", "1", "--out", out_dir], capsys)
    _assert_one_line_error(code, err, "--arms")
