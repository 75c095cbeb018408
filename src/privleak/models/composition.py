"""Several DP-SGD trainings on the same records composed into one ε: the privacy-budget ledger's arithmetic.

Kept beside :mod:`.accounting` (whose helpers it uses) so that module stays
one mechanism; the accountants package (``privleak.accountants``) has the
same composition as ``compose_epsilon``.
"""

from __future__ import annotations

from collections.abc import Sequence

import dp_accounting
import numpy as np
from dp_accounting import rdp as dp_rdp

from ..core.errors import UserError
from .accounting import _QUICK_RDP_ORDERS, _event, _prv_eps_error, _quiet_rdp, _validated


def composed_epsilon(trainings: Sequence[tuple[float, float, int]], delta: float) -> float:
    """ε at δ of releasing the outputs of several DP-SGD trainings on the same records: their composition,
    each training ``(q, σ, T)`` — T steps of the Poisson(q)-subsampled Gaussian with noise multiplier σ.

    Opacus's ``PRVAccountant`` with one history entry per training (heterogeneous composition, Gopi et al.
    2021: each training's PRV self-composed T times, the results convolved), the upper bound
    ``ε̂ + eps_error`` with the margin sized as :func:`epsilon_prv` does, from dp_accounting's RDP bound of
    the same composition. One training gives :func:`epsilon_prv`'s figure (to the margin's sizing). The
    privacy unit of every training must be the same (a record here).
    """
    if not trainings:
        raise UserError("nothing to compose: give at least one (q, sigma, steps) training")
    runs = [_validated(q, sigma, steps, delta)[:3] for q, sigma, steps in trainings]
    delta = float(delta)
    rdp = dp_rdp.RdpAccountant(orders=list(_QUICK_RDP_ORDERS))
    with _quiet_rdp():
        rdp.compose(dp_accounting.ComposedDpEvent([_event(q, sigma, steps) for q, sigma, steps in runs]))
        estimate = float(rdp.get_epsilon(delta))
    from opacus.accountants import PRVAccountant

    acc = PRVAccountant()
    acc.history = [(sigma, q, steps) for q, sigma, steps in runs]
    try:
        with _quiet_rdp(), np.errstate(divide="ignore"):
            return float(acc.get_epsilon(delta, eps_error=_prv_eps_error(estimate)))
    except (RuntimeError, ValueError) as exc:
        raise UserError(f"the PRV accountant cannot compose these {len(runs)} trainings at delta={delta:g} ({exc})") \
            from exc
