"""One-run ε lower bounds from canaries inserted independently with probability ½.

Steinke, Nasr & Jagielski (NeurIPS 2023, "Privacy auditing with one (1)
training run", arXiv 2305.08846): m canaries, each included in the training
data independently with probability ½ (S_i ∈ {in, out}). After training, an
auditor who sees only the model guesses T_i ∈ {in, out, abstain}; say r
guesses, v of them correct. If the training algorithm is ε-DP, then the
number of correct guesses is stochastically dominated by Binomial(r,
e^ε/(1+e^ε)) — every canary behaves at best like ε-randomised response
(their Theorem 3.1). For (ε, δ)-DP (their Theorem 5.2 / Algorithm 3)

    P[W ≥ v] ≤ P[B ≥ v] + 2 m δ · max_{i=1..v} P[v − i ≤ B < v] / i,
    B ~ Binomial(r, e^ε/(1+e^ε)),

so ε is rejected at level α when the right-hand side is < α, and the
largest rejected ε is a (1 − α)-confidence lower bound on the true ε.

Mahloujifar, Melis & Chaudhuri (2024, "Auditing f-differential privacy in
one run", arXiv 2410.22235) bound the same event for an f-DP mechanism. With
f = G_μ, the trade-off function of μ-Gaussian DP (Dong, Roth & Su 2022),
the observed guesses refute "the training is μ-GDP" for every μ below a
threshold: :func:`gdp_mu_lower_bound` returns that μ_lb. It is a bound on
μ, **not on ε**: μ-GDP is a stronger claim than the (ε, δ)-DP an accountant
certifies (an exactly ε-DP Laplace mechanism is not μ-GDP at the μ whose
Gaussian has the same (ε, δ), and its "ε under Gaussian f-DP" exceeded the
true ε in most simulated runs: issue 26), so μ_lb is compared with the μ the
DP-SGD run implies by the central limit theorem (:func:`dpsgd_mu_clt`, an
approximation, not a guarantee) and is never an alarm.

How many guesses: the auditor picks the k canaries with the highest scores
as "in" (and, in the two-sided design, the k lowest as "out"). k must not be
chosen by looking at which guesses were right; :func:`one_run_audit` tries a
fixed grid of k chosen from m alone and pays for the choice with a union
(Bonferroni) bound, α / |grid| per candidate, so the maximum over the grid is
still a (1 − α)-confidence bound.

Why one model's canaries may be counted as independent trials: they may
not in general (the model couples them), but Steinke et al.'s Theorem 3.1 /
5.2 proves that when the m inclusion bits are independent fair coins and the
training is (ε, δ)-DP in each canary, the number of correct guesses is
stochastically dominated by the binomial above, *whatever* the dependence
the training creates. That is why the audit canaries are inserted
independently with probability ½ and never chosen by looking at the bits.

As an alarm (:mod:`privleak.audit.alarms`): :func:`one_run_p_value` is the
p-value of "this training is (ε, δ)-DP for each canary" at the claimed ε,
with the union over the guess grid paid inside it.

Tests (``tests/test_one_run.py``, ``tests/test_alarms.py``) check the bound
against values computed from the paper's formula, its limit when every guess
is right, and that it exceeds the true ε of simulated ε-DP randomised
response (and the true μ of μ-GDP Gaussian scores) in at most an α fraction
of seeds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, special, stats

__all__ = ["OneRunBound", "OneRunAudit", "dpsgd_mu_clt", "gaussian_delta", "gaussian_mu", "gdp_mu_lower_bound",
           "reconstruction_counts", "reconstruction_grid",
           "gdp_p_value", "guess_counts", "guess_grid", "one_run_audit", "one_run_p_value", "steinke_epsilon", "steinke_p_value"]


def _check_counts(m: int, r: int, v: int) -> None:
    if not (0 <= v <= r <= m):
        raise ValueError(f"need 0 ≤ correct ≤ guesses ≤ canaries, got v={v}, r={r}, m={m}")


def steinke_p_value(m: int, r: int, v: int, epsilon: float, delta: float = 0.0) -> float:
    """P[≥ v of r guesses correct] under the null "(ε, δ)-DP" (Steinke et al. 2023, Thm 5.2).

    β = P[B ≥ v] with B ~ Binomial(r, e^ε/(1+e^ε)); with δ > 0 add
    2 m δ · max_{1≤i≤v} P[v − i ≤ B < v] / i. Capped at 1.
    """
    _check_counts(m, r, v)
    if epsilon < 0 or not 0.0 <= delta <= 1.0:
        raise ValueError(f"need ε ≥ 0 and δ in [0, 1], got {epsilon}, {delta}")
    q = float(special.expit(epsilon))  # accuracy of ε-randomised response
    beta = float(stats.binom.sf(v - 1, r, q))
    if delta == 0.0 or v == 0:
        return min(beta, 1.0)
    # P[v − i ≤ B < v] = Σ_{j=v−i}^{v−1} pmf(j): one pmf vector, cumulated from j = v − 1 down.
    window = np.cumsum(stats.binom.pmf(np.arange(v - 1, -1, -1), r, q))
    alpha = float(np.max(window / np.arange(1, v + 1)))
    return min(beta + 2.0 * m * delta * alpha, 1.0)


def one_run_p_value(m: int, counts: list[tuple[int, int]], epsilon: float, delta: float = 0.0) -> float:
    """The p-value of "the training is (ε, δ)-DP for each canary" from a fixed guess grid.

    ``counts``: (guesses r, correct v) for every candidate of the grid (fixed by m
    alone, :func:`guess_grid`). The union (Bonferroni) bound over the grid:
    p = min(1, |grid| · min_g :func:`steinke_p_value` (m, r_g, v_g, ε, δ)), so
    P[p ≤ a] ≤ a for every a under the null, whichever candidate is smallest.
    p ≤ a exactly when the bound :func:`steinke_epsilon` at level a / |grid|
    exceeds ε (up to its bisection tolerance).
    """
    if not counts:
        raise ValueError("no guess counts")
    best = min(steinke_p_value(m, r, v, epsilon, delta) for r, v in counts)
    return min(1.0, len(counts) * best)


def _largest_rejected(p_value, alpha: float, hi_start: float = 1.0, tol: float = 1e-6) -> float:
    """The largest ε ≥ 0 with p_value(ε) < alpha (p_value increases with ε); 0 if none."""
    if not p_value(0.0) < alpha:
        return 0.0
    lo, hi = 0.0, hi_start
    while p_value(hi) < alpha:
        lo, hi = hi, 2.0 * hi
        if hi > 1e3:  # every guess right with r → ∞: no finite bound is refuted; cap
            return lo
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if p_value(mid) < alpha:
            lo = mid
        else:
            hi = mid
    return lo


def steinke_epsilon(m: int, r: int, v: int, alpha: float = 0.05, delta: float = 0.0) -> float:
    """(1 − alpha)-confidence lower bound on ε from v correct of r guesses over m canaries.

    The largest ε that :func:`steinke_p_value` rejects at level ``alpha``
    (0 when even ε = 0 is not rejected). With δ = 0 and v = r (all guesses
    right) it solves (e^ε/(1+e^ε))^r = alpha: ε = logit(alpha^(1/r)).
    """
    _check_counts(m, r, v)
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if r == 0:
        return 0.0
    return _largest_rejected(lambda e: steinke_p_value(m, r, v, e, delta), alpha)


# ----------------------------------------------------------------------------- μ-GDP (Gaussian f-DP)

def gaussian_delta(mu: float, epsilon: float) -> float:
    """δ(ε) of μ-GDP (Dong, Roth & Su 2022, Cor. 2.13; Balle & Wang 2018):
    Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)."""
    if mu <= 0:
        return 0.0
    # e^ε·Φ(x) as exp(ε + log Φ(x)): e^ε alone overflows past ε ≈ 709, the product does not.
    return float(stats.norm.cdf(-epsilon / mu + mu / 2)
                 - math.exp(epsilon + float(stats.norm.logcdf(-epsilon / mu - mu / 2))))


def gaussian_mu(epsilon: float, delta: float) -> float:
    """The μ of the Gaussian mechanism that is exactly (ε, δ)-DP (μ = sensitivity / σ)."""
    if not 0.0 < delta < 1.0:
        raise ValueError(f"the Gaussian mechanism needs 0 < δ < 1, got {delta}")
    if epsilon <= 0:
        # ε = 0 with δ > 0: the μ whose total variation is δ.
        return float(optimize.brentq(lambda mu: gaussian_delta(mu, 0.0) - delta, 1e-12, 100.0))
    if gaussian_delta(1e-12, epsilon) >= delta:
        return 1e-12
    hi = 1.0
    while gaussian_delta(hi, epsilon) < delta:
        hi *= 2.0
        if hi > 1e4:
            return hi
    return float(optimize.brentq(lambda mu: gaussian_delta(mu, epsilon) - delta, 1e-12, hi, xtol=1e-12))


def dpsgd_mu_clt(sigma: float, sample_rate: float, steps: int) -> float:
    """The μ of μ-GDP that DP-SGD approaches by the central limit theorem (Bu, Dong, Long & Su 2020,
    "Deep learning with Gaussian differential privacy", Thm 5 / Dong, Roth & Su 2022, Cor. 5.4):

        μ ≈ q · √(T · (e^{1/σ²} − 1))

    for noise multiplier σ, Poisson sampling rate q and T steps. An approximation (exact only in
    the limit q → 0, T → ∞ with q√T fixed), not a guarantee: it is the figure a μ-GDP lower bound
    is read against, never the basis of an alarm."""
    if sigma <= 0 or not 0.0 < sample_rate <= 1.0 or steps < 1:
        raise ValueError(f"need σ > 0, 0 < q ≤ 1 and T ≥ 1, got σ={sigma}, q={sample_rate}, T={steps}")
    return float(sample_rate * math.sqrt(steps * math.expm1(1.0 / sigma**2)))


def _gdp_falsified(m: int, r: int, v: int, alpha: float, mu: float) -> float:
    """Positive when v correct of r guesses refute μ-GDP at level alpha (Mahloujifar et al. 2024).

    Start from the rarest tail: the correct and incorrect fractions the event
    needs, scaled by alpha (r_ = alpha·v/m, h = alpha·(r − v)/m), then for
    i = v−1 … 0 raise h to the trade-off function's inverse blow-up of r_
    (x ↦ Φ(Φ⁻¹(x) − μ)), and r_ by the share i/(r − i) of that increase.
    The claim survives only if r_ + h can reach r/m.
    """
    corr = alpha * v / m
    inc = alpha * (r - v) / m
    for i in range(v - 1, -1, -1):
        inc_new = max(inc, float(special.ndtr(special.ndtri(corr) - mu))) if corr > 0 else inc
        if inc_new == inc:
            break  # neither can change again
        corr = min(corr + (i / (r - i)) * (inc_new - inc), 1.0)
        inc = inc_new
    return corr + inc - r / m


def gdp_mu_lower_bound(m: int, r: int, v: int, alpha: float = 0.05, mu_max: float = 64.0) -> float:
    """(1 − alpha)-confidence lower bound on μ of μ-GDP (Mahloujifar, Melis & Chaudhuri 2024):
    the largest μ whose Gaussian trade-off function G_μ the observed guesses refute; 0 when none is.

    A bound on μ, not on ε: it refutes "the training is μ-GDP", which (ε, δ)-DP does not imply.
    Capped at ``mu_max`` (every guess right refutes every μ the recursion can resolve)."""
    _check_counts(m, r, v)
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if r == 0 or v == 0:
        return 0.0

    def refuted(mu: float) -> bool:
        return _gdp_falsified(m, r, v, alpha, mu) > 0

    if not refuted(0.0):
        return 0.0
    lo, hi = 0.0, 1.0
    while refuted(hi):
        lo, hi = hi, 2.0 * hi
        if hi > mu_max:
            return lo
    while hi - lo > 1e-4:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if refuted(mid) else (lo, mid)
    return lo


def gdp_p_value(m: int, counts: list[tuple[int, int]], mu: float) -> float:
    """The p-value of "the training is μ-GDP" from a fixed guess grid (Mahloujifar et al. 2024).

    Per candidate, the smallest level a at which :func:`_gdp_falsified` refutes μ (the recursion's
    starting mass grows with a, so refutation only gets easier: bisection on log a); then the union
    over the grid, min(1, |grid| · min). A diagnostic: μ-GDP is not what an accountant certifies."""
    if mu < 0:
        raise ValueError(f"need μ ≥ 0, got {mu}")
    if not counts:
        raise ValueError("no guess counts")

    def one(r: int, v: int) -> float:
        _check_counts(m, r, v)
        if r == 0 or v == 0:
            return 1.0
        refuted = lambda log_a: _gdp_falsified(m, r, v, math.exp(log_a), mu) > 0  # noqa: E731
        lo, hi = -700.0, 0.0
        if not refuted(hi):
            return 1.0
        if refuted(lo):
            return 0.0
        for _ in range(50):
            mid = 0.5 * (lo + hi)
            lo, hi = (lo, mid) if refuted(mid) else (mid, hi)
        return math.exp(hi)

    return min(1.0, len(counts) * min(one(r, v) for r, v in counts))


# ----------------------------------------------------------------------------- the audit

def guess_grid(m: int) -> list[tuple[int, int]]:
    """Candidate (k_in, k_out) guess counts, fixed by m alone (never by the outcome).

    Two-sided, as Steinke et al. guess: the top k and the bottom k scores for
    2k ∈ {5 %, 20 %, 50 %, 100 %} of m — few guesses for a weak signal (a DP
    arm), all of them for a strong one (an undefended arm). Kept to four
    because every extra candidate costs the union bound α/|grid|, and with
    δ > 0 Theorem 5.2's 2mδ term makes that cost heavy: with the default
    δ ≈ 1/(10 n) a 12-candidate grid capped a perfect auditor near ε ≈ 2.8.
    """
    if m < 1:
        raise ValueError(f"need at least one canary, got m={m}")
    out: list[tuple[int, int]] = []
    for frac in (0.05, 0.2, 0.5, 1.0):
        k = int(round(frac * m / 2))
        pair = (k, k) if k >= 1 else (1, 0)
        if pair not in out and sum(pair) <= m:
            out.append(pair)
    return out


@dataclass(frozen=True)
class OneRunBound:
    """One candidate (k_in, k_out): its guesses, correct ones and bounds (each at ``alpha_each``)."""

    k_in: int
    k_out: int
    guesses: int
    correct: int
    epsilon_steinke: float
    mu_gdp_lb: float | None


@dataclass(frozen=True)
class OneRunAudit:
    """The one-run audit of one model: the bounds at 1 − alpha, and every candidate behind them.

    ``epsilon_steinke``: the (ε, δ)-DP lower bound; ``mu_gdp_lb``: the μ-GDP lower bound (a μ, never an ε)."""

    m: int
    n_in: int
    alpha: float
    alpha_each: float
    delta: float
    epsilon_steinke: float
    mu_gdp_lb: float | None
    best_steinke: OneRunBound
    candidates: list[OneRunBound] = field(default_factory=list)

    @property
    def counts(self) -> list[tuple[int, int]]:
        """(guesses, correct) of every candidate: what :func:`one_run_p_value` takes."""
        return [(c.guesses, c.correct) for c in self.candidates]


def _checked(scores: np.ndarray, included: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    scores = np.asarray(scores, dtype=np.float64).ravel()
    included = np.asarray(included, dtype=bool).ravel()
    if scores.shape != included.shape:
        raise ValueError(f"scores and inclusion bits differ in length: {scores.size} vs {included.size}")
    if scores.size == 0:
        raise ValueError("no canaries to audit")
    if not np.isfinite(scores).all():
        raise ValueError("canary scores contain NaN or infinity")
    return scores, included


def guess_counts(scores: np.ndarray, included: np.ndarray,
                 grid: list[tuple[int, int]] | None = None) -> list[tuple[int, int, int, int]]:
    """(k_in, k_out, guesses, correct) for every candidate of ``grid`` (default :func:`guess_grid`).

    Guess "in" for the k_in highest scores, "out" for the k_out lowest, abstain on the rest, and
    count the correct guesses against ``included``. Ties in the scores are broken by a fixed
    permutation (index order), not by the outcome."""
    scores, included = _checked(scores, included)
    m = scores.size
    grid = guess_grid(m) if grid is None else list(grid)
    inc_sorted = included[np.argsort(-scores, kind="stable")]  # highest first
    out = []
    for k_in, k_out in grid:
        if k_in + k_out > m:
            raise ValueError(f"{k_in} + {k_out} guesses exceed the {m} canaries")
        v = int(inc_sorted[:k_in].sum()) + int((~inc_sorted[m - k_out:]).sum() if k_out else 0)
        out.append((k_in, k_out, k_in + k_out, v))
    return out


def one_run_audit(scores: np.ndarray, included: np.ndarray, *, alpha: float = 0.05, delta: float = 0.0,
                  gdp: bool = True, grid: list[tuple[int, int]] | None = None) -> OneRunAudit:
    """The one-run lower bounds of a model from its canary ``scores`` (higher = "in").

    The guesses of every candidate of ``grid`` (:func:`guess_counts`), each bounded at level
    alpha / |grid| (union bound over the grid). The reported bounds are the maxima over the grid,
    each a (1 − alpha)-confidence lower bound: on ε (Steinke et al.) and, with ``gdp``, on the μ of
    μ-GDP (Mahloujifar et al.).
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    scores, included = _checked(scores, included)
    m = scores.size
    counts = guess_counts(scores, included, grid)
    a = alpha / len(counts)
    cands = [OneRunBound(k_in=k_in, k_out=k_out, guesses=r, correct=v,
                         epsilon_steinke=steinke_epsilon(m, r, v, a, delta),
                         mu_gdp_lb=gdp_mu_lower_bound(m, r, v, a) if gdp else None)
             for k_in, k_out, r, v in counts]
    best = max(cands, key=lambda c: c.epsilon_steinke)
    return OneRunAudit(m=m, n_in=int(included.sum()), alpha=alpha, alpha_each=a, delta=delta,
                       epsilon_steinke=best.epsilon_steinke,
                       mu_gdp_lb=max(c.mu_gdp_lb for c in cands) if gdp else None,  # type: ignore[type-var]
                       best_steinke=best, candidates=cands)


