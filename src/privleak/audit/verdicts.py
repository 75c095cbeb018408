"""Verdicts: does an arm leak, by which family of attacks, and which arm to release.

Every attack result judges itself against the control (the base model,
which never saw the members) and its own floor
(:meth:`privleak.attacks.base.AttackResult.assess`); an arm's verdict
collects those findings by family — membership inference, canaries,
extraction, PII attacks — so an arm whose only leak is extraction is not
called near chance. A DP arm whose empirical ε lower bound exceeds its
accountant's ε fails outright: its guarantee does not hold.

Levels: ``chance`` (no family finds leakage), ``some`` (some families do),
``leaks`` (every family that could judge finds leakage), ``control``,
``guard`` (a guard arm is judged by what it stops, never recommended) and
``none`` (no attack could judge). Thresholds: :class:`~privleak.attacks.base.Policy`.
"""

from __future__ import annotations

import math

from ..arms import KINDS
from ..attacks.base import FAMILY_TITLES, Finding, Policy
from ..attacks.registry import ATTACKS
from ..core.stats import compare_proportions
from ..results import (
    CONTROL,
    ArmResult,
    AuditResults,
    Comparison,
    Recommendation,
    Verdict,
)

#: An arm whose held-out perplexity is within this fraction of the control's learned (almost) nothing.
UTILITY_SAME = 0.01
POLICY = Policy()


def _family(attack: str) -> str:
    spec = ATTACKS.get(attack)
    return spec.family if spec else "other"


def findings(arm: ArmResult, control: ArmResult | None, policy: Policy = POLICY) -> list[Finding]:
    """Every attack's finding on ``arm``, in registry order (no control: against chance and the floors only)."""
    out = []
    for name, result in arm.attacks.items():
        out.append(result.assess(name, control.attacks.get(name) if control else None, policy))
    return out


def _dp_violation(arm: ArmResult) -> str | None:
    one = arm.one_run_epsilon
    if arm.privacy is not None and one is not None and one.available and one.exceeds_accountant:
        return (f"the one-run ε lower bound {one.epsilon_steinke:.2f} (95% confidence, {one.m} audit canaries) "
                f"exceeds the accountant's ε {arm.privacy.epsilon_per_record:.2f}: DP guarantee violated")
    emp = arm.empirical_epsilon
    if emp is None or arm.privacy is None:
        return None
    acc = arm.privacy.epsilon_per_record
    if emp.exceeds_accountant or emp.epsilon_lb > acc + 1e-9:
        return (f"the empirical ε lower bound {emp.epsilon_lb:.2f} ({emp.attack}) exceeds the accountant's ε "
                f"{acc:.2f}: the DP guarantee does not hold")
    if emp.dp_bound is not None and not emp.dp_bound.ok:
        return (f"measured operating points violate TPR ≤ e^ε·FPR + δ ({emp.dp_bound.attack}): "
                "the DP guarantee is contradicted")
    return None


#: An arm that recovers less than this share of the best non-private fine-tune's gain learned little.
LOW_GAIN = 0.2


def _utility_note(arm: ArmResult, control: ArmResult | None) -> str:
    g = arm.utility.gain_recovered
    if g is not None:
        if g < LOW_GAIN:
            return (f" It recovers only {g:.2f} of the best non-private fine-tune's gain on held-out text "
                    f"(utility recovered G < {LOW_GAIN}): it learned little that is useful.")
        return ""
    ppl, bppl = arm.utility.ppl_non_members, control.utility.ppl_non_members if control else None
    if _finite(ppl) and _finite(bppl) and ppl >= bppl * (1 - UTILITY_SAME):
        return " It is no better than the untrained control on held-out text: it learned (almost) nothing useful from the members."
    return ""


def _utility_key(arm: ArmResult) -> float:
    """Higher is better: G where defined, else minus the held-out perplexity."""
    if arm.utility.gain_recovered is not None:
        return arm.utility.gain_recovered
    ppl = arm.utility.ppl_non_members
    return -ppl if _finite(ppl) else -math.inf


