"""LiRA / RMIA from shadow models, on simulated NLLs where the truth is known."""

from __future__ import annotations

import numpy as np
import pytest

from privleak.attacks.membership.lira import shadow_splits
from privleak.attacks.membership.rmia import log_pr_marginal, rmia_scores
from privleak.attacks.membership.shadows import shadow_scores
from privleak.core.metrics import roc_auc


def _world(n=400, m=200, S=8, seed=0):
    """Per-example difficulty d_x; training on x lowers its NLL by 0.3 (+ noise)."""
    rng = np.random.default_rng(seed)
    d = rng.uniform(1.0, 4.0, n)  # hard and easy examples: LOSS alone confuses them
    member = np.zeros(n, dtype=bool)
    member[: n // 2] = True
    in_mask = shadow_splits(n, S, seed=seed)

    def nll(trained_on):
        return d - 0.3 * trained_on + rng.normal(0, 0.05, n)

    target_x = nll(member)
    shadows_x = np.stack([nll(in_mask[s]) for s in range(S)])
    dz = rng.uniform(1.0, 4.0, m)
    target_z = dz + rng.normal(0, 0.05, m)
    shadows_z = np.stack([dz + rng.normal(0, 0.05, m) for _ in range(S)])
    return target_x, target_z, shadows_x, shadows_z, in_mask, member


def test_lira_beats_loss_when_difficulty_varies():
    tx, tz, sx, sz, in_mask, member = _world()
    res = shadow_scores(tx, tz, sx, sz, in_mask, global_variance=True, default_a=0.3)
    loss_auc = roc_auc(-tx[member], -tx[~member])
    for name in ("lira_online", "lira_offline", "rmia_shadows"):
        s = res.scores[name]
        assert roc_auc(s[member], s[~member]) > max(0.95, loss_auc + 0.2), name
    assert res.rmia_a_tuned and 0.0 <= res.rmia_a <= 1.0


def test_no_signal_gives_chance():
    tx, tz, sx, sz, in_mask, member = _world()
    rng = np.random.default_rng(1)
    member = rng.random(len(tx)) < 0.5  # labels unrelated to what the target trained on
    res = shadow_scores(tx, tz, sx, sz, in_mask, global_variance=True, default_a=0.3)
    for s in res.scores.values():
        assert abs(roc_auc(s[member], s[~member]) - 0.5) < 0.1


def test_two_shadows_cannot_tune_a_and_fall_back():
    tx, tz, sx, sz, in_mask, _ = _world(S=2)
    res = shadow_scores(tx, tz, sx, sz, in_mask, global_variance=True, default_a=0.3)
    assert not res.rmia_a_tuned and res.rmia_a == 0.3


def test_shape_errors_are_explicit():
    tx, tz, sx, sz, in_mask, _ = _world(S=4)
    with pytest.raises(ValueError, match="disagree"):
        shadow_scores(tx, tz, sx[:, :-1], sz, in_mask, global_variance=True, default_a=0.3)
    with pytest.raises(ValueError, match="at least 2"):
        shadow_scores(tx, tz, sx[:1], sz[:1], in_mask[:1], global_variance=True, default_a=0.3)


def test_masked_marginal_uses_only_out_references():
    rng = np.random.default_rng(3)
    ref = rng.normal(-2, 0.5, (4, 6))
    mask = np.array([[1, 0, 1, 1, 0, 1], [0, 1, 1, 0, 1, 1], [1, 1, 0, 1, 1, 0], [1, 1, 1, 0, 0, 1]], dtype=bool)
    got = log_pr_marginal(ref, 0.4, mask)
    for j in range(6):
        assert got[j] == pytest.approx(log_pr_marginal(ref[mask[:, j], j][:, None], 0.4)[0])
    with pytest.raises(ValueError, match="at least one reference"):
        log_pr_marginal(ref, 0.4, np.zeros_like(mask))
    # An all-True mask is the unmasked RMIA.
    tx, tz, rz = rng.normal(-2, 0.5, 6), rng.normal(-2, 0.5, 9), rng.normal(-2, 0.5, (4, 9))
    np.testing.assert_array_equal(rmia_scores(tx, ref, tz, rz, a=0.4, ref_mask_x=np.ones_like(mask)),
                                  rmia_scores(tx, ref, tz, rz, a=0.4))
