"""Membership evaluation: which records are compared, and the empirical ε over the attacks.

The attacks (``attacks/mia.py``) compute their metrics on the evaluation
subsets chosen here; this module turns their scores into the arm's
empirical ε lower bound and, for DP arms, checks the strongest attack's ROC
against the DP bound.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Sequence

import numpy as np

from ..attacks.audit_canaries import OneRunCanaryResult
from ..attacks.mia import MembershipResult
from ..core.metrics import roc_curve
from ..data.records import Record
from ..results import DpBound, EmpiricalEpsilon, EmpiricalEpsilonBound, OneRunCandidate, OneRunEpsilon
from .epsilon import dp_bound_check, empirical_epsilon
from .one_run import one_run_audit

#: Fewer audit canaries than this and the one-run bound cannot reach even ε ≈ 1.
MIN_ONE_RUN_CANARIES = 50

PROCEDURE = "attack and threshold chosen on a random half, Clopper-Pearson bounds on the other half"


def mia_subsets(members: Sequence[Record], non_members: Sequence[Record], max_records: int,
                seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the members / non-members the membership attacks compare.

    ``members`` are the non-canary members (canaries have their own measure).
    With known PII, only the PII-carrying records (those whose privacy is at
    stake); otherwise all. Both sides are capped at the same size, seeded.
    """
    def pick(recs: Sequence[Record]) -> np.ndarray:
        known = any(r.pii is not None for r in recs)
        idx = [i for i, r in enumerate(recs) if r.kind != "canary" and (r.has_pii or not known)]
        return np.asarray(idx, dtype=np.int64)

    m, n = pick(members), pick(non_members)
    cap = min(max_records, len(m), len(n))
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(m, cap, replace=False)), np.sort(rng.choice(n, cap, replace=False))


def empirical_epsilon_summary(results: dict[str, MembershipResult], *, delta: float, alpha: float, seed: int,
                              dp_epsilon: float | None = None) -> EmpiricalEpsilon:
    """The arm's empirical ε from freshly computed membership results.

    Every attack gets the same seeded select/evaluate split (same sizes, same
    seed). The arm's figure is the attack whose bound is largest on the
    *selection* half, evaluated on the held-out half — choosing the attack,
    like the threshold, before looking at the evaluation data keeps the
    1 − α guarantee that a maximum over attacks would lose. For a DP arm the
    strongest attack's ROC is also checked against TPR ≤ e^ε·FPR + δ.
    """
    bounds = {name: empirical_epsilon(*r.scores, delta=delta, alpha=alpha, seed=seed) for name, r in results.items()}
    best = max(bounds, key=lambda a: (bounds[a].epsilon_select, a))
    strongest = max(results, key=lambda a: (results[a].auc, a))
    summary = EmpiricalEpsilon(
        epsilon_lb=bounds[best].epsilon_lb, attack=best, alpha=alpha, delta=delta, procedure=PROCEDURE,
        strongest_attack_by_auc=strongest,
        by_attack={k: EmpiricalEpsilonBound.model_validate(v.to_dict()) for k, v in bounds.items()})
    if dp_epsilon is not None:
        pos, neg = results[strongest].scores
        fpr, tpr, _ = roc_curve(pos, neg)
        check = dp_bound_check(fpr, tpr, dp_epsilon, delta, n_pos=len(pos), n_neg=len(neg), alpha=alpha)
        summary.dp_bound = DpBound.model_validate({"attack": strongest, **asdict(check), "ok": check.ok})
        summary.exceeds_accountant = bool(bounds[best].epsilon_lb > dp_epsilon)
    return summary


def one_run_summary(result: OneRunCanaryResult, *, delta: float, alpha: float, fdp: bool = True,
                    dp_epsilon: float | None = None) -> OneRunEpsilon:
    """The one-run ε lower bounds (Steinke et al. 2023; Gaussian f-DP, Mahloujifar et al. 2024) from
    the audit canaries' scores, at the arm's δ; for a DP arm, whether the Steinke bound (valid for any
    (ε, δ)-DP training) exceeds the accountant's ε."""
    scores, included = result.scores
    if len(scores) < MIN_ONE_RUN_CANARIES:
        return OneRunEpsilon(available=False, m=len(scores),
                             reason=f"only {len(scores)} audit canaries (need ≥ {MIN_ONE_RUN_CANARIES}); "
                                    "raise one_run.canaries")
    audit = one_run_audit(scores, included, alpha=alpha, delta=delta, fdp=fdp)
    cands = [OneRunCandidate.model_validate(asdict(c)) for c in audit.candidates]
    out = OneRunEpsilon(available=True, epsilon_steinke=audit.epsilon_steinke, epsilon_fdp=audit.epsilon_fdp,
                        m=audit.m, n_included=audit.n_in, score=result.score, alpha=alpha,
                        alpha_each=audit.alpha_each, delta=delta,
                        best=OneRunCandidate.model_validate(asdict(audit.best_steinke)), candidates=cands)
    if dp_epsilon is not None:
        out.exceeds_accountant = bool(audit.epsilon_steinke > dp_epsilon)
    return out
