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
* **NEAR CHANCE**: no leak, and every attack shown within its margin
  (an intersection–union test: the claim's error rate is at most α);
* **INCONCLUSIVE**: neither — with, per attack that could not show its
  margin, how many items would at the observed estimate.

A DP arm whose empirical ε lower bound exceeds its accountant's ε fails
outright: its guarantee does not hold. Other levels: ``control``, ``guard`` (a
guard arm is judged by what it stops, never recommended), ``none`` (no attack
could judge) and the unlearning kinds' own (``arms/forgetting.py``).
Thresholds and margins: :class:`~privleak.attacks.base.Policy`.
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
from ..core.stats import compare_proportions, holm, two_figures
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


def _unsettled(f: Finding) -> str:
    """One attack that found no leak and could not show its figure within the margin, and what would settle it."""
    e = f.equivalence
    if e is None:
        return f"{f.attack}: makes no equivalence claim (it can only find leaks)"
    lo = "" if e.lower is None else f"{e.lower:+.3g}, "
    ci = f"{100 * (1 - 2 * e.alpha):.0f}% CI [{lo}{e.upper:+.3g}]" if e.upper is not None else "no interval"
    text = f"{f.attack}: {f.margin} not shown ({e.estimate:+.3g}, {ci}; {e.n:,} {f.items})"
    if e.n_needed is not None:
        text += f" — about {two_figures(e.n_needed):,} {f.items} would show it at this estimate"
    elif e.upper is None or (abs(e.estimate) if not e.one_sided else e.estimate) >= e.margin:
        text += " — its estimate is at or beyond the margin, so more items would not show it within"
    return text


def _need(f: Finding) -> float:
    """How far an attack is from showing its margin (what orders the unsettled list: the binding one first)."""
    e = f.equivalence
    if e is None or e.n_needed is None:
        return math.inf
    return e.n_needed / max(1, e.n)


def error_control(n_tests: int, alpha: float) -> str:
    """The verdict's error statement (Policy: Holm for leaks, TOST and intersection–union for near chance)."""
    return (f"Leak findings: Holm's step-down over the audit's {n_tests} leak test{'s' if n_tests != 1 else ''} (every "
            f"arm, every attack, every family) at family-wise α = {alpha:g}. NEAR CHANCE: every attack shown within its margin "
            f"of the control by two one-sided tests at α = {alpha:g} (an intersection–union test: the claim's error "
            f"is at most {alpha:g}). INCONCLUSIVE makes no claim.")


def _leak_p(f: Finding) -> float:
    # An attack without a p-value claims its leak exactly (p = 0) or nothing (p = 1).
    return f.p_leak if f.p_leak is not None else (0.0 if f.leaks else 1.0)


def _judged_by_findings(name: str, arm: ArmResult, results: AuditResults) -> bool:
    """Whether the arm's verdict comes from its attack findings (not the control, not a kind's own verdict)."""
    if arm is results.base_model or name == CONTROL:
        return False
    kind = KINDS.get(arm.kind)
    return kind is None or kind.verdict(name, arm, results) is None


def audit_leak_rejections(results: AuditResults, policy: Policy = POLICY,
                          extra: tuple[str, ArmResult] | None = None) -> tuple[dict[tuple[str, str], bool], int]:
    """Every leak test of the audit decided together: Holm's step-down at ``policy.alpha`` over the leak
    p-values of every arm judged by its findings (and ``extra``), every attack, every family. Returns ({(arm, attack): rejected},
    the number of tests). Family-wise error ≤ α over the whole audit, under any dependence (Holm 1979) — the
    error rate of every "leaks" the report prints, counted over everything it tests at once."""
    keys: list[tuple[str, str]] = []
    p: list[float] = []
    arms = dict(results.arms)
    if extra is not None:  # an arm judged on its own, beside the audit's (it joins the family)
        arms.setdefault(*extra)
    for name, arm in arms.items():
        if not _judged_by_findings(name, arm, results):
            continue
        for f in findings(arm, results.base_model, policy):
            if f.leaks is not None:
                keys.append((name, f.attack))
                p.append(_leak_p(f))
    return dict(zip(keys, holm(p, policy.alpha) if p else [])), len(p)


def arm_verdict(name: str, arm: ArmResult, results: AuditResults, policy: Policy = POLICY,
                rejections: tuple[dict[tuple[str, str], bool], int] | None = None) -> Verdict:
    """The plain-language verdict of one arm (see the module docstring). ``rejections``: the audit's leak
    decisions (:func:`audit_leak_rejections`), computed here when not given."""
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
    judged_findings = [f for f in found if f.leaks is not None]
    # Every leak test of the audit decided together (Holm over every arm's attacks, not this arm's alone).
    decided, n_tests = rejections if rejections is not None else audit_leak_rejections(results, policy, (name, arm))
    rejected = [decided.get((name, f.attack), False) for f in judged_findings]
    leaking: dict[str, list[str]] = {}
    leaking_attacks: list[str] = []
    judged: set[str] = set()
    for f, hit in zip(judged_findings, rejected):
        fam = _family(f.attack)
        judged.add(fam)
        if hit:
            leaking.setdefault(fam, []).append(f.reason or f"{f.attack} finds leakage ({f.figure})")
            leaking_attacks.append(f.attack)
    # An attack this audit is too small for — it could not show its margin even at a zero estimate (e.g. a
    # client-level attack over 20 clinics) — is named and left out of the near-chance claim: which attacks
    # the claim rests on is decided by the sizes, never by the outcomes (Equivalence.judgeable).
    too_small = [f for f, hit in zip(judged_findings, rejected)
                 if not hit and f.equivalence is not None and not f.equivalence.judgeable]
    open_ = sorted((f for f, hit in zip(judged_findings, rejected)
                    if not hit and not f.within_margin and f not in too_small), key=lambda f: -_need(f))
    unsettled = [_unsettled(f) for f in open_]
    basis = [f for f in judged_findings if f not in too_small]
    # Every family that judged the arm keeps at least one attack the claim can rest on.
    unbacked = sorted({_family(f.attack) for f in judged_findings} - {_family(f.attack) for f in basis})
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
    versus = "the control" if control is not None else "chance and their non-member floors"
    if not judged:
        level, label, text = "none", "NO ATTACKS", "No attack results for this arm."
    elif leaking:
        level, label = ("leaks", "LEAKS") if set(leaking) >= judged else ("some", "SOME LEAKAGE")
        text = "Leaks: " + "; ".join(reasons) + "." + note
    elif not unsettled and not unbacked:
        level, label = "chance", "NEAR CHANCE"
        text = (f"Near chance: every one of its {len(basis)} attacks that can judge at this audit's size is shown "
                f"within its margin of {versus} (two one-sided tests at α = {policy.alpha:g}), and none leaks."
                + (" Too small to show their margin here, and left out of the claim: "
                   + "; ".join(_unsettled(f) for f in too_small) + "." if too_small else "")) + note
    else:
        level, label = "inconclusive", "INCONCLUSIVE"
        if not unsettled:  # every figure within its margin, but a whole family rests on attacks too small
            unsettled = [f"{fam}: no attack of this family can show its margin at this audit's size"
                         for fam in unbacked] + [_unsettled(f) for f in too_small]
        text = (f"No leak found, but not shown near chance: {len(unsettled)} of its {len(judged_findings)} attacks "
                f"could not show their figure within the margin of {versus} — " + "; ".join(unsettled[:3])
                + (f"; and {len(unsettled) - 3} more" if len(unsettled) > 3 else "") + "." + note)
    blind = results.blind_baseline
    if blind is not None and blind.shifted and "membership" in leaking:
        text += (" Caution: a classifier that never sees the model tells these members from non-members "
                 f"(blind AUC {blind.auc:.2f}), so the membership figures are not evidence of memorisation.")
    if kind is not None:
        text += kind.remark(arm)
    if violation:
        label = "DP GUARANTEE VIOLATED"
    return Verdict(level=level, label=label, text=text, findings=reasons, figures=figures, families_leaking=fams,
                   attacks_leaking=leaking_attacks, unsettled=unsettled if not leaking else [],
                   settleable=level == "inconclusive" and all(_need(f) < math.inf for f in open_),
                   error_control=error_control(n_tests, policy.alpha))


def person_epsilon(arm: ArmResult) -> float | None:
    """The ε a person is held to, at the arm's δ: the arm's own ε for a person-level arm, the group ε of the person
    with the most records for a record-level one, the record ε of a client-level one when every person lies in one
    client (``Privacy.epsilon_person``); None when it states none (no DP, or people across clients)."""
    p = arm.privacy
    if p is None:
        return None
    return p.epsilon if p.unit == "person" else p.epsilon_person


def comparison_unit(arms: dict[str, ArmResult]) -> tuple[str, dict[str, float | None], str]:
    """The one unit the tie rule compares ε on: per person when every DP arm among ``arms`` states a person ε,
    else per record. Returns (unit, ε per arm on it — None without DP, the words after an ε: " per person at
    δ = 1e-05")."""
    dp = {n: a for n, a in arms.items() if a.privacy is not None}
    unit = "person" if dp and all(person_epsilon(a) is not None for a in dp.values()) else "record"
    eps = {n: (person_epsilon(a) if unit == "person" else a.privacy.epsilon_per_record) if a.privacy else None
           for n, a in arms.items()}
    deltas = sorted({a.privacy.delta for a in dp.values()})
    at = f" at δ = {deltas[0]:.2g}" if len(deltas) == 1 else " at each arm's δ" if deltas else ""
    return unit, eps, f" per {unit}{at}"


def seed_spread(arms: dict[str, ArmResult], policy: Policy = POLICY) -> tuple[dict[str, tuple[float, float | None, int]], str]:
    """Per arm (G, the standard deviation of G over training seeds, models behind G), and one sentence on how
    training noise entered. G is the mean over the audited model and its retrainings on extra seeds
    (``Utility.gain_recovered_seeds``) when there are any; an arm retrained on none takes the pooled spread of
    those that were, else ``policy.g_seed_sd``, else none."""
    out: dict[str, tuple[float, float | None, int]] = {}
    sds: list[float] = []
    for n, a in arms.items():
        g = a.utility.gain_recovered
        if g is None:
            continue
        vals = [g, *a.utility.gain_recovered_seeds]
        if len(vals) > 1:
            mean = sum(vals) / len(vals)
            sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1))
            sds.append(sd)
            out[n] = (mean, sd, len(vals))
    pooled = math.sqrt(sum(x * x for x in sds) / len(sds)) if sds else None
    fallback = pooled if pooled is not None else policy.g_seed_sd
    for n, a in arms.items():
        if n not in out and a.utility.gain_recovered is not None:
            out[n] = (a.utility.gain_recovered, fallback, 1)
    if sds:
        k = max(m for _, _, m in out.values())
        text = (f"Training noise is in the tie rule: G is the mean over up to {k} training seeds, and its spread "
                f"across them (pooled sd {pooled:.3f}) widens each arm's interval.")
    elif policy.g_seed_sd is not None:
        text = (f"Training noise is in the tie rule as an assumed spread of G across training seeds "
                f"(sd {policy.g_seed_sd:g}, Policy.g_seed_sd).")
    else:
        text = ("Training noise was not measured (no extra training seeds: recommendation.seeds = 0): the tie rule "
                f"counts the held-out texts' variance and the utility margin ({policy.utility_margin:g} of G) only.")
    return out, text


