r"""Auditing f-DP in one run (Mahloujifar, Melis & Chaudhuri, ICML 2025, arXiv 2410.22235).

The guessing game is Steinke et al.'s (:mod:`.one_run`): m canaries, an
auditor who looks at the trained model makes r guesses (abstaining on the
rest), v of them right. Where Steinke et al. bound the number of correct
guesses under an (ε, δ)-DP training, Mahloujifar et al. bound it under an
**f-DP** training, for any trade-off curve f (Dong, Roth & Su 2022: a
mechanism is f-DP when every test between neighbouring inputs with type-I
error x has type-II error ≥ f(x)). Their bound, for one canary at a time:
f-DP means an event of probability x under one value of the canary has
probability at most the *blow-up* 1 − f(x) under another, so a correct guess
of mass c forces at least ``B⁻¹(c)`` = f(1 − c) of mass on each wrong value
(f symmetric; k − 1 wrong values in a k-ary game). Their recursion
(PrivacyGuard's ``audit_rh_with_cap``; jax_privacy's ``_epsilon_one_run_fdp``):

    c_v = τ·v/m,  h_v = τ·(r − v)/m;   for i = v − 1, …, 0:
        h_i = max(h_{i+1}, (k − 1)·B⁻¹(c_{i+1})),
        c_i = min(1, c_{i+1} + i/(r − i) · (h_i − h_{i+1})),

and if ``c_0 + h_0 > r/m`` then P[≥ v of r guesses correct] ≤ τ under every
f-DP training, whatever the dependence between canaries (:func:`fdp_refutes`).
The smallest such τ is the p-value of "the training is f-DP"
(:func:`fdp_p_value`; both sides of the comparison grow with τ). With f the
curve of pure ε-DP, ``B⁻¹(c) = max(e^{−ε}c, 1 − e^{ε}(1 − c))`` and the
recursion reproduces Steinke et al.'s binomial bound at δ = 0 exactly
(``tests/test_fdp.py``).

Which f (:class:`TradeOff`): what makes this route powerful is that an
accountant that knows the mechanism knows its whole curve, not one (ε, δ)
point: :class:`ProfileCurve` is DP-SGD's (the Poisson-subsampled Gaussian at
the run's σ, q and T, :func:`privleak.accountants.analysis.profile.privacy_profile`),
always *below* the true curve, so a correct implementation is never refuted
beyond the test's level. :class:`EpsilonDeltaCurve` is the single point's
f_{ε,δ} (what "(ε, δ)-DP" alone allows); :class:`GaussianCurve` is μ-GDP
(a claim DP-SGD only approaches, used in tests and the μ-GDP diagnostic).

k-ary guesses (the reconstruction game, :mod:`privleak.attacks.one_run_canaries`):
each canary's secret is uniform over k values and the auditor guesses which;
the mechanism must then be f-DP between any two values of one canary, which
for a training record is the *replace-one* relation (a record changed, not
added), so the curve is DP-SGD's replace-one profile.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import special

__all__ = ["EpsilonDeltaCurve", "GaussianCurve", "ProfileCurve", "TradeOff", "fdp_grid_p_value", "fdp_min_correct",
           "fdp_p_value", "fdp_refutes"]


class TradeOff:
    """A symmetric trade-off curve f, by its inverse blow-up ``B⁻¹(c) = f(1 − c)``: the least mass every
    other value of a canary must put on an event that has mass c under the canary's own value."""

    name: str = "f"

    def inverse_blow_up(self, c: float) -> float:  # pragma: no cover - interface
        raise NotImplementedError

    def f(self, x: float) -> float:
        """The trade-off curve itself: the least type-II error of a test with type-I error x."""
        return self.inverse_blow_up(1.0 - x)


