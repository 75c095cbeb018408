"""Score-based membership inference from the shared scoring pass.

Sign convention: every function returns scores where higher = "member".

All scores are computed from one :class:`~privleak.attacks.scoring.TokenScores`
(flat per-token arrays with per-text offsets), vectorised over texts — no
Python loop per text — so 3,000 texts × 100 tokens take milliseconds.

Definitions (DESIGN.md, "Definitions to implement exactly"); NLL(x) is the mean
over predicted tokens of −log p(x_t | x_<t):

* LOSS       (Yeom et al. 2018)       −NLL(x)
* zlib       (Carlini et al. 2021)    −NLL(x) / len(zlib.compress(x.encode("utf-8")))
* Min-k%     (Shi et al. 2024)        mean of the lowest k-fraction of log p(x_t)
* Min-k%++   (Zhang et al. 2024)      mean of the lowest k-fraction of
                                      z_t = (log p(x_t) − μ_t) / σ_t
* Reference  (Carlini et al. 2021)    NLL_ref(x) − NLL_target(x)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import math
import zlib
from collections.abc import Sequence

import numpy as np

if TYPE_CHECKING:
    from ..scoring import TokenScores



def loss_scores(scores: TokenScores) -> np.ndarray:
    """LOSS attack (Yeom et al. 2018): score(x) = −NLL(x)."""
    return -scores.nll()


def zlib_entropy(texts: Sequence[str]) -> np.ndarray:
    """len(zlib.compress(x.encode("utf-8"))) per text, in bytes (default level)."""
    return np.array([len(zlib.compress(t.encode("utf-8"))) for t in texts], dtype=np.float64)


def zlib_scores(scores: TokenScores, texts: Sequence[str]) -> np.ndarray:
    """zlib attack (Carlini et al. 2021, "Extracting training data from LLMs").

    score(x) = −NLL(x) / len(zlib.compress(x.encode("utf-8")))

    The model's log-likelihood normalised by the zlib entropy of the text, so
    texts that are merely easy (repetitive, low entropy) do not look like
    members. Higher = member. This is MIMIR's ``ZLIBAttack`` with the sign
    flipped to our convention (MIMIR divides the *loss*, lower = member).
    """
    if len(texts) != len(scores):
        raise ValueError(f"zlib_scores: {len(texts)} texts for {len(scores)} scored texts")
    return -scores.nll() / zlib_entropy(texts)


def _check_k(k: float) -> float:
    k = float(k)
    if not (0.0 < k <= 1.0) or math.isnan(k):
        raise ValueError(f"k must be a fraction in (0, 1] (e.g. 0.2 for 20 %), got {k}")
    return k


def _segment_ids(offsets: np.ndarray) -> np.ndarray:
    counts = np.diff(offsets)
    return np.repeat(np.arange(len(counts)), counts)


def k_counts(n_tokens: np.ndarray, k: float) -> np.ndarray:
    """How many tokens min-k% averages for a text of ``n_tokens`` tokens.

    ``max(1, floor(n·k))`` — MIMIR's ``int(len(scores) * k)`` (floor), but never
    fewer than one token, so short texts get their single lowest token rather
    than the NaN mean of an empty slice. A tiny tolerance keeps float products
    such as 0.29·100 = 28.999… from flooring one token short.
    """
    n = np.asarray(n_tokens, dtype=np.int64)
    kc = np.floor(n * k + 1e-9).astype(np.int64)
    return np.minimum(np.maximum(kc, 1), np.maximum(n, 1))


def _mean_lowest_k(values: np.ndarray, offsets: np.ndarray, k: float) -> np.ndarray:
    """Per text, the mean of the lowest ``k_counts`` values (vectorised)."""
    k = _check_k(k)
    offsets = np.asarray(offsets, dtype=np.int64)
    n_texts = len(offsets) - 1
    n_tok = np.diff(offsets)
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return np.zeros(n_texts)
    seg = _segment_ids(offsets)
    # Sort by value within each segment: lexsort's last key is the primary one.
    order = np.lexsort((values, seg))
    sorted_vals = values[order]
    rank = np.arange(values.size) - np.repeat(offsets[:-1], n_tok)
    kc = k_counts(n_tok, k)
    keep = rank < np.repeat(kc, n_tok)
    sums = np.bincount(seg[keep], weights=sorted_vals[keep], minlength=n_texts)
    # Texts with no tokens (never produced by the scoring pass) get 0, like TokenScores.nll.
    return np.where(n_tok > 0, sums / kc, 0.0)


def min_k_scores(scores: TokenScores, k: float = 0.2) -> np.ndarray:
    """Min-k% Prob (Shi et al. 2024, "Detecting pretraining data from LLMs").

    score(x) = mean of the lowest ``max(1, floor(k·n))`` token log-probs
    log p(x_t | x_<t) of the n predicted tokens. Higher = member (members have
    fewer very unlikely tokens). ``k`` is a fraction in (0, 1]; k = 1 gives
    −NLL (the LOSS attack). MIMIR returns the negation (lower = member).
    """
    return _mean_lowest_k(scores.logprob, scores.offsets, k)


def min_k_pp_token_z(scores: TokenScores, sigma_floor: float = 1e-6) -> np.ndarray:
    """Per-token z_t = (log p(x_t) − μ_t) / σ_t with σ_t = sqrt(var_t).

    σ_t is floored at ``sigma_floor``: a (near-)deterministic next-token
    distribution has σ_t = 0, and then log p(x_t) − μ_t is 0 when x_t is the
    predicted token (z_t = 0) or very negative otherwise (z_t → −huge, the
    right direction: an unexpected token under a confident model).
    """
    if not scores.has_moments:
        raise ValueError("min-k%++ needs the scoring pass's vocabulary moments; this pass ran with moments=False")
    lp = np.asarray(scores.logprob, dtype=np.float64)
    mu = np.asarray(scores.mu, dtype=np.float64)
    sigma = np.sqrt(np.maximum(np.asarray(scores.var, dtype=np.float64), 0.0))
    return (lp - mu) / np.maximum(sigma, sigma_floor)


def min_k_pp_scores(scores: TokenScores, k: float = 0.2) -> np.ndarray:
    """Min-k%++ (Zhang et al. 2024, "Min-K%++: improved baseline for detecting
    pre-training data from LLMs").

    Per token z_t = (log p(x_t) − μ_t)/σ_t, μ_t = Σ_v p_v log p_v,
    σ_t² = Σ_v p_v (log p_v)² − μ_t² (both from the scoring pass); score(x) =
    mean of the lowest ``max(1, floor(k·n))`` z_t. Higher = member. Matches
    MIMIR's ``MinKPlusPlusAttack`` (which sorts ascending and takes
    ``int(len·k)`` tokens, returning the negated mean) except for the sign and
    the at-least-one-token rule; σ_t = 0 is guarded (see
    :func:`min_k_pp_token_z`).
    """
    return _mean_lowest_k(min_k_pp_token_z(scores), scores.offsets, k)


def reference_scores(target_scores: TokenScores, ref_scores: TokenScores) -> np.ndarray:
    """Reference-model attack (Carlini et al. 2021; "LiRA-lite" of Mireshghallah et al. 2022).

    score(x) = NLL_ref(x) − NLL_target(x): how much more likely the target
    model finds x than a reference model that never saw it (the base model,
    or a model trained on population data). Higher = member. Both score sets
    must be over the same texts in the same order (token counts may differ if
    the tokenizers differ; only per-text NLLs are compared).
    """
    if len(target_scores) != len(ref_scores):
        raise ValueError(f"reference_scores: {len(target_scores)} target texts vs {len(ref_scores)} reference texts")
    return ref_scores.nll() - target_scores.nll()
