"""The privacy-budget ledger: DP trainings on the same members recorded once each, and composed."""

from __future__ import annotations

import pytest

from privleak.data.records import Record

# Three DP-SGD trainings on the same members, as an audit's dp-1 / dp-4 / dp-8 would be (q, σ, T).
TRAININGS = [(0.2, 4.0, 75), (0.2, 1.6, 150), (0.1, 1.1, 300)]
DELTA = 1e-5


def _pld(trainings, delta: float) -> float:
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dp_accounting.ComposedDpEvent([
        dp_accounting.SelfComposedDpEvent(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(s)), t)
        for q, s, t in trainings]))
    return float(acc.get_epsilon(delta))


def _alone(q: float, s: float, t: int) -> float:
    """The ε an arm records: its accountant's (PRV) for its own training (a ledger line is checked against it)."""
    from privleak.accountants import epsilon_prv

    return epsilon_prv(sample_rate=q, noise_multiplier=s, steps=t, delta=DELTA)


def test_three_trainings_compose_as_dp_accounting_says():
    from privleak.accountants import Training, compose_epsilon, epsilon_prv

    def composed_epsilon(trainings, delta):
        return compose_epsilon(trainings=[Training(*t) for t in trainings], delta=delta, accountant="prv")

    eps = composed_epsilon(TRAININGS, DELTA)
    assert eps == pytest.approx(_pld(TRAININGS, DELTA), rel=0.01)
    alone = [epsilon_prv(sample_rate=q, noise_multiplier=s, steps=t, delta=DELTA) for q, s, t in TRAININGS]
    # More than the largest alone (the point of the ledger), less than their sum (composition beats adding up).
    assert max(alone) < eps < sum(alone)
    assert composed_epsilon(TRAININGS[:1], DELTA) == pytest.approx(alone[0], rel=1e-3)


def test_the_ledger_counts_each_training_once_and_composes_per_members(tmp_path, monkeypatch):
    from privleak.pipeline.budget import budget
    from privleak.pipeline.ledger import (cache_ledger, entry_for, ledger_entries, members_hash, record_training,
                                          training_people)

    monkeypatch.setenv("PRIVLEAK_CACHE", str(tmp_path / "cache"))
    members = [Record("note one"), Record("note two")]
    h, people = members_hash(members), training_people(members)
    assert h == members_hash(list(reversed(members))) and h != members_hash(members[:1])
    run_a, run_b = tmp_path / "a", tmp_path / "b"
    for run, arms in ((run_a, ["dp-1", "dp-4"]), (run_b, ["dp-8"])):
        run.mkdir()
        for arm in arms:
            q, s, t = TRAININGS[["dp-1", "dp-4", "dp-8"].index(arm)]
            privacy = {"sample_rate": q, "sigma": s, "steps": t, "delta": DELTA, "epsilon": _alone(q, s, t),
                       "accountant": "prv"}
            e = entry_for(h, arm, run, {"arm": arm}, privacy, people)
            record_training(run, e, people)
            record_training(run, e, people)  # a redone stage: the same training
    assert entry_for(h, "baseline", run_a, {}, {}, people) is None
    assert len(cache_ledger(h).read_text().splitlines()) == 6
    only_a = ledger_entries([run_a], cache=False)
    assert sorted(e.arm for e in only_a) == ["dp-1", "dp-4"]
    everything = ledger_entries([run_a])  # the cache adds run b's training on the same members
    assert sorted(e.arm for e in everything) == ["dp-1", "dp-4", "dp-8"]
    [group] = budget(everything, release=["dp-1", "dp-8"])
    lines = {x.what: x for x in group.lines}
    assert lines["everything trained"].epsilon == pytest.approx(_pld(TRAININGS, DELTA), rel=0.01)
    assert lines["released together"].arms == ["dp-1", "dp-8"]
    assert lines["released together"].epsilon == pytest.approx(_pld([TRAININGS[0], TRAININGS[2]], DELTA), rel=0.01)


def test_budget_command_composes_the_run_directories_ledgers(tmp_path, monkeypatch):
    """`privleak budget RUN_DIR… --release`: the composed ε of the arms released together, as budget() says;
    a directory without DP trainings is refused."""
    import json

    from typer.testing import CliRunner

    from privleak.cli import app
    from privleak.core.errors import UserError
    from privleak.pipeline.ledger import entry_for, members_hash, record_training, training_people

    monkeypatch.setenv("PRIVLEAK_CACHE", str(tmp_path / "cache"))
    members = [Record("note one"), Record("note two")]
    h, people = members_hash(members), training_people(members)
    run = tmp_path / "run"
    run.mkdir()
    for arm, (q, s, t) in zip(["dp-1", "dp-4", "dp-8"], TRAININGS):
        record_training(run, entry_for(h, arm, run, {"arm": arm},
                                       {"sample_rate": q, "sigma": s, "steps": t, "delta": DELTA,
                                        "epsilon": _alone(q, s, t), "accountant": "prv"}, people), people)
    res = CliRunner().invoke(app, ["budget", str(run), "--release", "dp-1,dp-8", "--no-cache", "--json"])
    assert res.exit_code == 0, res.output
    [group] = json.loads(res.stdout)
    lines = {x["what"]: x for x in group["lines"]}
    assert lines["released together"]["epsilon"] == pytest.approx(_pld([TRAININGS[0], TRAININGS[2]], DELTA), rel=0.01)
    assert CliRunner().invoke(app, ["budget", str(run)]).exit_code == 0
    empty = tmp_path / "empty"
    empty.mkdir()
    res = CliRunner().invoke(app, ["budget", str(empty), "--no-cache"])
    # main() turns a UserError into one line and exit 2 (tests/test_bad_inputs.py); the app raises it
    assert isinstance(res.exception, UserError) and "no DP training is recorded" in str(res.exception)
