import numpy as np
import pytest
from sklearn.metrics import roc_auc_score
from sklearn.metrics import roc_curve as sk_roc_curve

from privleak.core.metrics import mia_metrics, roc_auc, roc_curve, tpr_at_fpr


@pytest.mark.parametrize("seed", range(5))
def test_roc_and_auc_match_sklearn(seed):
    rng = np.random.default_rng(seed)
    # Rounded scores force ties, the case hand-written ROC code gets wrong.
    pos = np.round(rng.normal(0.5, 1, 300), 1)
    neg = np.round(rng.normal(0.0, 1, 400), 1)
    y = np.r_[np.ones(pos.size), np.zeros(neg.size)]
    s = np.r_[pos, neg]
    assert roc_auc(pos, neg) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    fpr, tpr, thr = roc_curve(pos, neg)
    sk_fpr, sk_tpr, sk_thr = sk_roc_curve(y, s, drop_intermediate=False)
    np.testing.assert_allclose(fpr, sk_fpr)
    np.testing.assert_allclose(tpr, sk_tpr)
    np.testing.assert_allclose(thr[1:], sk_thr[1:])


def test_tpr_at_fpr_is_strict():
    # 1000 negatives: one false positive is FPR 0.001, which is NOT < 0.001.
    neg = np.arange(1000, dtype=float)
    pos = np.array([998.5, 2000.0])
    assert tpr_at_fpr(pos, neg, 0.001) == 0.5  # only the 2000 beats every negative
    assert tpr_at_fpr(pos, neg, 0.0011) == 1.0  # now one false positive is allowed


def test_perfect_and_random_separation():
    pos, neg = np.arange(10, 20.0), np.arange(0, 10.0)
    m = mia_metrics(pos, neg, bootstrap=50)
    assert m.auc == 1.0 and m.tpr_at_0_1pct_fpr == 1.0
    assert m.auc_ci95[0] <= m.auc <= m.auc_ci95[1]
    same = np.ones(10)
    assert roc_auc(same, same) == 0.5


def test_bad_inputs_are_rejected():
    with pytest.raises(ValueError, match="at least one"):
        roc_auc(np.array([]), np.array([1.0]))
    with pytest.raises(ValueError, match="NaN"):
        roc_auc(np.array([np.nan]), np.array([1.0]))
    with pytest.raises(ValueError, match="max_fpr"):
        tpr_at_fpr(np.array([1.0]), np.array([0.0]), 0.0)
