"""Utility of an arm: log-perplexity and perplexity from the shared scoring pass,
and the utility gain recovered relative to the base model and the best non-private fine-tune."""

from __future__ import annotations

from typing import TYPE_CHECKING

import math

import numpy as np

if TYPE_CHECKING:
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


def text_losses(scores: TokenScores, keep: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(Σ_t −log p per text, tokens per text): what a bootstrap over texts resamples. ``keep``: a mask over
    the pass's predicted tokens (flat, as ``scores.logprob``); only those count (e.g. tokens outside PII)."""
    if keep is None:
        counts = np.diff(scores.offsets)
        return scores.nll() * np.maximum(counts, 1), counts
    lp = np.where(keep, scores.logprob.astype(np.float64), 0.0)
    cum_lp = np.concatenate([[0.0], np.cumsum(lp)])
    cum_n = np.concatenate([[0], np.cumsum(keep.astype(np.int64))])
    starts, ends = scores.offsets[:-1], scores.offsets[1:]
    return -(cum_lp[ends] - cum_lp[starts]), cum_n[ends] - cum_n[starts]


def pii_token_mask(tokenizer, texts: list[str], spans: list[list[tuple[int, int]]], scores: TokenScores,
                   lead: int) -> np.ndarray:
    """True for every predicted token of the scoring pass that overlaps a PII span of its text.

    The pass scores ``lead`` format tokens, the text's own tokens, then the format's tail (truncated to the
    model's context); the text's token b is the pass's predicted token ``lead + b − 1`` (the first has nothing
    before it when there is no lead). A token overlaps a span when their character ranges intersect — a
    byte-level BPE token " Smith" carries the space before the name and counts as PII.
    """
    out = np.zeros(len(scores.logprob), dtype=bool)
    if not any(spans):
        return out
    enc = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)
    for i, (offsets, text_spans) in enumerate(zip(enc["offset_mapping"], spans)):
        if not text_spans:
            continue
        start, end = int(scores.offsets[i]), int(scores.offsets[i + 1])
        for b, (a, z) in enumerate(offsets):
            j = lead + b - 1
            if j < 0 or start + j >= end:
                continue
            if any(a < s_end and s_start < z for s_start, s_end in text_spans):
                out[start + j] = True
    return out


def mean_loss(losses: tuple[np.ndarray, np.ndarray]) -> float | None:
    """L over the tokens :func:`text_losses` counted (None: none)."""
    n = int(losses[1].sum())
    return float(losses[0].sum() / n) if n else None


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
