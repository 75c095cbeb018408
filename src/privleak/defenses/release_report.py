"""What the audit releases about the members under DP, as ``results.json`` holds it (``data_release``): the
data summary under central (ε, δ)-DP (:mod:`privleak.defenses.release`) and the frequent terms under ε-local DP
(:mod:`privleak.defenses.ldp_terms`). Noisy values and their parameters only, never a record."""

from __future__ import annotations

from typing import Literal

from ..core.typed import Delta, Epsilon, Typed


class ReleasedQuery(Typed):
    """One statistic released under central DP (:mod:`privleak.defenses.release`): noisy values only."""

    name: str
    mechanism: Literal["laplace", "gaussian"]
    sensitivity: float
    noise_scale: float
    noise_sd: float
    epsilon_alone: Epsilon | None
    labels: list[str]
    values: list[float]


class ReleasedSummary(Typed):
    """The data summary under (ε, δ)-DP: Laplace / Gaussian per statistic, composed by dp_accounting's PLD."""

    epsilon: Epsilon
    delta: Delta
    epsilon_basic_composition: Epsilon
    accountant: str
    unit: str
    n_units_exact_kept: bool
    clipping: dict[str, list[float]]
    queries: list[ReleasedQuery]
    notes: list[str] = []
    systolic_mean: float | None = None  # post-processed from the released sum and histogram

    def query(self, name: str) -> ReleasedQuery | None:
        return next((q for q in self.queries if q.name == name), None)


class LdpTerms(Typed):
    """The members' frequent terms learned under ε-local DP (:func:`privleak.defenses.ldp_terms.discover`)."""

    epsilon: Epsilon
    method: Literal["cms", "hcms"]
    k: int
    m: int
    n_users: int
    n_candidates: int
    threshold: float
    terms: list[tuple[str, float]]
    candidates_from: str
    rule: str


class DataRelease(Typed):
    """What the audit releases about the members under DP, with the ε each spent."""

    summary: ReleasedSummary | None = None
    ldp_terms: LdpTerms | None = None
    epsilon_total: Epsilon  # summary ε + LDP ε (basic composition of the two, at the summary's δ)
