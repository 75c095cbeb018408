"""LiRA and RMIA on synthetic statistics where the truth is known."""

import numpy as np
import pytest
from scipy.stats import norm

from privleak.attacks.membership.lira import (
    fit_lira,
    lira_offline,
    lira_online,
    lira_scores,
    phi_from_nll,
    shadow_splits,
)
from privleak.attacks.membership.rmia import log_pr_marginal, rmia_scores
from privleak.core.metrics import roc_auc


def _world(n=600, n_shadows=16, seed=0, noise_in=0.15, noise_out=0.6):
    """Per-example difficulty d_i; φ ~ N(d_i + gain_i, noise) when IN, N(d_i, noise) when OUT.

    Gains differ per example and the IN spread is smaller, so the online
    (IN+OUT) test beats the offline (OUT only) one.
    """
    rng = np.random.default_rng(seed)
    d = rng.normal(0, 2, n)  # example difficulty: dwarfs the membership signal
    gain = rng.uniform(0.2, 1.5, n)
    in_mask = shadow_splits(n, n_shadows, seed)
    noise = np.where(in_mask, noise_in, noise_out)
    shadow = d + gain * in_mask + rng.normal(0, 1, (n_shadows, n)) * noise
    member = rng.random(n) < 0.5
    target = d + gain * member + rng.normal(0, 1, n) * np.where(member, noise_in, noise_out)
    return target, shadow, in_mask, member


def test_shadow_splits_are_balanced():
    m = shadow_splits(101, 8, seed=3)
    assert m.shape == (8, 101) and m.dtype == bool
    assert (m.sum(0) == 4).all()  # every example IN for exactly half the shadows
    assert set(m.sum(1)) <= {50, 51}  # every shadow trains on half the pool
    assert not np.array_equal(m, shadow_splits(101, 8, seed=4))
    np.testing.assert_array_equal(m, shadow_splits(101, 8, seed=3))
    odd = shadow_splits(10, 3, 0)
    assert odd.shape == (3, 10) and odd[2].sum() == 5


def test_online_beats_offline_beats_chance():
    target, shadow, in_mask, member = _world()
    on = lira_online(target, shadow, in_mask)
    off = lira_offline(target, shadow, in_mask)
    auc_on, auc_off = roc_auc(on[member], on[~member]), roc_auc(off[member], off[~member])
    auc_loss = roc_auc(target[member], target[~member])
    assert auc_on > auc_off > 0.5
    assert auc_off > auc_loss + 0.1  # calibrating per example removes the difficulty
    both = lira_scores(target, shadow, in_mask)
    np.testing.assert_allclose(both.online, on)
    np.testing.assert_allclose(both.offline, off)


def test_global_variance_works_with_few_shadows():
    target, shadow, in_mask, member = _world(n_shadows=4, noise_in=0.4, noise_out=0.4, seed=2)
    on = lira_online(target, shadow, in_mask, global_variance=True)
    fit = fit_lira(shadow, in_mask, global_variance=True)
    assert np.unique(fit.sigma_in).size == 1 and np.unique(fit.sigma_out).size == 1
    # Pooled within-example σ recovers the true noise (0.4), not the spread of difficulties (2).
    assert fit.sigma_out[0] == pytest.approx(0.4, rel=0.15)
    assert roc_auc(on[member], on[~member]) > 0.75


def test_formulas_by_hand():
    shadow = np.array([[1.0, 0.0], [3.0, 0.5], [0.0, 2.0], [1.0, 2.5]])
    in_mask = np.array([[True, False], [True, False], [False, True], [False, True]])
    fit = fit_lira(shadow, in_mask)
    np.testing.assert_allclose(fit.mu_in, [2.0, 2.25])
    np.testing.assert_allclose(fit.sigma_in, [1.0, 0.25])
    np.testing.assert_allclose(fit.mu_out, [0.5, 0.25])
    t = np.array([1.5, 1.0])
    np.testing.assert_allclose(
        lira_online(t, shadow, in_mask), norm.logpdf(t, [2.0, 2.25], [1.0, 0.25]) - norm.logpdf(t, [0.5, 0.25], [0.5, 0.25])
    )
    np.testing.assert_allclose(lira_offline(t, shadow, in_mask), -norm.logsf(t, [0.5, 0.25], [0.5, 0.25]))


def test_examples_without_in_or_out_shadows_do_not_crash():
    target, shadow, in_mask, member = _world(n=200, n_shadows=6)
    in_mask = in_mask.copy()
    in_mask[:, :10] = False  # never IN
    in_mask[:, 10:20] = True  # never OUT
    in_mask[:3, 20:30] = False
    in_mask[3:, 20:30] = True
    in_mask[:, 20:30] = False
    in_mask[0, 20:30] = True  # a single IN shadow: σ_in falls back to the pooled one
    for gv in (False, True):
        s = lira_scores(target, shadow, in_mask, global_variance=gv)
        assert np.isfinite(s.online).all() and np.isfinite(s.offline).all()
    fit = fit_lira(shadow, in_mask)
    assert (fit.mu_in[:10] > fit.mu_out[:10]).all()  # fallback keeps the typical IN shift
    # No IN shadows anywhere: offline still works, online refuses clearly.
    none_in = np.zeros_like(in_mask)
    assert np.isfinite(lira_offline(target, shadow, none_in)).all()
    assert np.isfinite(lira_offline(target, shadow)).all()
    assert lira_scores(target, shadow, none_in).online is None
    with pytest.raises(ValueError, match="offline"):
        lira_online(target, shadow, none_in)
    with pytest.raises(ValueError):
        lira_online(target[:-1], shadow, in_mask)


