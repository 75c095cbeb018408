"""Does an arm know its planted secrets? The exposure verdict as a test with a stated error rate.

A canary's secret is ranked among |R| − 1 candidates drawn from the same space; for a model that never saw
it the rank is uniform, so rank/|R| is an exact p-value per canary (:func:`rank_p_values`). The verdict
combines them (:func:`chance_p_value`) and, when the control's own ranks are not uniform, also asks for a
paired sign-flip test over the control's exposures (:func:`exposure_test`) — replacing a fixed "+1 bit over
the floor" line on a dozen canaries, which flipped with noise.

Near chance is an exact rank-based claim (:func:`exposure_within`): for a model that never saw a secret, P[its
exposure ≥ b bits] = 2^−b; "within m bits of chance" is shown when, at every exposure level b the audit's size can
speak to, the share of canaries reaching it is shown below 2^(m − b) — no level reached more than 2^m times as
often as by chance. Each level is an exact binomial test (valid for canaries of different repetition counts by
Hoeffding's 1956 bound on sums of unlike Bernoullis), the levels are joined as an intersection–union test, and
which levels the claim covers is decided by the number of canaries and candidates alone (the uniform-rank null).
It replaces a paired t on a dozen skewed exposure differences, whose false-equivalence rate at its margin was
7.2 % at α = 0.05 (issue 44).
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Sequence
from typing import Literal, Protocol

import functools
import math

import numpy as np
from scipy import stats as st

from ..core.stats import Equivalence, _needed, bootstrap_mean_ci, fisher_combined_p, min_p_combined, sign_flip_p


class CanaryExposure(Protocol):
    """What the tests read of one canary's exposure (:class:`.exposure.CanaryExposure` has it)."""

    canary_id: str
    rank: float
    n_candidates: int
    exposure: float


class ExposureResult(Protocol):
    """What the tests read of an arm's exposure result (:class:`.exposure.ExposureResult` has it)."""

    @property
    def canaries(self) -> Sequence[CanaryExposure]: ...

    @property
    def chance_exposure(self) -> float: ...


@dataclass(frozen=True)
class ExposureTest:
    """:func:`exposure_test`'s answer.

    ``p_chance``: the arm's canary ranks against uniform; ``control_p_chance``: the control's, on the
    same canaries (None without a control); ``p_control``: the paired sign-flip test of the arm's
    exposures over the control's (None without a control); ``mean_diff`` and ``mean_diff_ci``: the
    mean exposure minus the control's on the same canaries (``versus`` "control") or minus the
    uniform rank's expected exposure (``versus`` "chance"), with a 95 % percentile bootstrap interval
    over canaries. ``p_leak``: the p-value behind ``leaks`` (``p_chance``, or the larger of ``p_chance`` and
    ``p_control`` when the control's own ranks are not uniform: both must reject); ``equivalence``: TOST of
    the exposure within ``margin`` bits of chance (:func:`exposure_within`, exact)."""

    n: int
    alpha: float
    p_chance: float
    control_p_chance: float | None
    p_control: float | None
    versus: Literal["control", "chance"]
    mean_diff: float
    mean_diff_ci: tuple[float, float]
    leaks: bool
    p_leak: float = 1.0
    equivalence: Equivalence | None = None


def rank_p_values(canaries: Sequence[CanaryExposure]) -> np.ndarray:
    """Per canary, P[a secret the model knows nothing about ranks this high] = rank / |R|.

    The true secret and its |R| − 1 candidates are distinct uniform draws from one space, so for a
    model that never saw the secret its rank is uniform on 1..|R|: P[rank ≤ r] = r/|R|, i.e.
    P[exposure ≥ x] = 2^{−x}. (Mid-ranks split exact ties of log-likelihoods, which continuous
    scores make vanishingly rare.)"""
    return np.array([min(1.0, max(c.rank, 1.0) / c.n_candidates) for c in canaries], dtype=np.float64)


