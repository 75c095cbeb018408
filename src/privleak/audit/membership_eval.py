"""The membership-inference family on one arm, from the shared scoring pass.

All attacks read the same per-token arrays (one forward pass per model and
text set); this module turns them into scores, metrics, ROC points, the
empirical ε lower bound and, for DP arms, the check of the DP bound.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import numpy as np

from ..attacks.membership import (
    loss_scores,
    min_k_pp_scores,
    min_k_scores,
    reference_scores,
    zlib_scores,
)
from ..attacks.rmia import rmia_scores
from ..attacks.scoring import TokenScores
from ..core.metrics import mia_metrics, roc_curve, roc_points
from .epsilon import dp_bound_check, empirical_epsilon


def attack_scores(
    target: dict[str, TokenScores],
    reference: dict[str, TokenScores] | None,
    texts: dict[str, list[str]],
    k: float,
    rmia_a: float,
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Member and non-member scores (higher = member) for every attack.

    ``target``/``reference`` map "members", "non_members", "population" to
    scoring passes over the same texts in the same order. Reference-based
    attacks (reference, RMIA) need the reference model (the base model: it
    never saw the members) and are skipped without one.
    """
    m, n = target["members"], target["non_members"]
    out = {
        "loss": (loss_scores(m), loss_scores(n)),
        "zlib": (zlib_scores(m, texts["members"]), zlib_scores(n, texts["non_members"])),
        "min_k": (min_k_scores(m, k), min_k_scores(n, k)),
        "min_k_pp": (min_k_pp_scores(m, k), min_k_pp_scores(n, k)),
    }
    if reference is not None:
        rm, rn = reference["members"], reference["non_members"]
        out["reference"] = (reference_scores(m, rm), reference_scores(n, rn))
        # RMIA (offline): log p = −NLL; population points z are never trained on.
        z_t, z_r = -target["population"].nll(), -reference["population"].nll()[None, :]
        out["rmia"] = (
            rmia_scores(-m.nll(), -rm.nll()[None, :], z_t, z_r, a=rmia_a),
            rmia_scores(-n.nll(), -rn.nll()[None, :], z_t, z_r, a=rmia_a),
        )
    return out


def evaluate_membership(
    scores: dict[str, tuple[np.ndarray, np.ndarray]],
    member_idx: np.ndarray,
    non_member_idx: np.ndarray,
    *,
    delta: float,
    bootstrap: int,
    alpha: float,
    seed: int,
    dp_epsilon: float | None = None,
) -> dict[str, Any]:
    """Metrics per attack, plus the arm's empirical ε and the DP-bound check.

    Empirical ε: every attack gets the same seeded select/evaluate split (same
    sizes, same seed). The arm's figure is the attack whose bound is largest
    on the *selection* half, evaluated on the held-out half — choosing the
    attack, like the threshold, before looking at the evaluation data keeps
    the 1 − α guarantee that a maximum over attacks would lose.
    """
    attacks: dict[str, Any] = {}
    eps_by_attack = {}
    for name, (pos_all, neg_all) in scores.items():
        pos, neg = pos_all[member_idx], neg_all[non_member_idx]
        entry = asdict(mia_metrics(pos, neg, bootstrap=bootstrap, seed=seed))
        entry["roc"] = roc_points(pos, neg)
        emp = empirical_epsilon(pos, neg, delta=delta, alpha=alpha, seed=seed)
        entry["empirical_epsilon"] = emp.to_dict()
        eps_by_attack[name] = emp
        attacks[name] = entry
    best = max(eps_by_attack, key=lambda a: (eps_by_attack[a].epsilon_select, a))
    chosen = eps_by_attack[best]
    summary: dict[str, Any] = {
        "epsilon_lb": chosen.epsilon_lb,
        "attack": best,
        "alpha": alpha,
        "delta": delta,
        "procedure": "attack and threshold chosen on a random half, Clopper-Pearson bounds on the other half",
    }
    strongest = max(attacks, key=lambda a: (attacks[a]["auc"], a))
    summary["strongest_attack_by_auc"] = strongest
    if dp_epsilon is not None:
        pos, neg = scores[strongest][0][member_idx], scores[strongest][1][non_member_idx]
        fpr, tpr, _ = roc_curve(pos, neg)
        check = dp_bound_check(fpr, tpr, dp_epsilon, delta, n_pos=len(pos), n_neg=len(neg), alpha=alpha)
        summary["dp_bound"] = {"attack": strongest, **check.to_dict()}
        summary["exceeds_accountant"] = bool(chosen.epsilon_lb > dp_epsilon)
    return {"attacks": attacks, "empirical_epsilon": summary}
