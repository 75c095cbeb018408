"""Accountants by name: "pld", "prv", "rdp" (the names configs and the CLI use)."""

from __future__ import annotations

from typing import Callable

from privleak.core.errors import UserError

from .accountant import Accountant, PLDAccountant, PRVAccountant, RDPAccountant
from .analysis.pld import epsilon_pld
from .analysis.prv import epsilon_prv
from .analysis.rdp import epsilon_rdp

ACCOUNTANTS: dict[str, type[Accountant]] = {"pld": PLDAccountant, "prv": PRVAccountant, "rdp": RDPAccountant}

#: The pure ε function of each accountant (all keyword-only: sample_rate, noise_multiplier, steps, delta).
EPSILON_FUNCTIONS: dict[str, Callable[..., float]] = {"pld": epsilon_pld, "prv": epsilon_prv, "rdp": epsilon_rdp}


def _known(name: str) -> str:
    if name not in ACCOUNTANTS:
        raise UserError(f"accountant={name!r} is unknown; use one of {', '.join(repr(n) for n in sorted(ACCOUNTANTS))}")
    return name


def create_accountant(name: str) -> Accountant:
    """A fresh stateful accountant of the named method."""
    return ACCOUNTANTS[_known(name)]()


def epsilon(*, accountant: str, sample_rate: float, noise_multiplier: float, steps: int, delta: float) -> float:
    """ε of one DP-SGD run by the named accountant."""
    return EPSILON_FUNCTIONS[_known(accountant)](sample_rate=sample_rate, noise_multiplier=noise_multiplier,
                                                  steps=steps, delta=delta)