def _candidates(arms: dict[str, ArmResult], eligible: set[str], policy: Policy) -> tuple[list[ReleaseCandidate], str, str]:
    unit, eps, words = comparison_unit(arms)
    spread, noise = seed_spread(arms, policy)
    cands = []
    for n, a in arms.items():
        g, ci = a.utility.gain_recovered, a.utility.gain_recovered_ci95
        if g is not None:
            mean, sd, k = spread[n]
            interval = tuple(ci) if ci is not None and ci[0] <= g <= ci[1] else None
            cands.append(ReleaseCandidate(name=n, utility=mean, utility_ci=interval, epsilon=eps[n],  # type: ignore[arg-type]
                                          near_chance=n in eligible, seed_sd=sd, seeds=k))
        else:
            # No best reference: ranked by held-out perplexity (negated into utility) — and said so, never as G.
            cands.append(ReleaseCandidate(name=n, utility=_utility_key(a), utility_ci=None, epsilon=eps[n],
                                          near_chance=n in eligible,
                                          shown=f"held-out perplexity {a.utility.ppl_non_members:.2f}"))
    return cands, words, noise


def recommend(results: AuditResults, policy: Policy = POLICY) -> Recommendation:
    """The arm to release, by the stated tie rule (:func:`privleak.audit.ties.pick_release`): only the
    recommendable arms shown NEAR CHANCE are eligible; those whose G is within ``policy.utility_margin`` of the
    best's, or not shown below it (held-out texts and training seeds, :func:`seed_spread`), are tied, and the
    smallest ε on one unit (:func:`comparison_unit`) among them is recommended, then the name. With no arm shown
    near chance none is recommended; the arms with no leak found (INCONCLUSIVE) are named, with the arm the same
    rule would pick among them (``provisional``) and what would settle it. One that learned little
    (G < ``LOW_GAIN``) is named as such, never silently."""
    arms = {n: a for n, a in results.arms.items() if a.verdict is not None and _recommendable(a)
            and _finite(-_utility_key(a))}
    rules = policy.describe()
    eligible = {n for n, a in arms.items() if a.verdict.near_chance}
    cands, unit, noise = _candidates(arms, eligible, policy)
    choice = pick_release(cands, policy.utility_margin, policy.alpha, unit)
    if choice.chosen is None:
        text = "No arm is shown near chance on every attack; none is recommended for release."
        open_ = {n for n, a in arms.items() if a.verdict.level == "inconclusive"}
        settleable = {n for n in open_ if arms[n].verdict.settleable}
        provisional = None
        if settleable:
            pool = {n: a for n, a in arms.items() if n in settleable}
            pcands, punit, _ = _candidates(pool, settleable, policy)
            provisional = pick_release(pcands, policy.utility_margin, policy.alpha, punit).chosen
            names = sorted(settleable, key=lambda n: (n != provisional, n))
            text += (f" No leak was found in {', '.join(names)}, and their estimates lie inside the margins, but not "
                     "every attack could show its figure within its margin at this audit's size (INCONCLUSIVE); were "
                     f"they shown near chance, the tie rule would pick {provisional}. What would settle it: "
                     + "; ".join(arms[provisional].verdict.unsettled[:3]) + ".")
        if open_ - settleable:
            rest = sorted(open_ - settleable)
            text += (f" No leak was found in {', '.join(rest)}{' either' if settleable else ''}, but some of "
                     f"{'its' if len(rest) == 1 else 'their'} "
                     "estimates reach a margin: more items alone would not show "
                     f"{'it' if len(rest) == 1 else 'them'} near chance.")
        if not open_ and arms:
            order = {"chance": 0, "inconclusive": 1, "some": 2, "leaks": 3}
            least = min(arms, key=lambda n: (order.get(arms[n].verdict.level, 4), -_utility_key(arms[n])))
            text += f" The least leaky is {least}."
        return Recommendation(arm=None, text=text, policy=rules, provisional=provisional, rule=choice.rule,
                              training_noise=noise)
    best = choice.chosen
    arm = arms[best]
    why = f"Recommended arm: {best}. {choice.text} {noise}"
    if choice.leaking_better:
        n = len(choice.leaking_better)
        why += (f" {', '.join(choice.leaking_better)} ha{'s' if n == 1 else 've'} more utility but "
                f"{'is' if n == 1 else 'are'} not shown near chance.")
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
    return Recommendation(arm=best, text=why, policy=rules, tied=choice.tied, rule=choice.rule, training_noise=noise)


