"""LiRA — the Likelihood-Ratio Attack (Carlini et al. 2022, "Membership
inference attacks from first principles", IEEE S&P).

Shadow models are trained on random halves of a candidate pool; for every
candidate x we then have its statistic φ under shadows that trained on it
(IN) and under shadows that did not (OUT), fit one Gaussian to each, and
score the target model's φ(x):

* online:  log N(φ; μ_in, σ_in²) − log N(φ; μ_out, σ_out²)
* offline: −log P[Z ≥ φ], Z ~ N(μ_out, σ_out²) — the paper's one-sided test
  Λ = 1 − Pr[Z > φ] (Sec. IV-C "offline"), kept in log-survival form so it
  does not saturate at 1 for the confident members it is meant to find; it
  ranks exactly as the paper's Λ (both increase with φ).

Higher = member for both. φ is the paper's logit-scaled confidence; for a
language model the natural per-text statistic is −NLL(x), the log of the
per-token geometric-mean probability (:func:`phi_from_nll`; ``logit=True``
gives log(p/(1−p)) of that mean probability, the closest analogue of the
paper's scaling). Either way φ is monotone in −NLL, so "higher φ = more
member-like".

Variance: per-example σ needs many shadows; with few (< ~64) the paper
recommends one global variance (``global_variance=True``). We pool the
*within-example* residuals (φ − per-example mean) over all examples, so
differences between examples do not inflate it — the paper's code uses the
plain std of all IN (OUT) values instead, which includes those differences.

Fallbacks, so every candidate gets a score:

* fewer than 2 IN (OUT) values → the pooled σ_in (σ_out);
* no IN value at all → μ_in = μ_out(x) + Δ, with Δ the mean of μ_in − μ_out
  over examples that have both (the typical member shift); no OUT value →
  μ_out = μ_in(x) − Δ; neither → the global IN / OUT means.
* σ is floored at ``min_std`` (a per-example std of 0 would give ±inf).

Caution for the pipeline: the fallback is a different (cruder) model, so the
IN/OUT availability must not correlate with the label being evaluated —
split the *same* pool that holds the evaluated members and non-members
(:func:`shadow_splits` gives every candidate IN in exactly half the shadows).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import norm


def phi_from_nll(nll: np.ndarray, logit: bool = False) -> np.ndarray:
    """LiRA statistic φ from per-text NLL (mean −log p per token).

    ``logit=False``: φ = −NLL = log p̄ with p̄ = exp(−NLL) the per-token
    geometric-mean probability. ``logit=True``: φ = log(p̄ / (1 − p̄)) =
    −NLL − log(1 − exp(−NLL)), computed stably; NLL = 0 (p̄ = 1) maps to a
    large finite value.
    """
    nll = np.asarray(nll, dtype=np.float64)
    if not logit:
        return -nll
    tiny = np.finfo(np.float64).tiny
    return -nll - np.log(np.maximum(-np.expm1(-np.maximum(nll, 0.0)), tiny))


def shadow_splits(n_candidates: int, n_shadows: int, seed: int = 0) -> np.ndarray:
    """Balanced IN/OUT assignment, shape (n_shadows, n_candidates), True = IN.

    Shadows come in complementary pairs: shadow 2j trains on a uniformly
    random half H_j of the candidates (size floor(n/2)), shadow 2j+1 on the
    complement. With an even number of shadows every candidate is therefore IN
    for exactly n_shadows/2 shadows and OUT for the other half (the paper's
    balanced design), and every shadow trains on (almost exactly) half the
    pool. With an odd number the last shadow gets one more independent random
    half.
    """
    if n_candidates < 1 or n_shadows < 1:
        raise ValueError(f"need ≥ 1 candidate and ≥ 1 shadow, got {n_candidates} and {n_shadows}")
    rng = np.random.default_rng(seed)
    mask = np.zeros((n_shadows, n_candidates), dtype=bool)
    half = n_candidates // 2
    for s in range(0, n_shadows, 2):
        chosen = rng.permutation(n_candidates)[:half]
        mask[s, chosen] = True
        if s + 1 < n_shadows:
            mask[s + 1] = ~mask[s]
    return mask


@dataclass(frozen=True)
class LiraFit:
    """Per-example Gaussian parameters; n_in / n_out count shadows per example."""

    mu_in: np.ndarray
    sigma_in: np.ndarray
    mu_out: np.ndarray
    sigma_out: np.ndarray
    n_in: np.ndarray
    n_out: np.ndarray


def _masked_mean_var(x: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Per-column mean, variance (ddof=0), count, and the pooled within-column variance."""
    cnt = m.sum(0)
    s = np.where(m, x, 0.0).sum(0)
    mean = np.divide(s, cnt, out=np.full(x.shape[1], np.nan), where=cnt > 0)
    resid = np.where(m, x - np.nan_to_num(mean), 0.0)
    ss = (resid**2).sum(0)
    var = np.divide(ss, cnt, out=np.full(x.shape[1], np.nan), where=cnt > 0)
    # Pooled within-example variance with one dof lost per example mean.
    dof = int(cnt.sum() - (cnt > 0).sum())
    pooled = float(ss.sum() / dof) if dof > 0 else float("nan")
    return mean, var, cnt, pooled


