"""Utility of an arm: perplexity from the shared scoring pass."""

from __future__ import annotations

import math

import numpy as np

from ..attacks.scoring import TokenScores


def perplexity(scores: TokenScores) -> float:
    """Corpus perplexity exp(−Σ_tokens log p / #tokens), token-weighted over all texts."""
    if scores.logprob.size == 0:
        return float("nan")
    return float(math.exp(-float(np.mean(scores.logprob.astype(np.float64)))))