def chance_p_value(canaries: Sequence[CanaryExposure]) -> float:
    """One-sided p-value of "these canaries' ranks are uniform": 2 · min(Fisher, Tippett), capped at 1.

    Fisher's combination (−2 Σ ln p_i ~ χ²_{2n}, i.e. the sum of exposures) catches many canaries a
    little above chance; Tippett's (1 − (1 − min p_i)^n) one canary ranked first of 10,000, which
    Fisher dilutes among a dozen. The factor 2 is the Bonferroni price of using both. Given the
    model, canaries' candidates are drawn independently, so the ranks are independent under the null."""
    p = rank_p_values(canaries)
    return min(1.0, 2.0 * min(fisher_combined_p(p), min_p_combined(p)))


def exposure_test(arm: ExposureResult, control: ExposureResult | None, alpha: float = 0.05,
                  seed: int = 0, margin: float = 1.0) -> ExposureTest:
    """Does the arm know its planted secrets? A test with a stated error rate.

    leaks ⇔ p_chance ≤ α, and, when the control's own ranks are *not* uniform (its p_chance ≤ α:
    the candidates are not exchangeable with the secret, e.g. a format artefact), also the paired
    sign-flip test of the arm's exposures over the control's (matched by canary) at α. False leak
    rate: ≤ α exactly when the control's ranks are uniform (the chance test is exact), ≤ α as far
    as the paired test is valid otherwise (both must reject). The mean difference and its bootstrap
    interval are reported against the control when there is one, else against chance.

    Near chance is a separate claim, exact and read against the uniform rank (:func:`exposure_within`). A dozen
    canaries are not near chance by not leaking (issue 37: dp-8 read NEAR CHANCE at 2.41 bits and SOME LEAKAGE
    at 2.47, against a chance of 1.44); at that size the claim is too small to make, and the verdict says so."""
    if not arm.canaries:
        raise ValueError("no canaries to test")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    p_chance = chance_p_value(arm.canaries)
    exp = np.array([c.exposure for c in arm.canaries])
    by_id = {c.canary_id: c for c in control.canaries} if control is not None else {}
    pairs = [(c, by_id[c.canary_id]) for c in arm.canaries if c.canary_id in by_id]
    if pairs:
        ctrl = [b for _, b in pairs]
        control_p = chance_p_value(ctrl)
        d = np.array([a.exposure - b.exposure for a, b in pairs])
        p_control = sign_flip_p(d, "greater", seed=seed)
        versus: Literal["control", "chance"] = "control"
        diff, ci = float(d.mean()), bootstrap_mean_ci(d, 0.05, seed=seed)
        leaks = p_chance <= alpha and (control_p > alpha or p_control <= alpha)
        p_leak = p_chance if control_p > alpha else max(p_chance, p_control)
    else:
        control_p = p_control = None
        versus = "chance"
        x = exp - arm.chance_exposure
        d = x
        diff, ci = float(x.mean()), bootstrap_mean_ci(x, 0.05, seed=seed)
        leaks = p_chance <= alpha
        p_leak = p_chance
    eq = exposure_within(arm.canaries, margin, alpha) if 0.0 < alpha < 0.5 else None
    return ExposureTest(n=len(arm.canaries), alpha=alpha, p_chance=p_chance, control_p_chance=control_p,
                        p_control=p_control, versus=versus, mean_diff=diff, mean_diff_ci=ci, leaks=bool(leaks),
                        p_leak=float(p_leak), equivalence=eq)


