r"""Trainings of different privacy units composed at one unit: the budget ledger's events.

Every DP training of the same people spends one budget, whatever unit its
own accountant states. To compose a record-level DP-SGD run, a user-level
(person) run and a client-level DP-FedAvg run of the same people, each is
read as the event it is *for the unit being composed* (Poisson rate q,
noise multiplier σ, T steps; sensitivity = the clip norm):

* **for one record** (the common unit of ``privleak budget``'s "ε per
  record"): record-level DP-SGD is the add/remove-one subsampled Gaussian;
  one record of a person under user-level DP-SGD, or of a client under
  DP-FedAvg, *replaces* that person's (client's) clipped contribution — the
  replace-one subsampled Gaussian
  (:func:`privleak.accountants.record_epsilon`, :mod:`.federated`).
* **for one person with k records**: record-level DP-SGD is the mixture of
  Gaussians of a k-record group (Ganesh 2024; :func:`.group.mixture_event`);
  user-level DP-SGD is the add/remove-one subsampled Gaussian of the person;
  DP-FedAvg, where a person's records lie in one client, is replace-one of
  that client's contribution.

:func:`compose_events` composes such events by PLD on one grid (identical
events merged: T₁ steps then T₂ of one mechanism is T₁ + T₂ steps of it, so
a ledger of thousands of trainings costs as many FFTs as it has distinct
mechanisms). Where the grid cannot fit the limits it falls back to basic
composition (Dwork & Roth 2014, Thm 3.16: ε's add, δ's add), each event at
δ/m with its own sound bound, and says so.

Replace-one as the event of one record under user-level (ULS) training:
when the person has other records, removing one record changes their
clipped contribution (replace-one); when it is their only record, it removes
the person (add/remove-one). The replace-one ε is the larger of the two for
the subsampled Gaussian over the settings ``tests/test_budget_units.py``
checks against dp_accounting, so it is used for both.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Literal, Sequence

from privleak.core.errors import UserError

from .federated import record_epsilon
from .grid import GridTooLarge
from .group import conversion, group_epsilon, mixture_event
from .pld import REL_ERR, PldEvent, adaptive_epsilon, check_pld_feasible, pld_epsilon
from .rdp import QUICK_RDP_ORDERS, rdp_epsilon
from .validation import (PLD_DELTA_MIN, PLD_DELTA_REASON, check_delta, check_group_size,
    check_noise_multiplier, check_sample_rate, check_steps)

Relation = Literal["add_remove", "replace_one"]


@dataclass(frozen=True)
class UnitEvent:
    """One training as it acts on one unit: T steps of the Poisson(q)-subsampled Gaussian with noise
    multiplier σ, under add/remove-one or replace-one of the unit's contribution, or — ``group_size`` k > 1,
    add/remove — the mixture of Gaussians of a k-record group under record-level DP-SGD."""

    sample_rate: float
    noise_multiplier: float
    steps: int
    relation: Relation = "add_remove"
    group_size: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "sample_rate", check_sample_rate(self.sample_rate))
        object.__setattr__(self, "noise_multiplier", check_noise_multiplier(self.noise_multiplier))
        object.__setattr__(self, "steps", check_steps(self.steps))
        object.__setattr__(self, "group_size", check_group_size(self.group_size))
        if self.relation not in ("add_remove", "replace_one"):
            raise UserError(f"relation={self.relation!r} is unknown; use 'add_remove' or 'replace_one'")
        if self.relation == "replace_one" and self.group_size > 1:
            raise UserError("a replace-one event is one unit's contribution; group_size must be 1")

    @property
    def mechanism(self) -> tuple[float, float, str, int]:
        """What one step is, without T: events with the same mechanism compose by adding their steps."""
        return self.sample_rate, self.noise_multiplier, self.relation, self.group_size

    def pld(self) -> PldEvent:
        if self.group_size > 1:
            return mixture_event(self.sample_rate, self.noise_multiplier, self.steps, self.group_size)
        return PldEvent(noise_multiplier=self.noise_multiplier, sample_rate=self.sample_rate, count=self.steps,
                        replace=self.relation == "replace_one")

    def epsilon_alone(self, delta: float) -> float:
        """A sound ε at ``delta`` for this event alone, whatever the grid limits (the fallback's terms)."""
        q, s, t, k = self.sample_rate, self.noise_multiplier, self.steps, self.group_size
        if k > 1:
            return group_epsilon(sample_rate=q, noise_multiplier=s, steps=t, delta=delta, group_size=k).epsilon
        if self.relation == "replace_one":
            try:
                return record_epsilon(sample_rate=q, noise_multiplier=s, rounds=t, delta=delta)
            except GridTooLarge:  # replace-one = remove then add: group privacy over two add/remove neighbours
                check_pld_feasible(sample_rate=q, noise_multiplier=s, steps=t)
                return conversion(q, s, t, delta, 2)[0]
        try:
            check_pld_feasible(sample_rate=q, noise_multiplier=s, steps=t)
            return pld_epsilon(q, s, t, delta, REL_ERR)
        except GridTooLarge:
            return rdp_epsilon(q, s, t, delta, QUICK_RDP_ORDERS)


@dataclass(frozen=True)
class Composed:
    """ε at ``delta`` of a composition, and how it was computed."""

    epsilon: float
    delta: float
    method: Literal["pld", "basic"]
    mechanisms: int  # distinct mechanisms after merging identical events


def merge(events: Sequence[UnitEvent]) -> list[UnitEvent]:
    """Identical mechanisms merged, their steps added (order kept by first appearance)."""
    steps: Counter = Counter()
    for e in events:
        steps[e.mechanism] += e.steps
    return [UnitEvent(sample_rate=q, noise_multiplier=s, steps=t, relation=r, group_size=k)  # type: ignore[arg-type]
            for (q, s, r, k), t in steps.items()]


def compose_events(*, events: Sequence[UnitEvent], delta: float) -> Composed:
    """ε at ``delta`` of releasing the outputs of every event's training, for the one unit they act on.

    PLD over all of them on one grid (dp_accounting's arithmetic, an upper bound ~1e-4 relative above the
    exact composition); when that grid cannot fit the memory limits, basic composition of each merged
    event's own sound ε at δ/m (m events) — looser, never wrong.
    """
    if not events:
        raise UserError("events must be a non-empty list of UnitEvent")
    d = check_delta(delta, floor=PLD_DELTA_MIN, floor_reason=PLD_DELTA_REASON)
    merged = merge(events)
    try:
        for e in merged:
            if e.group_size == 1:
                check_pld_feasible(sample_rate=e.sample_rate, noise_multiplier=e.noise_multiplier, steps=e.steps)
        eps = adaptive_epsilon([e.pld() for e in merged], d, REL_ERR, math.inf)
        return Composed(epsilon=float(eps), delta=d, method="pld", mechanisms=len(merged))
    except GridTooLarge:
        share = d / len(merged)
        total = math.fsum(e.epsilon_alone(max(share, PLD_DELTA_MIN)) if share >= PLD_DELTA_MIN else math.inf
                          for e in merged)
        return Composed(epsilon=float(total), delta=d, method="basic", mechanisms=len(merged))
