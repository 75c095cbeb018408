"""Exact bounds, the empirical-ε lower bound, the DP-bound check, proportion tests."""

import math

import numpy as np
import pytest
from scipy import stats as st
from scipy.optimize import brentq

from privleak.audit.epsilon import dp_bound_check, empirical_epsilon
from privleak.core.metrics import mia_metrics, roc_curve, roc_points
from privleak.core.stats import (
    chi2_test,
    clopper_pearson,
    cohens_h,
    compare_proportions,
    fisher_exact_test,
    newcombe_diff_ci,
    wilson_ci,
)

# ---------------------------------------------------------------- binomial bounds


@pytest.mark.parametrize("k,n", [(0, 10), (1, 10), (5, 10), (9, 10), (10, 10), (3, 1000), (0, 1), (1, 1)])
@pytest.mark.parametrize("alpha", [0.05, 0.01])
def test_clopper_pearson_equals_beta_quantiles(k, n, alpha):
    lo2, hi2 = clopper_pearson(k, n, alpha, "two")
    assert lo2 == (0.0 if k == 0 else pytest.approx(st.beta.ppf(alpha / 2, k, n - k + 1), abs=1e-12))
    assert hi2 == (1.0 if k == n else pytest.approx(st.beta.ppf(1 - alpha / 2, k + 1, n - k), abs=1e-12))
    lo1, one = clopper_pearson(k, n, alpha, "lower")
    zero, hi1 = clopper_pearson(k, n, alpha, "upper")
    assert one == 1.0 and zero == 0.0
    assert lo1 == (0.0 if k == 0 else pytest.approx(st.beta.ppf(alpha, k, n - k + 1), abs=1e-12))
    assert hi1 == (1.0 if k == n else pytest.approx(st.beta.ppf(1 - alpha, k + 1, n - k), abs=1e-12))
    exact = st.binomtest(k, n).proportion_ci(1 - alpha, method="exact")
    assert (lo2, hi2) == pytest.approx((exact.low, exact.high), abs=1e-9)


def test_clopper_pearson_vectorised_and_validated():
    lo, hi = clopper_pearson(np.array([0, 3, 10]), np.array([10, 10, 10]), 0.05, "two")
    assert lo.shape == (3,) and lo[0] == 0 and hi[2] == 1
    assert lo[1] == pytest.approx(clopper_pearson(3, 10)[0])
    for bad in [dict(k=11, n=10), dict(k=-1, n=10), dict(k=0, n=0)]:
        with pytest.raises(ValueError):
            clopper_pearson(**bad)
    with pytest.raises(ValueError):
        clopper_pearson(1, 10, side="both")


@pytest.mark.parametrize("k,n", [(0, 20), (3, 20), (20, 20), (57, 300)])
def test_wilson_matches_scipy(k, n):
    ref = st.binomtest(k, n).proportion_ci(0.95, method="wilson")
    assert wilson_ci(k, n) == pytest.approx((ref.low, ref.high), abs=1e-12)


def test_newcombe_published_examples():
    # Newcombe (1998), Stat. Med. 17:873, Table II, method 10.
    assert newcombe_diff_ci(56, 70, 48, 80) == pytest.approx((0.0524, 0.3339), abs=5e-5)
    assert newcombe_diff_ci(9, 10, 3, 10) == pytest.approx((0.1705, 0.8090), abs=5e-5)