@dataclass(frozen=True)
class EpsilonDeltaCurve(TradeOff):
    """f_{ε,δ}(x) = max(0, 1 − δ − e^ε x, e^{−ε}(1 − δ − x)): exactly what (ε, δ)-DP allows (Dong et al. 2022,
    Prop. 2.5). ``B⁻¹(c) = max(0, e^{−ε}(c − δ), 1 − δ − e^{ε}(1 − c))``."""

    epsilon: float
    delta: float = 0.0

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"(ε = {self.epsilon:.3g}, δ = {self.delta:.2g})-DP"

    def inverse_blow_up(self, c: float) -> float:
        e, d = self.epsilon, self.delta
        low = math.exp(-e) * (c - d)
        # e^ε(1 − c) as exp(ε + log(1 − c)): e^ε alone overflows past ε ≈ 709
        high = 1.0 - d - (math.exp(e + math.log1p(-c)) if c < 1.0 else 0.0)
        return max(0.0, low, high)


@dataclass(frozen=True)
class GaussianCurve(TradeOff):
    """μ-GDP: G_μ(x) = Φ(Φ⁻¹(1 − x) − μ), so ``B⁻¹(c) = Φ(Φ⁻¹(c) − μ)`` (Dong et al. 2022, Def. 2.6)."""

    mu: float

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"μ-GDP with μ = {self.mu:.3g}"

    def inverse_blow_up(self, c: float) -> float:
        if c <= 0.0:
            return 0.0
        if c >= 1.0:
            return 1.0
        return float(special.ndtr(special.ndtri(c) - self.mu))


class _Envelope:
    """max_j (a_j·x + b_j) over lines, as its upper envelope (the lines that are the maximum somewhere, by
    slope, with the x where each takes over): exact, evaluated by one binary search."""

    def __init__(self, slopes: np.ndarray, intercepts: np.ndarray) -> None:
        order = np.lexsort((intercepts, slopes))  # by slope, then intercept: the last of equal slopes wins
        hull: list[tuple[float, float]] = []
        for a, b in zip(slopes[order].tolist(), intercepts[order].tolist()):
            if hull and hull[-1][0] == a:
                hull.pop()  # same slope, lower or equal intercept: never above this one
            while len(hull) >= 2:
                (a1, b1), (a2, b2) = hull[-2], hull[-1]
                # the middle line is never the maximum when the new one overtakes line 1 no later than line 2 does
                if (b - b1) * (a2 - a1) >= (b2 - b1) * (a - a1):
                    hull.pop()
                else:
                    break
            hull.append((a, b))
        self.a = [h[0] for h in hull]
        self.b = [h[1] for h in hull]
        # hull[i + 1] is the maximum from x = breaks[i] on
        self.breaks = [(self.b[i] - self.b[i + 1]) / (self.a[i + 1] - self.a[i]) for i in range(len(hull) - 1)]

    def __call__(self, x: float) -> float:
        i = bisect.bisect_right(self.breaks, x)
        return self.a[i] * x + self.b[i]


@dataclass(frozen=True)
class ProfileCurve(TradeOff):
    """f = sup_j f_{ε_j, δ_j} over a privacy profile (ε_j, δ_j upper bounds: Dong et al. 2022, Prop. 2.12).

    ``B⁻¹(c) = max(0, max_j e^{−ε_j}(c − δ_j), max_j (1 − δ_j − e^{ε_j}(1 − c)))``: two maxima of lines, each
    kept as its upper envelope (the second in u = 1 − c, which keeps e^{ε_j}·u free of cancellation)."""

    epsilons: tuple[float, ...]
    deltas: tuple[float, ...]
    label: str = "f"
    _low: _Envelope = field(init=False, repr=False, compare=False)
    _high: _Envelope = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        eps = np.asarray(self.epsilons, dtype=np.float64)
        dl = np.asarray(self.deltas, dtype=np.float64)
        if eps.shape != dl.shape or eps.size == 0:
            raise ValueError("a privacy profile needs as many δ as ε, at least one")
        if (dl < 0).any() or (dl > 1).any() or (eps < 0).any() or not np.isfinite(eps).all():
            raise ValueError("a privacy profile has finite ε ≥ 0 and δ in [0, 1]")
        em = np.exp(-eps)
        object.__setattr__(self, "_low", _Envelope(em, -em * dl))  # e^{−ε}·c − e^{−ε}δ
        keep = eps <= 700.0  # e^{ε}·u past ε ≈ 709 overflows; such lines only matter within 1e-300 of c = 1
        object.__setattr__(self, "_high", _Envelope(-np.exp(eps[keep]), 1.0 - dl[keep]))  # (1 − δ) − e^{ε}·u

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.label

    def inverse_blow_up(self, c: float) -> float:
        if c <= 0.0:
            return 0.0
        return max(0.0, self._low(c), self._high(1.0 - c))


