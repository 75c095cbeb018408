"""Verdicts: does an arm leak, by which family of attacks, and which arm to release.

Every attack result judges itself against the control (the base model,
which never saw the members) and its own floor
(:meth:`privleak.attacks.base.AttackResult.assess`): a leak test with its
p-value, and an equivalence test (Schuirmann's two one-sided tests) that its
figure lies within a stated margin of the control. An arm's verdict
collects those findings — membership inference, canaries, extraction, PII
attacks — and has three outcomes, never two:

* **LEAKS** / **SOME LEAKAGE**: every / some family that could judge finds
  leakage, every leak test of the *audit* — every arm, every attack, every
  family — decided together by Holm's procedure at family-wise α (so six
  arms of sixteen attacks do not make ninety-six chances of a false
  "leaks": the error rate is counted over everything the audit tests);
* **NEAR CHANCE**: no leak, and every test shown within its margin — each
  membership attack's AUC and its advantage TPR − FPR at 1 % and 0.1 % FPR
  (where privacy is lost), the canaries' exposure at every level they can
  speak to, every count's rate (an intersection–union test: the claim's
  error rate is at most α). Descriptive: the recommendation answers the
  user's requirement (:mod:`privleak.audit.recommend`) and does not rest on it;
* **INCONCLUSIVE**: neither — with, per test that could not show its
  margin, how many items would at the observed estimate.

The blind-baseline gate: where a model-free classifier beats a coin flip on
the split and reaches the arm's strongest membership attack, the membership
family can neither find a leak nor back a near-chance claim
(:func:`~privleak.audit.decisions.blind_gated`).

Decisions in :mod:`privleak.audit.decisions` (:func:`~privleak.audit.decisions.decide`: a typed
:class:`~privleak.audit.decisions.Decision`), sentences in :mod:`privleak.audit.wording`; here the alarm's
decision, the verdicts put together from both, and :func:`judge`, which runs the audit's judging.

A DP arm whose empirical ε lower bound exceeds its accountant's ε fails
outright: its guarantee does not hold. Other levels: ``control``, ``guard`` (a
guard arm is judged by what it stops, never recommended), ``none`` (no attack
could judge) and the unlearning kinds' own (``arms/forgetting.py``).
Thresholds and margins: :class:`~privleak.attacks.base.Policy`.
"""

from __future__ import annotations

import math

from ..arms import ArmSpec, judging, parse_arm, presentation
from ..attacks.base import Policy
from .alarms import (
    AlarmTest,
    alarm_decision,
    alarm_power,
    canary_curves,
    empirical_epsilon_diagnostic,
    fdp_alarm_test,
    largest_unit,
    mu_gdp_diagnostic,
    one_run_alarm_test,
    reconstruction_alarm_test,
    unit_privacy,
)
from .one_run import dpsgd_mu_clt
from .whitebox import noiseless, whitebox_alarm_test
from . import wording
from .decisions import POLICY, audit_leak_rejections, decide, seed_label
from .recommend import recommend, recommendable
from ..config.requirement import Requirement
from ..core.stats import compare_proportions
from ..results import (
    CONTROL,
    AlarmOutcome,
    AlarmPower,
    Alarms,
    ArmResult,
    AuditResults,
    Comparison,
    PowerNeed,
    Verdict,
)


LOW_GAIN = wording.LOW_GAIN


def _canary_tests(name: str, p, one, curves) -> list[AlarmTest]:
    """The alarm tests of one DP arm's promise to its audit canaries, from one model's guesses ``one`` (a
    :class:`~privleak.results.OneRunEpsilon`): Steinke's against the (ε, δ) of a canary's unit, and — where
    the accountant's curves are known (``curves``, :func:`~.alarms.canary_curves`) — the f-DP test of the same
    in/out guesses and the reconstruction test of the decoded secrets against them."""
    eps = p.epsilon if p.unit == "person" else p.epsilon_per_record
    counts = [(c.guesses, c.correct) for c in one.candidates]
    tests = [one_run_alarm_test(name, one.m, counts, eps, p.delta)]  # the arm's δ (what its one-run summary used)
    if curves is not None:
        tests.append(fdp_alarm_test(name, one.m, counts, curves, p.delta))
        rec = one.reconstruction
        if rec is not None and rec.candidates:
            tests.append(reconstruction_alarm_test(name, rec.m, rec.k, [(c.guesses, c.correct) for c in rec.candidates],
                                                   curves, p.delta))
    return tests


def _whitebox_test(name: str, p, check) -> AlarmTest:
    """The white-box route of one DP arm (:func:`~.whitebox.whitebox_alarm_test`) on ``check``'s statistics."""
    return whitebox_alarm_test(name, check, p.sigma, p.sample_rate, p.max_grad_norm, p.delta)


