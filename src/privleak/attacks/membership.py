"""Score-based membership inference from the shared scoring pass.

Sign convention: every function returns scores where higher = "member".
"""

from __future__ import annotations

import numpy as np

from .scoring import TokenScores


def loss_scores(scores: TokenScores) -> np.ndarray:
    """LOSS attack (Yeom et al. 2018): score(x) = −NLL(x)."""
    return -scores.nll()
