"""Every number printed with its name and unit (issue 39, item 2), on results built here.

What a newcomer met on the smoke profile: "dp-user-8 has the highest utility (G = −316.92)" — a negated
perplexity printed as G; a console privacy table showing 8 and 8 with no unit, neither dp-8's ε per person nor
dp-user-8's ε per record; the report's empirical-ε section calling dp-user-8 "(ε = 8)-DP for a record" while
its verdict says 15.94 per record; an unlearning table without the attack that shows over-forgetting, without a
word on why retrain scores well above 0.5 on people it never saw, counting 9 forgotten persons where
forget.json lists 10 entries, and without a recommendation.
"""

from __future__ import annotations

import io

import pytest
from rich.console import Console


def _privacy(unit: str, **extra) -> dict:
    return {"target_epsilon": 8.0, "epsilon": 7.996, "accountant": "prv", "delta": 6.3e-4, "sigma": 0.6,
            "sample_rate": 0.17, "steps": 12, "max_grad_norm": 1.0, "epsilon_rdp": 9.8, "epsilon_pld": 7.985,
            "epsilon_prv": 7.996, "unit": unit, "person_records": 8, **extra}


def _verdict(level: str = "chance", label: str = "NEAR CHANCE") -> dict:
    return {"level": level, "label": label, "text": "", "findings": [], "figures": []}


def dp_results() -> dict:
    """baseline, dp-8 (record-level: its person with 8 records at ε ≈ 117) and dp-user-8 (person-level: a record
    at ε ≈ 15.94), no best arm (so no G) — the smoke run of issue 39, in figures."""
    return {
        "schema_version": "2", "tool": {"name": "privleak", "version": "0"}, "config": {},
        "data": {"source": "synthetic-clinical", "n_public": 300, "n_members": 159, "n_canary_records": 9,
                 "n_non_members": 150, "n_population": 60, "mia_records_per_side": 91, "n_canaries": 2,
                 "canary_chance_exposure": 1.42},
        "base_model": {"kind": "control", "utility": {"ppl_members": 330.0, "ppl_non_members": 332.72},
                       "verdict": _verdict("control", "CONTROL")},
        "arms": {
            "baseline": {"kind": "baseline", "utility": {"ppl_members": 60.0, "ppl_non_members": 81.38},
                         "verdict": _verdict("some", "SOME LEAKAGE")},
            "dp-8": {"kind": "dp", "utility": {"ppl_members": 320.0, "ppl_non_members": 328.59},
                     "privacy": _privacy("record", epsilon_person=116.98), "verdict": _verdict("some", "SOME LEAKAGE")},
            "dp-user-8": {"kind": "dp-user", "utility": {"ppl_members": 310.0, "ppl_non_members": 316.92},
                          "privacy": _privacy("person", epsilon=7.997, epsilon_prv=7.997, epsilon_record=15.939,
                                              epsilon_person=7.997),
                          "verdict": _verdict()},
        },
        "recommendation": {"arm": "dp-user-8", "text": "Recommended arm: dp-user-8.",
                           "standings": [{"arm": "dp-user-8", "meets": True, "epsilon": 7.997, "delta": 6.3e-4},
                                         {"arm": "dp-8", "meets": False, "epsilon": 116.98, "delta": 6.3e-4,
                                          "lacking": "epsilon"}],
                           "eligible": ["dp-user-8"], "contenders": ["dp-user-8"]},
    }


def _validate(raw: dict):
    from privleak.report.schema import validate_results

    return validate_results(raw)


def _render(table) -> str:
    buf = io.StringIO()
    Console(file=buf, width=200).print(table)
    return buf.getvalue()


def test_the_console_privacy_table_gives_every_epsilon_its_unit_and_delta():
    from privleak.report.console import privacy_table

    text = _render(privacy_table(_validate(dp_results())))
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
            for line in text.splitlines() if line.startswith("│")}
    header = [c.strip() for c in next(x for x in text.splitlines() if x.startswith("┃")).split("┃")[2:-1]]
    col = {name: i for i, name in enumerate(header)}
    assert {"unit", "ε per record", "ε per person", "δ"} <= set(col), header
    dp, user = rows["dp-8"], rows["dp-user-8"]
    assert dp[col["unit"]] == "record" and user[col["unit"]] == "person"
    assert dp[col["ε per person"]] == "117 (k = 8)"  # dp-8's person: far above its record's 8
    assert user[col["ε per record"]] == "15.94"  # dp-user-8's record: above its person's 8
    assert dp[col["δ"]] == user[col["δ"]] == "6.3e-04"
    assert rows["baseline"][col["ε (target)"]] == "∞ (no DP)"
    assert "G" in col and dp[col["G"]] == "—"  # no best arm: no G anywhere