#: A person held to more than this many times the record's ε is not protected by record-level DP in the
#: recommendation's sentence: at 2 the person's guarantee is already that of two people, the point past
#: which group privacy stops being a rounding of the record's claim.
PERSON_EPSILON_FACTOR = 2.0


def people_sentence(name: str, arm: ArmResult, arms: dict[str, ArmResult]) -> str:
    """One sentence on whether record-level DP is enough for this corpus's people (issue 27), from the privacy
    blocks alone (``unit``, ``epsilon_person``, ``person_records``, ``delta``): "" when the recommended arm makes
    no DP claim or no DP arm reports people. Record-level DP is enough when the real person with the most
    records is held to at most :data:`PERSON_EPSILON_FACTOR` × the record's ε. Every ε is an accountant's upper
    bound and is printed with its δ ("guaranteed ε ≤ X at δ = …"); the planted canaries are test secrets, not
    people, and are named apart (issue 37)."""
    p = arm.privacy
    blocks = [a.privacy for a in arms.values() if a.privacy is not None and a.privacy.person_records]
    if p is None or not blocks:
        return ""
    k = max(b.person_records for b in blocks)
    canaries = ""
    if p.canary_records and p.epsilon_canary is not None and p.canary_records > 1:
        canaries = (f" (The planted canaries, up to {p.canary_records} copies each, are test secrets counted apart "
                    f"from the people: {name} guarantees each ε ≤ {p.epsilon_canary:.3g} at δ = {p.delta:.2g}.)")
    if k <= 1:
        return "Record-level DP is enough for this corpus: no person has more than one record." + canaries
    record_level = {n: a.privacy for n, a in arms.items() if a.privacy is not None and a.privacy.unit == "record"
                    and a.privacy.epsilon_person is not None}
    if p.unit == "person":
        text = f"{name} guarantees every person, up to {k} records each, ε ≤ {p.epsilon:.3g} at δ = {p.delta:.2g}"
        if record_level:
            worst = max(record_level, key=lambda n: record_level[n].epsilon_person)
            w = record_level[worst]
            text = (f"Record-level DP is not enough for this corpus: a person has up to {k} records, and "
                    f"{worst} guarantees that person only ε ≤ {w.epsilon_person:.3g} at δ = {w.delta:.2g}; {text}")
        return text + "." + canaries
    if p.epsilon_person is None:
        return ""
    if p.unit == "client":
        return (f"{name} holds each client to ε ≤ {p.epsilon:.3g}; every person's records lie in one client, so "
                f"each person, up to {p.person_records} records, is guaranteed ε ≤ {p.epsilon_person:.3g} at "
                f"δ = {p.delta:.2g}." + canaries)
    if p.epsilon_person <= PERSON_EPSILON_FACTOR * p.epsilon:
        return (f"Record-level DP is enough for this corpus: its person with the most records ({p.person_records}) "
                f"is guaranteed ε ≤ {p.epsilon_person:.3g} at δ = {p.delta:.2g}." + canaries)
    return (f"Record-level DP is not enough for this corpus on its own: a person has up to {p.person_records} "
            f"records, and {name} guarantees that person only ε ≤ {p.epsilon_person:.3g} at δ = {p.delta:.2g}; a "
            "user-level DP arm (dp-user-ε) holds each person to ε." + canaries)


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
    rejections = audit_leak_rejections(results, policy)
    for name, arm in results.arms.items():
        arm.verdict = arm_verdict(name, arm, results, policy, rejections)
    # A model audited by `privleak attack` is not one of several defences to choose between.
    choices = any(_recommendable(a) for a in results.arms.values())
    results.recommendation = recommend(results, policy) if choices else None
    results.statistical_tests = between_arm_tests(results.arms)
    return results
