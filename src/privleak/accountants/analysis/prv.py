r"""ε by the privacy loss random variable (PRV), Opacus's implementation, with the grid sized first.

Gopi, Lee & Wutschitz 2021: the same privacy loss random variable as the PLD,
truncated to [−L, L], discretised on a mesh chosen from an ε-error budget
``eps_error`` and δ-error budget ``delta_error`` and composed by FFT.
Opacus's ``get_epsilon`` returns the upper bound ``ε̂(δ − δ_err) +
eps_error``: the ``eps_error`` term is *additive*, so for tiny ε the bound is
loose in relative terms by construction (see :func:`epsilon_prv`).

At fine resolution (PLD Δ ≤ 1e-5, PRV eps_error ≤ 1e-3) the PLD bound and
the PRV point estimate agree to 1e-5 relative or better on the points
checked; at the default settings the gap is PRV's additive margin (≤ 0.23 %
for ε ≥ 0.5 over the 96-point grid of tests/test_accounting.py).

Grid: Opacus allocates ``2L / mesh`` points, ``L`` from
``compute_safe_domain_size`` (an RDP bound) and ``mesh = eps_error /
sqrt(T·log(12/δ_err)/2)``; :func:`prv_grid_points` mirrors it without
allocating. Beyond :data:`PRV_POINTS_MAX` points (~20 s and a few GB in
Opacus) the setting is refused. Opacus also refuses δ with
``finfo(longdouble).eps · points > δ − δ_err`` (float round-off would
dominate); that is checked here first, with the range it implies.
"""

from __future__ import annotations

import functools
import math
from typing import Sequence

import numpy as np

from privleak.core.errors import UserError

from .grid import GridTooLarge
from .pld import PldEvent, adaptive_epsilon, check_pld_feasible, pld_epsilon
from .rdp import QUICK_RDP_ORDERS, quiet_rdp, rdp_epsilon_composed
from .validation import (PLD_DELTA_MIN, PLD_DELTA_REASON, check_delta, check_noise_multiplier, check_sample_rate,
    check_steps, real)

EPS_ERROR_MAX = 1e-2  # Opacus's default
EPS_ERROR_MIN = 1e-3  # below this the PRV mesh gets too large to be fast
EPS_ERROR_REL = 2e-3  # aim for ≤ 0.2 % additive margin where affordable
SIZING_REL_ERR = 1e-2  # coarse PLD used only to size PRV's margin
PRV_POINTS_MAX = 3e7  # ~20 s and a few GB in Opacus; beyond, refuse rather than swap

#: A history entry as Opacus keeps it: (noise_multiplier, sample_rate, steps).
History = Sequence[tuple[float, float, int]]


def eps_error_for(eps: float) -> float:
    """PRV's additive margin for an ε near ``eps``: min(0.01, max(1e-3, 2e-3·ε))."""
    return min(EPS_ERROR_MAX, max(EPS_ERROR_MIN, EPS_ERROR_REL * eps))


@functools.lru_cache(maxsize=64)
def _rdp_domain(history: tuple[tuple[float, float, int], ...], delta_error: float) -> float:
    """L_rdp of Opacus's ``compute_safe_domain_size`` (which returns ``max(L_rdp, eps_error) + 3``), by the same
    RDP calls in the same order, so the domain built from it is bit-identical to Opacus's own. L_rdp does not
    depend on eps_error: one evaluation serves every margin, and the size check and the accountant share it.
    On the suite's settings it is most of a PRV evaluation's cost (Opacus's RDP at fractional orders, in
    Python): ``bench/bench_accounting.py`` times prv_upper beside the domain sized twice."""
    from opacus.accountants import RDPAccountant

    total = sum(t for _, _, t in history)
    with quiet_rdp(), np.errstate(divide="ignore", over="ignore"):
        acc = RDPAccountant()
        acc.history = [(s, q, t) for s, q, t in history]
        bound = acc.get_epsilon(delta_error / 4)
        for s, q, _ in history:
            one = RDPAccountant()
            one.history = [(s, q, 1)]
            bound = max(bound, one.get_epsilon(delta=delta_error / (8 * total)))
    return float(bound)


