"""Simulated audits of exactly ε-DP mechanisms, for the alarm's error rate (tests/test_alarms.py).

A simulated DP arm is a score mechanism: a unit's score is ``shift`` if it is a
member (0 if not) plus noise. With Laplace(1) noise and shift ε it is exactly
ε-DP (the likelihood ratio of Laplace(ε, 1) to Laplace(0, 1) is at most e^ε,
reached on a whole half-line); with N(0, 1) noise and shift μ it is exactly
(ε, δ)-DP for the μ of :func:`privleak.audit.one_run.gaussian_mu`. Scores of
different units are independent, so every route's assumption holds here: the
simulation measures each test at its own level, and the audit's decision.

One audit of one arm, every route as the pipeline computes it:

* one-run: m canaries, each included with probability ½, scored by the
  mechanism; guesses by :func:`~privleak.audit.one_run.guess_counts`; the
  alarm test against the claimed (ε, δ);
* membership: ``attacks`` independent score sets of n members and n
  non-members, :func:`~privleak.audit.epsilon.empirical_epsilon` on each (one
  seeded split for all), the attack with the largest selection-half bound
  tested on its held-out half; the ROC band on the same held-out half.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privleak.audit.alarms import (
    AlarmTest,
    alarm_decision,
    empirical_epsilon_diagnostic,
    one_run_alarm_test,
    roc_band_diagnostic,
)
from privleak.audit.epsilon import empirical_epsilon, roc_band_check, split_halves
from privleak.audit.one_run import gaussian_mu, guess_counts


@dataclass(frozen=True)
class Mechanism:
    """Scores ``shift · member + noise``; ``claim``: the (ε, δ) its accountant states."""

    name: str
    noise: str  # "laplace" or "normal"
    shift: float
    claim: tuple[float, float]

    def scores(self, rng: np.random.Generator, member: np.ndarray) -> np.ndarray:
        noise = rng.laplace(size=member.shape) if self.noise == "laplace" else rng.normal(size=member.shape)
        return self.shift * member + noise


def laplace(eps: float) -> Mechanism:
    """Exactly ε-DP; claimed (ε, 0): the tightest claim it meets."""
    return Mechanism(f"Laplace ε={eps:g}", "laplace", eps, (eps, 0.0))


def gaussian(eps: float, delta: float = 1e-5) -> Mechanism:
    """Exactly (ε, δ)-DP: the Gaussian mechanism with μ = gaussian_mu(ε, δ)."""
    return Mechanism(f"Gaussian ε={eps:g}", "normal", gaussian_mu(eps, delta), (eps, delta))


def broken(shift: float = 3.0, claim: tuple[float, float] = (1.0, 1e-5)) -> Mechanism:
    """DP-SGD without its noise: members separate strongly (AUC ≈ 0.98 at shift 3), ε = 1 claimed."""
    return Mechanism(f"no noise (shift {shift:g}), claims ε={claim[0]:g}", "normal", shift, claim)


def arm_tests(rng: np.random.Generator, arm: str, mech: Mechanism, n: int, m: int = 1000, attacks: int = 2,
              seed: int = 0, max_thresholds: int = 2000, membership: bool = True) -> list[AlarmTest]:
    """Every route's test of one simulated arm (module docstring)."""
    eps, delta = mech.claim
    inc = rng.random(m) < 0.5
    counts = [(r, v) for _, _, r, v in guess_counts(mech.scores(rng, inc), inc)]
    tests = [one_run_alarm_test(arm, m, counts, eps, delta)]
    if not membership:
        return tests
    member = np.r_[np.ones(n, bool), np.zeros(n, bool)]
    sets = [mech.scores(rng, member) for _ in range(attacks)]
    bounds = [empirical_epsilon(s[:n], s[n:], delta, alpha=0.05, seed=seed, max_thresholds=max_thresholds)
              for s in sets]
    best = max(range(attacks), key=lambda a: bounds[a].epsilon_select)
    tests.append(empirical_epsilon_diagnostic(arm, bounds[best], eps, delta))
    _, pos_eval, _, neg_eval = split_halves(sets[best][:n], sets[best][n:], seed)
    tests.append(roc_band_diagnostic(arm, roc_band_check(pos_eval, neg_eval, eps, delta)))
    return tests


@dataclass(frozen=True)
class Tally:
    """Out of ``runs`` audits: how many raised the alarm, how many had a diagnostic reject."""

    runs: int
    alarms: int
    diagnostics: int


def simulate(arms: list[Mechanism], n: int, runs: int, seed: int, alpha: float = 0.05, **kw) -> Tally:
    """``runs`` independent audits, each of every arm in ``arms``, decided by :func:`alarm_decision`."""
    alarms = diags = 0
    for run in range(runs):
        rng = np.random.default_rng([seed, run])
        tests = [t for i, mech in enumerate(arms) for t in arm_tests(rng, f"arm{i}", mech, n, seed=run, **kw)]
        decision = alarm_decision(tests, alpha)
        alarms += bool(decision.violated)
        diags += any(o.rejected for o in decision.diagnostics)
    return Tally(runs, alarms, diags)