@functools.lru_cache(maxsize=4096)
def _level_cutoff(n: int, q: float, alpha: float) -> float:
    """The largest count c ≤ n·q − 1 with P[Binomial(n, q) ≤ c] ≤ α (−1: none). Rejecting "share ≥ q" when at
    most c of n canaries reach the level is exact for unlike canaries too: for a sum S of independent Bernoullis
    with mean n·p̄, P[S ≤ c] ≤ P[Binomial(n, p̄) ≤ c] when c ≤ n·p̄ − 1 (Hoeffding 1956, Thm 4)."""
    c = float(st.binom.ppf(alpha, n, q))  # smallest c with cdf(c) ≥ α
    if st.binom.cdf(c, n, q) > alpha:
        c -= 1
    return min(c, math.floor(n * q - 1))


@functools.lru_cache(maxsize=4096)
def _levels(n: int, n_candidates: int, margin: float, alpha: float) -> tuple[int, ...]:
    """The exposure levels b (whole bits) the claim covers at these sizes: those where 2^(m − b) < 1 and a
    uniform-rank model's median count of canaries at or above b bits would be shown below 2^(m − b) —
    decided by n, |R| and the margin alone."""
    out = []
    for b in range(1, int(math.floor(math.log2(n_candidates))) + 1):
        q = 2.0 ** (margin - b)
        if q >= 1.0:
            continue
        if st.binom.median(n, 2.0 ** -b) <= _level_cutoff(n, q, alpha):
            out.append(b)
    return tuple(out)


def exposure_within(canaries: Sequence[CanaryExposure], margin: float = 1.0, alpha: float = 0.05) -> Equivalence:
    """Are the planted secrets within ``margin`` bits of chance? Shown when, for every exposure level b of
    :func:`_levels`, N_b = #{canaries with rank/|R| ≤ 2^−b} (exposure ≥ b bits) is at most the exact binomial
    cutoff of "share ≥ 2^(m − b)" (:func:`_level_cutoff`). Intersection–union over the levels: the
    false-equivalence rate at the margin is ≤ α. ``p_value``: the largest level's binomial p; ``judgeable``: some
    level can be covered at these sizes; ``estimate``: mean exposure minus the uniform rank's expectation.
    ``n_needed``: canaries that would show it at the observed shares."""
    if not margin > 0 or not 0.0 < alpha < 0.5:
        raise ValueError(f"need margin > 0 and 0 < α < 0.5, got {margin}, {alpha}")
    if not canaries:
        raise ValueError("no canaries")
    size = min(c.n_candidates for c in canaries)
    n = len(canaries)
    u = rank_p_values(canaries)
    exp_mean = float(np.mean([c.exposure for c in canaries]))
    chance = math.log2(size) - float(np.mean(np.log2(np.arange(1, size + 1))))
    counts = {b: int((u <= 2.0 ** -b + 1e-12).sum()) for b in range(1, int(math.log2(size)) + 1)}
    levels = _levels(n, size, margin, alpha)

    def shows(scale: float = 1.0) -> bool:  # at n·scale canaries (a whole number) with the observed shares
        m = max(1, int(round(n * scale)))
        lv = _levels(m, size, margin, alpha)
        return bool(lv) and all(counts[b] * m / n <= _level_cutoff(m, 2.0 ** (margin - b), alpha) for b in lv)

    eq = shows()
    p = max((float(st.binom.cdf(counts[b], n, 2.0 ** (margin - b))) for b in levels), default=1.0)
    needed = _needed(n, shows, limit=10**5) if not eq else None  # None: no size would show these shares
    worst = max(levels, key=lambda b: counts[b] / (n * 2.0 ** -b), default=None)
    method = ("exact binomial per exposure level (" + (f"{levels[0]}–{levels[-1]} bits" if levels else "no level")
              + ")" + (f"; most at {worst} bits: {counts[worst]} of {n}, chance {n * 2.0 ** -worst:.2g}"
                       if worst is not None else ""))
    return Equivalence(estimate=exp_mean - chance, lower=None, upper=None, margin=margin, alpha=alpha,
                       p_value=min(1.0, p), equivalent=bool(eq and levels), one_sided=True, n=n, n_needed=needed,
                       method=method, judgeable=bool(levels))