def _history_key(history: History) -> tuple[tuple[float, float, int], ...]:
    return tuple((float(s), float(q), int(t)) for s, q, t in history)


def _half_width_and_mesh(history: History, eps_error: float, delta_error: float) -> tuple[float, float]:
    """Opacus's ``PRVAccountant._get_domain`` arithmetic: the domain [-L, L] with L = max(L_rdp, eps_error) + 3
    (L_rdp from :func:`_rdp_domain`'s memo) and the mesh ``eps_error / sqrt(T·log(12/δ_err)/2)``."""
    key = _history_key(history)
    half_width = max(_rdp_domain(key, delta_error), eps_error) + 3
    mesh = eps_error / np.sqrt(sum(t for _, _, t in key) * np.log(12 / delta_error) / 2)
    return half_width, mesh


def _domain(history: History, eps_error: float, delta_error: float):
    """Opacus's ``PRVAccountant._get_domain``, with L_rdp from :func:`_rdp_domain`'s memo."""
    from opacus.accountants.analysis.prv import Domain

    half_width, mesh = _half_width_and_mesh(history, eps_error, delta_error)
    return Domain.create_aligned(-half_width, half_width, mesh)


def prv_grid_points(history: History, delta: float, eps_error: float) -> float:
    """Size of the grid Opacus's PRVAccountant will allocate (δ_err = δ/1000, its default), without
    allocating it."""
    half_width, mesh = _half_width_and_mesh(history, eps_error, delta / 1000)
    return float(2 * half_width / mesh)


def _describe(history: History) -> str:
    if len(history) == 1:
        s, q, t = history[0]
        return f"sample_rate={q:g}, noise_multiplier={s:g}, steps={t}"
    return f"{len(history)} trainings, {sum(int(t) for _, _, t in history)} steps in all"


def _fix(history: History, delta: float, eps_error: float) -> str:
    """The range that would fit, for a single run: the most steps at this σ, the least σ at these steps."""
    if len(history) != 1:
        return "use fewer steps or larger noise multipliers"
    from .grid import largest_fitting, smallest_fitting

    s, q, t = history[0]

    def fits(h: History) -> bool:
        return prv_grid_points(h, delta, eps_error) <= PRV_POINTS_MAX

    parts = []
    if fits([(s, q, 1)]):
        parts.append(f"steps <= {int(largest_fitting(lambda x: fits([(s, q, max(1, int(x)))]), 1.0, float(t)))}")
    if fits([(1e3, q, t)]):
        parts.append(f"noise_multiplier >= {smallest_fitting(lambda x: fits([(x, q, t)]), s, 1e3):.3g}")
    return "use " + " or ".join(parts) if parts else "use fewer steps or a larger noise_multiplier"


def check_prv_feasible(history: History, delta: float, eps_error: float) -> float:
    """Refuse a PRV computation whose grid exceeds :data:`PRV_POINTS_MAX` or whose δ Opacus
    cannot resolve on that grid; returns the grid's size."""
    points = prv_grid_points(history, delta, eps_error)
    if not points <= PRV_POINTS_MAX:
        raise GridTooLarge(
            f"the PRV accountant would need a grid of {points:.2g} points (limit {PRV_POINTS_MAX:.2g}, ~20 s and "
            f"a few GB) for {_describe(history)} at delta={delta:g}; {_fix(history, delta, eps_error)}",
            points=points, limit=PRV_POINTS_MAX)
    floor = float(np.finfo(np.longdouble).eps) * points / (1 - 1e-3)
    if delta <= floor:
        raise UserError(f"delta={delta:g} is too small for the PRV accountant on its {points:.2g}-point grid for "
                        f"{_describe(history)} (float round-off would dominate); use delta > {floor:.2g} or the "
                        "PLD accountant")
    return points