# ----------------------------------------------------------------------------- the test

def _check(m: int, r: int, v: int, k: float) -> None:
    if not (0 <= v <= r <= m):
        raise ValueError(f"need 0 ≤ correct ≤ guesses ≤ canaries, got v={v}, r={r}, m={m}")
    if not k >= 2:
        raise ValueError(f"a guess chooses between k ≥ 2 values, got k={k}")


def _margin(m: int, r: int, v: int, tau: float, curve: TradeOff, k: float) -> float:
    """c_0 + h_0 − r/m of the recursion (module docstring) at level τ: positive ⇔ refuted."""
    corr = tau * v / m
    inc = tau * (r - v) / m
    for i in range(v - 1, -1, -1):
        new = max(inc, (k - 1.0) * curve.inverse_blow_up(corr))
        if new == inc:
            break  # neither mass can change again
        corr = min(corr + (i / (r - i)) * (new - inc), 1.0)
        inc = new
        if corr + inc > r / m:
            break  # already refuted; the masses only grow
    return corr + inc - r / m


def fdp_refutes(m: int, r: int, v: int, tau: float, curve: TradeOff, k: float = 2) -> bool:
    """Whether v correct of r guesses (m canaries, k values each) refute "f-DP" at level τ: then
    P[≥ v correct] ≤ τ for every f-DP training (Mahloujifar et al. 2025; module docstring)."""
    _check(m, r, v, k)
    if not 0.0 < tau <= 1.0:
        raise ValueError(f"level must be in (0, 1], got {tau}")
    if v == 0:
        return False
    return _margin(m, r, v, tau, curve, k) > 0


def fdp_p_value(m: int, r: int, v: int, curve: TradeOff, k: float = 2) -> float:
    """The smallest level τ at which :func:`fdp_refutes` holds (1 when none ≤ 1 does): the p-value of
    "the training is f-DP" from one guess count. Bisection on log τ (the margin grows with τ)."""
    _check(m, r, v, k)
    if v == 0 or _margin(m, r, v, 1.0, curve, k) <= 0:
        return 1.0
    lo, hi = -745.0, 0.0  # e^-745 is the smallest positive double
    if _margin(m, r, v, math.exp(lo), curve, k) > 0:
        return 0.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if _margin(m, r, v, math.exp(mid), curve, k) > 0:
            hi = mid
        else:
            lo = mid
        if hi - lo < 1e-3:
            break
    return math.exp(hi)


def fdp_grid_p_value(m: int, counts: Sequence[tuple[int, int]], curve: TradeOff, k: float = 2) -> float:
    """p of "f-DP" from a fixed grid of (guesses, correct): min(1, |grid| · min_g :func:`fdp_p_value`), the
    union bound over the grid (each candidate fixed by m alone, never by the outcome)."""
    if not counts:
        raise ValueError("no guess counts")
    best = 1.0
    for r, v in counts:
        r, v = int(r), int(v)
        _check(m, r, v, k)
        # The margin grows with τ: a count not refuted at the best level so far has its p above it (its bisection
        # would end above it), so the minimum is the same without bisecting it — one recursion instead of ~20.
        if v == 0 or (best < 1.0 and _margin(m, r, v, best, curve, k) <= 0):
            continue
        best = min(best, fdp_p_value(m, r, v, curve, k))
    return min(1.0, len(counts) * best)


def fdp_min_correct(m: int, r: int, level: float, curve: TradeOff, k: float = 2) -> int | None:
    """The fewest correct of r guesses that refute "f-DP" at ``level`` (None: not even all r do): the
    smallest violation this many guesses can show. Refutation only gets easier with more correct guesses."""
    _check(m, r, 0, k)
    if r == 0 or not fdp_refutes(m, r, r, level, curve, k):
        return None
    lo, hi = 0, r  # lo never refutes (v = 0), hi does
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fdp_refutes(m, r, mid, level, curve, k):
            hi = mid
        else:
            lo = mid
    return hi
