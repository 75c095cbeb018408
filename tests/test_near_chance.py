"""Issue 37: three outcomes, the family-wise error over an arm's tests, and a recommendation on one unit.

"Near chance" is an equivalence claim (Schuirmann's two one-sided tests against the control, within a stated
margin), not the absence of a significant leak; an arm that neither leaks nor is shown within the margins is
INCONCLUSIVE, with the items that would settle it. The arms here are real result types built by hand — scores,
canary ranks and counts chosen so each case is the one the issue describes — judged by the real verdict code.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from privleak.attacks.base import Policy
from privleak.attacks.exposure import CanaryExposure, ExposureResult, chance_exposure
from privleak.attacks.extraction import SamplingExtractionResult
from privleak.attacks.membership.attacks import MembershipResult, Roc
from privleak.audit.verdicts import arm_verdict, judge
from privleak.core.metrics import mia_metrics, roc_points
from privleak.core.stats import holm, mcnemar_p, paired_excess_within, rate_excess_within, tost_normal, tost_paired_t
from privleak.results import ArmResult, AuditResults, DataSummary, Privacy, ToolInfo, Utility

R = 10_000  # exposure candidates


# --------------------------------------------------------------------------- building results by hand

def _mia(pos: np.ndarray, neg: np.ndarray) -> MembershipResult:
    m = mia_metrics(pos, neg, bootstrap=50, seed=0)
    return MembershipResult(auc=m.auc, tpr_at_1pct_fpr=m.tpr_at_1pct_fpr, tpr_at_0_1pct_fpr=m.tpr_at_0_1pct_fpr,
                            n_members=m.n_members, n_non_members=m.n_non_members, auc_ci95=m.auc_ci95,
                            roc=Roc(**roc_points(pos, neg)), member_scores=[float(x) for x in pos],
                            non_member_scores=[float(x) for x in neg], evaluated="same-records")


def _exposure(exposures) -> ExposureResult:
    # An exposure is log2 R − log2 rank with 1 ≤ rank ≤ R: within [0, log2 R] (results validate the range).
    exposures = np.clip(np.asarray(exposures, dtype=float), 0.0, math.log2(R))
    return ExposureResult(chance_exposure=chance_exposure(R), canaries=[
        CanaryExposure(canary_id=f"c{i}", repeats=(1, 2, 4, 8, 16)[i % 5], exposure=float(e),
                       max_exposure=math.log2(R), rank=R * 2.0 ** -float(e), n_candidates=R,
                       exposure_extrapolated=float(e)) for i, e in enumerate(exposures)])


def _sampling(k: int, n: int = 2000) -> SamplingExtractionResult:
    return SamplingExtractionResult(n_samples=n, n_unique=n, window=50, rankings=[], all_member_hits=k,
                                    all_non_member_hits=0, all_member_only_hits=k, all_non_member_only_hits=0,
                                    examples=[], settings={})


#: The control's canary exposures: 100 canaries at evenly spread ranks (mean ≈ 1.44 bits, chance 1.44) — enough
#: for the exact rank-based claim to be made (15 are too few at any outcome: test_exposure.py).
N_CANARIES = 100
CONTROL_EXPOSURE = -np.log2((np.arange(N_CANARIES) + 0.5) / N_CANARIES)


def _shifted(mean: float, spread: float) -> np.ndarray:
    """The control's exposures moved by per-canary differences of this mean and spread (alternating signs)."""
    z = np.where(np.arange(N_CANARIES) % 2 == 0, 1.0, -1.0)
    return CONTROL_EXPOSURE + mean + spread * (z - z.mean())


def _privacy(eps: float, unit: str = "record", person: float | None = None, record: float | None = None) -> Privacy:
    return Privacy(target_epsilon=eps, epsilon=eps, accountant="prv", delta=1e-5, sigma=1.0, sample_rate=0.1,
                   steps=100, max_grad_norm=1.0, epsilon_rdp=None, epsilon_pld=None, epsilon_prv=eps, unit=unit,
                   epsilon_record=record, epsilon_person=person, person_records=4 if person else None)


def _utility(g: float | None = None, half: float = 0.005, seeds: list[float] | None = None) -> Utility:
    return Utility(ppl_members=10.0, ppl_non_members=12.0, nll_non_members=2.5, gain_recovered=g,
                   gain_recovered_ci95=(g - half, g + half) if g is not None else None,
                   gain_recovered_seeds=seeds or [])