@functools.cache
def _accountant_class() -> type:
    """Opacus's ``PRVAccountant`` with its domain from the memo the size check just filled (Opacus is imported
    on first use only)."""
    from opacus.accountants import PRVAccountant

    class Accountant(PRVAccountant):
        def _get_domain(self, prvs, num_self_compositions, eps_error, delta_error):
            h = [(p.noise_multiplier, p.sample_rate, t) for p, t in zip(prvs, num_self_compositions)]
            return _domain(h, eps_error, delta_error)

    return Accountant


def prv_upper(history: History, delta: float, eps_error: float, *, checked: bool = False) -> float:
    """Opacus ``PRVAccountant.get_epsilon`` (the upper bound) for ``history``, grid checked first
    (unless ``checked``: the caller just ran :func:`check_prv_feasible` with these arguments)."""
    if not checked:
        check_prv_feasible(history, delta, eps_error)
    acc = _accountant_class()()
    acc.history = [(float(s), float(q), int(t)) for s, q, t in history]
    try:
        # Opacus sizes the PRV domain with an RDP bound (which warns about its
        # orders) and takes log(1 - q), which numpy flags as a division by 0 at q = 1.
        with quiet_rdp(), np.errstate(divide="ignore"):
            return float(acc.get_epsilon(delta, eps_error=eps_error))
    except (RuntimeError, ValueError) as exc:  # Opacus: "Cannot compute epsilon" / float limits
        raise UserError(f"PRV accountant cannot compute epsilon for {_describe(history)}, delta={delta:g} "
                        f"({exc}); use the PLD accountant") from exc


def prv_sizing_estimate(history: History, delta: float) -> float:
    """A coarse PLD bound (~1 % above ε, tens of ms) to size PRV's margin. Only the margin depends on it,
    the PRV number itself does not. (A quick RDP bound is cheaper but up to 20× loose at T = 1.)"""
    if len(history) == 1:
        s, q, t = history[0]
        return pld_epsilon(q, s, int(t), delta, SIZING_REL_ERR)
    events = [PldEvent(noise_multiplier=s, sample_rate=q, count=int(t)) for s, q, t in history]
    return adaptive_epsilon(events, delta, SIZING_REL_ERR, rdp_epsilon_composed(history, delta, QUICK_RDP_ORDERS))


def epsilon_prv(*, sample_rate: float, noise_multiplier: float, steps: int, delta: float,
                eps_error: float | None = None) -> float:
    """ε upper bound by Opacus's ``PRVAccountant`` (history ``[(σ, q, T)]``).

    The bound is the PRV point estimate plus ``eps_error`` (absolute). Default
    (``None``): ``eps_error = min(0.01, max(1e-3, 2e-3·ε̃))`` with ε̃ a coarse
    PLD bound (~1 % above ε), so the margin is ≤ 0.2 % of ε for ε ≥ 0.5 and
    ≤ 1e-3 absolute below; 0.01 is Opacus's default. A smaller margin
    for tiny ε would need a PRV mesh of 10⁷+ points (several seconds); use
    :func:`~.pld.epsilon_pld` there.
    """
    q, sigma = check_sample_rate(sample_rate), check_noise_multiplier(noise_multiplier)
    t = check_steps(steps)
    history = [(sigma, q, t)]
    if eps_error is not None:
        d = check_delta(delta)
        ee = real("eps_error", eps_error, "use a small positive number, e.g. 0.01")
        if not (ee > 0 and math.isfinite(ee)):
            raise UserError(f"eps_error={ee!r} must be a finite number > 0, e.g. 0.01")
        return prv_upper(history, d, ee)
    d = check_delta(delta, floor=PLD_DELTA_MIN, floor_reason=PLD_DELTA_REASON)
    check_pld_feasible(sample_rate=q, noise_multiplier=sigma, steps=t)
    check_prv_feasible(history, d, EPS_ERROR_MAX)  # the smallest grid any margin gives: refuse before sizing
    estimate = prv_sizing_estimate(history, d)
    if estimate == 0.0:
        raise UserError(f"delta={d:g} is so large that epsilon is 0 at sample_rate={q:g}, noise_multiplier={sigma:g}, "
                        f"steps={t}, which the PRV accountant cannot represent; use delta below 1/n for n records")
    return prv_upper(history, d, eps_error_for(estimate))
