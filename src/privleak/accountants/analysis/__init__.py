"""Pure accounting functions: ε and σ for DP-SGD-style mechanisms, every argument keyword-only.

One concept, three numerical methods, all for the same mechanism. Each of
``T`` DP-SGD steps draws a Poisson batch (every record independently with
probability ``q``), sums the per-example gradients clipped to norm ``C``
and adds ``N(0, σ²C²·I)``. One step is, for add/remove-one neighbours,
dominated by the one-dimensional pair

    P = N(0, σ²)      and      Q = (1 − q)·N(0, σ²) + q·N(1, σ²)

(and the same pair swapped). Its privacy loss is ``L(x) = log(Q(x)/P(x))``,
``δ(ε) = E_Q[(1 − e^{ε − L})₊]``, and T steps add T copies of L. ε(δ) is
the smallest ε with δ(ε) ≤ δ. :mod:`.rdp`, :mod:`.pld` and :mod:`.prv`
bound it three ways; :mod:`.calibration` inverts them; :mod:`.group`,
:mod:`.federated` and :mod:`.composition` apply them to a person, a
federated record and a ledger of trainings; :mod:`.units` composes trainings of different units at one. Inputs are checked
(:mod:`.validation`) and grids sized (:mod:`.grid`) before any work.
"""

from .calibration import SigmaReport, calibrate_sigma, sigmas
from .composition import Training, compose_epsilon
from .federated import client_epsilons, record_epsilon
from .grid import GridTooLarge
from .group import GroupEpsilon, calibrate_group_sigma, group_epsilon, group_epsilon_conversion, group_epsilon_direct
from .pld import check_pld_feasible, epsilon_pld
from .prv import epsilon_prv
from .rdp import INTEGER_RDP_ORDERS, RDP_ORDERS, epsilon_opacus_rdp, epsilon_rdp, quiet_rdp
from .steps import opacus_calibration_steps, steps_for
from .summary import EpsilonReport, epsilons
from .units import Composed, UnitEvent, compose_events
from .validation import check_privacy_params

__all__ = [
    "INTEGER_RDP_ORDERS",
    "RDP_ORDERS",
    "Composed",
    "EpsilonReport",
    "GridTooLarge",
    "GroupEpsilon",
    "SigmaReport",
    "Training",
    "calibrate_group_sigma",
    "calibrate_sigma",
    "check_pld_feasible",
    "check_privacy_params",
    "client_epsilons",
    "compose_epsilon",
    "compose_events",
    "epsilon_opacus_rdp",
    "epsilon_pld",
    "epsilon_prv",
    "epsilon_rdp",
    "epsilons",
    "group_epsilon",
    "group_epsilon_conversion",
    "group_epsilon_direct",
    "opacus_calibration_steps",
    "quiet_rdp",
    "record_epsilon",
    "sigmas",
    "steps_for",
    "UnitEvent",
]
