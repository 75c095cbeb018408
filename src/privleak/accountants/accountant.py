"""Stateful accountants: record the (sample_rate, noise_multiplier, steps) of every training step, compose them.

Thin state over :mod:`.analysis`, after Opacus's ``IAccountant``: ``step``
records, ``get_epsilon`` composes the whole history with the accountant's
method (:func:`~.analysis.composition.compose_epsilon`). Consecutive steps
with the same (q, σ) are kept as one entry, so a run of T steps is one
:class:`~.analysis.composition.Training`. The same object serves a training
loop (one ``step`` per optimizer step) and a budget ledger (one ``step`` per
training, ``steps=T``).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from .analysis.composition import Training, compose_epsilon
from .analysis.validation import check_noise_multiplier, check_sample_rate, check_steps


class Accountant:
    """History of DP-SGD steps and the ε they spend, by the method named in :attr:`mechanism`."""

    mechanism: ClassVar[Literal["pld", "prv", "rdp"]]

    def __init__(self) -> None:
        self.history: list[Training] = []

    def step(self, *, noise_multiplier: float, sample_rate: float, steps: int = 1) -> None:
        """Record ``steps`` steps at (``sample_rate``, ``noise_multiplier``)."""
        s, q, t = check_noise_multiplier(noise_multiplier), check_sample_rate(sample_rate), check_steps(steps)
        last = self.history[-1] if self.history else None
        if last is not None and (last.noise_multiplier, last.sample_rate) == (s, q):
            self.history[-1] = Training(sample_rate=q, noise_multiplier=s, steps=last.steps + t)
        else:
            self.history.append(Training(sample_rate=q, noise_multiplier=s, steps=t))

    def get_epsilon(self, *, delta: float) -> float:
        """ε at ``delta`` spent by everything recorded (0 before the first step)."""
        if not self.history:
            return 0.0
        return compose_epsilon(trainings=self.history, delta=delta, accountant=self.mechanism)

    def __len__(self) -> int:
        return sum(t.steps for t in self.history)


class PLDAccountant(Accountant):
    """dp_accounting's PLD on a grid fitted to ε (the tight figure this project reports)."""

    mechanism = "pld"


class PRVAccountant(Accountant):
    """Opacus's PRV with the error margin of :func:`~.analysis.prv.epsilon_prv`."""

    mechanism = "prv"


class RDPAccountant(Accountant):
    """dp_accounting's RDP over :data:`~.analysis.rdp.RDP_ORDERS` (looser; for comparison with papers)."""

    mechanism = "rdp"
