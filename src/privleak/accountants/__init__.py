"""Differential-privacy accountants: pure analysis functions, thin stateful accountants, a registry.

Layout after Opacus's ``opacus/accountants``: :mod:`.analysis` holds the
pure functions (RDP, PLD and PRV ε; σ calibration; steps from rate and
epochs; person-level, federated record-level and composed ε), every one
keyword-only with one naming scheme — ``sample_rate``, ``noise_multiplier``,
``steps``, ``delta``, ``target_epsilon``, ``group_size``.
:mod:`.accountant` records (sample_rate, noise_multiplier, steps) events and
composes them; :mod:`.registry` maps "pld", "prv", "rdp" to both. This layer
imports only :mod:`privleak.core` and third-party code.
"""

from .accountant import Accountant, PLDAccountant, PRVAccountant, RDPAccountant
from .analysis import *  # noqa: F403
from .analysis import __all__ as _analysis_all
from .registry import ACCOUNTANTS, EPSILON_FUNCTIONS, create_accountant, epsilon

__all__ = [*_analysis_all, "ACCOUNTANTS", "EPSILON_FUNCTIONS", "Accountant", "PLDAccountant", "PRVAccountant",
           "RDPAccountant", "create_accountant", "epsilon"]
