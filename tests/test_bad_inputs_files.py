"""Issue 49 item 1, "files that cannot lie": forged results.json files and ledger lines, each a bad input.

A hostile probe of main (3d4b8c7) edited a run's files and read them back: 22 results.json inputs (AUC 1.5,
−0.1, NaN; G NaN; a negative perplexity, member count and duration; the label "TOTALLY SAFE"; NEAR CHANCE on an
inconclusive level; ε per person below ε per record; the recommendation naming the baseline or an arm that does
not exist; a verdict or the recommendation missing) were rendered by ``report`` and ``compare`` as if true, and
ledger lines with σ raised 7 %, numbers written as strings, an unknown accountant or no ``people`` were composed
by ``budget``. Each is a row here, run in this process (``cli_harness.run_cli`` through
``test_bad_inputs.run_case_here``): exit 2, one ``error:`` line naming the field, nothing written (no report, no
comparison page), no crash report. The unedited files beside them are read (the last tests).
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import pytest
from test_bad_inputs import check_refusal, run_case_here

from privleak.accountants import epsilon_prv
from privleak.data.records import Record

Q, SIGMA, STEPS, DELTA = 0.16230366492146597, 0.6058391076079517, 12, 6.289e-4  # the smoke profile's dp-8


@functools.cache
def _epsilon() -> float:
    """dp-8's ε by its accountant (PRV), once: a second a call on a busy machine."""
    return epsilon_prv(sample_rate=Q, noise_multiplier=SIGMA, steps=STEPS, delta=DELTA)


def valid_results() -> dict:
    """A small complete results.json as ``privleak run`` writes it: a control, the baseline and dp-8, each with
    a membership attack and a verdict, dp-8 recommended, the budget."""
    from privleak import arms  # noqa: F401  (the arm kinds results.json names)
    from privleak.attacks.membership.attacks import MembershipResult, Roc
    from privleak.config.requirement import Requirement
    from privleak.results import (ArmResult, AuditResults, BudgetRelease, DataSummary, Privacy, PrivacyBudget,
                                  Recommendation, Standing, ToolInfo, Training, Utility, Verdict)

    def mia(auc: float) -> MembershipResult:
        return MembershipResult(auc=auc, tpr_at_1pct_fpr=0.02, tpr_at_0_1pct_fpr=0.0, n_members=91,
                                n_non_members=91, auc_ci95=(auc - 0.08, auc + 0.08),
                                roc=Roc(fpr=[0.0, 0.5, 1.0], tpr=[0.0, 0.6, 1.0], threshold=[None, -5.0, -7.0]))

    def verdict(level: str, label: str) -> Verdict:
        return Verdict(level=level, label=label, text=f"{label.capitalize()}.", findings=[], figures=[])

    eps = _epsilon()
    privacy = Privacy(target_epsilon=8.0, epsilon=eps, accountant="prv", delta=DELTA, sigma=SIGMA, sample_rate=Q,
                      steps=STEPS, max_grad_norm=1.0, epsilon_rdp=9.81, epsilon_pld=7.985, epsilon_prv=eps,
                      epsilon_person=115.6, person_records=8)
    base = ArmResult(kind="control", utility=Utility(ppl_members=330.0, ppl_non_members=332.7, nll_non_members=5.807,
                                                     gain_recovered=0.0),
                     attacks={"loss": mia(0.52)}, verdict=verdict("control", "CONTROL"))
    baseline = ArmResult(kind="baseline", training=Training(steps=96, epoch_losses=[4.1], settings={}),
                         utility=Utility(ppl_members=60.0, ppl_non_members=81.4, nll_non_members=4.399,
                                         gain_recovered=1.0),
                         attacks={"loss": mia(0.67)}, verdict=verdict("some", "SOME LEAKAGE"))
    dp = ArmResult(kind="dp", training=Training(steps=STEPS, epoch_losses=[5.7], settings={}), privacy=privacy,
                   utility=Utility(ppl_members=320.0, ppl_non_members=328.7, nll_non_members=5.795,
                                   gain_recovered=0.03),
                   attacks={"loss": mia(0.53)}, verdict=verdict("chance", "NEAR CHANCE"))
    results = AuditResults(
        tool=ToolInfo(name="privleak", version="0"), config={},
        data=DataSummary(source="synthetic-clinical", n_public=240, n_members=150, n_canary_records=9,
                         n_non_members=150, n_population=20, mia_records_per_side=91, n_canaries=2,
                         canary_chance_exposure=1.4),
        base_model=base, arms={"baseline": baseline, "dp-8": dp},
        recommendation=Recommendation(
            arm="dp-8", text="Recommended arm: dp-8.", requirement=Requirement(epsilon=8.0, unit="record"),
            standings=[Standing(arm="dp-8", meets=True, epsilon=eps, delta=DELTA, unit="record", utility=0.03)],
            eligible=["dp-8"], contenders=["dp-8"]),
        budget=[PrivacyBudget(members="0" * 24, unit="record", accountant="PLD", releases=[
            BudgetRelease(what="alone", arms=["dp-8"], epsilon=eps, delta=DELTA, epsilon_person=115.6,
                          person_records=8)])],
        durations_s={"train/dp-8": 65.0, "train/baseline": 16.0})
    return results.to_json()


