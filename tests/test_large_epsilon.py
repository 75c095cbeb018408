"""Formulas in ε stay finite for ε in the thousands (issue 37 item 1).

A person with dozens of records under record-level DP is guaranteed only a group ε in the hundreds or
thousands; every test that forms e^ε with it overflowed a double past ε ≈ 709 (``math.exp`` raises
OverflowError). Each check here raised on the old code; each also agrees with the plain formula where e^ε
is representable, so the log-space form is the same test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from privleak.audit.alarms import empirical_epsilon_diagnostic
from privleak.audit.epsilon import (dp_bound_check, empirical_epsilon, epsilon_test_p_value, roc_band_check,
                                    split_halves)
from privleak.audit.one_run import gaussian_delta

HUGE = (709.8, 1469.7, 5000.0)


def _scores(seed: int = 0, shift: float = 1.5, n: int = 300) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(shift, 1.0, n), rng.normal(0.0, 1.0, n)


@pytest.mark.parametrize("eps", HUGE)
def test_roc_band_check_at_a_group_epsilon(eps):
    pos, neg = _scores()
    band = roc_band_check(pos, neg, eps, 1e-5)
    assert band.p_value == 1.0 and band.epsilon == eps  # nothing is outside an ε in the thousands


def test_roc_band_check_is_the_same_test_where_exp_is_finite():
    pos, neg = _scores(shift=3.0)
    for eps in (0.0, 0.5, 2.0, 30.0):
        e = math.exp(eps)
        t = np.append(np.unique(np.concatenate([pos, neg])), np.inf)
        tpr = (pos.size - np.searchsorted(np.sort(pos), t, side="left")) / pos.size
        fpr = (neg.size - np.searchsorted(np.sort(neg), t, side="left")) / neg.size
        s = 1 / math.sqrt(2 * pos.size)
        c = max(float(((lhs - e * rhs - 1e-5) / (s + e * s)).max())
                for lhs, rhs in ((tpr, fpr), (1 - fpr, 1 - tpr), (fpr, tpr), (1 - tpr, 1 - fpr)))
        p = 1.0 if c <= 0 else min(1.0, 4 * math.exp(-c * c))
        assert roc_band_check(pos, neg, eps, 1e-5).p_value == pytest.approx(p, rel=1e-9, abs=1e-300)


@pytest.mark.parametrize("eps", HUGE)
def test_the_held_out_test_and_the_point_check_at_a_group_epsilon(eps):
    assert epsilon_test_p_value(90, 100, 3, 100, eps, 1e-5) == 1.0
    assert epsilon_test_p_value(90, 100, 0, 100, eps, 1e-5) == 1.0
    check = dp_bound_check(np.array([0.0, 0.01, 0.5]), np.array([0.9, 0.9, 0.95]), eps, 1e-5, n_pos=100, n_neg=100)
    assert not check.violations and check.max_excess < 0


def test_the_held_out_test_is_unchanged_where_exp_is_finite():
    # 60/100 against 1/100 refutes ε = 1 (e·CP_hi(1/100) ≈ 0.15 < CP_lo(60/100)), not ε = 5.
    assert epsilon_test_p_value(60, 100, 1, 100, 1.0, 1e-5) == pytest.approx(1.094e-5, rel=1e-3)
    assert epsilon_test_p_value(60, 100, 1, 100, 5.0, 1e-5) == 1.0
    assert epsilon_test_p_value(60, 100, 0, 100, 0.0, 0.0) < 1e-10


@pytest.mark.parametrize("eps", HUGE)
def test_the_membership_diagnostic_for_a_unit_of_many_records(eps):
    pos, neg = _scores()
    bound = empirical_epsilon(pos, neg, delta=1e-5, alpha=0.05, seed=0)
    test = empirical_epsilon_diagnostic("dp-8", bound, eps, 1e-5, unit_records=1)
    assert test.p_value == 1.0
    # A unit of 64 records under record-level ε = 25: group privacy's 64·25 = 1,600 and a δ of 1.
    test = empirical_epsilon_diagnostic("dp-8", bound, 25.0, 1e-5, unit_records=64)
    assert test.p_value == 1.0 and test.detail["vacuous"]
    _, pos_eval, _, neg_eval = split_halves(pos, neg, 0)
    assert roc_band_check(pos_eval, neg_eval, eps, 1e-5).p_value == 1.0


@pytest.mark.parametrize("eps", HUGE)
def test_gaussian_delta_at_a_group_epsilon(eps):
    assert gaussian_delta(1.0, eps) == 0.0
    assert 0.0 <= gaussian_delta(60.0, eps) <= 1.0


def test_gaussian_delta_is_unchanged_where_exp_is_finite():
    from scipy.stats import norm

    for mu, eps in ((1.0, 0.5), (2.0, 3.0), (0.5, 0.1)):
        plain = norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)
        assert gaussian_delta(mu, eps) == pytest.approx(plain, rel=1e-9)
