"""The decisions behind an arm's verdict, without a sentence: which tests judged, which leak (Holm over the
audit), what a near-chance claim rests on, which tests are too small or still open, the blind-baseline gate and
the DP alarm's rejection, as a typed :class:`Decision`.

:mod:`privleak.audit.verdicts` words them (through :mod:`privleak.audit.wording`) and
:mod:`privleak.audit.recommend` re-makes them at an empirical requirement's tolerances; this module imports
neither, nor :mod:`~privleak.audit.wording`, so the judging layer has no circle: decisions ← wording ← recommend ←
verdicts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..arms import judging
from ..attacks.base import Finding, Policy
from ..attacks.registry import ATTACKS
from ..core.stats import holm
from ..results import CONTROL, AlarmOutcome, ArmResult, AuditResults

POLICY = Policy()


def seed_label(arm: str, k: int) -> str:
    """How an extra training seed's model is named among the audit's leak tests."""
    return f"{arm} (seed {k})"


def _family(attack: str) -> str:
    spec = ATTACKS.get(attack)
    return spec.family if spec else "other"


def findings(arm: ArmResult, control: ArmResult | None, policy: Policy = POLICY) -> list[Finding]:
    """Every test of every attack on ``arm`` (:meth:`~privleak.attacks.base.AttackResult.assess_all`), in
    registry order (no control: against chance and the floors only)."""
    out: list[Finding] = []
    for name, result in arm.attacks.items():
        out += result.assess_all(name, control.attacks.get(name) if control else None, policy)
    return out


def violated_alarm(name: str, results: AuditResults) -> AlarmOutcome | None:
    """The rejected alarm test that says arm ``name``'s DP guarantee does not hold (the first, in the audit's
    order), or None: no alarm was raised against it (:func:`privleak.audit.verdicts.decide_alarms`)."""
    alarms = results.alarms
    if alarms is None or name not in alarms.violated:
        return None
    return next(x for x in alarms.outcomes if x.arm == name and x.alarm and x.rejected)


def _leak_p(f: Finding) -> float:
    # An attack without a p-value claims its leak exactly (p = 0) or nothing (p = 1).
    return f.p_leak if f.p_leak is not None else (0.0 if f.leaks else 1.0)


def _judged_by_findings(name: str, arm: ArmResult, results: AuditResults) -> bool:
    """Whether the arm's verdict comes from its attack findings (not the control, not a kind's own verdict)."""
    if arm is results.base_model or name == CONTROL:
        return False
    return judging(arm.kind).verdict(name, arm, results) is None


def audit_leak_rejections(results: AuditResults, policy: Policy = POLICY,
                          extra: Sequence[tuple[str, ArmResult]] = ()) -> tuple[dict[tuple[str, str], bool], int]:
    """Every leak test of the audit decided together: Holm's step-down at ``policy.alpha`` over the leak
    p-values of every arm judged by its findings (and ``extra`` models: an arm judged on its own, the extra
    training seeds an empirical requirement attacks), every attack and each of its tests (the AUC, the tail at
    each FPR), every family. Returns ({(arm, test key): rejected}, the number of tests). Family-wise error ≤ α
    over the whole audit, under any dependence (Holm 1979) — the error rate of every "leaks" the report prints,
    counted over everything it tests at once."""
    keys: list[tuple[str, str]] = []
    p: list[float] = []
    models = [(n, a) for n, a in results.arms.items() if _judged_by_findings(n, a, results)]
    seen = {n for n, _ in models}
    models += [(n, a) for n, a in extra if n not in seen]
    for name, arm in models:
        for f in findings(arm, results.base_model, policy):
            if f.leaks is not None:
                keys.append((name, f.key))
                p.append(_leak_p(f))
    return dict(zip(keys, holm(p, policy.alpha) if p else [])), len(p)


def blind_gated(arm: ArmResult, results: AuditResults) -> bool:
    """The blind-baseline gate (Das, Zhang & Tramèr 2024): the model-free classifier beats a coin flip on this
    split (its AUC's 95 % CI above 0.5) and its interval reaches the arm's strongest membership attack's AUC —
    the attacks are not shown to know more than the texts' difference, so the membership family's figures can
    neither find a leak nor show a margin. (The rivals rule of :mod:`privleak.audit.blind` stays the report's
    flag.)"""
    b = results.blind_baseline
    if b is None or b.auc_ci95 is None or not b.auc_ci95[0] > 0.5:
        return False
    aucs = [r.auc for r in arm.membership().values()]
    return bool(aucs) and b.auc_ci95[1] >= max(aucs)


def need(f: Finding) -> float:
    """How far a test is from showing its margin (what orders the unsettled list: the binding one first)."""
    e = f.equivalence
    if e is None or e.n_needed is None:
        return math.inf
    return e.n_needed / max(1, e.n)


@dataclass(frozen=True)
class Decision:
    """One arm's verdict as decisions, before any sentence (:func:`decide`): ``level``; the tests that judged
    (``judged_findings``) and what the near-chance claim rests on (``basis``: those the sizes let judge);
    ``too_small``: tests no outcome could have shown at these sizes; ``open``: judgeable tests that found no
    leak and were not shown within their margin (the binding one first); ``unbacked``: families every one of
    whose tests is too small; ``leaking``: the tests that find a leak (Holm-decided over the audit), grouped by
    family in the order of ``families``; ``gated``: the membership family is flagged by the blind baseline;
    ``violation``: the DP alarm's rejected test, which makes the arm leak. :func:`privleak.audit.wording.leak_reasons`
    words both."""

    level: str
    findings: list[Finding]
    judged_findings: list[Finding]
    basis: list[Finding]
    too_small: list[Finding]
    open: list[Finding]
    unbacked: list[str]
    leaking: list[Finding]
    leaking_attacks: list[str]
    families: list[str]
    gated: bool
    violation: AlarmOutcome | None
    n_tests: int
    family_attacks: dict[str, tuple[str, ...]]

    @property
    def settleable(self) -> bool:
        return self.level == "inconclusive" and not self.gated and all(need(f) < math.inf for f in self.open)


def decide(name: str, arm: ArmResult, results: AuditResults, policy: Policy = POLICY,
           rejections: tuple[dict[tuple[str, str], bool], int] | dict | None = None) -> Decision:
    """The decisions behind one arm's verdict (the levels: :mod:`privleak.audit.verdicts`). ``rejections``: the
    audit's leak decisions (:func:`audit_leak_rejections`, made at the audit's policy even when ``policy`` re-judges
    the margins, as an empirical requirement does); computed here when not given."""
    control = results.base_model
    found = findings(arm, control, policy)
    judged_findings = [f for f in found if f.leaks is not None]
    if rejections is None:
        rejections = audit_leak_rejections(results, policy, ((name, arm),))
    decided, n_tests = rejections if isinstance(rejections, tuple) else (rejections, len(rejections))
    gated = blind_gated(arm, results)
    hit = {id(f): decided.get((name, f.key), False) and not (gated and _family(f.attack) == "membership")
           for f in judged_findings}
    leaking: dict[str, list[Finding]] = {}
    leaking_attacks: list[str] = []
    for f in judged_findings:
        if hit[id(f)]:
            leaking.setdefault(_family(f.attack), []).append(f)
            if f.attack not in leaking_attacks:
                leaking_attacks.append(f.attack)
    # Which tests a near-chance claim rests on is decided by the sizes, never the outcomes (judgeable); under the
    # blind gate no membership test can back it.
    too_small = [f for f in judged_findings if not hit[id(f)] and f.equivalence is not None
                 and not f.equivalence.judgeable]
    gated_out = [f for f in judged_findings if gated and _family(f.attack) == "membership"]
    open_ = sorted((f for f in judged_findings if not hit[id(f)] and not f.within_margin and f not in too_small
                    and f not in gated_out), key=lambda f: -need(f))
    basis = [f for f in judged_findings if f not in too_small and f not in gated_out]
    fams = {_family(f.attack) for f in judged_findings}
    unbacked = sorted((fams - {_family(f.attack) for f in basis}) - ({"membership"} if gated else set()))
    family_attacks: dict[str, tuple[str, ...]] = {}
    for f in judged_findings:
        family_attacks[_family(f.attack)] = tuple(dict.fromkeys((*family_attacks.get(_family(f.attack), ()), f.attack)))
    violation = violated_alarm(name, results)
    leak_findings = [f for fam in leaking for f in leaking[fam]]
    if violation is not None:
        leaking.setdefault("membership", [])
    if not judged_findings and violation is None:
        level = "none"
    elif leaking:
        level = "leaks" if set(leaking) >= fams else "some"
    elif not open_ and not unbacked and not gated:
        level = "chance"
    else:
        level = "inconclusive"
    return Decision(level=level, findings=found, judged_findings=judged_findings, basis=basis, too_small=too_small,
                    open=open_, unbacked=unbacked, leaking=leak_findings, leaking_attacks=leaking_attacks,
                    families=list(leaking), gated=gated, violation=violation, n_tests=n_tests,
                    family_attacks=family_attacks)
