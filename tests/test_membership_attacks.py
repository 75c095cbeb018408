"""zlib, min-k%, min-k%++ and reference scores against hand computation on a tiny model."""

import math
import zlib

import numpy as np
import pytest
from hand import (
    token_stats_by_hand,  # tests/ is on sys.path (pytest default import mode)
)

from privleak.attacks.membership.scores import (
    k_counts,
    loss_scores,
    min_k_pp_scores,
    min_k_scores,
    reference_scores,
    zlib_scores,
)
from privleak.attacks.scoring import TokenScores, score_texts

TEXTS = [
    "Patient Ann Lee was seen on day 3 for asthma.",
    "General advice: drink water.",
    "Bo Kim, gout, phone 555-0101, seen again on day 7 with a much longer note than the others here.",
    "x",
    "Cy Ray flu flu flu flu flu flu flu flu.",
]


_by_hand = token_stats_by_hand


def _lowest_mean(values, k):
    n = len(values)
    m = max(1, int(math.floor(n * k + 1e-9)))
    return float(np.mean(sorted(values)[:m]))


@pytest.fixture(scope="module")
def scored(tiny_handle):
    return score_texts(tiny_handle, TEXTS, max_tokens=40), [_by_hand(tiny_handle, t) for t in TEXTS]


def test_zlib_equals_hand(scored):
    scores, hand = scored
    expected = [tok.mean() / len(zlib.compress(t.encode("utf-8"))) for t, (tok, _, _) in zip(TEXTS, hand)]
    np.testing.assert_allclose(zlib_scores(scores, TEXTS), expected, rtol=1e-5)
    with pytest.raises(ValueError):
        zlib_scores(scores, TEXTS[:-1])


@pytest.mark.parametrize("k", [0.2, 0.5, 1.0, 0.05])
def test_min_k_equals_hand(scored, k):
    scores, hand = scored
    expected = [_lowest_mean(tok, k) for tok, _, _ in hand]
    np.testing.assert_allclose(min_k_scores(scores, k), expected, rtol=1e-5, atol=1e-6)


def test_min_k_one_is_loss(scored):
    scores, _ = scored
    np.testing.assert_allclose(min_k_scores(scores, 1.0), loss_scores(scores), rtol=1e-6)


@pytest.mark.parametrize("k", [0.2, 0.6])
def test_min_k_pp_equals_hand(scored, k):
    scores, hand = scored
    expected = [_lowest_mean((tok - mu) / np.sqrt(var), k) for tok, mu, var in hand]
    np.testing.assert_allclose(min_k_pp_scores(scores, k), expected, rtol=2e-3, atol=2e-3)


def test_reference_equals_hand(scored):
    scores, hand = scored
    # A "reference model" scoring the same texts: here a perturbed copy of the target's scores.
    rng = np.random.default_rng(0)
    ref = TokenScores(scores.logprob - rng.random(scores.logprob.size).astype(np.float32), scores.mu, scores.var, scores.offsets)
    # NLL_ref − NLL_target = −mean(ref lp) + mean(target lp)
    expected = [-ref.logprob[scores.tokens(i)].astype(np.float64).mean() + tok.mean() for i, (tok, _, _) in enumerate(hand)]
    np.testing.assert_allclose(reference_scores(scores, ref), expected, rtol=1e-5)
    assert (reference_scores(scores, ref) > 0).all()  # the reference finds every text less likely
    with pytest.raises(ValueError):
        reference_scores(scores, TokenScores(ref.logprob[:0], ref.mu[:0], ref.var[:0], ref.offsets[:1]))


@pytest.mark.parametrize("k", [0.0, -0.1, 1.5, 20, float("nan")])
def test_k_is_validated(scored, k):
    scores, _ = scored
    with pytest.raises(ValueError, match="k must be"):
        min_k_scores(scores, k)
    with pytest.raises(ValueError, match="k must be"):
        min_k_pp_scores(scores, k)


def test_k_counts_short_texts_and_float_products():
    np.testing.assert_array_equal(k_counts(np.array([1, 2, 4, 5, 10, 100]), 0.2), [1, 1, 1, 1, 2, 20])
    assert k_counts(np.array([100]), 0.29)[0] == 29  # 0.29*100 = 28.999…


def test_zero_variance_is_guarded():
    s = TokenScores(
        logprob=np.array([0.0, -3.0, -1.0], dtype=np.float32),
        mu=np.array([0.0, 0.0, -1.0], dtype=np.float32),
        var=np.array([0.0, 0.0, 1.0], dtype=np.float32),
        offsets=np.array([0, 2, 3]),
    )
    out = min_k_pp_scores(s, 0.5)
    assert np.isfinite(out).all() and out[0] < -1e5 and out[1] == 0.0


def test_vectorised_scores_match_a_loop():
    rng = np.random.default_rng(1)
    lengths = rng.integers(1, 200, 3000)
    offsets = np.r_[0, np.cumsum(lengths)]
    n = int(offsets[-1])
    s = TokenScores(
        logprob=-rng.exponential(2, n).astype(np.float32),
        mu=-rng.exponential(2, n).astype(np.float32),
        var=rng.exponential(1, n).astype(np.float32),
        offsets=offsets,
    )
    mk = min_k_scores(s, 0.2)  # speed against the loop: bench/bench_primitives.py
    mpp = min_k_pp_scores(s, 0.2)
    for i in rng.choice(3000, 50, replace=False):
        sl = s.tokens(i)
        assert mk[i] == pytest.approx(_lowest_mean(s.logprob[sl].astype(np.float64), 0.2), rel=1e-9)
        z = (s.logprob[sl].astype(np.float64) - s.mu[sl]) / np.sqrt(s.var[sl].astype(np.float64))
        assert mpp[i] == pytest.approx(_lowest_mean(z, 0.2), rel=1e-6)