def test_phi_from_nll():
    nll = np.array([0.0, 0.1, 2.0, 30.0])
    np.testing.assert_allclose(phi_from_nll(nll), -nll)
    p = np.exp(-nll[1:])
    np.testing.assert_allclose(phi_from_nll(nll, logit=True)[1:], np.log(p / (1 - p)), rtol=1e-9)
    assert np.isfinite(phi_from_nll(nll, logit=True)).all()
    assert np.all(np.diff(phi_from_nll(nll, logit=True)) < 0)


def _rmia_world(n=500, m=400, n_ref=4, seed=0, leak=0.6):
    """Per-text log p̄ (= −NLL). Difficulty shared by all models; the target adds `leak` on members."""
    rng = np.random.default_rng(seed)
    dx, dz = rng.normal(-2.0, 0.7, n), rng.normal(-2.0, 0.7, m)
    member = rng.random(n) < 0.5
    ref_x = dx + rng.normal(0, 0.1, (n_ref, n))
    ref_z = dz + rng.normal(0, 0.1, (n_ref, m))
    tx = dx + leak * member + rng.normal(0, 0.1, n)
    tz = dz + rng.normal(0, 0.1, m)
    return tx, ref_x, tz, ref_z, member


def test_rmia_members_score_higher():
    tx, rx, tz, rz, member = _rmia_world()
    s = rmia_scores(tx, rx, tz, rz)
    assert ((s >= 0) & (s <= 1)).all()
    auc_loss = roc_auc(tx[member], tx[~member])
    assert roc_auc(s[member], s[~member]) > auc_loss + 0.03
    assert s[member].mean() > s[~member].mean() + 0.2
    s1 = rmia_scores(tx, rx, tz, rz, a=1.0)  # no offline damping: the full reference correction
    assert roc_auc(s1[member], s1[~member]) > 0.9


def test_rmia_equals_privacy_meter_formula():
    tx, rx, tz, rz, _ = _rmia_world(n=60, m=50)
    for a in (0.0, 0.3, 1.0):
        px = np.exp(rx).mean(0)
        pz = np.exp(rz).mean(0)
        mean_x = (1 + a) / 2 * px + (1 - a) / 2
        mean_z = (1 + a) / 2 * pz + (1 - a) / 2
        ratios = (np.exp(tx) / mean_x)[:, None] / (np.exp(tz) / mean_z)[None, :]
        for gamma in (1.0, 2.0):
            np.testing.assert_allclose(rmia_scores(tx, rx, tz, rz, a=a, gamma=gamma), (ratios > gamma).mean(1))


def test_rmia_a_behaviour():
    tx, rx, tz, rz, member = _rmia_world()
    # a = 1: Pr(x) is the plain mean over the OUT reference models.
    np.testing.assert_allclose(log_pr_marginal(rx, 1.0), np.log(np.exp(rx).mean(0)))
    # a = 0: Pr(x) = (mean_ref + 1)/2 — nearly constant for small p, so RMIA ≈ LOSS on the target.
    np.testing.assert_allclose(log_pr_marginal(rx, 0.0), np.log((np.exp(rx).mean(0) + 1) / 2))
    s0 = rmia_scores(tx, rx, tz, rz, a=0.0)
    s1 = rmia_scores(tx, rx, tz, rz, a=1.0)
    auc0, auc1 = roc_auc(s0[member], s0[~member]), roc_auc(s1[member], s1[~member])
    auc_loss = roc_auc(tx[member], tx[~member])
    assert abs(auc0 - auc_loss) < 0.05 and auc1 > auc0 + 0.1
    with pytest.raises(ValueError):
        rmia_scores(tx, rx, tz, rz, a=1.5)
    with pytest.raises(ValueError):
        rmia_scores(tx, rx[:2], tz, rz)


def test_tune_offline_a_prefers_reference_correction_for_small_probabilities():
    from privleak.attacks.membership.rmia import tune_offline_a

    tx, rx, tz, rz, member = _rmia_world(seed=5)
    best, aucs = tune_offline_a(tx, member, rx, tz, rz)
    assert set(aucs) == {round(0.1 * i, 10) for i in range(11)}
    assert best >= 0.7 and aucs[best] == max(aucs.values())
    with pytest.raises(ValueError):
        tune_offline_a(tx, np.ones_like(member), rx, tz, rz)
