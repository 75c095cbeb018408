r"""The whole privacy profile δ(ε) of DP-SGD, not one (ε, δ) point: what an f-DP audit tests against.

The accountant certifies one point, (ε, δ); the mechanism it analysed — T
compositions of the Poisson(q)-subsampled Gaussian with noise multiplier σ —
satisfies (ε', δ(ε'))-DP for **every** ε' ≥ 0 at once, with δ(ε') read off the
same composed privacy loss distribution (PLD) (:mod:`.pld`). By Dong, Roth &
Su (2022, Prop. 2.12) that family is equivalent to f-DP with the trade-off
curve

    f(x) = sup_{ε' ≥ 0} max(0, 1 − δ(ε') − e^{ε'}·x, e^{−ε'}·(1 − δ(ε') − x)),

which is far tighter than the single point's f_{ε,δ} (a one-run audit can
refute "this is the DP-SGD the accountant analysed" long before it can refute
"(ε, δ)-DP": :mod:`privleak.audit.fdp`).

Soundness: dp_accounting's pessimistic discretisation makes every δ(ε') an
upper bound on the true one, and a supremum over a finite grid of ε' is below
the supremum over all of them, so the f built from this profile is **below**
the mechanism's true trade-off curve at every x: a correct implementation is
f-DP for it. Coarser grids (in loss or in ε') only make it looser, never
invalid.

Relations:

* ``"add_remove"``: one unit added or removed (a DP-SGD record, a ULS person, a
  DP-FedAvg client) — the pair ``N(0, σ²)`` vs ``(1 − q)·N(0, σ²) + q·N(1, σ²)``
  and its swap, δ the larger of the two directions;
* ``"replace"``: one unit's contribution (norm ≤ C) swapped for another —
  ``(1 − q)·N(0, σ²) + q·N(−1, σ²)`` vs ``(1 − q)·N(0, σ²) + q·N(1, σ²)``
  (dp_accounting's REPLACE_ONE): a record inside a federated client, or one
  audit canary's secret changed for another (the reconstruction game).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np

from .grid import COMPOSED_POINTS_MAX, VDI_MAX, GridTooLarge, describe
from .pld import PldEvent, _pmfs, _TooFine, composed_points, estimate_grid
from .rdp import QUICK_RDP_ORDERS, rdp_epsilon
from .validation import check_noise_multiplier, check_sample_rate, check_steps

Relation = Literal["add_remove", "replace"]

#: ε' grid step of the profile: the supremum over a grid this fine is within ~1 % of the continuous one in
#: the mass the one-run recursion moves (e^{−ε'} changes by 1 % per step).
EPS_STEP = 0.01
#: Where the profile stops: dp_accounting truncates tails at 1e-15, so δ(ε') does not fall below that mass.
DELTA_FLOOR = 1e-15
#: Loss-grid width as a fraction of the ε at δ = 1e-5, over √T (the same law as :func:`.pld.vdi_for`): a
#: relative excess of about 1e-3 in δ's exponent, ample for an audit.
REL_ERR = 1e-3


@dataclass(frozen=True)
class PrivacyProfile:
    """δ(ε') upper bounds on a grid ``epsilons`` (ascending from 0), of one mechanism under ``relation``."""

    sample_rate: float
    noise_multiplier: float
    steps: int
    relation: Relation
    epsilons: tuple[float, ...]
    deltas: tuple[float, ...]
    value_discretization_interval: float

    def delta(self, epsilon: float) -> float:
        """δ at ε (an upper bound): the grid's value at the largest grid ε' ≤ ε (δ decreases in ε)."""
        eps = np.asarray(self.epsilons)
        i = int(np.searchsorted(eps, epsilon, side="right")) - 1
        return float(self.deltas[max(i, 0)]) if epsilon >= 0 else 1.0

    def epsilon(self, delta: float) -> float:
        """The smallest grid ε' with δ(ε') ≤ ``delta`` (∞ when the grid never reaches it)."""
        for e, d in zip(self.epsilons, self.deltas):
            if d <= delta:
                return float(e)
        return math.inf


def _compose(events: list[PldEvent], vdi: float):
    """The composed PLD at width ``vdi``, coarsened until it fits the grid limits (:mod:`.grid`)."""
    cap = VDI_MAX
    for _ in range(30):
        try:
            acc = None
            for ev in events:
                n = ev.single_points(vdi)
                if n > ev.single_limit:
                    raise _TooFine(n / ev.single_limit)
                single = ev.build(vdi)
                m = max(composed_points(p, ev.count, within=COMPOSED_POINTS_MAX) for p in _pmfs(single))
                if m > COMPOSED_POINTS_MAX:
                    raise _TooFine(m / COMPOSED_POINTS_MAX)
                composed = single.self_compose(ev.count)
                acc = composed if acc is None else acc.compose(composed)
            return acc, vdi
        except _TooFine as exc:
            if vdi >= cap:
                size = estimate_grid(events, cap)
                raise GridTooLarge(f"the privacy profile cannot be computed for these settings: {describe(size)}",
                                   points=max(size.single_points, size.composed_points)) from None
            vdi = min(cap, vdi * exc.factor * 1.05)
    raise GridTooLarge("the privacy profile could not fit its grid to the memory limit")  # pragma: no cover


@lru_cache(maxsize=128)
def _profile(q: float, sigma: float, steps: int, relation: Relation, vdi: float | None) -> PrivacyProfile:
    events = [PldEvent(noise_multiplier=sigma, sample_rate=q, count=steps, replace=relation == "replace")]
    if vdi is None:
        guess = rdp_epsilon(q, sigma, steps, 1e-5, QUICK_RDP_ORDERS)
        if relation == "replace":
            guess *= 2.0  # replace-one is at most a group of two add/remove steps
        if not math.isfinite(guess) or guess <= 0:
            guess = 1.0
        vdi = min(VDI_MAX, max(1e-4, guess * math.sqrt(REL_ERR / steps)))
    pld, used = _compose(events, vdi)
    # The grid runs to where δ reaches the truncation floor; at most 200 (e^{-200}: nothing the recursion sees).
    top = float(pld.get_epsilon_for_delta(DELTA_FLOOR * 10))
    top = min(200.0, max(1.0, top if math.isfinite(top) else 200.0) + 1.0)
    eps = np.round(np.arange(0.0, top + EPS_STEP, EPS_STEP), 10)
    # clipped to [0, 1]: the FFT composition leaves round-off of ±1e-16 where the mass runs out
    deltas = np.clip(np.nan_to_num(np.asarray(pld.get_delta_for_epsilon(eps), dtype=np.float64), nan=1.0), 0.0, 1.0)
    deltas = np.maximum.accumulate(deltas[::-1])[::-1]  # monotone (rounding can make it wiggle by 1 ulp)
    return PrivacyProfile(sample_rate=q, noise_multiplier=sigma, steps=steps, relation=relation,
                          epsilons=tuple(float(e) for e in eps), deltas=tuple(float(d) for d in deltas),
                          value_discretization_interval=float(used))


def privacy_profile(*, sample_rate: float, noise_multiplier: float, steps: int, relation: Relation = "add_remove",
                    value_discretization_interval: float | None = None) -> PrivacyProfile:
    """δ(ε') for ε' on a 0.01 grid of DP-SGD (Poisson rate q, noise multiplier σ, T steps) under ``relation``:
    upper bounds from dp_accounting's pessimistic PLD (see the module docstring). The loss grid's width
    ``value_discretization_interval`` (None: ≈ 1e-3 relative accuracy, at most 5e-3) only trades tightness for
    time: any width gives upper bounds. Memoised per argument set."""
    q = check_sample_rate(sample_rate)
    s = check_noise_multiplier(noise_multiplier)
    t = check_steps(steps)
    if relation not in ("add_remove", "replace"):
        raise ValueError(f"relation must be 'add_remove' or 'replace', got {relation!r}")
    vdi = value_discretization_interval
    if vdi is not None and not (vdi > 0 and math.isfinite(vdi)):
        raise ValueError(f"value_discretization_interval must be a finite number > 0, got {vdi!r}")
    return _profile(float(q), float(s), int(t), relation, None if vdi is None else float(vdi))
