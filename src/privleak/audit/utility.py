"""Utility of an arm: log-perplexity and perplexity from the shared scoring pass,
and the utility gain recovered relative to the base model and the best non-private fine-tune."""

from __future__ import annotations

import math

import numpy as np

from ..attacks.scoring import TokenScores

#: Below this many nats of held-out gain from base to best, G is a ratio of
#: noise: fine-tuning had nothing to teach, and G is left undefined.
MIN_GAIN_NATS = 0.01


def mean_nll(scores: TokenScores) -> float | None:
    """L = −(1/T) Σ_t log p(x_t | x_<t) over every token of every text (nats); None for no tokens."""
    if scores.logprob.size == 0:
        return None
    return float(-np.mean(scores.logprob.astype(np.float64)))


def perplexity(scores: TokenScores) -> float:
    """Corpus perplexity exp(L), token-weighted over all texts (NaN for no tokens)."""
    nll = mean_nll(scores)
    return float("nan") if nll is None else float(math.exp(nll))


def gain_recovered(l_base: float | None, l_arm: float | None, l_best: float | None) -> float | None:
    """G = (L_base − L_arm) / (L_base − L_best) (Li et al. 2022 compare DP fine-tunes
    with the non-private one the same way, on loss rather than perplexity).

    None when a figure is missing or the best reference gained less than
    :data:`MIN_GAIN_NATS` over the base (then no arm has anything to recover).
    """
    if l_base is None or l_arm is None or l_best is None:
        return None
    gain = l_base - l_best
    if not math.isfinite(gain) or gain < MIN_GAIN_NATS:
        return None
    return float((l_base - l_arm) / gain)


def text_losses(scores: TokenScores) -> tuple[np.ndarray, np.ndarray]:
    """(Σ_t −log p per text, tokens per text): what a bootstrap over texts resamples."""
    counts = np.diff(scores.offsets)
    return scores.nll() * np.maximum(counts, 1), counts


def gain_interval(base: tuple[np.ndarray, np.ndarray], arm: tuple[np.ndarray, np.ndarray],
                  best: tuple[np.ndarray, np.ndarray], *, seed: int, n_boot: int = 1000,
                  level: float = 0.95) -> tuple[float, float] | None:
    """A percentile-bootstrap interval for G over the held-out texts: the same resampled texts for the base,
    the arm and the best reference (a paired bootstrap — the three models are scored on one set, so their
    errors are correlated and G's interval is far narrower than one from three independent intervals). Each
    argument is :func:`text_losses` of one model on the same texts. None when G is undefined on the data or
    on too many replicates (the best reference gains less than :data:`MIN_GAIN_NATS` there)."""
    n = len(base[0])
    if n == 0 or len(arm[0]) != n or len(best[0]) != n:
        return None
    idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))

    def loss(m: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        return m[0][idx].sum(axis=1) / np.maximum(m[1][idx].sum(axis=1), 1)

    lb, la, lr = loss(base), loss(arm), loss(best)
    gain = lb - lr
    ok = gain >= MIN_GAIN_NATS
    if ok.mean() < 0.99:
        return None
    g = (lb[ok] - la[ok]) / gain[ok]
    return float(np.quantile(g, (1 - level) / 2)), float(np.quantile(g, (1 + level) / 2))