def alarm_tests(results: AuditResults) -> list[AlarmTest]:
    """Every test of every DP arm's claim the audit can make (:mod:`privleak.audit.alarms`): the one-run
    canary tests (the alarm routes: each canary is one record, its own person, held to the arm's record ε —
    or its person ε for an arm accounted per person — and, by the f-DP routes, to the accountant's trade-off
    curves), and as diagnostics the empirical ε and the ROC band (against the ε of the units evaluated) and
    the μ-GDP test (against the μ the DP-SGD run implies)."""
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
            tests += _canary_tests(name, p, one, canary_curves(p))
            if p.unit == "record" and p.sigma > 0 and p.steps > 0:
                counts = [(c.guesses, c.correct) for c in one.candidates]
                tests.append(mu_gdp_diagnostic(name, one.m, counts, dpsgd_mu_clt(p.sigma, p.sample_rate, p.steps)))
        if p.gradient_canaries is not None and p.sigma > 0:
            tests.append(_whitebox_test(name, p, p.gradient_canaries))
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


#: The arm kinds whose guesses stand for "a DP arm broken as badly as no DP at all" (first present wins).
REFERENCE_KINDS = ("baseline", "best")


def _reference(results: AuditResults) -> tuple[str, object] | None:
    """The audit's non-private trained arm with one-run guesses: what a DP-SGD run with no noise and no
    clipping approaches (None: the audit has none)."""
    for kind in REFERENCE_KINDS:
        for name, arm in results.arms.items():
            one = arm.one_run_epsilon
            if arm.kind == kind and arm.privacy is None and one is not None and one.available and one.candidates:
                return name, one
    return None


def _perfect(one):
    """``one`` with every guess right: the strongest evidence this audit's size could hold."""
    cands = [c.model_copy(update={"correct": c.guesses}) for c in one.candidates]
    rec = one.reconstruction
    if rec is not None:
        rec = rec.model_copy(update={"candidates": [c.model_copy(update={"correct": c.guesses}) for c in rec.candidates],
                                     "reconstructed": rec.m})
    return one.model_copy(update={"candidates": cands, "reconstruction": rec})


def _power(results: AuditResults, decision) -> dict[str, AlarmPower]:
    """Per DP arm with alarm tests: its tests re-run on the reference's guesses (:func:`_reference`, else
    every guess right) at the levels its own tests were allotted (:func:`~.alarms.alarm_power`); its white-box
    test on the readings of a step without noise or clipping (:func:`~.whitebox.noiseless`)."""
    ref = _reference(results)
    out: dict[str, AlarmPower] = {}
    for name, arm in results.arms.items():
        own = [o for o in decision.alarms if o.test.arm == name]
        one = arm.one_run_epsilon
        if not own or arm.privacy is None:
            continue
        hypothetical: list[AlarmTest] = []
        label = ref[0] if ref is not None else "every guess right"
        if one is not None and one.available and one.candidates:
            guesses = ref[1] if ref is not None else _perfect(one)
            hypothetical += _canary_tests(name, arm.privacy, guesses, canary_curves(arm.privacy))
        if arm.privacy.gradient_canaries is not None and arm.privacy.sigma > 0:
            hypothetical.append(_whitebox_test(name, arm.privacy, noiseless(arm.privacy.gradient_canaries)))
        check = alarm_power(name, own, hypothetical, label)
        out[name] = AlarmPower(arm=name, verified=check.verified, reference=check.reference, route=check.route,
                               p_value=check.p_value, level=check.level, text=check.text,
                               needed=[PowerNeed(route=r, guesses=g, correct=c) for r, g, c in check.needed])
    return out


def decide_alarms(results: AuditResults, policy: Policy = POLICY) -> Alarms | None:
    """"DP guarantee violated", decided once for the audit at ``policy.alarm_alpha`` (None: no DP arm), with
    each DP arm's alarm power (:func:`_power`)."""
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
                  diagnostics_rejected=[f"{o.test.arm}: {o.test.route}" for o in d.diagnostics if o.rejected],
                  power=_power(results, d))


def _fdp_figures(name: str, arm: ArmResult, results: AuditResults) -> list[str]:
    """The f-DP routes' bounds (the ε of the DP-SGD curves at the arm's q and T they refute) and the alarm's power."""
    alarms = results.alarms
    if alarms is None:
        return []
    out = []
    for o in alarms.outcomes:
        if o.arm == name and o.route == "whitebox" and o.bound_at_level is not None and arm.privacy is not None:
            wb = arm.privacy.gradient_canaries
            out.append(f"white-box ε ≥ {o.bound_at_level:.2f} ({wb.canaries} gradient canaries read through its "
                       f"{wb.steps} DP steps; the DP-SGD noise multipliers at this q and T refuted)")
            continue
        if o.arm != name or o.route not in ("one_run_fdp", "one_run_kary") or o.bound_at_level is None:
            continue
        rec = arm.one_run_epsilon.reconstruction if arm.one_run_epsilon else None
        what = (f"f-DP, {arm.one_run_epsilon.m} canaries in/out" if o.route == "one_run_fdp" else
                f"reconstruction, {rec.reconstructed} of {rec.m} secrets decoded" if rec else "reconstruction")
        out.append(f"one-run ε ≥ {o.bound_at_level:.2f} ({what}; the DP-SGD curves at this q and T refuted)")
    power = alarms.power.get(name)
    if power is not None:
        out.append(power.text)
    return out