def test_the_report_shows_epsilon_with_unit_and_delta_in_its_tables():
    from privleak.report.html import _eps_cell, section_arms

    results = _validate(dp_results())
    cell = _eps_cell("dp-user-8", results.arms["dp-user-8"], results)
    assert cell.text == "7.997 per person at δ = 6.3e-04 (prv)"
    arms = section_arms(results)["blocks"][0]
    cols = arms["columns"]
    row = next(r for r in arms["rows"] if r[0] == "dp-8")
    assert row[cols.index("ε per person")]["text"] == "117 (k = 8)"
    user = next(r for r in arms["rows"] if r[0] == "dp-user-8")
    assert user[cols.index("ε per record")]["text"] == "15.94"


def test_the_comparison_page_shows_epsilon_with_unit_and_delta():
    from privleak.report.compare import render_compare

    page = render_compare([_validate(dp_results())])
    assert "7.997 per person (δ = 6.3e-04)" in page and "7.996 per record (δ = 6.3e-04)" in page


def test_the_recommendation_never_prints_a_perplexity_as_g():
    from privleak.attacks.base import Policy
    from privleak.audit.recommend import recommend
    from privleak.config.requirement import Requirement

    rec = recommend(_validate(dp_results()), Requirement(epsilon=8), Policy())
    assert rec.arm == "dp-user-8"
    assert "G =" not in rec.text and "-316.92" not in rec.text and "−316.92" not in rec.text
    assert "held-out perplexity 316.92" in rec.text


def test_the_recommended_arm_names_its_epsilon_s_unit_and_delta():
    from privleak.attacks.base import Policy
    from privleak.audit.recommend import recommend
    from privleak.config.requirement import Requirement

    rec = recommend(_validate(dp_results()), Requirement(epsilon=8, unit="record"), Policy())
    assert rec.arm == "dp-8" and "ε ≤ 8 per record at δ = 0.00063" in rec.text


def test_a_person_level_arm_s_empirical_check_names_the_person():
    """§ 9 of the report (the empirical ε's check) and § 1 (the verdict's figures) tell one story: dp-user-8 is
    (ε = 8)-DP for a person, not for a record (its record is held to ≈ 15.94)."""
    from privleak.audit.verdicts import alarm_tests

    raw = dp_results()
    bound = {"epsilon_lb": 0.0, "threshold": 0.5, "test": "members >= t", "tpr_lo": 0.7, "fpr_hi": 0.9, "k_p_eval": 40,
             "k_q_eval": 40, "n_pos_eval": 46, "n_neg_eval": 46, "n_pos_select": 45, "n_neg_select": 45,
             "epsilon_select": 0.0, "delta": 6.3e-4, "alpha": 0.05, "per_bound_alpha": 0.05}
    for name in ("dp-8", "dp-user-8"):
        raw["arms"][name]["empirical_epsilon"] = {"epsilon_lb": 0.0, "attack": "loss", "alpha": 0.05,
                                                  "delta": 6.3e-4, "procedure": "p", "strongest_attack_by_auc": "loss",
                                                  "by_attack": {"loss": bound}}
    claims = {t.arm: t.claim for t in alarm_tests(_validate(raw)) if t.route == "empirical_epsilon"}
    assert claims["dp-user-8"].endswith("-DP for a person") and "ε = 8" in claims["dp-user-8"]
    assert claims["dp-8"].endswith("-DP for a record")  # one-record units: the record's own claim


# --------------------------------------------------------------------------- the unlearning table

def _versus(attack: str, auc: float, ref: float, lo: float, hi: float, p_less: float) -> dict:
    return {"attack": attack, "auc": auc, "auc_reference": ref, "diff": auc - ref, "diff_ci95": [lo, hi],
            "p_greater": 1 - p_less, "p_less": p_less, "privleak": (auc - ref) / ref, "privleak_ci95": [-1.0, 1.0]}


def _assessment(versus: str, outcome: str, membership: list[dict], holdout_nll: float) -> dict:
    return {"versus": versus, "outcome": outcome, "alpha": 0.05, "n_tests": 17, "membership": membership,
            "nll": {"forget": 4.2, "retain": 4.3, "holdout": holdout_nll}, "n_forget": 9}