# (variant, the edit): each writes {d}/<variant>/results.json, the valid file with that edit.
def _set(path: str, value) -> callable:
    def edit(r: dict) -> None:
        *head, last = path.split(".")
        node = r
        for k in head:
            node = node[k]
        if value is _DROP:
            node.pop(last)
        else:
            node[last] = value
    return edit


_DROP = object()
NAN = float("nan")
VARIANTS = {
    "auc-high": _set("arms.dp-8.attacks.loss.auc", 1.5),
    "auc-negative": _set("arms.dp-8.attacks.loss.auc", -0.1),
    "auc-nan": _set("arms.dp-8.attacks.loss.auc", NAN),
    "tpr-high": _set("arms.baseline.attacks.loss.tpr_at_1pct_fpr", 1.2),
    "g-nan": _set("arms.dp-8.utility.gain_recovered", NAN),
    "g-infinite": _set("arms.dp-8.utility.gain_recovered", float("inf")),
    "ppl-negative": _set("arms.dp-8.utility.ppl_non_members", -3.0),
    "ppl-zero": _set("base_model.utility.ppl_members", 0.0),
    "members-negative": _set("data.n_members", -5),
    "mia-members-negative": _set("arms.dp-8.attacks.loss.n_members", -91),
    "duration-negative": _set("durations_s.train/dp-8", -2.0),
    "label-totally-safe": _set("arms.dp-8.verdict.label", "TOTALLY SAFE"),
    "near-chance-on-inconclusive": _set("arms.dp-8.verdict.level", "inconclusive"),
    "violated-without-alarm": _set("arms.dp-8.verdict.label", "DP GUARANTEE VIOLATED"),
    "person-below-record": _set("arms.dp-8.privacy.epsilon_person", 1.0),
    "budget-person-below-record": lambda r: r["budget"][0]["releases"][0].update(epsilon_person=1.0),
    "recommend-baseline": _set("recommendation.arm", "baseline"),
    "recommend-missing-arm": _set("recommendation.arm", "dp-9"),
    "recommend-not-eligible": _set("recommendation.eligible", []),
    "standing-meets-beyond-requirement": lambda r: r["recommendation"]["standings"][0].update(epsilon=151.9),
    "standing-of-the-baseline": lambda r: r["recommendation"]["standings"].append(
        {**r["recommendation"]["standings"][0], "arm": "baseline", "meets": False}),
    "contender-not-eligible": _set("recommendation.contenders", ["dp-8", "baseline"]),
    "verdict-missing": _set("arms.dp-8.verdict", _DROP),
    "control-verdict-missing": _set("base_model.verdict", _DROP),
    "recommendation-missing": _set("recommendation", _DROP),
}


def _ledger(run: Path) -> Path:
    """The run's ledger: dp-8's training as privleak records it."""
    from privleak.pipeline import ledger as L

    records = [Record(f"note {v} of P{p}", meta={"kind": "phi", "person_id": f"P{p}"}) for p in range(6)
               for v in range(2)]
    people = L.training_people(records)
    entry = L.entry_for(L.members_hash(records), "dp-8", run, {"arm": "dp-8"},
                        {"sample_rate": Q, "sigma": SIGMA, "steps": STEPS, "delta": DELTA, "epsilon": _epsilon(),
                         "unit": "record", "accountant": "prv"}, people)
    L.record_training(run, entry, people)
    return run / "budget" / "ledger.jsonl"


