"""The CLI's commands on real (small) inputs."""

from __future__ import annotations

import json

import pytest

from privleak.cli import main
from privleak.data.records import read_jsonl
from privleak.report.schema import load_results


def _ok(argv: list[str]) -> None:
    try:
        main(argv)
    except SystemExit as exc:  # typer may exit 0 explicitly
        assert exc.code in (0, None), exc.code


def test_data_generate_writes_all_splits(tmp_path, capsys):
    out = tmp_path / "corpus"
    _ok(["data", "generate", "--out", str(out), "--n-public", "50", "--n-members", "40", "--n-non-members", "40",
         "--n-population", "20", "--seed", "3"])
    for split in ("public", "members", "non_members", "population"):
        recs = read_jsonl(out / f"{split}.jsonl")
        assert recs
    members = read_jsonl(out / "members.jsonl")
    assert any(r.kind == "canary" for r in members)
    assert json.loads((out / "canaries.json").read_text())


def test_accountant_json_epsilon(capsys):
    _ok(["accountant", "-q", "0.01", "--steps", "1000", "--delta", "1e-5", "--sigma", "1.0", "--json"])
    payload = json.loads(capsys.readouterr().out)
    assert set(payload) >= {"epsilon_rdp", "epsilon_pld", "epsilon_prv"}
    assert payload["epsilon_prv"] == pytest.approx(payload["epsilon_pld"], rel=0.01)
    assert payload["epsilon_rdp"] >= payload["epsilon_pld"]  # RDP is the looser bound


def test_accountant_json_sigma(capsys):
    _ok(["accountant", "-q", "0.01", "--steps", "1000", "--delta", "1e-5", "--epsilon", "8", "--json"])
    payload = json.loads(capsys.readouterr().out)
    assert set(payload) >= {"sigma_rdp", "sigma_pld", "sigma_prv"}
    assert payload["sigma_pld"] <= payload["sigma_rdp"]


def _user_corpus_lines(n: int = 90) -> list[str]:
    return [f"Ticket {i}: customer reports issue number {i * 37 % 101} with the billing page." for i in range(n)]


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "txt", "hf"])
def test_user_corpus_with_local_model_and_planted_canaries(fmt, tmp_path, tiny_model_dir, capsys):
    lines = _user_corpus_lines()
    if fmt == "jsonl":
        data = tmp_path / "c.jsonl"
        data.write_text("".join(json.dumps({"body": t, "id": i}) + "\n" for i, t in enumerate(lines)))
        extra = ["--text-field", "body"]
    elif fmt == "csv":
        data = tmp_path / "c.csv"
        data.write_text("id,body\n" + "".join(f'{i},"{t}"\n' for i, t in enumerate(lines)))
        extra = ["--text-field", "body"]
    elif fmt == "txt":
        data = tmp_path / "c.txt"
        data.write_text("\n".join(lines) + "\n")
        extra = []
    else:
        from datasets import Dataset

        data = tmp_path / "hfds"
        Dataset.from_dict({"text": lines}).save_to_disk(str(data))
        extra = []
    cfg = tmp_path / "small.yaml"
    cfg.write_text(
        "profile: smoke\n"  # its attack sizes; the one-run audit canaries are not what this test reads
        "one_run: {canaries: 0}\n"
        "canaries: {repeats: [1, 4], per_repeat: 1, candidates: 100}\n"
        "train: {epochs: 1, batch_size: 16}\n"
        "dp: {epochs: 1, batch_size: 16}\n"
        "attacks: {bootstrap: 0}\n"
    )
    out = tmp_path / "run"
    _ok(["run", "--config", str(cfg), "--data", str(data), *extra, "--model", str(tiny_model_dir),
         "--arms", "baseline,dp-8", "--plant-canaries", "--out", str(out)])
    results = load_results(out)
    assert set(results.arms) == {"baseline", "dp-8"}
    assert results.base_model.source.kind == "user"
    members = read_jsonl(out / "splits" / "members.jsonl")
    non_members = read_jsonl(out / "splits" / "non_members.jsonl")
    assert sum(r.kind == "canary" for r in members) == 1 + 4
    assert not {r.text for r in members} & {r.text for r in non_members}
    assert len(results.arms["dp-8"].attacks["exposure"].canaries) == 2
    assert results.data.n_public == 0  # a user model needs no public pre-training text