def _results(arms: dict[str, ArmResult], control_attacks: dict) -> AuditResults:
    control = ArmResult(kind="control", utility=Utility(ppl_members=50.0, ppl_non_members=50.0, nll_non_members=3.9),
                        attacks=control_attacks)
    data = DataSummary(source="synthetic", n_public=0, n_members=800, n_canary_records=31, n_non_members=800,
                       n_population=0, mia_records_per_side=800, n_canaries=15, canary_chance_exposure=chance_exposure(R))
    return AuditResults(tool=ToolInfo(name="privleak", version="test"), config={}, data=data, base_model=control,
                        arms=arms)


@pytest.fixture(scope="module")
def control_attacks() -> dict:
    rng = np.random.default_rng(37)
    pos, neg = rng.normal(0.0, 1.0, 800), rng.normal(0.0, 1.0, 800)
    return {"loss": _mia(pos, neg), "exposure": _exposure(CONTROL_EXPOSURE), "sampling_extraction": _sampling(0)}


def _arm(control_attacks: dict, exposures: np.ndarray, k_sampled: int = 0, g: float = 0.5,
         privacy: Privacy | None = None) -> ArmResult:
    """An arm that scores the control's texts almost exactly (a DP model close to its base), with its own canary
    exposures and sampling-extraction count."""
    c = control_attacks["loss"]
    rng = np.random.default_rng(1)
    pos = np.asarray(c.member_scores) + rng.normal(0, 0.05, len(c.member_scores))
    neg = np.asarray(c.non_member_scores) + rng.normal(0, 0.05, len(c.non_member_scores))
    return ArmResult(kind="dp", utility=_utility(g), privacy=privacy or _privacy(8.0, person=30.0),
                     attacks={"loss": _mia(pos, neg), "exposure": _exposure(exposures),
                              "sampling_extraction": _sampling(k_sampled)})


# --------------------------------------------------------------------------- the tests behind the claims

def test_tost_is_the_interval_inside_the_margin():
    """TOST at α ⇔ the (1 − 2α) interval inside (−Δ, Δ) (Schuirmann 1987); equivalent rejects both one-sided
    nulls; the items it would take scale as 1/se²."""
    for est, se in ((0.005, 0.005), (0.01, 0.006), (-0.012, 0.004), (0.03, 0.001)):
        e = tost_normal(est, se, 0.02, 0.05, n=400)
        z = 1.6448536269514722
        assert e.equivalent == (est - z * se > -0.02 and est + z * se < 0.02)
        assert e.lower == pytest.approx(est - z * se) and e.upper == pytest.approx(est + z * se)
    e = tost_normal(0.01, 0.016, 0.02, 0.05, n=650)
    assert not e.equivalent and e.n_needed is not None
    assert tost_normal(0.01, 0.016 * math.sqrt(650 / e.n_needed), 0.02, 0.05, n=e.n_needed).equivalent
    assert tost_normal(0.03, 0.001, 0.02, 0.05, n=650).n_needed is None  # beyond the margin: no n shows it within
    t = tost_paired_t([0.1, -0.2, 0.05, 0.0, 0.1, -0.1], 1.0)
    assert t.equivalent and t.lower > -1.0 and t.upper < 1.0
    assert not tost_paired_t([0.5], 1.0).equivalent  # one difference shows nothing


def test_tost_error_rate_at_the_margin():
    """At the margin's edge (true difference = Δ) the equivalence claim is made in ≤ α of samples: the
    test's stated error rate, on 4,000 simulated paired-t TOSTs of 15 canaries."""
    rng = np.random.default_rng(4)
    claims = sum(tost_paired_t(rng.normal(1.0, 1.5, 15), 1.0, 0.05).equivalent for _ in range(4000))
    assert claims / 4000 <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 4000), claims


