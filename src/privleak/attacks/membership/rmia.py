"""RMIA — the Relative Membership Inference Attack (Zarifzadeh, Liu, Mohapatra,
Shokri 2024, "Low-cost high-power membership inference attacks", ICML),
offline form as implemented in Privacy Meter
(privacytrustlab/ml_privacy_meter, ``modules/mia/attacks/rmia.py``,
``run_rmia`` / ``get_out_ref_signals``).

For a candidate x and population points z (never trained on by anyone):

    Pr(x)      ≈ ½((1 + a)·mean_ref Pr(x | θ_ref) + (1 − a))      (offline)
    ratio_x    = Pr(x | θ_target) / Pr(x)
    score(x)   = fraction of z with ratio_x / ratio_z > γ          (γ = 1)

The reference models are OUT models (trained without x), so their mean only
estimates the OUT half of Pr(x) = ½(Pr_IN + Pr_OUT); the paper's offline
approximation replaces Pr_IN by a linear function of Pr_OUT, giving the
``(1+a)/2·p_out + (1−a)/2`` form above — verbatim Privacy Meter's
``mean_x = (1 + offline_a) / 2 * mean_out_x + (1 - offline_a) / 2``, and its
comparison ``ratios > 1.0`` (strict). Privacy Meter's default
``offline_a`` is 0.3 (``get_out_ref_signals(..., offline_a=0.3)``); it also
offers tuning a over {0, 0.1, …, 1} on a paired reference model.

* a = 1: Pr(x) = mean_ref Pr(x) — the plain ratio to the OUT reference
  models (no offline correction; a reference-model attack made relative).
* a = 0: Pr(x) = ½(mean_ref Pr(x) + 1) — the ratio is damped towards the
  target probability itself, which is the attack most like LOSS.

Language models: Pr(x | θ) of a whole sequence underflows, and the
``+ (1 − a)/2`` term needs a probability on a [0, 1] scale comparable across
texts of different length, so we use the per-token geometric-mean
probability Pr(x | θ) := exp(−NLL_θ(x)) and work in log space (logaddexp
for the mixture, log-ratio differences for the comparison). Higher score =
member; scores are in [0, 1].
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp


def _as_2d(a: np.ndarray, name: str) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    if a.ndim == 1:
        a = a[None, :]
    if a.ndim != 2:
        raise ValueError(f"{name} must be (n_ref, n) or (n,), got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError(f"{name} contains NaN or infinity")
    return a


def log_pr_marginal(ref_log_p: np.ndarray, a: float = 0.3, ref_mask: np.ndarray | None = None) -> np.ndarray:
    """log Pr(x) = log(½((1+a)·mean_ref p(x) + (1−a))) from (n_ref, n) reference log-probs.

    The mean over reference models is taken in probability space (as in
    Privacy Meter), via logsumexp. ``ref_mask`` (n_ref, n), True where a
    reference model may be used for that x — with shadow models as
    references, only those that did *not* train on x (offline RMIA).
    """
    if not 0.0 <= a <= 1.0:
        raise ValueError(f"RMIA offline parameter a must be in [0, 1], got {a}")
    ref = _as_2d(ref_log_p, "ref_log_p")
    if ref_mask is None:
        log_mean_out = logsumexp(ref, axis=0) - np.log(ref.shape[0])
    else:
        mask = np.asarray(ref_mask, dtype=bool)
        if mask.shape != ref.shape:
            raise ValueError(f"ref_mask shape {mask.shape} does not match the reference scores {ref.shape}")
        counts = mask.sum(axis=0)
        if (counts == 0).any():
            raise ValueError("every candidate needs at least one reference model that did not train on it")
        log_mean_out = logsumexp(np.where(mask, ref, -np.inf), axis=0) - np.log(counts)
    if a == 1.0:
        return log_mean_out
    return np.logaddexp(np.log1p(a) + log_mean_out, np.log1p(-a)) - np.log(2.0)


def rmia_scores(
    target_log_p_x: np.ndarray,
    ref_log_p_x: np.ndarray,
    target_log_p_z: np.ndarray,
    ref_log_p_z: np.ndarray,
    a: float = 0.3,
    gamma: float = 1.0,
    ref_mask_x: np.ndarray | None = None,
) -> np.ndarray:
    """Offline RMIA score per candidate: fraction of population z it dominates.

    Arguments are *log* probabilities, i.e. −NLL per text for a language
    model (log of the per-token geometric-mean probability):

    * ``target_log_p_x`` (n,): target model on the candidates;
    * ``ref_log_p_x`` (n_ref, n): each reference model on the candidates;
      ``ref_mask_x`` (n_ref, n) marks the (x, model) pairs where the model is
      OUT for x (default: all — references that never saw any candidate);
    * ``target_log_p_z`` (m,), ``ref_log_p_z`` (n_ref, m): same for population
      z, which no reference model trained on.

    score(x) = (1/m)·#{z : ratio_x / ratio_z > γ}, computed as
    log ratio_z < log ratio_x − log γ with a sort + binary search
    (O((n + m) log m), no n×m matrix).
    """
    if gamma <= 0:
        raise ValueError(f"gamma must be > 0, got {gamma}")
    tx = np.asarray(target_log_p_x, dtype=np.float64).ravel()
    tz = np.asarray(target_log_p_z, dtype=np.float64).ravel()
    rx = _as_2d(ref_log_p_x, "ref_log_p_x")
    rz = _as_2d(ref_log_p_z, "ref_log_p_z")
    if rx.shape[1] != tx.size or rz.shape[1] != tz.size:
        raise ValueError(
            f"shape mismatch: target x {tx.size} vs ref x {rx.shape}, target z {tz.size} vs ref z {rz.shape}"
        )
    if rx.shape[0] != rz.shape[0]:
        raise ValueError(f"need the same reference models for x and z, got {rx.shape[0]} and {rz.shape[0]}")
    if tz.size == 0:
        raise ValueError("RMIA needs at least one population point z")
    if not (np.isfinite(tx).all() and np.isfinite(tz).all()):
        raise ValueError("target log-probabilities contain NaN or infinity")
    log_ratio_x = tx - log_pr_marginal(rx, a, ref_mask_x)
    log_ratio_z = np.sort(tz - log_pr_marginal(rz, a))
    counts = np.searchsorted(log_ratio_z, log_ratio_x - np.log(gamma), side="left")
    return counts / tz.size


def tune_offline_a(
    paired_log_p_x: np.ndarray,
    paired_is_member: np.ndarray,
    ref_log_p_x: np.ndarray,
    paired_log_p_z: np.ndarray,
    ref_log_p_z: np.ndarray,
    grid: np.ndarray | None = None,
    ref_mask_x: np.ndarray | None = None,
) -> tuple[float, dict[float, float]]:
    """Pick ``a`` as Privacy Meter's ``tune_offline_a`` does: attack a *paired
    reference model* (one whose training set is known, e.g. a shadow model)
    with the remaining reference models, for a ∈ {0, 0.1, …, 1}, and keep the
    a with the highest AUC. Returns (best a, {a: AUC}).

    Why it matters for language models: per-token probabilities exp(−NLL)
    are often ≪ 1, so with a small a the constant (1 − a)/2 dominates Pr(x)
    and RMIA degrades towards LOSS on the target; a near 1 keeps the
    reference-model correction. ``ref_log_p_*`` must not include the paired
    model itself; ``ref_mask_x`` as in :func:`rmia_scores`.
    """
    from ...core.metrics import roc_auc

    member = np.asarray(paired_is_member, dtype=bool).ravel()
    if member.all() or not member.any():
        raise ValueError("the paired model needs both members and non-members among the candidates")
    grid = np.round(np.arange(0.0, 1.01, 0.1), 10) if grid is None else np.asarray(grid, dtype=np.float64)
    aucs: dict[float, float] = {}
    for a in grid:
        s = rmia_scores(paired_log_p_x, ref_log_p_x, paired_log_p_z, ref_log_p_z, a=float(a), ref_mask_x=ref_mask_x)
        aucs[float(a)] = roc_auc(s[member], s[~member])
    best = max(aucs, key=lambda k: (aucs[k], k))
    return best, aucs