def unlearning_results() -> dict:
    """retrain (0.778 on the 9 forgotten persons it never saw), unlearn-ga (min-k% like retrain's, RMIA well
    below it: over-forgetting, not significant at the split level) and unlearn-sisa (FORGOTTEN, less utility)."""
    raw = dp_results()
    raw.pop("recommendation")  # no arm here is one to release: unlearning arms are judged on their forget set
    raw["arms"] = {
        "baseline": raw["arms"]["baseline"],
        "retrain": {"kind": "retrain", "utility": {"ppl_members": 80.0, "ppl_non_members": 85.3},
                    "verdict": _verdict("forgotten", "FORGOTTEN"),
                    "details": {"kind": "retrain", "made_from": "the base model", "n_forgotten_records": 17,
                                "assessment": _assessment("control", "forgotten", [
                                    _versus("min_k", 0.728, 0.358, 0.069, 0.672, 0.992),
                                    _versus("loss", 0.778, 0.531, -0.135, 0.629, 0.898)], 4.446)}},
        "unlearn-ga": {"kind": "unlearn-ga", "utility": {"ppl_members": 90.0, "ppl_non_members": 102.5},
                       "verdict": _verdict("forgotten", "FORGOTTEN"),
                       "details": {"kind": "unlearn-ga", "made_from": "the baseline arm's model", "method": "npo",
                                   "steps": 30, "stopped_by_rule": True, "n_forget_records": 17,
                                   "n_retain_records": 142, "nll_forget_start": 4.1, "nll_forget_end": 4.5,
                                   "nll_population_end": 4.6,
                                   "assessment": _assessment("retrain", "forgotten", [
                                       _versus("min_k", 0.704, 0.728, -0.102, 0.053, 0.266),
                                       _versus("rmia", 0.673, 0.778, -0.182, -0.028, 0.0037)], 4.630)}},
        "unlearn-sisa": {"kind": "unlearn-sisa", "utility": {"ppl_members": 170.0, "ppl_non_members": 177.1},
                         "verdict": _verdict("forgotten", "FORGOTTEN"),
                         "details": {"kind": "unlearn-sisa", "made_from": "the base model", "shards": 4,
                                     "shard_sizes": [40, 40, 40, 39], "affected": [1, 3],
                                     "forgotten_per_shard": [5, 0, 12, 0], "steps_unlearn": 40,
                                     "nll_population_average": 5.2, "nll_population_shards": 5.3,
                                     "assessment": _assessment("retrain", "forgotten", [
                                         _versus("min_k", 0.741, 0.728, -0.059, 0.084, 0.63)], 5.177)}},
    }
    raw["data"]["forget"] = {"n_persons": 9, "n_member_persons": 94, "canary_ids": ["canary-001"], "n_canaries": 2,
                             "n_forget_records": 17, "n_retain_records": 142}
    raw["durations_s"] = {"train/retrain/fit": 1.8, "derive/unlearn-ga/unlearn": 0.7, "train/unlearn-sisa/unlearn": 0.9}
    return raw


@pytest.fixture(scope="module")
def unlearning():
    return _validate(unlearning_results())


def test_the_unlearning_table_shows_the_attack_that_reveals_over_forgetting(unlearning):
    from privleak.arms.unlearning import CONSOLE_COLUMNS, unlearning_rows

    rows, _ = unlearning_rows(unlearning, console=True)
    col = CONSOLE_COLUMNS.index("most telling attack: Δ AUC [95% CI], p (level)")
    ga = next(r for r in rows if r[0] == "unlearn-ga")
    assert ga[col].text.startswith("-0.105 [") and "(rmia)" in ga[col].text and "p = 0.0037 (0.0029)" in ga[col].text


def test_the_unlearning_table_counts_the_forget_set_as_forget_json_does(unlearning):
    from privleak.arms.unlearning import forget_count

    assert forget_count(unlearning) == "9 persons and 1 planted canary (forget.json's 10 entries)"


def test_the_unlearning_table_explains_retrain_and_recommends_with_a_reason(unlearning):
    from privleak.arms.unlearning import reading_note, unlearning_recommendation

    note = reading_note(unlearning)
    assert "retrain never saw the forgotten persons, yet scores AUC 0.73 (min_k)" in note
    assert "9 per side" in note and "templates" in note and "never with 0.5" in note
    line = unlearning_recommendation(unlearning)
    assert line.startswith("Recommended for the erasure request: unlearn-ga — FORGOTTEN against retrain")
    assert "held-out NLL 4.630 vs retrain's 4.446" in line and "0.39× retrain's time" in line
    assert "also FORGOTTEN: unlearn-sisa" in line


def test_no_cheaper_arm_forgotten_recommends_retrain(unlearning):
    from privleak.arms.unlearning import unlearning_recommendation

    raw = unlearning.model_copy(deep=True)
    for name in ("unlearn-ga", "unlearn-sisa"):
        a = raw.arms[name].details.assessment
        raw.arms[name].details.assessment = a.model_copy(update={"outcome": "not_forgotten"})
    line = unlearning_recommendation(raw)
    assert line.startswith("Recommended for the erasure request: retrain — it never saw the forgotten persons")
    assert "unlearn-ga NOT FORGOTTEN" in line


def test_the_console_prints_the_unlearning_recommendation_under_its_table(unlearning):
    from privleak.report.console import all_tables

    text = "".join(_render(t) for t in all_tables(unlearning))
    flat = " ".join(text.split())
    assert "forget set: 9 persons and 1 planted canary (forget.json's 10 entries)" in flat
    assert "Recommended for the erasure request: unlearn-ga" in flat
