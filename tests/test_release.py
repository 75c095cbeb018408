"""Laplace and Gaussian mechanisms against their analytical noise scales, composition by dp_accounting,
and the data summary an audit releases under DP."""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import pld_privacy_accountant

from privleak.data.records import PiiSpan, Record, read_jsonl
from privleak.defenses import release as rel

N = 40_000


@pytest.mark.parametrize("sens,eps", [(1.0, 1.0), (130.0, 0.25), (2.0, 8.0)])
def test_laplace_noise_scale(sens, eps):
    rng = np.random.default_rng(0)
    noise = rel.laplace(np.zeros(N), sens, eps, rng)
    b = sens / eps  # Var Lap(b) = 2b²; the sample sd's relative error ≈ √(5/(4N)) (kurtosis 6)
    assert abs(noise.mean()) < 5 * math.sqrt(2) * b / math.sqrt(N)
    assert abs(noise.std() / (math.sqrt(2) * b) - 1) < 5 * math.sqrt(5 / (4 * N))
    assert abs(np.median(np.abs(noise)) / (b * math.log(2)) - 1) < 0.05  # |Lap(b)| is Exp(b): median b ln 2


@pytest.mark.parametrize("eps,delta", [(0.5, 1e-5), (1.0, 1e-6), (4.0, 1e-5)])
def test_gaussian_calibration(eps, delta):
    sigma = rel.gaussian_sigma(eps, delta, 1.0)
    assert rel.gaussian_delta(sigma, eps) == pytest.approx(delta, rel=1e-6)
    # the accountant library agrees: the Gaussian with this σ is (ε, δ)-DP, tightly
    acc = pld_privacy_accountant.PLDAccountant(neighboring_relation=dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE)
    acc.compose(dp_accounting.GaussianDpEvent(sigma))
    assert acc.get_epsilon(delta) == pytest.approx(eps, rel=0.01)
    if eps < 1:  # the seed's classic σ = Δ√(2 ln(1.25/δ))/ε is valid there, and never smaller
        assert rel.gaussian_sigma_classic(eps, delta, 1.0) >= sigma
    rng = np.random.default_rng(1)
    assert abs(rel.gaussian(np.zeros(N), sigma, rng).std() / sigma - 1) < 5 / math.sqrt(2 * N)
    assert rel.gaussian_sigma(eps, delta, 3.0) == pytest.approx(3 * sigma)


def test_pure_composition_adds_up_and_pld_is_never_looser():
    events = [dp_accounting.LaplaceDpEvent(1 / 0.5), dp_accounting.LaplaceDpEvent(1 / 0.25)]
    eps = rel._pld_epsilon(events, 1e-9)
    assert eps <= 0.75 + 1e-3  # basic composition of 0.5 and 0.25
    assert eps > 0.6  # and not far below it at δ ≈ 0


def _corpus() -> list[Record]:
    """300 notes, two per person, each with a name, a condition and a blood pressure span."""
    recs = []
    for i in range(300):
        name, bp = f"Name{i}", f"{100 + i % 90}/80"
        text = f"Patient {name} has asthma; BP {bp}."
        spans = [PiiSpan(8, 8 + len(name), "NAME"), PiiSpan(text.index("asthma"), text.index(";"), "CONDITION"),
                 PiiSpan(text.index(bp), text.index(bp) + len(bp), "BLOOD_PRESSURE")]
        recs.append(Record(text=text, pii=spans, meta={"kind": "phi", "person_id": f"P{i // 2}"}))
    return recs


def test_summary_spends_exactly_its_epsilon_with_bounded_contributions():
    recs = _corpus()
    exact = rel.exact_statistics(recs)
    assert exact["units"][1][0] == 150  # two records per person: the unit is the person
    assert exact["pii_type_counts"][1][list(exact["pii_type_counts"][0]).index("NAME")] == 150
    assert exact["condition_counts"][1].sum() == 150  # one condition per unit
    assert exact["systolic_histogram"][1].sum() == 150  # one reading per unit
    s = rel.release_summary(recs, 2.0, 1e-5, seed=0)
    assert 1.99 <= s.epsilon <= 2.0 + 1e-6
    assert s.epsilon_basic_composition >= s.epsilon  # PLD is the tighter bound
    for q in s.queries:
        exact_vals = exact[q.name][1]
        assert len(q.values) == len(exact_vals)
        assert np.all(np.abs(np.array(q.values) - exact_vals) < 8 * q.noise_sd)
        if q.mechanism == "laplace":
            assert q.noise_sd == pytest.approx(math.sqrt(2) * q.sensitivity / q.epsilon_alone)
        else:
            assert q.sensitivity == pytest.approx(math.sqrt(13))
    # more budget, less noise
    s8 = rel.release_summary(recs, 8.0, 1e-5, seed=0)
    assert all(a.noise_sd > b.noise_sd for a, b in zip(s.queries, s8.queries))


def test_canaries_are_not_summarised():
    recs = _corpus() + [Record(text="SSN 123-45-6789", pii=[], meta={"kind": "canary"})] * 5
    assert rel.exact_statistics(recs)["units"][1][0] == 150


def test_bad_arguments():
    with pytest.raises(ValueError):
        rel.release_summary(_corpus(), 0.0, 1e-5, seed=0)
    with pytest.raises(ValueError):
        rel.gaussian_sigma_classic(2.0, 1e-5, 1.0)


def test_audit_releases_the_summary_and_ldp_terms_with_their_epsilon(extras_run):
    out, console, results = extras_run
    r = results.data_release
    assert r is not None and r.summary is not None and r.ldp_terms is not None
    assert r.summary.epsilon == pytest.approx(2.0, abs=0.01)
    assert r.ldp_terms.epsilon == 4.0 and r.epsilon_total == pytest.approx(6.0)
    assert r.ldp_terms.candidates_from.startswith("the public split")
    members = read_jsonl(out / "splits" / "members.jsonl")
    exact = rel.exact_statistics(members)
    assert {q.name for q in r.summary.queries} == set(exact)
    assert "Released under DP" in console
    assert "Released under differential privacy" in (out / "report.html").read_text(encoding="utf-8")