def _utility_phrase(arm: ArmResult) -> str:
    g = arm.utility.gain_recovered
    if g is not None:
        return f"utility recovered G = {g:.2f}"
    return f"held-out perplexity {arm.utility.ppl_non_members:.2f}"


def _kind(arm: ArmResult):
    return KINDS.get(arm.kind)


def _recommendable(arm: ArmResult) -> bool:
    k = _kind(arm)
    return k is None or k.recommendable


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def arm_verdict(name: str, arm: ArmResult, results: AuditResults, policy: Policy = POLICY) -> Verdict:
    """The plain-language verdict of one arm (see the module docstring)."""
    control = results.base_model
    if arm is control or name == CONTROL:
        return Verdict(level="control", label="CONTROL", findings=[], figures=[],
                       text="The base model never saw the members: its attack figures are the floor any arm can reach.")
    kind = KINDS.get(arm.kind)
    own = kind.verdict(name, arm, results) if kind is not None else None
    if own is not None:
        return own
    found = findings(arm, control, policy)
    figures = [f.figure for f in found if f.figure]
    leaking: dict[str, list[str]] = {}
    leaking_attacks: list[str] = []
    judged: set[str] = set()
    for f in found:
        if f.leaks is None:
            continue
        fam = _family(f.attack)
        judged.add(fam)
        if f.leaks:
            leaking.setdefault(fam, []).append(f.reason)
            leaking_attacks.append(f.attack)
    reasons = [r for fam in leaking for r in leaking[fam]]
    violation = _dp_violation(arm)
    if arm.empirical_epsilon is not None:
        figures.append(f"empirical ε ≥ {arm.empirical_epsilon.epsilon_lb:.2f} ({arm.empirical_epsilon.attack})")
    if kind is not None:
        figures += kind.figures(arm)
    one = arm.one_run_epsilon
    if one is not None and one.available:
        figures.append(f"one-run ε ≥ {one.epsilon_steinke:.2f} (Steinke et al.; {one.m} canaries)"
                       + (f"; μ-GDP μ ≥ {one.mu_gdp_lb:.2f}" if one.mu_gdp_lb is not None else ""))
    if violation:
        reasons.insert(0, violation)
        leaking.setdefault("membership", [])
        judged.add("membership")
    if arm.utility.gain_recovered is not None and control is not None:
        figures.append(f"utility recovered G = {arm.utility.gain_recovered:.2f} (held-out log-perplexity "
                       f"{arm.utility.nll_non_members:.3f} nats; control {control.utility.nll_non_members:.3f})")
    elif _finite(arm.utility.ppl_non_members):
        b = control.utility.ppl_non_members if control else None
        figures.append(f"held-out perplexity {arm.utility.ppl_non_members:.2f}" + (f" (control {b:.2f})" if _finite(b) else ""))
    note = _utility_note(arm, control)
    fams = [FAMILY_TITLES.get(f, f).lower() if f != "pii" else FAMILY_TITLES[f] for f in leaking]
    if not judged:
        level, label, text = "none", "NO ATTACKS", "No attack results for this arm."
    elif not leaking:
        level, label = "chance", "NEAR CHANCE"
        text = ("No measurable leakage: attacks do no better than on the control." if control is not None else
                "No measurable leakage: attacks do no better than chance and their non-member floors.") + note
    else:
        level, label = ("leaks", "LEAKS") if set(leaking) >= judged else ("some", "SOME LEAKAGE")
        text = "Leaks: " + "; ".join(reasons) + "." + note
    blind = results.blind_baseline
    if blind is not None and blind.shifted and "membership" in leaking:
        text += (" Caution: a classifier that never sees the model tells these members from non-members "
                 f"(blind AUC {blind.auc:.2f}), so the membership figures are not evidence of memorisation.")
    if violation:
        label = "DP GUARANTEE VIOLATED"
    return Verdict(level=level, label=label, text=text, findings=reasons, figures=figures, families_leaking=fams,
                   attacks_leaking=leaking_attacks)


