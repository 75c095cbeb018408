"""Central DP releases of corpus statistics: the Laplace and Gaussian mechanisms, composed with dp_accounting.

Laplace (Dwork et al. 2006): f(D) + Lap(Δ₁/ε) is ε-DP for a query with ℓ₁
sensitivity Δ₁. Gaussian: f(D) + N(0, σ²I) with σ = Δ₂·√(2 ln(1.25/δ))/ε is
(ε, δ)-DP for ε < 1 (source document 004; Dwork & Roth Thm A.1); here σ is
the analytic Gaussian mechanism's (Balle & Wang 2018), exact at any ε. A release of several statistics is the composition of one mechanism
per statistic, accounted by ``dp_accounting``'s PLD accountant under
add-or-remove-one of a *unit* (a person when the records say which person
they belong to, else a record).

:func:`release_summary` publishes what a team would say about its corpus —
units, counts per PII type, counts per condition, the mean and a histogram of
systolic blood pressure clipped to a stated range — with every unit's
contribution bounded so the sensitivities hold:

* PII-type counts: units having ≥ 1 span of each type; a unit moves each of
  the T counts by ≤ 1 → Δ₂ = √T (Gaussian);
* condition counts: each unit counts under **one** condition (its first) →
  Δ₁ = 1 (Laplace);
* systolic BP: each unit's first reading, clipped to [lo, hi]; the sum of
  (x − lo) has Δ₁ = hi − lo and the 10-mmHg histogram Δ₁ = 1 (Laplace
  each); mean = noisy sum / (sum of the noisy histogram) + lo, post-processing;
* number of units: Δ₁ = 1 (Laplace).

Budget: each of the Q statistics is first calibrated for ε/Q (basic
composition, Gaussian σ at (ε/Q, δ)); then every noise is scaled by one
common factor t ≤ 1, the smallest with the PLD-composed ε(δ) ≤ ε.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import dp_accounting
import numpy as np
from dp_accounting.pld import pld_privacy_accountant

from ..data.records import PHI_LABELS, Record

_ADD_REMOVE = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE


def laplace(values: np.ndarray | float, l1_sensitivity: float, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """f + Lap(Δ₁/ε) per coordinate: ε-DP."""
    if not (epsilon > 0 and l1_sensitivity > 0):
        raise ValueError("Laplace mechanism: ε and the sensitivity must be > 0")
    v = np.asarray(values, dtype=np.float64)
    return v + rng.laplace(0.0, l1_sensitivity / epsilon, size=v.shape)


def gaussian_sigma_classic(epsilon: float, delta: float, l2_sensitivity: float) -> float:
    """σ = Δ₂·√(2 ln(1.25/δ))/ε, (ε, δ)-DP for 0 < ε < 1 (Dwork & Roth, Theorem A.1)."""
    if not (0 < epsilon < 1 and 0 < delta < 1):
        raise ValueError("the classic Gaussian calibration needs 0 < ε < 1 and 0 < δ < 1; use gaussian_sigma")
    return l2_sensitivity * math.sqrt(2 * math.log(1.25 / delta)) / epsilon


def _pld_epsilon(events: Sequence[dp_accounting.DpEvent], delta: float) -> float:
    acc = pld_privacy_accountant.PLDAccountant(neighboring_relation=_ADD_REMOVE)
    acc.compose(dp_accounting.ComposedDpEvent(list(events)))
    return float(acc.get_epsilon(delta))


def gaussian_delta(sigma: float, epsilon: float, l2_sensitivity: float = 1.0) -> float:
    """The exact δ of the Gaussian mechanism at ε (Balle & Wang 2018, Theorem 8):
    δ = Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ)."""
    from scipy.stats import norm

    a, b = l2_sensitivity / (2 * sigma), epsilon * sigma / l2_sensitivity
    return float(norm.cdf(a - b) - math.exp(epsilon) * norm.cdf(-a - b))


def gaussian_sigma(epsilon: float, delta: float, l2_sensitivity: float) -> float:
    """The smallest σ with the Gaussian mechanism (ε, δ)-DP at any ε (the analytic Gaussian mechanism)."""
    if not (epsilon > 0 and 0 < delta < 1 and l2_sensitivity > 0):
        raise ValueError("Gaussian mechanism: need ε > 0, 0 < δ < 1 and a positive sensitivity")
    from scipy.optimize import brentq

    lo, hi = 1e-6 * l2_sensitivity, l2_sensitivity
    while gaussian_delta(hi, epsilon, l2_sensitivity) > delta:
        hi *= 2
    return float(brentq(lambda s: gaussian_delta(s, epsilon, l2_sensitivity) - delta, lo, hi, xtol=1e-12, rtol=1e-10))


def gaussian(values: np.ndarray | float, sigma: float, rng: np.random.Generator) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64)
    return v + rng.normal(0.0, sigma, size=v.shape)


@dataclass
class Query:
    """One released statistic: its exact value is never stored, only the noisy one and how it was made."""

    name: str
    mechanism: str  # "laplace" | "gaussian"
    sensitivity: float  # ℓ₁ (Laplace) or ℓ₂ (Gaussian), per unit
    noise_scale: float  # Laplace b or Gaussian σ
    noise_sd: float
    epsilon_alone: float | None  # this query's ε by itself (Laplace: Δ₁/b; Gaussian: at the release's δ)
    labels: list[str]
    values: list[float]


@dataclass
class ReleasedSummary:
    epsilon: float  # composed, PLD accountant, at delta
    delta: float
    epsilon_basic_composition: float  # Σ of the queries' ε alone (basic composition; the Gaussians' each at δ)
    accountant: str
    unit: str
    n_units_exact_kept: bool  # always False: the exact values are not in the release
    clipping: dict[str, list[float]]
    queries: list[Query] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def query(self, name: str) -> Query | None:
        return next((q for q in self.queries if q.name == name), None)


_SYSTOLIC = re.compile(r"(\d{2,3})\s*/\s*\d{2,3}")


def _units(records: Sequence[Record]) -> tuple[list[list[Record]], str]:
    people: dict[str, list[Record]] = {}
    singles: list[list[Record]] = []
    for r in records:
        pid = r.meta.get("person_id")
        if pid is None:
            singles.append([r])
        else:
            people.setdefault(str(pid), []).append(r)
    unit = "person (records grouped by person_id; records without one count as their own person)" if people else "record"
    return list(people.values()) + singles, unit


def _spans(unit: list[Record], label: str) -> list[str]:
    return [s.value(r.text) for r in unit for s in (r.pii or []) if s.label == label]


def exact_statistics(records: Sequence[Record], bp_range: tuple[float, float] = (70.0, 200.0),
                     bin_width: float = 10.0) -> dict[str, tuple[list[str], np.ndarray]]:
    """The statistics before noise, each unit's contribution bounded (see the module docstring)."""
    units, _ = _units([r for r in records if r.kind != "canary"])
    lo, hi = bp_range
    out: dict[str, tuple[list[str], np.ndarray]] = {"units": (["units"], np.array([float(len(units))]))}
    if not any(r.pii for u in units for r in u):
        return out
    out["pii_type_counts"] = (list(PHI_LABELS), np.array([float(sum(bool(_spans(u, t)) for u in units))
                                                          for t in PHI_LABELS]))
    conds: Counter[str] = Counter()
    for u in units:
        c = _spans(u, "CONDITION")
        if c:
            conds[c[0].lower()] += 1
    from ..data.vocab import CONDITIONS

    # The bins are public (the vocabulary), never read off the data: a bin of its own would reveal a rare value.
    labels = sorted({c.lower() for c in CONDITIONS})
    out["condition_counts"] = (labels, np.array([float(conds.get(c, 0)) for c in labels]))
    sys_vals = []
    for u in units:
        for v in _spans(u, "BLOOD_PRESSURE"):
            m = _SYSTOLIC.search(v)
            if m:
                sys_vals.append(min(max(float(m.group(1)), lo), hi))
                break
    edges = np.arange(lo, hi + bin_width, bin_width)
    hist, _ = np.histogram(sys_vals, bins=edges)
    out["systolic_sum_above_lo"] = (["sum"], np.array([float(sum(x - lo for x in sys_vals))]))
    out["systolic_histogram"] = ([f"{a:g}-{b:g}" for a, b in zip(edges[:-1], edges[1:])], hist.astype(float))
    return out


