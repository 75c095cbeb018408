"""Client-level privacy accounting of DP-FedAvg with Poisson client sampling.

DP-FedAvg (McMahan et al. 2018, "Learning differentially private recurrent
language models") with fixed clipping is, per round, one sampled Gaussian
mechanism whose unit is a **client**: every client joins the round
independently with probability q (Poisson), its model update Δ_k is clipped
to ‖Δ_k‖ ≤ C, and the server releases Σ_k Δ̄_k + N(0, σ²C²I). Adding or
removing one client changes the sum by at most C, so T rounds are T
compositions of the Poisson-subsampled Gaussian with noise multiplier σ —
exactly the DP-SGD event with "record" read as "client". The central arms'
accountants apply unchanged (:func:`privleak.models.accounting.epsilons`:
PLD, RDP and PRV), and σ is calibrated for the target ε the same way.

Flower's fixed-size sampling (a fixed number of clients per round, without
replacement) is a *different* mechanism: its amplification is only known
under the replace-one relation (Wang, Balle & Kasiviswanathan 2019, RDP),
and Flower 1.41's own accountant for its fixed-clipping wrappers accepts
only "no-amplification". Our DP strategy samples Poisson, so this is the
accounting that matches what runs.

**One record inside a client** (the unit of the record-level attacks and of
the one-run audit's canaries) is not an add/remove of a client: the client
is there either way, its update changes from Δ̄ to Δ̄′ with ‖Δ̄ − Δ̄′‖ ≤ 2C,
i.e. the client is *replaced*. Remove-then-add is two add/remove steps, so
by group privacy an (ε₁, δ₁) client-level guarantee gives (2ε₁,
(1 + e^ε₁)δ₁) per record; :func:`record_epsilon` picks δ₁ = δ/(1 + e^ε₁)
(a fixed point in ε₁) so the record-level guarantee is (2ε₁, δ) at the
arms' common δ. That is the ε the record-level audits are checked against.
"""

from __future__ import annotations

import math

from .accounting import EpsilonReport, epsilon_pld, epsilons


def client_epsilons(q: float, sigma: float, rounds: int, delta: float) -> EpsilonReport:
    """Client-level ε of ``rounds`` rounds of Poisson(q)-sampled DP-FedAvg at noise multiplier σ, by PLD,
    RDP and PRV (add/remove one client; the same event as DP-SGD's)."""
    return epsilons(q, sigma, rounds, delta)


def record_epsilon(q: float, sigma: float, rounds: int, delta: float, max_iter: int = 50) -> float:
    """Record-level ε at ``delta`` implied by the client-level guarantee: 2ε₁ with
    ε₁ = ε_PLD(q, σ, T, δ/(1 + e^ε₁)) (group privacy over a client's replacement, see the module docstring)."""
    eps1 = epsilon_pld(q, sigma, rounds, delta)
    for _ in range(max_iter):
        nxt = epsilon_pld(q, sigma, rounds, _split_delta(delta, eps1))
        # ε₁ grows as δ₁ falls and δ₁ falls as ε₁ grows: the iteration climbs monotonically to the fixed point.
        if nxt <= eps1:
            # (nxt, δ₁)-DP with nxt ≤ ε₁ is (ε₁, δ₁)-DP, and (1 + e^ε₁)·δ₁ = δ: the group bound holds at δ.
            return 2.0 * eps1
        eps1 = nxt * (1.0 + 1e-4)  # a hair above, so the next check can close
    return math.inf


def _split_delta(delta: float, eps1: float) -> float:
    return delta / (1.0 + math.exp(min(eps1, 700.0)))