def _edit_line(ledger: Path, **edit) -> None:
    obj = json.loads(ledger.read_text())
    obj.update(edit)
    for k in [k for k, v in edit.items() if v is _DROP]:
        obj.pop(k)
    ledger.write_text(json.dumps(obj) + "\n")


LEDGER_EDITS = {
    "sigma-raised-7pct": {"sigma": SIGMA * 1.07},
    "sigma-string": {"sigma": str(SIGMA)},
    "steps-string": {"steps": str(STEPS)},
    "steps-boolean": {"steps": True},
    "accountant-vibes": {"accountant": "vibes"},
    "people-missing": {"people": _DROP},
    "accountant-missing": {"accountant": _DROP},
}

@functools.cache
def _valid_text() -> str:
    return json.dumps(valid_results())


def write_inputs(d: Path, names: list[str] | None = None) -> None:
    """The run directories ``names`` (default: all) under ``d``: ``good`` (the valid file and its ledger), a
    results.json variant, ``ledger-<edit>`` (the ledger with that edit) or ``budget-edited`` (a good ledger
    beside an edited results.json)."""
    names = names or ["good", *VARIANTS, *(f"ledger-{k}" for k in LEDGER_EDITS), "budget-edited"]
    for name in names:
        run = d / name
        run.mkdir()
        if name.startswith("ledger-"):
            _edit_line(_ledger(run), **LEDGER_EDITS[name.removeprefix("ledger-")])
            continue
        r = json.loads(_valid_text())
        VARIANTS.get(name, VARIANTS["auc-high"] if name == "budget-edited" else lambda r: None)(r)
        (run / "results.json").write_text(json.dumps(r))  # NaN and Infinity as Python's json writes them
        if name in ("good", "budget-edited"):
            _ledger(run)


# The field each refusal must name.
NEEDLES = {
    "auc-high": "field arms.dp-8.attacks.loss.auc: Input should be less than or equal to 1",
    "auc-negative": "field arms.dp-8.attacks.loss.auc: Input should be greater than or equal to 0",
    "auc-nan": "field arms.dp-8.attacks.loss.auc: nan is not a number privleak writes",
    "tpr-high": "field arms.baseline.attacks.loss.tpr_at_1pct_fpr: Input should be less than or equal to 1",
    "g-nan": "field arms.dp-8.utility.gain_recovered: nan is not a number",
    "g-infinite": "field arms.dp-8.utility.gain_recovered: inf is not a number",
    "ppl-negative": "field arms.dp-8.utility.ppl_non_members: Input should be greater than 0",
    "ppl-zero": "field base_model.utility.ppl_members: Input should be greater than 0",
    "members-negative": "field data: n_members = -5 is negative; it is a count",
    "mia-members-negative": "field arms.dp-8.attacks.loss: n_members = -91 is negative",
    "duration-negative": "field durations_s.train/dp-8: Input should be greater than or equal to 0",
    "label-totally-safe": "field arms.dp-8.verdict.label: 'TOTALLY SAFE' is not a label of level 'chance'",
    "near-chance-on-inconclusive": "field arms.dp-8.verdict.label: 'NEAR CHANCE' is not a label of level "
                                   "'inconclusive'",
    "violated-without-alarm": "field arms.dp-8.verdict.label: 'DP GUARANTEE VIOLATED' on an arm the audit's DP "
                              "alarm does not name",
    "person-below-record": "field arms.dp-8.privacy.epsilon_person: ε per person 1 is below ε per record",
    "budget-person-below-record": "field budget[0].releases[0].epsilon_person: ε per person 1 is below",
    "recommend-baseline": "field recommendation.arm: 'baseline' is a baseline arm, which is never recommended",
    "recommend-missing-arm": "field recommendation.arm: 'dp-9' is no arm of this audit",
    "recommend-not-eligible": "field recommendation.arm: 'dp-8' cannot be recommended: it is not among the arms "
                              "that meet the requirement",
    "standing-meets-beyond-requirement": "field recommendation.standings[0].meets: dp-8 meets ε ≤ 8 per record with "
                                         "ε = 151.9",
    "standing-of-the-baseline": "field recommendation.standings[1].arm: 'baseline' is a baseline arm, which is "
                                "never recommended",
    "contender-not-eligible": "field recommendation.contenders: 'baseline' is not an eligible arm",
    "verdict-missing": "field arms.dp-8.verdict: required field is missing",
    "control-verdict-missing": "field base_model.verdict: required field is missing",
    "recommendation-missing": "field recommendation: required field is missing",
}

