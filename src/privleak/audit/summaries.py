"""What an arm's attack scores add up to: the empirical ε over the membership attacks, the one-run bound of
the audit canaries, and the most exposed individuals.

The membership attacks (:mod:`privleak.attacks.membership`) compute their
metrics on the evaluation sets chosen there; this module turns their scores
into the arm's empirical ε lower bound and, for DP arms, checks the strongest
attack's ROC against the DP bound.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

from ..attacks.membership.attacks import MembershipResult
from ..attacks.one_run_canaries import OneRunCanaryResult
from ..core.metrics import roc_curve
from ..data.records import Record
from ..data.splits import unit_of
from ..results import (EmpiricalEpsilon, EmpiricalEpsilonBound, ExposedPerson, OneRunCandidate, OneRunEpsilon,
                       OneRunReconstruction, ReconstructionCandidate, RocBand)
from .epsilon import empirical_epsilon, roc_band_check, split_halves
from .one_run import one_run_audit, reconstruction_counts

#: Fewer audit canaries than this and the one-run bound cannot reach even ε ≈ 1.
MIN_ONE_RUN_CANARIES = 50

PROCEDURE = "attack and threshold chosen on a random half, Clopper-Pearson bounds on the other half"


def empirical_epsilon_summary(results: dict[str, MembershipResult], *, delta: float, alpha: float, seed: int,
                              unit_claim: tuple[float, float, int] | None = None) -> EmpiricalEpsilon:
    """The arm's empirical ε from freshly computed membership results.

    Every attack gets the same seeded select/evaluate split (same sizes, same
    seed). The arm's figure is the attack whose bound is largest on the
    *selection* half, evaluated on the held-out half — choosing the attack,
    like the threshold, before looking at the evaluation data keeps the
    1 − α guarantee that a maximum over attacks would lose. For a DP arm
    (``unit_claim`` = the (ε, δ) that holds for the units evaluated, and the
    most records a unit holds) the chosen attack's held-out ROC is also tested
    against that claim with one DKW band (:func:`roc_band_check`) — a
    diagnostic, as every membership-based figure (:mod:`privleak.audit.alarms`).
    """
    # Group-level attacks test a whole person (k records: group privacy, ≈ kε): never a record-level bound.
    results = {k: r for k, r in results.items() if not r.parameters.get("group")}
    bounds = {name: empirical_epsilon(*r.scores, delta=delta, alpha=alpha, seed=seed) for name, r in results.items()}
    best = max(bounds, key=lambda a: (bounds[a].epsilon_select, a))
    strongest = max(results, key=lambda a: (results[a].auc, a))
    summary = EmpiricalEpsilon(
        epsilon_lb=bounds[best].epsilon_lb, attack=best, alpha=alpha, delta=delta, procedure=PROCEDURE,
        strongest_attack_by_auc=strongest,
        by_attack={k: EmpiricalEpsilonBound.model_validate(v.to_dict()) for k, v in bounds.items()})
    if unit_claim is not None:
        eps_u, delta_u, k = unit_claim
        _, pos_eval, _, neg_eval = split_halves(*results[best].scores, seed)
        if delta_u < 1.0 and pos_eval.size and neg_eval.size:
            band = roc_band_check(pos_eval, neg_eval, eps_u, delta_u, alpha)
            summary.roc_band = RocBand.model_validate({"attack": best, "unit_records": k, **band.to_dict()})
    return summary


def one_run_summary(result: OneRunCanaryResult, *, delta: float, alpha: float, fdp: bool = True) -> OneRunEpsilon:
    """The one-run lower bounds (ε: Steinke et al. 2023; μ of μ-GDP: Mahloujifar et al. 2024) from
    the audit canaries' scores, at the arm's δ. Whether a DP arm's claim is refuted is decided once for
    the whole audit from the guess counts kept here (:mod:`privleak.audit.alarms`)."""
    scores, included = result.scores
    if len(scores) < MIN_ONE_RUN_CANARIES:
        return OneRunEpsilon(available=False, m=len(scores), canary_auc=result.auc,
                             reason=f"only {len(scores)} audit canaries (need ≥ {MIN_ONE_RUN_CANARIES}); "
                                    "raise one_run.canaries")
    audit = one_run_audit(scores, included, alpha=alpha, delta=delta, gdp=fdp)
    cands = [OneRunCandidate.model_validate(asdict(c)) for c in audit.candidates]
    out = OneRunEpsilon(available=True, epsilon_steinke=audit.epsilon_steinke, mu_gdp_lb=audit.mu_gdp_lb,
                        m=audit.m, n_included=audit.n_in, score=result.score, alpha=alpha,
                        alpha_each=audit.alpha_each, delta=delta,
                        best=OneRunCandidate.model_validate(asdict(audit.best_steinke)), candidates=cands,
                        canary_auc=result.auc, reconstruction=reconstruction_summary(result))
    return out


def reconstruction_summary(result: OneRunCanaryResult) -> OneRunReconstruction | None:
    """The reconstruction game's guess counts on the fixed grid (None: the attack did not play it)."""
    recon = result.reconstruction
    if recon is None or not result.pool_size or not result.secret_words:
        return None
    confidence, right = recon
    counts = reconstruction_counts(confidence, right)
    return OneRunReconstruction(m=int(confidence.size), pool_size=result.pool_size, secret_words=result.secret_words,
                                k=float(result.pool_size) ** result.secret_words, reconstructed=int(right.sum()),
                                candidates=[ReconstructionCandidate(guesses=r, correct=v) for r, v in counts])


def exposed_people(results: dict[str, MembershipResult], members: Sequence[Record], evaluated: np.ndarray,
                   mask, top: int = 10, seed: int = 0) -> list[ExposedPerson]:
    """The individuals an aggregate AUC hides: for each evaluated member record (one per person / unit),
    the attacks that flag it at ≤ 1 % FPR (its score above the ⌊0.01 n⌋+1-th highest non-member score),
    ranked by how many attacks flag it, then by its highest percentile among non-member scores.

    ``members`` are the non-canary members the scores index (``evaluated`` = the evaluated indices);
    ``mask`` masks a name. Ids are salted hashes of the unit, never the unit itself.
    """
    record_level = {k: r for k, r in results.items() if not r.parameters.get("group")}
    if not record_level or len(evaluated) == 0:
        return []
    sizes: dict[tuple[str, str], int] = {}
    for r in members:
        u = unit_of(r)
        sizes[u] = sizes.get(u, 0) + 1
    flags: list[list[str]] = [[] for _ in evaluated]
    pct = np.zeros(len(evaluated))
    for name, res in record_level.items():
        pos, neg = res.scores
        if len(pos) != len(evaluated) or not len(neg):
            continue
        srt = np.sort(neg)[::-1]
        t = srt[min(len(srt) - 1, int(0.01 * len(srt)))]
        pct = np.maximum(pct, np.searchsorted(np.sort(neg), pos, side="left") / len(neg))
        for i in np.flatnonzero(pos > t):
            flags[i].append(name)
    order = sorted(range(len(evaluated)), key=lambda i: (-len(flags[i]), -pct[i], i))[:top]
    out = []
    for i in order:
        rec = members[int(evaluated[i])]
        u = unit_of(rec)
        digest = hashlib.sha256(f"{seed}:{u[0]}:{u[1]}".encode()).hexdigest()[:8]
        name = next((sp.value(rec.text) for sp in rec.pii or () if sp.label == "NAME"), None)
        out.append(ExposedPerson(id=f"{u[0]} {digest}", name=mask(name) if name else None, records=sizes[u],
                                 flagged_by=flags[i], percentile=float(pct[i])))
    return out
