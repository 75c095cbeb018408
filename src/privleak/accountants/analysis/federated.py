r"""Privacy accounting of DP-FedAvg with Poisson client sampling: per client and per record.

DP-FedAvg (McMahan et al. 2018, "Learning differentially private recurrent
language models") with fixed clipping is, per round, one sampled Gaussian
mechanism whose unit is a **client**: every client joins the round
independently with probability q (Poisson), its model update Δ_k is clipped
to ‖Δ_k‖ ≤ C, and the server releases Σ_k Δ̄_k + N(0, σ²C²I). Adding or
removing one client changes the sum by at most C, so T rounds are T
compositions of the Poisson-subsampled Gaussian with noise multiplier σ —
exactly the DP-SGD event with "record" read as "client"
(:func:`client_epsilons`).

Flower's fixed-size sampling (a fixed number of clients per round, without
replacement) is a *different* mechanism: its amplification is only known
under the replace-one relation (Wang, Balle & Kasiviswanathan 2019, RDP),
and Flower 1.41's own accountant for its fixed-clipping wrappers accepts
only "no-amplification". Our DP strategy samples Poisson, so this is the
accounting that matches what runs.

**One record inside a client** (the unit of the record-level attacks and of
the one-run audit's canaries) is not an add/remove of a client: the client
is there either way and joins each round with probability q whatever its
records; only its clipped update changes, from Δ̄ to Δ̄′, both of norm ≤ C.
Adding or removing the record is therefore a **replacement** of one
client's contribution, and each round is the Poisson-subsampled Gaussian
under replace-one: ``(1 − q)·N(0, σ²) + q·N(−1, σ²)`` vs ``(1 − q)·N(0, σ²) +
q·N(1, σ²)`` in units of C (the worst case puts Δ̄ and Δ̄′ opposite; a
2-D numerical check of other angles and norms is in the tests).
:func:`record_epsilon` composes it T times by PLD (dp_accounting's
``NeighboringRelation.REPLACE_ONE``). The former figure — group privacy over
remove-then-add, 2ε₁ at δ₁ = δ/(1 + e^{ε₁}) — is also sound but much looser
(δ₁ shrinks with e^{ε₁}, so ε₁ grows past the client ε); tests keep it as an
oracle that must stay above this one.
"""

from __future__ import annotations

import math

from .grid import VDI_MAX, GridTooLarge, describe
from .pld import REL_ERR, PldEvent, adaptive_epsilon, estimate_grid
from .summary import EpsilonReport, epsilons
from .validation import (PLD_DELTA_MIN, PLD_DELTA_REASON, check_delta, check_noise_multiplier, check_sample_rate,
    check_steps)


def client_epsilons(*, sample_rate: float, noise_multiplier: float, rounds: int, delta: float) -> EpsilonReport:
    """Client-level ε of ``rounds`` rounds of Poisson(q)-sampled DP-FedAvg at noise multiplier σ, by PLD,
    RDP and PRV (add/remove one client; the same event as DP-SGD's)."""
    return epsilons(sample_rate=sample_rate, noise_multiplier=noise_multiplier, steps=rounds, delta=delta)


def replace_one_event(sample_rate: float, noise_multiplier: float, rounds: int) -> PldEvent:
    return PldEvent(noise_multiplier=noise_multiplier, sample_rate=sample_rate, count=rounds, replace=True)


def record_epsilon(*, sample_rate: float, noise_multiplier: float, rounds: int, delta: float) -> float:
    """Record-level ε at ``delta`` of DP-FedAvg: replace-one of a client's contribution, PLD (see the module
    docstring); about 1e-4 relative above the exact figure, like the other PLD figures here."""
    q, s = check_sample_rate(sample_rate), check_noise_multiplier(noise_multiplier)
    t = check_steps(rounds, name="rounds")
    d = check_delta(delta, floor=PLD_DELTA_MIN, floor_reason=PLD_DELTA_REASON)
    ev = replace_one_event(q, s, t)
    size = estimate_grid([ev], VDI_MAX)
    if not size.fits():
        raise GridTooLarge(f"the record-level accounting of sample_rate={q:g}, noise_multiplier={s:g}, "
                           f"rounds={t} cannot run: {describe(size)}; use fewer rounds or more noise",
                           points=max(size.single_points, size.composed_points))
    return adaptive_epsilon([ev], d, REL_ERR, math.inf)