LABELS = {"none": "NO ATTACKS", "leaks": "LEAKS", "some": "SOME LEAKAGE", "chance": "NEAR CHANCE",
          "inconclusive": "INCONCLUSIVE"}


def arm_verdict(name: str, arm: ArmResult, results: AuditResults, policy: Policy = POLICY,
                rejections: tuple[dict[tuple[str, str], bool], int] | None = None) -> Verdict:
    """The plain-language verdict of one arm: its :func:`~privleak.audit.decisions.decide` decisions, worded by
    :mod:`.wording`."""
    control = results.base_model
    if arm is control or name == CONTROL:
        return Verdict(level="control", label="CONTROL", findings=[], figures=[],
                       text="The base model never saw the members: its attack figures are the floor any arm can reach.")
    own = judging(arm.kind).verdict(name, arm, results)
    if own is not None:
        return own
    d = decide(name, arm, results, policy, rejections)
    figures = [f.figure for f in d.findings if f.figure]
    if arm.empirical_epsilon is not None:
        figures.append(f"empirical ε ≥ {arm.empirical_epsilon.epsilon_lb:.2f} ({arm.empirical_epsilon.attack})")
    figures += presentation(arm.kind).figures(arm)
    one = arm.one_run_epsilon
    if one is not None and one.available:
        figures.append(f"one-run ε ≥ {one.epsilon_steinke:.2f} (Steinke et al.; {one.m} canaries)"
                       + (f"; μ-GDP μ ≥ {one.mu_gdp_lb:.2f}" if one.mu_gdp_lb is not None else ""))
        figures += _fdp_figures(name, arm, results)
    if arm.utility.gain_recovered is not None and control is not None:
        figures.append(f"utility recovered G = {arm.utility.gain_recovered:.2f} (held-out log-perplexity "
                       f"{arm.utility.nll_non_members:.3f} nats; control {control.utility.nll_non_members:.3f})")
    elif wording._finite(arm.utility.ppl_non_members):
        b = control.utility.ppl_non_members if control else None
        figures.append(f"held-out perplexity {arm.utility.ppl_non_members:.2f}"
                       + (f" (control {b:.2f})" if wording._finite(b) else ""))
    versus = "the control or chance" if control is not None else "chance and their non-member floors"
    text = wording.verdict_text(d, arm, control, versus, policy)
    blind = results.blind_baseline
    if blind is not None and blind.shifted and ("membership" in d.families or d.gated):
        text += wording.blind_caution(blind.auc)
    text += presentation(arm.kind).remark(arm)
    if arm.defences is not None and arm.defences.scrub is not None:
        text += wording.scrub_reach(arm.defences.scrub.labels, arm.defences.scrub.mode)
    label = "DP GUARANTEE VIOLATED" if d.violation is not None else LABELS[d.level]
    fams = [wording.family_title(f) for f in d.families]
    unsettled = wording.inconclusive_items(d) if d.level == "inconclusive" else []
    return Verdict(level=d.level, label=label, text=text, findings=wording.leak_reasons(d), figures=figures,
                   families_leaking=fams, attacks_leaking=d.leaking_attacks, unsettled=unsettled,
                   settleable=d.settleable, error_control=wording.error_control(d.n_tests, policy.alpha))


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
    kinds = {n: judging(a.kind) for n, a in arms.items()}
    ref = next((n for n, k in kinds.items() if k.stress_test), None)
    for name, arm in arms.items():
        if not kinds[name].compared:
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


def judge(results: AuditResults, policy: Policy = POLICY, requirement: Requirement | None = None,
          seeds_allowed: int = 0) -> AuditResults:
    """``results`` with the alarm decision, every verdict, the recommendation against ``requirement`` (default:
    the one the audit's config states, else ε ≤ 10 per person) and the between-arm tests. ``seeds_allowed``: how
    many extra training seeds the pipeline may still train for contenders (the recommendation names them)."""
    results.alarms = decide_alarms(results, policy)
    if results.base_model is not None:
        results.base_model.verdict = arm_verdict(CONTROL, results.base_model, results, policy)
    extra = [(seed_label(n, k), s) for n, a in results.arms.items() for k, s in enumerate(a.seed_results, 1)]
    rejections = audit_leak_rejections(results, policy, extra)
    for name, arm in results.arms.items():
        arm.verdict = arm_verdict(name, arm, results, policy, rejections)
        for k, s in enumerate(arm.seed_results, 1):
            s.verdict = arm_verdict(seed_label(name, k), s, results, policy, rejections)
    # A model audited by `privleak attack` is not one of several defences to choose between.
    if any(recommendable(a) for a in results.arms.values()):
        if requirement is None:
            raw = (results.config.get("recommendation") or {}).get("require") if isinstance(results.config, dict) else None
            requirement = Requirement.model_validate(raw) if raw is not None else Requirement()
        results.recommendation = recommend(results, requirement, policy, seeds_allowed, rejections)
    else:
        results.recommendation = None
    results.statistical_tests = between_arm_tests(results.arms)
    return results