def test_no_leak_is_not_near_chance(control_attacks):
    """Issue 37 item 4: with 15 canaries, "not significantly above the control" is mostly low power. An arm
    whose 15 canaries sit 0.5 bit above chance leaks by no test — the old verdict read
    NEAR CHANCE — but its exposure is not shown within 1 bit either (15 canaries cannot show it at any outcome:
    the exact claim is too small at this size, issue 44): INCONCLUSIVE, naming the canaries and how many would
    settle it. With 100 canaries tight around chance it is shown near chance."""
    wide = _arm(control_attacks, -np.log2((np.arange(15) + 0.5) / 15) + 0.5)
    results = _results({"dp-8": wide}, control_attacks)
    f = wide.attacks["exposure"].assess("exposure", control_attacks["exposure"], Policy())
    assert f.leaks is False and f.p_leak > 0.05 and not f.within_margin  # no leak, no equivalence
    assert not f.equivalence.judgeable
    v = arm_verdict("dp-8", wide, results)
    assert v.level == "inconclusive" and v.label == "INCONCLUSIVE" and not v.near_chance
    assert len(v.unsettled) == 1 and v.unsettled[0].startswith("canaries: none of its 1 tests can show")
    assert "canaries would show it" in v.unsettled[0] and "INCONCLUSIVE" not in v.text
    assert "Holm" in v.error_control and "intersection–union" in v.error_control
    tight = _arm(control_attacks, _shifted(0.05, 0.3))
    assert arm_verdict("dp-8", tight, _results({"dp-8": tight}, control_attacks)).level == "chance"


def test_the_issue_flip_is_one_verdict(control_attacks):
    """Issue 37: dp-8 read NEAR CHANCE at a mean exposure of 2.41 bits and SOME LEAKAGE at 2.47 between two
    runs, 15 canaries each. Both readings now give the same verdict — not near chance, and no leak at the
    audit's family-wise level: 15 canaries cannot make the exact claim at all (INCONCLUSIVE, saying so)."""
    levels = set()
    base = -np.log2((np.arange(15) + 0.5) / 15)
    z = np.where(np.arange(15) % 2 == 0, 1.0, -1.0)
    for mean in (2.41, 2.47):
        arm = _arm(control_attacks, base + (mean - base.mean()) + (z - z.mean()))
        assert arm.attacks["exposure"].mean_exposure == pytest.approx(mean)
        results = judge(_results({"dp-8": arm}, control_attacks))
        v = results.arms["dp-8"].verdict
        levels.add(v.level)
        assert any(u.startswith("canaries") for u in v.unsettled)
    assert levels == {"inconclusive"}


def test_holm_controls_the_arms_family_wise_error():
    """Holm's step-down rejects what Bonferroni does and more, never less; on m = 16 independent null p-values
    (an arm's attacks) any false "leaks" happens in ≤ α of 20,000 simulated arms, where testing each at α
    gives 1 − 0.95¹⁶ ≈ 56 %."""
    assert holm([0.01, 0.04, 0.03, 0.2], 0.05) == [True, False, False, False]
    assert holm([0.01, 0.02, 0.03], 0.05) == [True, True, True]  # 0.01 ≤ .05/3, 0.02 ≤ .05/2, 0.03 ≤ .05
    assert holm([], 0.05) == []
    rng = np.random.default_rng(16)
    p = rng.random((20_000, 16))
    any_holm = np.mean([any(holm(row, 0.05)) for row in p[:4000]])
    any_each = np.mean((p <= 0.05).any(axis=1))
    assert any_holm <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 4000) and any_each > 0.5


def test_one_small_p_among_many_attacks_is_not_a_leak(control_attacks):
    """An arm's verdict combines every family: a lone p = 0.03 among its attacks was SOME LEAKAGE when each
    attack was read at α; decided together (Holm) it is not, and a strong leak still is."""
    arm = _arm(control_attacks, _shifted(0.05, 0.3), k_sampled=0)
    # 16 attacks: the three above plus 13 sampling-extraction runs, one of them a little high
    for i in range(13):
        arm.attacks[f"sampling_extraction_{i}"] = _sampling(7 if i == 0 else 0)
        control_attacks = {**control_attacks, f"sampling_extraction_{i}": _sampling(0)}
    f = arm.attacks["sampling_extraction_0"].assess("x", _sampling(0), Policy())
    assert f.leaks and 0.005 < f.p_leak < 0.05  # alone, at α: a leak
    v = arm_verdict("dp-8", arm, _results({"dp-8": arm}, control_attacks))
    assert v.level in ("chance", "inconclusive") and not v.attacks_leaking
    assert "18 leak tests" in v.error_control  # the loss attack tests its AUC and its tail at two FPRs
    arm.attacks["sampling_extraction_0"] = _sampling(40)
    v = arm_verdict("dp-8", arm, _results({"dp-8": arm}, control_attacks))
    assert v.level == "some" and v.attacks_leaking == ["sampling_extraction_0"]


