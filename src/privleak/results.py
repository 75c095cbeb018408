"""``results.json``: the contract the report, ``compare`` and other tools read.

Schema (version 1)::

    schema_version   "1"
    tool             {name, version}
    config           the validated AuditConfig
    data             split sizes, canary count, chance-level exposure
    base_model       {kind, path, …, utility, attacks, canaries}  (the control: never saw members)
    arms             arm name → {   (names: see privleak.arms — baseline, dp-ε, scrub, dedup, dp-ε+scrub, guard, …)
        kind         "baseline" | "dp" | "guard"
        training     {steps, epoch_losses, settings}
        privacy      {epsilon (null for non-DP), delta, sigma, sample_rate, steps,
                      max_grad_norm, epsilon_rdp, epsilon_pld, epsilon_prv, target_epsilon, accountant}
        utility      {ppl_members, ppl_non_members}
        attacks      attack name → {auc, tpr_at_1pct_fpr, tpr_at_0_1pct_fpr, n_members, n_non_members, auc_ci95}
                     (loss, zlib, min_k, min_k_pp, reference, rmia; with shadow models also
                      lira_online, lira_offline, rmia_shadows)
        shadows      {n_shadows, global_variance, rmia_a, rmia_a_tuned, pool}   (only with shadow models)
        canaries     [{canary_id, repeats, exposure, max_exposure, rank, n_candidates, exposure_extrapolated}]
        empirical_epsilon {epsilon_lb, attack, alpha, delta, procedure, strongest_attack_by_auc,
                      dp_bound (DP arms), exceeds_accountant (DP arms)}
        extraction   {prefix, canaries, sampling, phi_prompts}   (texts masked)
        pii          {by_category, identifying_total, counting}
        pii_attacks  Lukas et al. extraction / reconstruction / inference, each beside its
                     chance level and non-member floor (values masked)
        defences     {scrub: {mode, labels, quality (per-type precision/recall), pii_in_training, …},
                      dedup: {n_removed, passes, canary_copies}}   (data-defence arms)
        n_train_records  records the arm trained on (after dedup)
        guard        the guard arm: per attack leaks without/with the guard, fraction stopped,
                     false-positive rate on benign output
    }
    statistical_tests  "baseline vs <arm>: …" → {k1, n1, k2, n2, p1, p2, CIs, diff_ci95, cohens_h, fisher_p, chi2_p}
    warnings         list of strings
    durations_s      stage name → seconds (not reproducible)
    versions         python and package versions

Everything except ``durations_s`` is identical for the same config and seed.
Undefined figures are ``null`` (never NaN).
"""

from __future__ import annotations

import platform
from importlib import metadata
from pathlib import Path
from typing import Any

from .rundir import write_json

SCHEMA_VERSION = "1"

_PACKAGES = ("torch", "transformers", "tokenizers", "opacus", "dp-accounting", "numpy", "scipy", "faker")


def package_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def write_results(path: Path, results: dict[str, Any]) -> None:
    write_json(path, results)
