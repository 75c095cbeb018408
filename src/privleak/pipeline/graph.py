"""One audit as a graph of stages: which tasks, their inputs and their cache keys.

data → base model → data defences → train arms (and shadows) → per model:
utility and one attack stage per family (membership, canaries, extraction,
PII attacks) → the guard arm → results.

Each stage writes its artefacts under the run directory and is skipped when
already done with the same key (``rundir``): a key hashes the config that
determines the stage and the keys of the stages it reads, so rerunning after
a crash or Ctrl-C resumes where it stopped, a changed setting redoes exactly
the stages it affects, and the same config + seed reproduce the same
``results.json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from ..attacks.base import FAMILIES
from ..config import AuditConfig, resolve_delta
from ..core.io import stable_hash, write_json
from ..models.device import use_policy
from ..results import AuditResults
from .release import release_key, release_stage
from .rundir import RunDir
from .assemble import assemble
from .audit import Audit
from .checks import preflight
from .data import audit_canaries_key, base_key, data_key, make_audit_canaries_stage, make_data, resolve_base
from .evaluate import (
    Target,
    blind_stage,
    attack_key,
    attack_stage,
    family_specs,
    guard_cost_stage,
    utility_stage,
)
from .train import (
    arm_settings,
    dedup_stage,
    derive_dpw_arm,
    defence_keys,
    scrub_pool_stage,
    scrub_stage,
    shadow_arms,
    shadow_plan,
    train_arm,
    train_shadow,
)


def run_audit(cfg: AuditConfig, out_dir: str | Path, notify: Callable[[str], None] = lambda s: None) -> AuditResults:
    """Run (or resume) the whole audit; returns the typed results also written to ``results.json``.

    Every model is placed and computes as ``cfg.device`` / ``cfg.compute`` say (:mod:`privleak.models.device`).
    """
    with use_policy(cfg.compute_policy()):
        return _run_audit(cfg, out_dir, notify)


def _run_audit(cfg: AuditConfig, out_dir: str | Path, notify: Callable[[str], None]) -> AuditResults:
    preflight(cfg)
    run = RunDir.open(out_dir)
    notify(f"PrivLeak audit → {run.root}  (arms: {', '.join(cfg.arm_names())})")
    audit = Audit(cfg=cfg, run=run, notify=notify)
    write_json(run.path("config.json"), cfg.model_dump(mode="json"))

    dkey = data_key(cfg)
    audit.stage("data", dkey, lambda: make_data(audit))
    members = audit.splits()["members"]
    _, delta_warning = resolve_delta(cfg, len(members))
    if delta_warning and cfg.dp.epsilons:
        audit.warn(delta_warning)
    if cfg.release.summary_epsilon is not None or cfg.release.ldp_terms_epsilon is not None:
        audit.stage("release", release_key(cfg, dkey), lambda: release_stage(audit))
    bkey = base_key(cfg, dkey)
    audit.stage("base-model", bkey, lambda: resolve_base(audit, audit.splits()["public"]))
    if cfg.one_run.canaries:
        audit.stage("audit-canaries", audit_canaries_key(cfg, bkey), lambda: make_audit_canaries_stage(audit))

    audit.stage("blind-baseline", stable_hash("blind", dkey, cfg.attacks.max_mia_records, cfg.attacks.bootstrap, cfg.seed),
                lambda: blind_stage(audit))

    # data defences, arms, shadows
    specs = cfg.arm_specs()
    dkeys = defence_keys(cfg, dkey)
    if any(s.scrub for s in specs):
        audit.stage("defend/scrub", dkeys["scrub"], lambda: scrub_stage(audit))
    if any(s.dedup for s in specs):
        audit.stage("defend/dedup", dkeys["dedup"], lambda: dedup_stage(audit))
    arm_keys: dict[str, str] = {}
    for spec in (s for s in specs if s.trained and not s.derived):
        settings = arm_settings(cfg, spec, len(members))
        arm_keys[spec.name] = stable_hash("arm", bkey, settings, tuple(dkeys[d] for d in spec.data_defences))
        audit.stage(f"train/{spec.name}", arm_keys[spec.name], lambda sp=spec, st=settings: train_arm(audit, sp, st))
    for spec in (s for s in specs if s.derived):  # from the baseline's model (the config requires that arm)
        settings = arm_settings(cfg, spec, len(members))
        arm_keys[spec.name] = stable_hash("arm-dpw", arm_keys["baseline"], settings)
        audit.stage(f"noise/{spec.name}", arm_keys[spec.name], lambda sp=spec, st=settings: derive_dpw_arm(audit, sp, st))
    shadow_keys: dict[str, str] = {}
    if shadow_arms(cfg):
        plan = shadow_plan(cfg, audit.splits())
        by_name = {s.name: s for s in specs}
        if any(by_name[a].scrub for a in shadow_arms(cfg)):
            audit.stage("defend/scrub-pool", stable_hash("scrub-pool", dkeys["scrub"]), lambda: scrub_pool_stage(audit))
        for arm in shadow_arms(cfg):
            spec, settings = by_name[arm], arm_settings(cfg, by_name[arm], len(members))
            keys = []
            for k in range(cfg.shadows.n_shadows):
                # Which other arms get shadows does not change this arm's shadows.
                key = stable_hash("shadow", arm_keys[arm], cfg.shadows.model_dump(mode="json", exclude={"arms"}), k,
                                  cfg.attacks.max_mia_records)
                keys.append(key)
                audit.stage(f"shadow/{arm}/{k + 1}", key,
                            lambda sp=spec, st=settings, k=k: train_shadow(audit, sp, st, k, plan))
            shadow_keys[arm] = stable_hash(*keys)

    # evaluation: the base control, every trained arm, the guard arm
    targets = [Target("base", bkey, audit.base_dir(), reference=False)]
    targets += [Target(a, arm_keys[a], str(run.path("arms", a, "model")), reference=True) for a in arm_keys]
    if any(s.guard for s in specs):
        targets.append(Target("guard", stable_hash("guard", arm_keys["baseline"], dkey), str(run.path("arms", "baseline", "model")),
                              reference=True, serves="baseline"))
    for t in targets:
        if not t.serves:
            audit.stage(f"utility/{t.name}", stable_hash("utility", t.key), lambda t=t: utility_stage(audit, t, bkey))
        for family in FAMILIES:
            if not family_specs(audit, family, t):
                continue
            shadows = family == "membership" and t.name in shadow_keys
            audit.stage(f"{family}/{t.name}", attack_key(audit, family, t, bkey, shadow_keys.get(t.name)),
                        lambda t=t, f=family, sh=shadows: attack_stage(audit, f, t, bkey, sh))
        if t.serves:
            audit.stage(f"guard-cost/{t.name}", stable_hash("guard-cost", t.key, bkey, cfg.seed),
                        lambda t=t: guard_cost_stage(audit, t, bkey))

    results = assemble(audit, [s.name for s in specs])
    write_json(run.path("results.json"), results.to_json())
    return results
