"""Choosing a PII candidate by full-window perplexity (Lukas et al. 2023, §III-C/D).

Reconstruction and inference both insert every candidate into the masked
window and keep the candidate whose window has the lowest perplexity,
exp(NLL) with NLL = mean token −log p (:meth:`TokenScores.nll`). All windows
of all slots go through one pass that runs each shared left context once
(:func:`~.prefix_scoring.shared_prefix_nll`).

The reference implementation kept candidates in a dict keyed by perplexity,
so candidates with equal perplexity overwrote each other, and its final
choice was not always the minimum. Here scores stay aligned with the
candidate list, the choice is the arg-min, and ties keep the first
candidate in the (truth-independent) candidate order; the number tied is
reported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np
from pydantic import computed_field

from ..core.stats import rate_ci
from ..core.typed import Typed, ratio
from .base import Finding, Policy, count_finding

if TYPE_CHECKING:
    from ..models.handle import ModelHandle


def choose_min(nlls: Sequence[float]) -> tuple[int, int]:
    """(index of the lowest NLL, number of candidates sharing that minimum); NaNs never win.

    Raises ValueError for an empty list or when every score is NaN.
    """
    arr = np.asarray(nlls, dtype=float)
    if arr.size == 0 or np.all(np.isnan(arr)):
        raise ValueError("no scorable candidate")
    m = np.nanmin(arr)
    tied = np.flatnonzero(arr == m)
    return int(tied[0]), int(len(tied))


def score_windows(handle: ModelHandle, windows: Sequence[Sequence[str]], desc: str = "scoring PII candidates") -> list[np.ndarray]:
    """Mean NLL of every window, ``out[i][j]`` for ``windows[i][j]``; duplicates scored once.

    A slot's windows share their left context: :func:`~.prefix_scoring.shared_prefix_nll` runs it once per
    slot (the same NLLs as the plain scoring pass, to float tolerance)."""
    from .prefix_scoring import shared_prefix_nll

    uniq = list(dict.fromkeys(w for ws in windows for w in ws))
    pos = {w: i for i, w in enumerate(uniq)}
    # One call per slot (its windows' common left context is its prefix); a window shared by two slots is
    # scored with the first.
    owner: dict[int, int] = {}
    for k, ws in enumerate(windows):
        for w in ws:
            owner.setdefault(pos[w], k)
    groups = [[i for i in sorted({pos[w] for w in ws}) if owner[i] == k] for k, ws in enumerate(windows)]
    nll = shared_prefix_nll(handle, uniq, desc=desc, groups=[g for g in groups if g]) if uniq else np.zeros(0)
    return [np.array([nll[pos[w]] for w in ws], dtype=float) for ws in windows]


# ----------------------------------------------------------------------------
# accuracy tables shared by reconstruction and inference


class AccuracyCell(Typed):
    """Accuracy of one PII type for members, and the same attack on non-members (the floor).

    ``*_chance_sum``: Σ over slots of P(a uniformly random pick from the
    candidate set is the true value) = 1{true ∈ C}/|C| — the chance level is
    its mean.
    """

    label: str
    n_members: int = 0
    member_correct: int = 0
    member_true_in_candidates: int = 0
    member_chance_sum: float = 0.0
    member_candidates_sum: int = 0
    member_ties: int = 0  # slots whose minimum was shared by > 1 candidate
    n_non_members: int = 0
    non_member_correct: int = 0
    non_member_true_in_candidates: int = 0
    non_member_chance_sum: float = 0.0
    non_member_candidates_sum: int = 0
    non_member_ties: int = 0

    def add(self, side: str, correct: bool, true_in: bool, n_candidates: int, tied: int) -> None:
        p = "member" if side == "member" else "non_member"
        n_attr = "n_members" if side == "member" else "n_non_members"
        setattr(self, n_attr, getattr(self, n_attr) + 1)
        setattr(self, f"{p}_correct", getattr(self, f"{p}_correct") + bool(correct))
        setattr(self, f"{p}_true_in_candidates", getattr(self, f"{p}_true_in_candidates") + bool(true_in))
        setattr(self, f"{p}_chance_sum", getattr(self, f"{p}_chance_sum") + (1.0 / n_candidates if true_in and n_candidates else 0.0))
        setattr(self, f"{p}_candidates_sum", getattr(self, f"{p}_candidates_sum") + int(n_candidates))
        setattr(self, f"{p}_ties", getattr(self, f"{p}_ties") + (tied > 1))

    @computed_field
    @property
    def accuracy(self) -> float | None:
        return ratio(self.member_correct, self.n_members)

    @computed_field
    @property
    def accuracy_ci(self) -> tuple[float, float] | None:
        return rate_ci(self.member_correct, self.n_members)

    @computed_field
    @property
    def non_member_accuracy(self) -> float | None:
        return ratio(self.non_member_correct, self.n_non_members)

    @computed_field
    @property
    def chance(self) -> float | None:
        return ratio(self.member_chance_sum, self.n_members)

    @computed_field
    @property
    def non_member_chance(self) -> float | None:
        return ratio(self.non_member_chance_sum, self.n_non_members)

    @computed_field
    @property
    def mean_candidates(self) -> float | None:
        return ratio(self.member_candidates_sum, self.n_members)

    def finding(self, attack: str, what: str, control: AccuracyCell | None, policy: Policy) -> Finding:
        return count_finding(attack, what, self.member_correct, self.n_members, self.non_member_correct,
                             self.n_non_members, (control.member_correct, control.n_members) if control else None, policy,
                             "member slots")


def pool(cells: Sequence[AccuracyCell], label: str = "ALL") -> AccuracyCell:
    out = AccuracyCell(label=label)
    for c in cells:
        for f in AccuracyCell.model_fields:
            if f != "label":
                setattr(out, f, getattr(out, f) + getattr(c, f))
    return out