# report: every variant; compare: each kind of check once, against the good file; budget: its run's ledger edits
# and a results.json beside a good ledger.
CASES: list[tuple[str, str, str]] = (
    [(f"report-{v}", f"report {{d}}/{v}", NEEDLES[v]) for v in VARIANTS]
    + [(f"compare-{v}", f"compare {{d}}/good {{d}}/{v} --out {{d}}/c.html", NEEDLES[v])
       for v in ("auc-high", "auc-nan", "g-nan", "ppl-negative", "duration-negative", "label-totally-safe",
                 "near-chance-on-inconclusive", "person-below-record", "recommend-baseline", "recommendation-missing")]
    + [("budget-ledger-sigma-raised-7pct", "budget {d}/ledger-sigma-raised-7pct --no-cache",
        "line 1: dp-8's ε = 7.99589 does not follow from its σ = 0.648248"),
       ("budget-ledger-sigma-string", "budget {d}/ledger-sigma-string --no-cache",
        "line 1 is not a ledger entry (sigma: Input should be a valid number"),
       ("budget-ledger-steps-string", "budget {d}/ledger-steps-string --no-cache",
        "line 1 is not a ledger entry (steps: Input should be a valid integer"),
       ("budget-ledger-steps-boolean", "budget {d}/ledger-steps-boolean --no-cache",
        "line 1 is not a ledger entry (steps: Input should be a valid integer"),
       ("budget-ledger-accountant-vibes", "budget {d}/ledger-accountant-vibes --no-cache",
        "(accountant: Input should be 'prv', 'pld' or 'rdp'"),
       ("budget-ledger-accountant-missing", "budget {d}/ledger-accountant-missing --no-cache",
        "(accountant: Field required"),
       ("budget-ledger-people-missing", "budget {d}/ledger-people-missing --no-cache", "(people: Field required"),
       ("budget-results-auc-high", "budget {d}/budget-edited --no-cache",
        "results.json: field arms.dp-8.attacks.loss.auc: Input should be less than or equal to 1")]
)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Every case in this process on a scratch directory holding only the run directories its argv names."""
    out = {}
    for cid, argv, _ in CASES:
        d = tmp_path_factory.mktemp(cid)
        write_inputs(d, sorted({m for m in re.findall(r"\{d\}/([\w.-]+)", argv) if m != "c.html"}))
        out[cid] = (run_case_here(argv, d, 0), d)
    return out


def test_every_row_of_the_probe_has_a_case():
    assert len({c[0] for c in CASES}) == len(CASES) and set(NEEDLES) == set(VARIANTS)
    report = [c for c in CASES if c[1].startswith("report")]
    compare = [c for c in CASES if c[1].startswith("compare")]
    assert len(report) + len(compare) >= 22  # the probe's 22 results.json inputs, and more
    assert {c[0] for c in CASES if c[0].startswith("budget-ledger-")} == {f"budget-ledger-{k}" for k in LEDGER_EDITS}


@pytest.mark.parametrize("cid,argv,needle", CASES, ids=[c[0] for c in CASES])
def test_refused_in_one_line_naming_the_field(results, cid, argv, needle):
    check_refusal(results, cid, argv, needle)


def test_the_unedited_files_are_read(tmp_path, monkeypatch):
    """The valid file renders and compares, its ledger composes: the refusals come from the edits alone."""
    from cli_harness import run_cli

    monkeypatch.setenv("PRIVLEAK_CACHE", str(tmp_path / "cache"))
    write_inputs(tmp_path, ["good"])
    proc = run_cli(["report", str(tmp_path / "good")])
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "good" / "report.html").is_file()
    other = tmp_path / "other"
    other.mkdir()
    (other / "results.json").write_text((tmp_path / "good" / "results.json").read_text())
    proc = run_cli(["compare", str(tmp_path / "good"), str(other), "--out", str(tmp_path / "c.html")])
    assert proc.returncode == 0, proc.stderr
    proc = run_cli(["budget", str(tmp_path / "good"), "--no-cache", "--json"])
    assert proc.returncode == 0, proc.stderr
    [group] = json.loads(proc.stdout)
    assert [e["arm"] for e in group["trainings"]] == ["dp-8"]