# ----------------------------------------------------------------------------- the reconstruction game

#: Fractions of the game's canaries guessed, most confident first (:func:`reconstruction_grid`).
RECONSTRUCTION_FRACTIONS = (0.02, 0.1, 0.3, 1.0)


def reconstruction_grid(m: int) -> list[int]:
    """Guess counts of the reconstruction game, fixed by m (the included canaries) alone, never by the
    outcome: the most confident 2 %, 10 %, 30 % and all of them. Under DP a right k-ary guess is strong
    evidence when k is large (Mahloujifar et al. 2025, the (k − 1) factor of their recursion), so a few
    confident right guesses can refute a claim that all m could not; a weakly memorising model needs more
    guesses. Four candidates, for the same reason as :func:`guess_grid`: each costs the union bound."""
    if m < 1:
        raise ValueError(f"need at least one canary, got m={m}")
    out: list[int] = []
    for frac in RECONSTRUCTION_FRACTIONS:
        r = max(1, int(round(frac * m)))
        if r not in out:
            out.append(r)
    return out


def reconstruction_counts(confidence: np.ndarray, right: np.ndarray,
                          grid: list[int] | None = None) -> list[tuple[int, int]]:
    """(guesses r, right v) for every r of ``grid`` (default :func:`reconstruction_grid`): the r decoded
    secrets the model was most confident of, v of them exactly right. Ties in confidence are broken by
    index order (a fixed permutation), not by the outcome."""
    confidence, right = _checked(confidence, right)
    grid = reconstruction_grid(confidence.size) if grid is None else list(grid)
    hits = np.cumsum(right[np.argsort(-confidence, kind="stable")])
    out = []
    for r in grid:
        if not 1 <= r <= confidence.size:
            raise ValueError(f"{r} guesses of {confidence.size} canaries")
        out.append((int(r), int(hits[r - 1])))
    return out
