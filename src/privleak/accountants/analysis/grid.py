"""How big the PLD grids get, estimated before anything is allocated.

dp_accounting's PLD accountant allocates two kinds of arrays (read from
dp_accounting 0.6.0, ``pld/privacy_loss_distribution.py`` and
``pld/pld_pmf.py``):

* **one step**: the connect-the-dots PMF of the privacy loss between the
  ``epsilon_lower`` and ``epsilon_upper`` its ``connect_dots_bounds()``
  gives, one point per ``value_discretization_interval`` Δ, for each of the
  ADD and REMOVE directions (one PMF when the pair is symmetric). The count
  is known exactly, from closed forms, before building it.
* **T steps**: ``self_compose`` raises the PMF's FFT to the T-th power on
  ``next_fast_len`` of the width that a Chernoff bound
  (``common.compute_self_convolve_bounds``, tail mass 1e-15) leaves; that
  width is exact once the one-step PMF exists, and is estimated before from
  a coarse one-step PMF (the bound's orders scale with the PMF's width, so
  the width in loss units barely depends on Δ).

Measured on this project's 2-core machine (``bench/bench_primitives.py``
prints the per-point costs): building one step costs 5–7 µs and 80–160 B
per point (traced allocations to resident memory), composing about 1 µs and
40–140 B per FFT point. The limits below keep one evaluation under about
30 s and 5 GB, so an accountant call fits a 24 GB machine with room for the
rest of an audit. Δ never goes above :data:`VDI_MAX` (coarser grids lose the
accuracy the adaptive PLD promises), so a setting whose grid does not fit
at Δ = :data:`VDI_MAX` cannot run and is refused, naming the setting to
change and the range it must be in for the others.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from privleak.core.errors import UserError

#: Points of one step's PMFs together (ADD + REMOVE): ~0.7 GB, ~30 s to build.
SINGLE_POINTS_MAX = 4_000_000
#: FFT points of one composed PMF: ~4.7 GB while it is being composed.
COMPOSED_POINTS_MAX = 2**25
#: Coarsest grid width the adaptive PLD uses for DP-SGD's own event (kept from the accountant this package
#: replaced, so its figures are reproduced exactly; its accuracy target needs no coarser one).
VDI_MAX = 5e-3
#: Coarsest width for a mixture of Gaussians (person-level ε, often in the tens or hundreds): there the
#: adaptive law Δ = ε·sqrt(r/T) alone sets the width, which keeps its grids small.
MIXTURE_VDI_MAX = 1.0
#: Finest grid width: below it the cost grows with no measurable gain (see pld.py).
VDI_MIN = 1e-6

# The coarse one-step PMF used only to estimate the composed width.
_COARSE_POINTS = 20_000


class GridTooLarge(UserError):
    """A PLD or PRV grid would not fit the limits; the message names the setting and its range."""

    def __init__(self, message: str, *, points: float = math.inf, limit: float = math.inf) -> None:
        super().__init__(message)
        self.points = points
        self.limit = limit


#: Building one step of a mixture of Gaussians costs ~50× a Gaussian's per point (measured 170–270 µs vs
#: 3–7 µs: dp_accounting inverts the mixture's privacy loss numerically, point by point), so its
#: one-step limit is 50× fewer points for the same time.
MIXTURE_POINT_COST = 50


@dataclass(frozen=True)
class GridSize:
    """Points one PLD evaluation allocates at grid width ``vdi``, and the one-step limit that applies."""

    vdi: float
    single_points: int
    composed_points: float
    single_limit: int = SINGLE_POINTS_MAX

    def fits(self) -> bool:
        return self.single_points <= self.single_limit and self.composed_points <= COMPOSED_POINTS_MAX


def largest_fitting(fits: Callable[[float], bool], lo: float, hi: float, *, log: bool = True, iters: int = 60) -> float:
    """The largest x in [lo, hi] with ``fits(x)`` for a predicate true at ``lo`` and false at ``hi``
    (bisection, in log x when ``log``). Used to turn a grid limit into the range a message states."""
    a, b = (math.log(lo), math.log(hi)) if log else (lo, hi)
    for _ in range(iters):
        m = 0.5 * (a + b)
        if fits(math.exp(m) if log else m):
            a = m
        else:
            b = m
        if (b - a) <= (1e-3 if log else max(1.0, 1e-3 * abs(a))):
            break
    return math.exp(a) if log else a


def smallest_fitting(fits: Callable[[float], bool], lo: float, hi: float, iters: int = 60) -> float:
    """The smallest x in [lo, hi] with ``fits(x)`` (false at ``lo``, true at ``hi``), bisecting in log x."""
    a, b = math.log(lo), math.log(hi)
    for _ in range(iters):
        m = 0.5 * (a + b)
        if fits(math.exp(m)):
            b = m
        else:
            a = m
        if b - a <= 1e-3:
            break
    return math.exp(b)


def describe(size: GridSize) -> str:
    """'one step 2.1e+10 points (limit 4e+06)' / 'T steps 5e+09 points (limit 3.4e+07)': the part that does not fit."""
    if size.single_points > size.single_limit:
        return (f"one step's privacy-loss grid would hold {size.single_points:.2g} points at the coarsest width "
                f"{size.vdi:g} (limit {size.single_limit:.2g}, about 30 s to build)")
    return (f"the composed privacy-loss grid would hold {size.composed_points:.2g} points at the coarsest width "
            f"{size.vdi:g} (limit {COMPOSED_POINTS_MAX:.2g}, about 5 GB)")