def test_two_arm_tests_match_scipy():
    table = np.array([[30, 70], [10, 90]])
    assert fisher_exact_test(30, 100, 10, 100) == pytest.approx(tuple(st.fisher_exact(table)))
    assert fisher_exact_test(30, 100, 10, 100, "greater")[1] == pytest.approx(st.fisher_exact(table, "greater")[1])
    assert chi2_test(30, 100, 10, 100) == pytest.approx(tuple(st.chi2_contingency(table)[:2]))
    assert chi2_test(0, 10, 0, 10) == (0.0, 1.0)
    assert cohens_h(0.3, 0.1) == pytest.approx(2 * math.asin(math.sqrt(0.3)) - 2 * math.asin(math.sqrt(0.1)))
    c = compare_proportions(30, 100, 10, 100)
    assert c.diff == pytest.approx(0.2) and c.diff_ci95[0] > 0 and c.fisher_p < 0.01
    assert c.p1_ci95 == pytest.approx(clopper_pearson(30, 100))  # one rule for a rate: Clopper–Pearson
    assert compare_proportions(5, 100, 5, 100).diff_ci95[0] < 0 < compare_proportions(5, 100, 5, 100).diff_ci95[1]


# ---------------------------------------------------------------- empirical ε


def _gaussian_mu(eps, delta):
    """μ such that N(μ,1) vs N(0,1) is exactly (ε, δ)-DP (Balle & Wang 2018, analytic Gaussian)."""
    f = lambda mu: st.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * st.norm.cdf(-eps / mu - mu / 2) - delta
    return brentq(f, 1e-4, 50)


def _naive_eps(pos, neg, delta):
    """The WRONG procedure: point estimates, threshold chosen and evaluated on the same data."""
    fpr, tpr, _ = roc_curve(pos, neg)
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.log((tpr - delta) / fpr)
    return float(np.nanmax(np.where(np.isfinite(e) | (e > 0), e, np.nan)))


def test_empirical_epsilon_never_exceeds_true_epsilon_gaussian():
    eps, delta, n = 1.0, 1e-5, 2000
    mu = _gaussian_mu(eps, delta)
    rng = np.random.default_rng(123)
    lbs, naive = [], []
    for trial in range(200):
        pos, neg = rng.normal(mu, 1, n), rng.normal(0, 1, n)
        r = empirical_epsilon(pos, neg, delta, alpha=0.05, seed=trial, max_thresholds=400)
        lbs.append(r.epsilon_lb)
        naive.append(_naive_eps(pos, neg, delta))
    assert max(lbs) <= eps
    # The test has teeth: the naive estimate blows through the true ε almost always.
    assert np.mean(np.array(naive) > eps) > 0.9


def test_empirical_epsilon_randomized_response_tight_case():
    # Randomized response is exactly ε-DP with every threshold tight: the hardest case.
    eps, n = 1.0, 2000
    p1 = math.exp(eps) / (1 + math.exp(eps))
    rng = np.random.default_rng(7)
    lbs, naive = [], []
    for trial in range(200):
        pos = (rng.random(n) < p1).astype(float)
        neg = (rng.random(n) < 1 - p1).astype(float)
        lbs.append(empirical_epsilon(pos, neg, 0.0, alpha=0.05, seed=trial).epsilon_lb)
        naive.append(math.log(pos.mean() / neg.mean()))
    lbs = np.array(lbs)
    # A valid (1−α) lower bound exceeds ε in at most an α fraction of trials.
    assert np.mean(lbs > eps) <= 0.05
    assert np.mean(lbs) > 0.6  # and it is close to tight, not trivially 0
    assert np.mean(np.array(naive) > eps) > 0.3


def test_empirical_epsilon_detects_non_private_mechanism():
    rng = np.random.default_rng(0)
    r = empirical_epsilon(rng.normal(4, 1, 2000), rng.normal(0, 1, 2000), 1e-5)
    assert r.epsilon_lb > 3.0  # far above the ε = 1 of the DP arm
    assert r.n_pos_eval == 1000 and r.n_neg_eval == 1000 and r.n_pos_select == 1000
    assert 0 < r.fpr_hi < 0.05 and r.tpr_lo > 0.5
    assert r.epsilon_lb == pytest.approx(math.log((r.tpr_lo - 1e-5) / r.fpr_hi))
    d = r.to_dict()
    assert d["epsilon_lb"] == r.epsilon_lb and d["test"] == r.test
    # Flipping the score sign is caught by the swapped tests.
    flipped = empirical_epsilon(-rng.normal(4, 1, 2000), -rng.normal(0, 1, 2000), 1e-5)
    assert flipped.epsilon_lb > 3.0 and flipped.test in ("non-members >= t", "members < t")


