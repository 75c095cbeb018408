r"""Privacy accounting with the **person** as the unit (add/remove all of one person's records).

Three mechanisms, one question each:

* **ULS** (user-level sampling, :mod:`user_dp`): every step samples people,
  not records, each with probability q; a sampled person's contribution is
  clipped to norm C as one vector, and N(0, σ²C²) is added to the sum. Adding
  or removing a person is then exactly DP-SGD's add/remove-one with "record"
  read as "person": the Poisson-subsampled Gaussian at (q, σ, T), accounted by
  the existing accountants (:mod:`accounting`) at the person-level q.
* **A record inside a ULS person.** Removing one record of a person who has
  others does not remove the person: their clipped contribution v changes to
  some v′ (‖v‖, ‖v′‖ ≤ C), i.e. the person's data is *replaced*. Per step the
  pair is (1 − q)·N(0, σ²C²) + q·N(v, σ²C²) against the same with v′ — the
  Poisson-subsampled Gaussian under the replace-one relation, which
  dp_accounting's PLD accountant implements (``NeighboringRelation.REPLACE_ONE``).
  That is the ULS arm's ε per record for people with ≥ 2 records (it is
  smaller than group privacy's 2ε over remove-then-add); a person with one
  record is a person, and ε per record is ε per person.
* **Record-level DP-SGD read at the person level** (record-level arms, and
  ELS: example-level sampling after capping each person at k records). Each of
  the person's k records is sampled independently with probability q, each
  clipped to C, so the person shifts the noised sum by at most J·C with
  J ~ Binomial(k, q): per step a *mixture of Gaussians* N(J, σ²) against
  N(0, σ²) (1-d after scaling by C; the vector mechanism is dominated by the
  scalar one with each sensitivity replaced by its norm, Choquette-Choo et al.
  2023, Cor. 4.7). Charles et al. 2024 ("Fine-Tuning LLMs with User-Level
  DP", arXiv 2407.07737) derive this as the tight user-level accountant for
  ELS; dp_accounting builds its PLD (``from_mixture_gaussian_mechanism``). It is
  far tighter than the textbook group-privacy bound (kε, k·e^{(k−1)ε}·δ), whose
  δ explodes. With k = 1 it *is* the record-level accountant (tested).

PLD grids follow :mod:`accounting`'s rule (width Δ = ε·√(10⁻⁴/T), refined
until it fits the ε it produced), pessimistic rounding: every number here is
an upper bound.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence

import dp_accounting
import numpy as np
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from scipy.stats import binom

from ..core.errors import UserError
from .accounting import validate_privacy_params

__all__ = ["calibrate_group_sigma", "group_epsilon", "records_per_person", "replace_one_epsilon"]

_REL_ERR = 1e-4  # target relative excess of the PLD bound over the exact ε (as ``accounting``)
_SEARCH_REL_ERR = 1e-2  # coarser grid inside the σ search; the final σ is checked on the fine one
_VDI_MIN, _VDI_MAX = 1e-6, 5e-3
_SEARCH_VDI_MAX = 5e-2
_REFINEMENTS = 6


def _vdi(eps: float, steps: int, rel_err: float, vdi_max: float = _VDI_MAX) -> float:
    if not math.isfinite(eps):
        return vdi_max
    return min(vdi_max, max(_VDI_MIN, eps * math.sqrt(rel_err / steps)))


def _adaptive(eps_at, start: float, steps: int, rel_err: float, vdi_max: float = _VDI_MAX) -> float:
    """ε on a PLD grid fitted to ε itself (every pass is an upper bound)."""
    vdi = _vdi(start, steps, rel_err, vdi_max)
    eps = start
    for _ in range(_REFINEMENTS):
        eps = eps_at(vdi)
        needed = _vdi(eps, steps, rel_err, vdi_max)
        if vdi <= 1.5 * needed:
            break
        vdi = needed
    return eps


def _check_k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or int(k) < 1:
        raise UserError(f"records per person k={k!r} must be a whole number >= 1")
    return int(k)


def _mog_eps(q: float, sigma: float, steps: int, delta: float, k: int, vdi: float) -> float:
    j = np.arange(k + 1)
    probs = binom.pmf(j, k, q)
    keep = probs > 0
    pld = pld_lib.from_mixture_gaussian_mechanism(
        standard_deviation=sigma, sensitivities=j[keep].astype(float).tolist(),
        sampling_probs=(probs[keep] / probs[keep].sum()).tolist(), value_discretization_interval=vdi)
    return float(pld.self_compose(steps).get_epsilon_for_delta(delta))


def _rdp_start(q: float, sigma: float, steps: int, delta: float, k: int) -> float:
    """A cheap first guess for the grid: record-level RDP ε times k (group privacy's ε part)."""
    acc = dp_accounting.rdp.RdpAccountant(orders=[float(a) for a in range(2, 65)])
    acc.compose(dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps))
    return k * float(acc.get_epsilon(delta))