def fit_lira(
    shadow_phi: np.ndarray,
    in_mask: np.ndarray,
    global_variance: bool = False,
    min_std: float = 1e-4,
) -> LiraFit:
    """Fit per-example IN/OUT Gaussians (see module docstring for the fallbacks)."""
    x = np.asarray(shadow_phi, dtype=np.float64)
    m = np.asarray(in_mask, dtype=bool)
    if x.ndim != 2 or m.shape != x.shape:
        raise ValueError(f"shadow_phi and in_mask must both be (n_shadows, n); got {x.shape} and {m.shape}")
    if not np.isfinite(x).all():
        raise ValueError("shadow_phi contains NaN or infinity")
    mu_in, var_in, n_in, pooled_in = _masked_mean_var(x, m)
    mu_out, var_out, n_out, pooled_out = _masked_mean_var(x, ~m)
    # Pooled variances: if one side has no replicated examples, borrow the other's.
    if np.isnan(pooled_in):
        pooled_in = pooled_out
    if np.isnan(pooled_out):
        pooled_out = pooled_in
    if np.isnan(pooled_in):  # one shadow per side at most: nothing to estimate spread from
        pooled_in = pooled_out = float(np.var(x)) if x.size > 1 else 1.0
    both = (n_in > 0) & (n_out > 0)
    delta = float(np.mean(mu_in[both] - mu_out[both])) if both.any() else 0.0
    g_in = float(np.mean(x[m])) if m.any() else np.nan
    g_out = float(np.mean(x[~m])) if (~m).any() else np.nan
    if np.isnan(g_in):
        g_in = g_out + delta
    if np.isnan(g_out):
        g_out = g_in - delta
    no_in, no_out = n_in == 0, n_out == 0
    mu_in = np.where(no_in, np.where(no_out, g_in, mu_out + delta), mu_in)
    mu_out = np.where(no_out, np.where(no_in, g_out, mu_in - delta), mu_out)
    if global_variance:
        var_in = np.full_like(mu_in, pooled_in)
        var_out = np.full_like(mu_out, pooled_out)
    else:
        var_in = np.where(n_in >= 2, var_in, pooled_in)
        var_out = np.where(n_out >= 2, var_out, pooled_out)
    return LiraFit(
        mu_in=mu_in,
        sigma_in=np.maximum(np.sqrt(var_in), min_std),
        mu_out=mu_out,
        sigma_out=np.maximum(np.sqrt(var_out), min_std),
        n_in=n_in,
        n_out=n_out,
    )


def _check_target(target_phi: np.ndarray, n: int) -> np.ndarray:
    t = np.asarray(target_phi, dtype=np.float64).ravel()
    if t.size != n:
        raise ValueError(f"target_phi has {t.size} values for {n} candidates")
    if not np.isfinite(t).all():
        raise ValueError("target_phi contains NaN or infinity")
    return t


def lira_online(
    target_phi: np.ndarray,
    shadow_phi: np.ndarray,
    in_mask: np.ndarray,
    global_variance: bool = False,
    min_std: float = 1e-4,
) -> np.ndarray:
    """Online LiRA: log N(φ; μ_in, σ_in²) − log N(φ; μ_out, σ_out²). Higher = member.

    ``target_phi`` (n,): φ of each candidate under the target model;
    ``shadow_phi`` (n_shadows, n): φ under each shadow; ``in_mask``
    (n_shadows, n) bool: was candidate i in shadow s's training set.
    """
    fit = fit_lira(shadow_phi, in_mask, global_variance=global_variance, min_std=min_std)
    if not fit.n_in.any():
        raise ValueError("online LiRA needs shadows trained on the candidates (in_mask has no True); use lira_offline")
    t = _check_target(target_phi, fit.mu_in.size)
    return norm.logpdf(t, fit.mu_in, fit.sigma_in) - norm.logpdf(t, fit.mu_out, fit.sigma_out)


def lira_offline(
    target_phi: np.ndarray,
    shadow_phi: np.ndarray,
    in_mask: np.ndarray | None = None,
    global_variance: bool = False,
    min_std: float = 1e-4,
) -> np.ndarray:
    """Offline LiRA: −log P[Z ≥ φ], Z ~ N(μ_out, σ_out²) (OUT shadows only). Higher = member.

    ``in_mask=None`` means every shadow is OUT for every candidate (shadows
    trained on population data only — the cheap offline setting).
    """
    x = np.asarray(shadow_phi, dtype=np.float64)
    m = np.zeros(x.shape, dtype=bool) if in_mask is None else np.asarray(in_mask, dtype=bool)
    fit = fit_lira(x, m, global_variance=global_variance, min_std=min_std)
    t = _check_target(target_phi, fit.mu_out.size)
    return -norm.logsf(t, fit.mu_out, fit.sigma_out)


@dataclass(frozen=True)
class LiraScores:
    online: np.ndarray | None
    offline: np.ndarray


def lira_scores(
    target_phi: np.ndarray,
    shadow_phi: np.ndarray,
    in_mask: np.ndarray,
    global_variance: bool = False,
    min_std: float = 1e-4,
) -> LiraScores:
    """Both LiRA variants from one set of shadows (online is None when no shadow is IN)."""
    m = np.asarray(in_mask, dtype=bool)
    online = lira_online(target_phi, shadow_phi, m, global_variance, min_std) if m.any() else None
    return LiraScores(online=online, offline=lira_offline(target_phi, shadow_phi, m, global_variance, min_std))