def release_summary(records: Sequence[Record], epsilon: float, delta: float, seed: int,
                    bp_range: tuple[float, float] = (70.0, 200.0), bin_width: float = 10.0) -> ReleasedSummary:
    """The corpus summary under (ε, δ)-DP: every statistic's noise calibrated so the PLD composition is ε at δ."""
    if not (epsilon > 0 and math.isfinite(epsilon)) or not (0 < delta < 1):
        raise ValueError("a DP summary needs ε > 0 and 0 < δ < 1")
    lo, hi = bp_range
    if not hi > lo:
        raise ValueError("the blood-pressure clipping range needs hi > lo")
    stats = exact_statistics(records, bp_range, bin_width)
    sens: dict[str, tuple[str, float]] = {"units": ("laplace", 1.0)}
    if "pii_type_counts" in stats:
        sens.update({"pii_type_counts": ("gaussian", math.sqrt(len(PHI_LABELS))), "condition_counts": ("laplace", 1.0),
                     "systolic_sum_above_lo": ("laplace", hi - lo),
                     "systolic_histogram": ("laplace", 1.0)})
    # Equal shares under basic composition (ε/Q each: Laplace b = Δ₁Q/ε, Gaussian σ for (ε/Q, δ)), then every
    # noise scaled by one factor t so that the tighter PLD composition is exactly ε at δ.
    share = epsilon / len(sens)
    base = {name: (d / share if mech == "laplace" else gaussian_sigma(share, delta, 1.0) * d) for name, (mech, d) in sens.items()}

    def events(t: float) -> list[dp_accounting.DpEvent]:
        # noise multipliers relative to the sensitivity: Laplace b/Δ₁, Gaussian σ/Δ₂
        return [dp_accounting.GaussianDpEvent(t * base[n] / d) if mech == "gaussian" else
                dp_accounting.LaplaceDpEvent(t * base[n] / d) for n, (mech, d) in sens.items()]

    lo_t, hi_t = 0.05, 1.0  # t = 1 is the basic-composition calibration, valid but loose
    for _ in range(40):  # bisection: composed ε decreases in t
        mid = (lo_t + hi_t) / 2
        if _pld_epsilon(events(mid), delta) > epsilon:
            lo_t = mid
        else:
            hi_t = mid
        if hi_t - lo_t < 1e-4:
            break
    t = hi_t
    rng = np.random.default_rng([seed, 0x5E1EA5E])
    queries = []
    for (name, (mech, d)), (labels, exact) in zip(sens.items(), (stats[n] for n in sens)):
        scale = t * base[name]
        if mech == "laplace":
            noisy, sd, alone = laplace(exact, d, d / scale, rng), math.sqrt(2) * scale, d / scale
        else:
            noisy, sd = gaussian(exact, scale, rng), scale
            alone = _pld_epsilon([dp_accounting.GaussianDpEvent(scale / d)], delta)
        queries.append(Query(name=name, mechanism=mech, sensitivity=d, noise_scale=scale, noise_sd=sd,
                             epsilon_alone=alone, labels=labels, values=[round(float(v), 2) for v in noisy]))
    s_eps = _pld_epsilon(events(t), delta)
    _, unit = _units([r for r in records if r.kind != "canary"])
    notes = ["canary records (planted audit secrets) are excluded",
             "released counts can be negative or fractional: noise is not post-processed away, so it stays unbiased"]
    clipping = {}
    if "systolic_histogram" in stats:
        clipping["systolic_bp_mmHg"] = [lo, hi]
        notes.append(f"systolic BP: each unit's first reading, clipped to [{lo:g}, {hi:g}] mmHg; "
                     "mean = noisy sum / noisy readings + lower bound")
    summary = ReleasedSummary(epsilon=s_eps, delta=delta,
                              epsilon_basic_composition=float(sum(q.epsilon_alone or 0 for q in queries)),
                              accountant="dp_accounting PLD (add-or-remove-one unit)", unit=unit,
                              n_units_exact_kept=False, clipping=clipping, queries=queries, notes=notes)
    return summary


def released_mean(summary: ReleasedSummary) -> float | None:
    """Systolic mean from the released sum and count (post-processing: no extra privacy cost)."""
    total, hist = summary.query("systolic_sum_above_lo"), summary.query("systolic_histogram")
    if total is None or hist is None or sum(hist.values) <= 0:
        return None
    return total.values[0] / sum(hist.values) + summary.clipping["systolic_bp_mmHg"][0]