def test_empirical_epsilon_zero_for_identical_distributions_and_validation():
    rng = np.random.default_rng(1)
    r = empirical_epsilon(rng.normal(0, 1, 500), rng.normal(0, 1, 500), 1e-5)
    assert r.epsilon_lb == 0.0
    with pytest.raises(ValueError):
        empirical_epsilon(np.array([1.0]), np.array([0.0, 1.0]), 1e-5)
    with pytest.raises(ValueError):
        empirical_epsilon(np.array([1.0, np.nan]), np.array([0.0, 1.0]), 1e-5)
    with pytest.raises(ValueError):
        empirical_epsilon(np.ones(10), np.ones(10), 1.5)


# ---------------------------------------------------------------- DP bound check


def test_dp_bound_check_flags_violations():
    eps, delta = 1.0, 1e-5
    fpr = np.array([0.0, 0.01, 0.1, 0.5, 1.0])
    tpr = np.array([0.0, 0.05, 0.2, 0.6, 1.0])
    res = dp_bound_check(fpr, tpr, eps, delta)
    assert not res.ok
    v = [x for x in res.violations if x.inequality.startswith("TPR")]
    assert [x.index for x in v] == [1]
    assert v[0].excess == pytest.approx(0.05 - (math.e * 0.01 + delta))
    assert res.max_excess == pytest.approx(max(x.excess for x in res.violations))
    # Within the bound everywhere: OK, and the max excess is ≤ 0.
    # (the ε-DP trade-off curve of randomized response, mixed a little with the diagonal)
    grid = np.linspace(0, 1, 101)
    ok = dp_bound_check(grid, 0.95 * np.minimum(math.e * grid, 1 - (1 - grid) / math.e) + 0.05 * grid, eps, delta)
    assert ok.ok and ok.max_excess <= 0
    # The complement form: TNR ≤ e^ε·FNR + δ catches a curve that jumps to TPR 1 early.
    comp = dp_bound_check(np.array([0.3]), np.array([0.8]), eps, delta)
    assert [x.inequality for x in comp.violations] == ["1-FPR <= e^eps*(1-TPR) + delta"]
    # With counts, a violation must be statistically significant: 5/100 vs 1/100 is not.
    assert dp_bound_check(np.array([0.01]), np.array([0.05]), eps, delta, n_pos=100, n_neg=100).ok
    assert not dp_bound_check(np.array([0.01]), np.array([0.2]), eps, delta, n_pos=10000, n_neg=10000).ok


# ---------------------------------------------------------------- metrics extensions


def test_roc_points_downsampled_keeps_low_fpr_end():
    rng = np.random.default_rng(0)
    pos, neg = rng.normal(1, 1, 5000), rng.normal(0, 1, 5000)
    pts = roc_points(pos, neg, max_points=200)
    fpr, tpr = np.array(pts["fpr"]), np.array(pts["tpr"])
    assert len(fpr) <= 200 and len(pts["threshold"]) == len(fpr)
    assert fpr[0] == 0 and tpr[0] == 0 and fpr[-1] == 1 and tpr[-1] == 1 and pts["threshold"][0] is None
    assert (np.diff(fpr) >= 0).all() and (np.diff(tpr) >= 0).all()
    full_f, full_t, _ = roc_curve(pos, neg)
    assert (fpr[1:] <= 2e-3).sum() >= 5  # many points at the low-FPR end
    # Every kept point is a true ROC point, and the TPR just below 1/1000 FPR is preserved.
    assert tpr[fpr < 1e-3].max() == full_t[full_f < 1e-3].max()
    small = roc_points(pos[:10], neg[:10])
    assert small["fpr"] == [float(x) for x in roc_curve(pos[:10], neg[:10])[0]]