def test_paired_membership_is_judged_on_the_same_records(control_attacks):
    """Both models' scores on the same records: DeLong's paired test sees an arm that moves every score by a
    hair as within ±0.02 of the control, which the unpaired comparison (two standard errors of ≈ 0.016 at
    800 per side) cannot show; a real shift is a leak either way."""
    c = control_attacks["loss"]
    close = _arm(control_attacks, CONTROL_EXPOSURE).attacks["loss"]
    paired = close.assess("loss", c, Policy(auc_margin=0.02))
    assert paired.within_margin and "DeLong, paired" in paired.equivalence.method
    unpaired = close.model_copy(update={"evaluated": None}).assess("loss", c, Policy(auc_margin=0.02))
    assert not unpaired.within_margin and unpaired.equivalence.method == "DeLong, unpaired"
    shifted = _mia(np.asarray(c.member_scores) + 0.5, np.asarray(c.non_member_scores))
    assert shifted.assess("loss", c, Policy()).leaks


def test_counts_are_judged_against_a_rate_margin():
    """A count's rate is shown at most 0.05 above the control's (Newcombe) — which 21 slots cannot show even at
    0 of 21 (upper bound ≈ 0.11): the finding says how many would."""
    assert rate_excess_within(0, 459, 0, 459, 0.05).equivalent
    small = rate_excess_within(0, 21, 0, 21, 0.05)
    assert not small.equivalent and small.upper == pytest.approx(0.114, abs=0.001) and 40 < small.n_needed < 70
    assert rate_excess_within(0, small.n_needed, 0, small.n_needed, 0.05).equivalent


def test_mcnemar_and_the_paired_bound():
    """McNemar's exact test reads only the discordant pairs; the paired bound on P[A only] is exact."""
    assert mcnemar_p(6, 0) == pytest.approx(0.5 ** 6)
    assert mcnemar_p(3, 3, "two-sided") == 1.0 and mcnemar_p(0, 0) == 1.0
    assert mcnemar_p(5, 1, "less") == pytest.approx(sum(math.comb(6, j) for j in range(6)) / 64)
    e = paired_excess_within(0, 0, 69, 0.05)
    assert e.equivalent and e.upper == pytest.approx(1 - 0.05 ** (1 / 69))


def test_leak_tests_are_counted_over_the_whole_audit(control_attacks):
    """Holm over every arm's leak tests, not each arm's alone (issue 37; "counted over everything the audit tests
    at once"): a p that one arm's five tests would reject is not a leak among six arms' thirty."""
    ps = {k: _sampling(k).assess("x", _sampling(0), Policy()).p_leak for k in range(1, 40)}
    k = next(k for k, p in ps.items() if 0.05 / 30 < p <= 0.05 / 5)
    hit = _arm(control_attacks, CONTROL_EXPOSURE, k_sampled=k)
    alone = _results({"dp-8": hit}, control_attacks)
    assert arm_verdict("dp-8", hit, alone).attacks_leaking == ["sampling_extraction"]
    crowd = {"dp-8": hit, **{f"dp-{i}": _arm(control_attacks, CONTROL_EXPOSURE) for i in range(1, 6)}}
    v = arm_verdict("dp-8", hit, _results(crowd, control_attacks))
    assert not v.attacks_leaking and "30 leak tests" in v.error_control
    # and judge() decides every arm from the one family
    judged = judge(_results(crowd, control_attacks))
    assert not any(a.verdict.attacks_leaking for a in judged.arms.values())


def test_too_small_is_decided_by_the_sizes_not_the_observed_se():
    """Which attacks a near-chance claim rests on is fixed by the design: 56 members a side cannot show an AUC
    within ±0.05 of the control's (null se of a difference ≈ 0.077), however close the paired scores happen to
    be — the foreign-corpus audit called dp-1 NEAR CHANCE on zlib alone that way. 800 a side can."""
    rng = np.random.default_rng(5)
    for n, judgeable in ((56, False), (800, True)):
        pos, neg = rng.normal(0.0, 1.0, n), rng.normal(0.0, 1.0, n)
        c = _mia(pos, neg)
        a = _mia(pos + rng.normal(0, 1e-3, n), neg + rng.normal(0, 1e-3, n))
        f = a.assess("zlib", c, Policy())
        assert f.equivalence.method == "DeLong, paired" and f.within_margin  # the observed se is tiny
        assert f.equivalence.judgeable is judgeable
