"""The white-box route's statistics and test (privleak.audit.whitebox), without training: a hand-computed
case, its false-alarm rate at the claim's boundary and inside it, and its power against a step noised below σ."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from privleak.audit.alarms import ALARM_ROUTES, alarm_decision
from privleak.audit.whitebox import noiseless, whitebox_alarm_test, whitebox_p_value, whitebox_statistic


def _check(n: np.ndarray, y: np.ndarray, steps: int) -> dict:
    return {"canaries": len(n), "included": int((n > 0).sum()), "steps": steps, "scale": 100.0,
            "sum_nn": float((n * n).sum()), "sum_ny": float((n * y).sum()), "sum_yy": float((y * y).sum())}


def test_hand_computed_case():
    """m = 4 canaries, T = 10 steps, σ = 0.8; by hand: S_nn = 38, S_ny = 36.2, S_yy = 35.86, slope 36.2/38,
    RSS = 35.86 − 36.2²/38 = 1.374737, s² = RSS/3, t = slope·√38/s = 8.6749, λ₀ = √(38/10)/0.8 = 2.43670."""
    n = np.array([3.0, 0.0, 5.0, 2.0])
    y = np.array([3.5, -0.2, 4.1, 2.6])
    t, df, root = whitebox_statistic(_check(n, y, 10))
    assert df == 3
    assert t == pytest.approx(8.6749, abs=1e-3)
    assert root / 0.8 == pytest.approx(2.43670, abs=1e-4)
    test = whitebox_alarm_test("dp-8", _check(n, y, 10), sigma=0.8, sample_rate=0.3, max_grad_norm=1.0, delta=1e-5)
    assert test.p_value == pytest.approx(stats.nct.sf(8.6749, 3, 2.43670), rel=1e-3)
    assert test.route == "whitebox" and test.route in ALARM_ROUTES and test.alarm


def _simulate(rng, sims: int, m: int, steps: int, q: float, sigma: float, alpha: float, tau: float) -> np.ndarray:
    """p-values of ``sims`` audits of a step contributing ``alpha``·C per inclusion under N(0, τ²C²) noise per step."""
    inside = rng.random((sims, m)) < 0.5
    n = rng.binomial(steps, q, size=(sims, m)) * inside
    y = alpha * n + tau * math.sqrt(steps) * rng.standard_normal((sims, m))
    s_nn, s_ny, s_yy = (n * n).sum(1), (n * y).sum(1), (y * y).sum(1)
    slope = s_ny / s_nn
    t = slope * np.sqrt(s_nn) / np.sqrt((s_yy - s_ny ** 2 / s_nn) / (m - 1))
    # the vectorised p-value must be the function's own
    k = 0
    assert whitebox_p_value(float(t[k]), m - 1, math.sqrt(s_nn[k] / steps) / sigma) == pytest.approx(
        float(stats.nct.sf(t[k], m - 1, math.sqrt(s_nn[k] / steps) / sigma)))
    return stats.nct.sf(t, m - 1, np.sqrt(s_nn / steps) / sigma)


@pytest.mark.parametrize("alpha,tau", [(1.0, 0.9), (0.5, 0.9), (1.0, 1.8)],
                         ids=["at the claim", "clipping below C", "more noise"])
def test_false_alarm_rate_is_at_most_the_level(alpha, tau):
    """The claim is τ/α ≥ σ (σ = 0.9 here). At its boundary the test is exact (p uniform); inside it, more
    conservative. 4,000 audits each: the rate at 5 % must stay below 5 % + 3 standard errors."""
    p = _simulate(np.random.default_rng(7), 4000, 200, 40, 0.1, 0.9, alpha, tau)
    se = math.sqrt(0.05 * 0.95 / len(p))
    assert (p <= 0.05).mean() <= 0.05 + 3 * se
    if alpha == 1.0 and tau == 0.9:  # exact at the boundary: not conservative either
        assert (p <= 0.05).mean() >= 0.05 - 3 * se
        assert stats.kstest(p, "uniform").pvalue > 1e-3


def test_power_against_less_noise():
    """A step noised at σ/1.5 relative to its clip (ε well above the claim) is caught nearly always at m = 200."""
    p = _simulate(np.random.default_rng(8), 500, 200, 40, 0.1, 0.9, 1.0, 0.6)
    assert (p <= 0.05).mean() > 0.95


def test_no_noise_and_no_clipping_are_caught_and_the_power_says_so():
    rng = np.random.default_rng(3)
    n = (rng.binomial(40, 0.1, 500) * (rng.random(500) < 0.5)).astype(float)
    ok = _check(n, n + 0.9 * math.sqrt(40) * rng.standard_normal(500), 40)
    no_noise = _check(n, n, 40)
    no_clip = _check(n, 100 * n + 0.9 * math.sqrt(40) * rng.standard_normal(500), 40)
    kw = dict(sigma=0.9, sample_rate=0.1, max_grad_norm=1.0, delta=1e-5)
    assert whitebox_alarm_test("a", no_noise, **kw).p_value == 0.0
    assert whitebox_alarm_test("a", no_clip, **kw).p_value < 1e-12
    assert whitebox_alarm_test("a", noiseless(ok), **kw).p_value == 0.0
    correct = whitebox_alarm_test("a", ok, **kw)
    r, eps = correct.detectable(0.05)
    assert 1.0 < r < 1.5 and math.isfinite(eps)
    # the displayed bound: below the claim's ε when the claim holds, above it when refuted
    from privleak.audit.alarms import dpsgd_epsilon as _dpsgd_epsilon

    claimed = _dpsgd_epsilon(0.1, 0.9, 40, "add_remove", 1e-5)
    assert correct.bound(0.05) < claimed < whitebox_alarm_test("a", no_clip, **kw).bound(0.05)
    d = alarm_decision([whitebox_alarm_test("ok", ok, **kw), whitebox_alarm_test("broken", no_clip, **kw)], 0.05)
    assert d.violated == ["broken"]


def test_no_canary_joined_is_no_evidence():
    n = np.zeros(10)
    assert whitebox_alarm_test("a", _check(n, np.ones(10), 5), sigma=1.0, sample_rate=0.1, max_grad_norm=1.0,
                               delta=1e-5).p_value == 1.0