def test_mia_metrics_has_tpr_cis():
    rng = np.random.default_rng(0)
    m = mia_metrics(rng.normal(1, 1, 1000), rng.normal(0, 1, 1000), bootstrap=100)
    for value, ci in [(m.auc, m.auc_ci95), (m.tpr_at_1pct_fpr, m.tpr_at_1pct_fpr_ci95), (m.tpr_at_0_1pct_fpr, m.tpr_at_0_1pct_fpr_ci95)]:
        assert ci[0] <= ci[1] and ci[0] - 0.05 <= value <= ci[1] + 0.05
    assert m.auc_ci95[0] < m.auc < m.auc_ci95[1]
    assert mia_metrics(np.ones(3), np.zeros(3), bootstrap=0).tpr_at_1pct_fpr_ci95 is None


# ----------------------------------------------------------------------------- combined p-values, paired tests

def test_combined_p_values_match_scipy():
    from scipy.stats import combine_pvalues

    from privleak.core.stats import fisher_combined_p, min_p_combined

    p = np.array([0.2, 0.01, 0.5, 0.04, 0.9])
    assert fisher_combined_p(p) == pytest.approx(combine_pvalues(p, method="fisher").pvalue, rel=1e-12)
    assert min_p_combined(p) == pytest.approx(combine_pvalues(p, method="tippett").pvalue, rel=1e-12)
    assert min_p_combined([1.0, 1.0]) == 1.0
    with pytest.raises(ValueError):
        fisher_combined_p([0.0, 0.5])
    with pytest.raises(ValueError):
        min_p_combined([])


def test_sign_flip_exact_and_monte_carlo():
    import itertools

    from privleak.core.stats import sign_flip_p

    d = np.array([1.5, -0.2, 0.7, 2.1, 0.4, -1.0, 0.9])
    sums = [sum(s * x for s, x in zip(signs, d)) for signs in itertools.product((1, -1), repeat=d.size)]
    want = sum(t >= d.sum() - 1e-12 for t in sums) / len(sums)
    assert sign_flip_p(d) == pytest.approx(want)
    assert sign_flip_p(-d, "less") == pytest.approx(want)
    assert sign_flip_p(d, "two-sided") == pytest.approx(sum(abs(t) >= d.sum() - 1e-12 for t in sums) / len(sums))
    assert sign_flip_p(np.zeros(5)) == 1.0 and sign_flip_p(np.ones(10)) == pytest.approx(1 / 1024)
    rng = np.random.default_rng(0)
    big = rng.normal(0.3, 1.0, 40)  # Monte Carlo (n > 16) agrees with the normal approximation
    from scipy.stats import norm

    assert sign_flip_p(big) == pytest.approx(norm.sf(big.sum() / np.sqrt((big**2).sum())), abs=0.02)
    with pytest.raises(ValueError):
        sign_flip_p([1.0, np.nan])


def test_sign_flip_is_valid_under_symmetry():
    from privleak.core.stats import sign_flip_p

    rng = np.random.default_rng(1)
    ps = np.array([sign_flip_p(rng.standard_t(3, 12)) for _ in range(2000)])
    for a in (0.01, 0.05, 0.2):
        assert np.mean(ps <= a) <= a + 3 * np.sqrt(a * (1 - a) / ps.size)


def test_bootstrap_mean_ci_covers_the_mean():
    from privleak.core.stats import bootstrap_mean_ci

    rng = np.random.default_rng(2)
    cover = 0
    for i in range(300):
        x = rng.exponential(1.0, 60)
        lo, hi = bootstrap_mean_ci(x, seed=i, n_resamples=1000)
        cover += lo <= 1.0 <= hi
    assert 0.88 <= cover / 300 <= 0.99  # percentile bootstrap at n = 60: close to 95 %, a little under
    assert bootstrap_mean_ci([2.0, 2.0, 2.0]) == (2.0, 2.0)