def recommend(results: AuditResults, policy: Policy = POLICY) -> Recommendation:
    """The arm to release: the highest utility recovered G (where the audit has a best
    reference; else the best held-out perplexity) among the arms whose verdict is near
    chance. One that learned little (G < ``LOW_GAIN``) is named as such, never silently."""
    arms = {n: a for n, a in results.arms.items() if a.verdict is not None and _recommendable(a)}
    ok = {n: a for n, a in arms.items() if a.verdict.near_chance and _finite(-_utility_key(a))}
    rules = policy.describe()
    if ok:
        best = max(ok, key=lambda n: _utility_key(ok[n]))
        key = _utility_key(ok[best])
        by_g = ok[best].utility.gain_recovered is not None
        others = [n for n, a in arms.items() if n not in ok and _utility_key(a) > key]
        what = "utility recovered" if by_g else "held-out perplexity"
        why = (f"Recommended arm: {best} — the best {what} ({_utility_phrase(ok[best])}) among the arms whose attacks "
               f"are near chance ({', '.join(ok)}).")
        if others:
            why += f" {', '.join(others)} ha{'s' if len(others) == 1 else 've'} more utility but leak{'s' if len(others) == 1 else ''}."
        guarantee = _kind(ok[best]).guarantee(ok[best]) if _kind(ok[best]) else None
        if guarantee:
            why += (f" It has {guarantee}: near chance holds for these attacks, not for every "
                    "attacker, unlike a DP-SGD arm's ε.")
        g = ok[best].utility.gain_recovered
        cppl = results.base_model.utility.ppl_non_members if results.base_model else None
        bppl = ok[best].utility.ppl_non_members
        if g is not None and g < LOW_GAIN:
            why += (f" Caution: it recovers only {g:.2f} of the best non-private fine-tune's gain — it is safe because "
                    "it learned little; consider a larger ε, more steps or a larger batch.")
        elif g is None and _finite(cppl) and bppl >= cppl * (1 - UTILITY_SAME):
            why += (f" Caution: its perplexity is no better than the untrained control's ({cppl:.2f}); it is safe because "
                    "it learned little — consider more epochs, a larger ε or a larger batch.")
        return Recommendation(arm=best, text=why, policy=rules)
    text = "No arm meets the near-chance thresholds; none is recommended for release."
    cands = arms
    if cands:
        order = {"chance": 0, "some": 1, "leaks": 2}
        least = min(cands, key=lambda n: (order.get(cands[n].verdict.level, 3), -_utility_key(cands[n])))
        text += f" The least leaky is {least}."
    return Recommendation(arm=None, text=text, policy=rules)


def between_arm_tests(arms: dict[str, ArmResult]) -> dict[str, Comparison]:
    """Each arm vs the memorisation stress test (the arm whose kind is ``stress_test``: the baseline) on the leak
    counts its attacks compare between arms (:meth:`~privleak.attacks.base.AttackResult.between_arm_count`):
    Fisher / χ², Cohen's h, Newcombe CI, as source 003 does."""
    ref = next((n for n, a in arms.items() if _kind(a) is not None and _kind(a).stress_test), None)
    if ref is None:
        return {}
    base = arms[ref]
    tests: dict[str, Comparison] = {}
    for name, arm in arms.items():
        if name == ref or not (_kind(arm) is None or _kind(arm).compared):
            continue
        for attack, b_result in arm.attacks.items():
            a_result = base.attacks.get(attack)
            a, b = (a_result.between_arm_count() if a_result else None), b_result.between_arm_count()
            if a is not None and b is not None and a.n and b.n:
                tests[f"{ref} vs {name}: {a.unit}"] = Comparison.model_validate(
                    compare_proportions(a.k, a.n, b.k, b.n).to_dict())
    return tests


def judge(results: AuditResults, policy: Policy = POLICY) -> AuditResults:
    """``results`` with every verdict, the recommendation and the between-arm tests filled in."""
    if results.base_model is not None:
        results.base_model.verdict = arm_verdict(CONTROL, results.base_model, results, policy)
    for name, arm in results.arms.items():
        arm.verdict = arm_verdict(name, arm, results, policy)
    # A model audited by `privleak attack` is not one of several defences to choose between.
    choices = any(_recommendable(a) for a in results.arms.values())
    results.recommendation = recommend(results, policy) if choices else None
    results.statistical_tests = between_arm_tests(results.arms)
    return results
