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

from ..arms import KINDS, ArmSpec, parse_arm
from ..attacks.base import FAMILY_TITLES, Finding, Policy
from .alarms import (
    AlarmTest,
    alarm_decision,
    empirical_epsilon_diagnostic,
    largest_unit,
    mu_gdp_diagnostic,
    one_run_alarm_test,
    unit_privacy,
)
from .one_run import dpsgd_mu_clt
from .ties import ReleaseCandidate, pick_release
from ..attacks.registry import ATTACKS
from ..core.stats import compare_proportions
from ..results import (
    CONTROL,
    AlarmOutcome,
    Alarms,
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


def alarm_tests(results: AuditResults) -> list[AlarmTest]:
    """Every test of every DP arm's claim the audit can make (:mod:`privleak.audit.alarms`): the one-run
    canary test (the alarm route: each canary is one record, its own person, held to the arm's record ε —
    or its person ε for an arm accounted per person), and as diagnostics the empirical ε and the ROC band
    (against the ε of the units evaluated) and the μ-GDP test (against the μ the DP-SGD run implies)."""
    design = results.data.membership_design
    k = largest_unit(design.strata) if design is not None and any(design.strata.values()) else 1
    tests: list[AlarmTest] = []
    for name, arm in results.arms.items():
        p = arm.privacy
        if p is None:
            continue
        eps = p.epsilon if p.unit == "person" else p.epsilon_per_record
        one = arm.one_run_epsilon
        if one is not None and one.available and one.candidates:
            counts = [(c.guesses, c.correct) for c in one.candidates]
            tests.append(one_run_alarm_test(name, one.m, counts, eps, one.delta))
            if p.unit == "record" and p.sigma > 0 and p.steps > 0:
                tests.append(mu_gdp_diagnostic(name, one.m, counts, dpsgd_mu_clt(p.sigma, p.sample_rate, p.steps)))
        emp = arm.empirical_epsilon
        if emp is not None and emp.attack in emp.by_attack:
            units = 1 if p.unit == "person" else k
            tests.append(empirical_epsilon_diagnostic(name, emp.by_attack[emp.attack],
                                                      p.epsilon if p.unit == "person" else eps, p.delta, units,
                                                      unit_privacy(p), "person" if p.unit == "person" else None))
        if emp is not None and emp.roc_band is not None:
            tests.append(AlarmTest(arm=name, route="roc_band", p_value=emp.roc_band.p_value, alarm=False,
                                   claim=f"held-out ROC inside the (ε = {emp.roc_band.epsilon:.3g}, δ = "
                                         f"{emp.roc_band.delta:.2g}) region of a unit of up to "
                                         f"{emp.roc_band.unit_records} records"))
    return tests


def decide_alarms(results: AuditResults, policy: Policy = POLICY) -> Alarms | None:
    """"DP guarantee violated", decided once for the audit at ``policy.alarm_alpha`` (None: no DP arm)."""
    tests = alarm_tests(results)
    if not tests:
        return None
    d = alarm_decision(tests, policy.alarm_alpha)
    outcomes = []
    for o in d.alarms + d.diagnostics:
        bound = o.test.bound(o.level) if o.test.bound is not None else None
        outcomes.append(AlarmOutcome(arm=o.test.arm, route=o.test.route, claim=o.test.claim, p_value=o.test.p_value,
                                     level=o.level, rejected=o.rejected, alarm=o.test.alarm,
                                     bound_at_level=bound if bound is None or math.isfinite(bound) else None))
    return Alarms(alpha=d.alpha, statement=d.statement,
                  violated=sorted({o.test.arm for o in d.alarms if o.rejected}),
                  outcomes=outcomes,
                  diagnostics_rejected=[f"{o.test.arm}: {o.test.route}" for o in d.diagnostics if o.rejected])


def _dp_violation(name: str, results: AuditResults) -> str | None:
    alarms = results.alarms
    if alarms is None or name not in alarms.violated:
        return None
    o = next(x for x in alarms.outcomes if x.arm == name and x.alarm and x.rejected)
    bound = f" (ε ≥ {o.bound_at_level:.2f} at its level)" if o.bound_at_level is not None else ""
    return (f"the {o.route.replace('_', '-')} test refutes {o.claim} at level {o.level:.3g}{bound}, p = "
            f"{o.p_value:.2g}: DP guarantee violated")


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
    violation = _dp_violation(name, results)
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
    if kind is not None:
        text += kind.remark(arm)
    if violation:
        label = "DP GUARANTEE VIOLATED"
    return Verdict(level=level, label=label, text=text, findings=reasons, figures=figures, families_leaking=fams,
                   attacks_leaking=leaking_attacks)


def recommend(results: AuditResults, policy: Policy = POLICY) -> Recommendation:
    """The arm to release, by the stated tie rule (:func:`privleak.audit.ties.pick_release`): among the
    recommendable arms whose verdict is near chance, those whose utility interval (G's paired-bootstrap 95 %
    interval; held-out perplexity where there is no best reference) overlaps the best's are within noise of
    it, and the smallest accountant ε among them is recommended, then the name — never the third decimal of G.
    One that learned little (G < ``LOW_GAIN``) is named as such, never silently."""
    arms = {n: a for n, a in results.arms.items() if a.verdict is not None and _recommendable(a)
            and _finite(-_utility_key(a))}
    rules = policy.describe()
    cands = []
    for n, a in arms.items():
        g, ci = a.utility.gain_recovered, a.utility.gain_recovered_ci95
        utility, interval = (g, tuple(ci) if ci is not None and ci[0] <= g <= ci[1] else None) if g is not None \
            else (_utility_key(a), None)
        shown = None if g is not None else f"held-out perplexity {a.utility.ppl_non_members:.2f}"
        cands.append(ReleaseCandidate(name=n, utility=utility, utility_ci=interval, epsilon=a.epsilon,
                                      near_chance=a.verdict.near_chance, shown=shown,
                                      unit=a.privacy.unit if a.privacy is not None else None))
    choice = pick_release(cands)
    if choice.chosen is None:
        text = "No arm meets the near-chance thresholds; none is recommended for release."
        if arms:
            order = {"chance": 0, "some": 1, "leaks": 2}
            least = min(arms, key=lambda n: (order.get(arms[n].verdict.level, 3), -_utility_key(arms[n])))
            text += f" The least leaky is {least}."
        return Recommendation(arm=None, text=text, policy=rules)
    best = choice.chosen
    arm = arms[best]
    why = f"Recommended arm: {best}. {choice.text}"
    if choice.leaking_better:
        n = len(choice.leaking_better)
        why += f" {', '.join(choice.leaking_better)} ha{'s' if n == 1 else 've'} more utility but leak{'s' if n == 1 else ''}."
    guarantee = _kind(arm).guarantee(arm) if _kind(arm) else None
    if guarantee:
        why += (f" It has {guarantee}: near chance holds for these attacks, not for every "
                "attacker, unlike a DP-SGD arm's ε.")
    if people := people_sentence(best, arm, results.arms):
        why += f" {people}"
    g = arm.utility.gain_recovered
    cppl = results.base_model.utility.ppl_non_members if results.base_model else None
    bppl = arm.utility.ppl_non_members
    if g is not None and g < LOW_GAIN:
        why += (f" Caution: its utility recovered is only G = {g:.2f} of the best non-private fine-tune's gain — it "
                "is safe because it learned little; consider a larger ε, more steps or a larger batch.")
    elif g is None and _finite(cppl) and bppl >= cppl * (1 - UTILITY_SAME):
        why += (f" Caution: its perplexity is no better than the untrained control's ({cppl:.2f}); it is safe because "
                "it learned little — consider more epochs, a larger ε or a larger batch.")
    return Recommendation(arm=best, text=why, policy=rules, tied=choice.tied, rule=choice.rule)


#: A person held to more than this many times the record's ε is not protected by record-level DP in the
#: recommendation's sentence: at 2 the person's guarantee is already that of two people, the point past
#: which group privacy stops being a rounding of the record's claim.
PERSON_EPSILON_FACTOR = 2.0


def people_sentence(name: str, arm: ArmResult, arms: dict[str, ArmResult]) -> str:
    """One sentence on whether record-level DP is enough for this corpus's people (issue 27), from the privacy
    blocks alone (``unit``, ``epsilon_person``, ``person_records``): "" when the recommended arm makes no DP
    claim or no DP arm reports people. Record-level DP is enough when the person with the most records is
    held to at most :data:`PERSON_EPSILON_FACTOR` × the record's ε."""
    p = arm.privacy
    blocks = [a.privacy for a in arms.values() if a.privacy is not None and a.privacy.person_records]
    if p is None or not blocks:
        return ""
    k = max(b.person_records for b in blocks)
    if k <= 1:
        return "Record-level DP is enough for this corpus: no person has more than one record."
    record_level = {n: a.privacy for n, a in arms.items() if a.privacy is not None and a.privacy.unit == "record"
                    and a.privacy.epsilon_person is not None}
    if p.unit == "person":
        text = f"{name} holds every person, up to {k} records each, to ε = {p.epsilon:.3g}"
        if record_level:
            worst = max(record_level, key=lambda n: record_level[n].epsilon_person)
            text = (f"Record-level DP is not enough for this corpus: a person has up to {k} records, and "
                    f"{worst} holds that person only to ε ≈ {record_level[worst].epsilon_person:.3g}; {text}")
        return text + "."
    if p.epsilon_person is None or p.unit != "record":
        return ""
    if p.epsilon_person <= PERSON_EPSILON_FACTOR * p.epsilon:
        return (f"Record-level DP is enough for this corpus: its person with the most records ({p.person_records}) "
                f"is held to ε ≈ {p.epsilon_person:.3g}.")
    return (f"Record-level DP is not enough for this corpus on its own: a person has up to {p.person_records} "
            f"records, and {name} holds that person only to ε ≈ {p.epsilon_person:.3g}; a user-level DP arm "
            "(dp-user-ε) holds each person to ε.")


def _compare(ref: str, a_arm: ArmResult, name: str, b_arm: ArmResult, tests: dict[str, Comparison]) -> None:
    for attack, b_result in b_arm.attacks.items():
        a_result = a_arm.attacks.get(attack)
        a, b = (a_result.between_arm_count() if a_result else None), b_result.between_arm_count()
        if a is not None and b is not None and a.n and b.n:
            tests[f"{ref} vs {name}: {a.unit}"] = compare_proportions(a.k, a.n, b.k, b.n)


def between_arm_tests(arms: dict[str, ArmResult]) -> dict[str, Comparison]:
    """Two-proportion tests (Fisher / χ², Cohen's h, Newcombe CI, as source 003 does) on the leak counts the
    attacks compare between arms (:meth:`~privleak.attacks.base.AttackResult.between_arm_count`): every arm
    against the memorisation stress test (the kind that is ``stress_test``: the baseline), and every arm with a
    data defence against the same recipe without it (``scrub`` against ``best``, ``dp-8+scrub`` against
    ``dp-8``) — what the defence adds on an equal recipe."""
    tests: dict[str, Comparison] = {}
    ref = next((n for n, a in arms.items() if _kind(a) is not None and _kind(a).stress_test), None)
    for name, arm in arms.items():
        if not (_kind(arm) is None or _kind(arm).compared):
            continue
        if ref is not None and name != ref:
            _compare(ref, arms[ref], name, arm, tests)
        try:
            spec = parse_arm(name)
        except ValueError:
            continue
        plain = ArmSpec(spec.kind, spec.param, spec.modifiers).name if spec.data else None
        if plain in arms and plain != ref:
            _compare(plain, arms[plain], name, arm, tests)
    return tests


def judge(results: AuditResults, policy: Policy = POLICY) -> AuditResults:
    """``results`` with the alarm decision, every verdict, the recommendation and the between-arm tests."""
    results.alarms = decide_alarms(results, policy)
    if results.base_model is not None:
        results.base_model.verdict = arm_verdict(CONTROL, results.base_model, results, policy)
    for name, arm in results.arms.items():
        arm.verdict = arm_verdict(name, arm, results, policy)
    # A model audited by `privleak attack` is not one of several defences to choose between.
    choices = any(_recommendable(a) for a in results.arms.values())
    results.recommendation = recommend(results, policy) if choices else None
    results.statistical_tests = between_arm_tests(results.arms)
    return results
