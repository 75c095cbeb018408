"""Verdicts and the recommended arm consider every family of attacks, on real results of a small audit.

The arms here are built from real attack results of the ``audited`` run
(its baseline memorised a canary repeated 16 times): e.g. an arm that looks
exactly like the control to every attack except one extraction attack.
"""

from __future__ import annotations

import pytest

from privleak.attacks.base import Policy
from privleak.audit.verdicts import arm_verdict, judge
from privleak.results import CONTROL


@pytest.fixture()
def results(audited):
    return audited.results.model_copy(deep=True)


def _leaking_text_attacks(results) -> dict:
    """The baseline's extraction attacks that leak strongly enough to survive the arm's family-wise (Holm)
    decision: exact (no p-value needed) or p well below α over the arm's attacks."""
    base, control = results.arms["baseline"], results.base_model
    found = {n: (r, r.assess(n, control.attacks.get(n), Policy())) for n, r in base.attacks.items()
             if n in ("canary_extraction", "sampling_extraction", "phi_extraction", "pii_extraction")}
    return {n: r for n, (r, f) in found.items() if f.leaks and (f.p_leak is None or f.p_leak <= 0.05 / 20)}


def test_an_arm_whose_only_leak_is_extraction_is_not_near_chance(results):
    leaks = _leaking_text_attacks(results)
    assert leaks, "the memorising baseline should leak through at least one extraction attack"
    arm = results.arms["dp-8"]
    # Every attack reads exactly what it reads on the control (which never saw the members): no leak — though
    # at this tiny size not every attack can show its figure within its margin (then INCONCLUSIVE) ...
    arm.attacks = {**results.base_model.attacks}
    arm.empirical_epsilon = None
    v = arm_verdict("dp-8", arm, results)
    assert v.level in ("chance", "inconclusive") and not v.attacks_leaking, v
    assert v.level == "chance" or v.unsettled
    # ... except one extraction attack that gets member data out.
    name, leaking = next(iter(leaks.items()))
    arm.attacks[name] = leaking
    v = arm_verdict("dp-8", arm, results)
    assert v.level in ("some", "leaks") and not v.near_chance
    assert v.attacks_leaking == [name] and v.findings, v


def test_dp_violation_is_loud_and_never_recommended(results):
    arm = results.arms["dp-8"]
    one = arm.one_run_epsilon
    if one is None or not one.available or not one.candidates:
        pytest.skip("the verdicts fixture has no one-run audit canaries")
    # Every guess right, on an arm claiming ε = 1: no (1, δ)-DP training makes that likely with this many
    # canaries (at ε = 8 a hundred canaries cannot refute the claim: e^8/(1 + e^8) ≈ 0.9997 per guess). The
    # claim is made whole — σ for ε = 1 at the arm's q and T — since the f-DP routes test the accountant's
    # curve of σ, q and T; and α is split over the three alarm routes of each arm, at which Steinke's test
    # alone (p ≈ 0.017 at m = 100) no longer rejects.
    from privleak.models.dp_sigma import calibrated_sigma as _calibrated_sigma

    p = arm.privacy
    p.epsilon, p.epsilon_record = 1.0, None
    p.sigma = _calibrated_sigma(1.0, p.delta, p.sample_rate, p.steps, p.accountant)
    for c in one.candidates:
        c.correct = c.guesses
    # ... and one extraction attack leaks too: the refutation is named first, then the leak findings.
    leaks = _leaking_text_attacks(results)
    name, leaking = next(iter(leaks.items()))
    arm.attacks[name] = leaking
    judged = judge(results)
    v = judged.arms["dp-8"].verdict
    assert judged.alarms.violated == ["dp-8"]
    assert v.label == "DP GUARANTEE VIOLATED" and not v.near_chance
    assert "DP guarantee violated" in v.findings[0] and v.text.startswith("Leaks: " + v.findings[0])
    assert name in v.attacks_leaking and len(v.findings) > 1
    assert not any("DP guarantee violated" in r for r in v.findings[1:])
    assert judged.recommendation.arm != "dp-8"
    # The decision holds the rejected test and the leaking findings, no sentence (decisions without prose):
    # wording makes them, in that order.
    from privleak.audit import wording
    from privleak.audit.decisions import audit_leak_rejections, decide, seed_label

    extra = [(seed_label(n, k), s) for n, a in judged.arms.items() for k, s in enumerate(a.seed_results, 1)]
    d = decide("dp-8", judged.arms["dp-8"], judged, rejections=audit_leak_rejections(judged, extra=extra))
    assert d.violation is not None and d.violation.arm == "dp-8" and d.violation.rejected
    assert name in {f.attack for f in d.leaking}
    assert v.findings == wording.leak_reasons(d)


def test_a_membership_bound_above_the_claim_is_a_diagnostic_never_the_alarm(results):
    """Clopper–Pearson over many members of one model is not a valid alarm (audit/alarms.py)."""
    arm = results.arms["dp-8"]
    b = arm.empirical_epsilon.by_attack[arm.empirical_epsilon.attack]
    b.k_p_eval, b.k_q_eval = b.n_pos_eval if b.test.startswith("members") else b.n_neg_eval, 0
    judged = judge(results)
    assert "dp-8" not in judged.alarms.violated
    assert judged.arms["dp-8"].verdict.label != "DP GUARANTEE VIOLATED"


def test_guard_arm_is_judged_by_what_it_stops_and_never_recommended(results):
    judged = judge(results)
    v = judged.arms["guard"].verdict
    assert v.level == "guard" and v.label == "GUARDED" and not v.near_chance
    assert "leaks found by the extraction attacks are stopped" in v.text and "scores or weights" in v.text
    assert judged.recommendation.arm != "guard"
    assert judged.base_model.verdict.level == "control"


def test_recommendation_is_only_ever_an_arm_that_meets_the_requirement(results):
    judged = judge(results)
    rec = judged.recommendation
    ok = {s.arm for s in rec.standings if s.meets}
    assert set(rec.eligible) == ok
    if ok:
        assert rec.arm in ok and set(rec.tied) <= ok
    else:
        assert rec.arm is None and "none is recommended" in rec.text
    assert rec.training_noise and rec.text.startswith("Privacy requirement:")


def test_attack_outcomes_do_not_move_a_formal_recommendation(results):
    """Every arm made to leak by a text attack: a formal requirement reads the accountant, so the choice stays."""
    before = judge(results).recommendation.arm
    name, leaking = next(iter(_leaking_text_attacks(results).items()))
    for arm in results.arms.values():
        if arm.kind != "guard":
            arm.attacks[name] = leaking
    judged = judge(results)
    assert judged.recommendation.arm == before


def test_exposure_wording_says_what_was_measured(results):
    exposure = results.arms["baseline"].attacks["exposure"]
    f = exposure.assess("exposure", results.base_model.attacks["exposure"], Policy())
    if exposure.n_ranked_first:
        assert "rank first among" in f.reason and "extrapolated" in f.reason and "recovered outright" not in f.reason
    assert f"of {exposure.canaries[0].n_candidates:,}" in f.figure
    assert CONTROL in dict(results.models())