def group_epsilon(q: float, sigma: float, steps: int, delta: float, k: int, *, rel_err: float = _REL_ERR,
                  vdi_max: float = _VDI_MAX) -> float:
    """Person-level ε of record-level DP-SGD for a person with ``k`` records (mixture-of-Gaussians PLD).

    Per step the person's records join the batch J ~ Binomial(k, q) times and
    move the noised sum by ≤ J·C; T steps compose (PLD, both adjacency
    directions). k = 1 is the ordinary record-level ε. Upper bound.
    """
    validate_privacy_params(q=q, sigma=sigma, steps=steps, delta=delta)
    k = _check_k(k)
    q, sigma, steps, delta = float(q), float(sigma), int(steps), float(delta)
    start = _rdp_start(q, sigma, steps, delta, k)
    return _adaptive(lambda vdi: _mog_eps(q, sigma, steps, delta, k, vdi), start, steps, rel_err, vdi_max)


def replace_one_epsilon(q: float, sigma: float, steps: int, delta: float) -> float:
    """ε of the Poisson-subsampled Gaussian under *replace-one* (dp_accounting PLD, pessimistic).

    For ULS: the ε per record of a person who has other records (removing the
    record replaces the person's clipped contribution, see the module docstring).
    """
    validate_privacy_params(q=q, sigma=sigma, steps=steps, delta=delta)
    q, sigma, steps, delta = float(q), float(sigma), int(steps), float(delta)
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps)

    def at(vdi: float) -> float:
        acc = dp_accounting.pld.PLDAccountant(
            neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE, value_discretization_interval=vdi)
        acc.compose(event)
        return float(acc.get_epsilon(delta))

    return _adaptive(at, 2 * _rdp_start(q, sigma, steps, delta, 1), steps, _REL_ERR)


def _bracket(g, lo: float, glo: float, hi: float, ghi: float, what: str) -> tuple[float, float, float, float]:
    """Widen [lo, hi] until g(lo) > 0 ≥ g(hi) (g = log(ε/target), decreasing in σ)."""
    while glo <= 0:  # even σ = lo meets the target: walk down
        hi, ghi = lo, glo
        lo /= 1.25
        if lo < 1e-2:
            raise UserError(f"person-level epsilon is met with almost no noise ({what}); delta is too large")
        glo = g(lo)
    while ghi > 0:  # walk up a power-law step at a time (ε ∝ σ^-p, p ≥ ~1)
        lo, glo = hi, ghi
        hi = hi * min(8.0, math.exp(1.25 * ghi) * 1.01)
        if hi > 1e6:
            raise UserError(f"person-level epsilon is unreachable with sigma up to 1e6 ({what}); raise the target "
                            "or cap fewer records per person")
        ghi = g(hi)
    return lo, glo, hi, ghi


def _secant(g, lo: float, glo: float, hi: float, ghi: float, tol: float) -> tuple[float, float]:
    """Shrink a bracket to hi/lo ≤ 1 + tol: secant in (log σ, log ε), bisection when it strays,
    and a probe one tolerance beyond each new point (the root is usually that close)."""
    a, b, w = math.log(lo), math.log(hi), math.log1p(tol)
    for _ in range(100):
        if b - a <= w:
            break
        x = b - ghi * (b - a) / (ghi - glo) if ghi != glo else (a + b) / 2
        if not a + 0.05 * (b - a) < x < b - 0.05 * (b - a):
            x = (a + b) / 2
        gx = g(math.exp(x))
        if gx > 0:
            a, glo = x, gx
        else:
            b, ghi = x, gx
        y = x - w if gx <= 0 else x + w
        if a < y < b:
            gy = g(math.exp(y))
            if gy > 0:
                a, glo = y, gy
            else:
                b, ghi = y, gy
    return math.exp(a), math.exp(b)


def calibrate_group_sigma(target_epsilon: float, delta: float, q: float, steps: int, k: int, tol: float = 1e-3) -> float:
    """Smallest σ (to relative ``tol``) with :func:`group_epsilon` (q, σ, T, δ, k) ≤ ``target_epsilon``.

    ε is decreasing in σ and close to a power law: a secant in (log σ, log ε)
    inside a bracket, first on a coarse PLD grid (which over-states ε, so its
    root is above the true one), then on the fine grid of :func:`group_epsilon`
    itself from there. The σ returned satisfies ``group_epsilon(…) ≤ target``
    by that very function. No caps or floors: a target no σ in [1e-2, 1e6]
    meets is a :class:`UserError`.
    """
    validate_privacy_params(q=q, steps=steps, delta=delta, epsilon=target_epsilon)
    k = _check_k(k)
    target = float(target_epsilon)

    def log_ratio(eps: float) -> float:
        return math.log(eps / target) if eps > 0 else -745.0

    def coarse(s: float) -> float:
        return log_ratio(group_epsilon(q, s, steps, delta, k, rel_err=_SEARCH_REL_ERR, vdi_max=_SEARCH_VDI_MAX))

    def fine(s: float) -> float:
        return log_ratio(group_epsilon(q, s, steps, delta, k))

    g1 = coarse(1.0)
    lo, hi = _secant(coarse, *_bracket(coarse, 1.0, g1, 1.0, g1, "coarse grid"), tol)
    top = fine(hi)
    lo, glo, hi, ghi = _bracket(fine, hi / 1.02, fine(hi / 1.02), hi, top, "fine grid")
    return float(_secant(fine, lo, glo, hi, ghi, tol)[1])


def records_per_person(persons: Sequence[Hashable]) -> dict[int, int]:
    """The distribution of records per person: {records: people with that many}, ascending."""
    counts = Counter(Counter(persons).values())
    return dict(sorted(counts.items()))
