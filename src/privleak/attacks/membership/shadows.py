"""Membership scores from shadow models: LiRA (online, offline) and RMIA with shadows.

The pipeline trains S shadow models per arm, each exactly like the arm
(same training settings, same defences) on a random half of the candidate
pool, and records every shadow's NLL on the evaluated candidates x and on
the population z (which no shadow trains on). This module turns those
numbers into per-candidate scores; it trains nothing.

* LiRA (Carlini et al. 2022): φ = −NLL(x) (:func:`privleak.attacks.membership.lira.phi_from_nll`),
  per-example Gaussians over the shadows where x was IN / OUT.
* RMIA (Zarifzadeh et al. 2024, offline): the reference models for x are
  the shadows that did not train on x; ``a`` is tuned as Privacy Meter does
  (attack shadow 0, whose members are known, with the other shadows, and
  keep the ``a`` of highest AUC) when there are enough shadows for every
  candidate to have an OUT reference among the others.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .lira import lira_scores, phi_from_nll
from .rmia import rmia_scores, tune_offline_a


@dataclass(frozen=True)
class ShadowScores:
    scores: dict[str, np.ndarray]  # attack name → score per candidate (higher = member)
    rmia_a: float
    rmia_a_tuned: bool
    rmia_a_aucs: dict[float, float] | None


def shadow_scores(
    target_nll_x: np.ndarray,
    target_nll_z: np.ndarray,
    shadow_nll_x: np.ndarray,
    shadow_nll_z: np.ndarray,
    in_mask: np.ndarray,
    *,
    global_variance: bool,
    default_a: float,
) -> ShadowScores:
    """Scores for the candidates x from S shadows.

    ``target_nll_x`` (n,), ``target_nll_z`` (m,): the attacked model;
    ``shadow_nll_x`` (S, n), ``shadow_nll_z`` (S, m): the shadows;
    ``in_mask`` (S, n): True where shadow s trained on candidate x.
    """
    sx = np.asarray(shadow_nll_x, dtype=np.float64)
    sz = np.asarray(shadow_nll_z, dtype=np.float64)
    m = np.asarray(in_mask, dtype=bool)
    if sx.ndim != 2 or sx.shape != m.shape or sz.ndim != 2 or sz.shape[0] != sx.shape[0]:
        raise ValueError(f"shadow arrays disagree: x {sx.shape}, z {sz.shape}, in_mask {m.shape}")
    if sx.shape[0] < 2:
        raise ValueError(f"need at least 2 shadow models, got {sx.shape[0]}")
    lira = lira_scores(phi_from_nll(np.asarray(target_nll_x, dtype=np.float64)), phi_from_nll(sx), m,
                       global_variance=global_variance)
    out = {"lira_offline": lira.offline}
    if lira.online is not None:
        out["lira_online"] = lira.online

    a, tuned, aucs = default_a, False, None
    others, other_out = sx[1:], ~m[1:]
    if other_out.any(axis=0).all() and m[0].any() and not m[0].all():
        a, aucs = tune_offline_a(-sx[0], m[0], -others, -sz[0], -sz[1:], ref_mask_x=other_out)
        tuned = True
    out["rmia_shadows"] = rmia_scores(-np.asarray(target_nll_x, dtype=np.float64), -sx,
                                      -np.asarray(target_nll_z, dtype=np.float64), -sz, a=a, ref_mask_x=~m)
    return ShadowScores(scores=out, rmia_a=float(a), rmia_a_tuned=tuned, rmia_a_aucs=aucs)
