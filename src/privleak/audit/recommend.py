"""The recommendation: which arm meets the user's privacy requirement with the most utility.

It answers one question, with the requirement stated first (``recommendation.require``,
:class:`~privleak.config.requirement.Requirement`; default ε ≤ 10 per person, tier 2 of Ponomareva et al. 2023):

1. **Eligibility.**
   *Formal* (the default): from the accountant alone — the arm's ε for the required unit (per person: the
   arm's own ε for a person-level arm, the group bound of the person with the most records for a record-level
   one) at most the required ε, at a δ no larger than the required δ, and no "DP guarantee violated" alarm. It
   never reads an attack outcome, so it cannot flip with a seed. Arms with no DP guarantee (scrubbing,
   deduplication, plain fine-tuning) cannot meet it. The standing says whether the alarm had the power to
   catch the arm broken at its size ("implementation unverified" when not).
   *Empirical* (asked for by name): the arm's measured leakage shown within the requirement's tolerances —
   every judgeable attack's equivalence at level α / k over the k candidate arms (Bonferroni: the arm
   recommended among k meets the requirement with error ≤ α, whichever is picked — each claim alone is an
   intersection–union test over its attacks), no leak found, the membership family not flagged by the blind
   baseline, on every measured training seed.
   Every arm that does not meet the requirement is shown with what it lacks.
2. **Utility.** Among eligible arms the highest utility recovered G wins. Arms whose G the audit cannot tell
   from the best's — within ``policy.utility_margin`` of it, or with overlapping intervals — are *contenders*:
   the pipeline retrains them on up to ``recommendation.seeds`` extra training seeds (:attr:`needs_seeds`),
   and their intervals are then mean ± t₀.₉₇₅,ₖ₋₁ · se over the k trained models (held-out and seed variance).
3. **Ties.** Contenders whose intervals still overlap the best's are tied; the smallest ε on the requirement's
   unit among them is recommended, then the name.

Decisions only: :mod:`privleak.audit.wording` writes the sentences from the typed :class:`Recommendation`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from scipy import stats

from ..arms import judging
from ..attacks.base import Policy
from ..config.requirement import Requirement
from ..results import ArmResult, AuditResults, Recommendation, Standing
from . import wording
from .decisions import decide, seed_label

#: z of a 95 % two-sided interval: G's held-out interval is read back into a standard error with it.
Z95 = 1.959963984540054


def recommendable(arm: ArmResult) -> bool:
    return judging(arm.kind).recommendable


def person_epsilon(arm: ArmResult) -> float | None:
    """The ε a person is held to, at the arm's δ: the arm's own ε for a person-level arm, the group ε of the person
    with the most records for a record-level one, the record ε of a client-level one when every person lies in one
    client (``Privacy.epsilon_person``); None when it states none (no DP, or people across clients)."""
    p = arm.privacy
    if p is None:
        return None
    return p.epsilon if p.unit == "person" else p.epsilon_person


def unit_epsilon(arm: ArmResult, unit: str) -> float | None:
    """The arm's accountant ε for ``unit`` ("person" or "record"); None without a DP guarantee for it."""
    if arm.privacy is None:
        return None
    return person_epsilon(arm) if unit == "person" else arm.privacy.epsilon_per_record


def alarm_power(name: str, results: AuditResults) -> tuple[bool | None, str]:
    """Whether the one-run audit could have caught DP arm ``name`` broken at this audit's size, and its words:
    the arm's entry in ``results.alarms.power`` (:class:`~privleak.results.AlarmPower`, decided with the alarm
    because it is held to the levels the alarm allotted the arm's tests; None: the audit computed none)."""
    power = results.alarms.power.get(name) if results.alarms is not None else None
    if power is None:
        return None, ""
    return bool(power.verified), power.text


def _budget(results: AuditResults, arm: str, unit: str) -> tuple[float | None, float | None]:
    """(ε alone, ε of everything trained on the same people) on ``unit`` for ``arm``, from the audit's ledger
    composition (``results.budget``); None where the budget does not say."""
    alone = together = None
    for group in results.budget:
        for r in group.releases:
            eps = r.epsilon_person if unit == "person" else r.epsilon
            if r.arms == [arm]:
                alone = eps
            elif arm in r.arms and len(r.arms) > 1 and (together is None or (eps is not None and eps > together)):
                together = eps
    return alone, together


def formal_standing(name: str, arm: ArmResult, req: Requirement, results: AuditResults) -> Standing:
    """Does ``arm`` meet the formal requirement? From the accountant and the alarm only (module docstring)."""
    p = arm.privacy
    eps = unit_epsilon(arm, req.unit)
    verified, power_text = alarm_power(name, results) if p is not None else (None, "")
    _, together = _budget(results, name, req.unit)
    common = dict(arm=name, epsilon=eps, delta=p.delta if p else None, unit=req.unit, verified=verified,
                  power=power_text, epsilon_all_together=together, **_utility(arm))
    code = ""
    if p is None:
        code = "no_dp"
    elif results.alarms is not None and name in results.alarms.violated:
        code = "alarm"
    elif req.delta is not None and p.delta > req.delta * (1 + 1e-9):
        code = "delta"
    elif eps is None:
        code = "unit"
    elif eps > req.epsilon * (1 + 1e-9):
        code = "epsilon"
    if not code:
        return Standing(meets=True, **common)
    records = p.person_records if p is not None and req.unit == "person" and p.unit != "person" else None
    text = wording.lacks(code, eps=eps, delta=p.delta if p else None,
                         required=req.delta if code == "delta" else req.epsilon, unit=req.unit, records=records,
                         summary=_defended(arm), own_unit=p.unit if p else "")
    return Standing(meets=False, lacks=text, lacking=code, **common)


def empirical_standing(name: str, arm: ArmResult, req: Requirement, results: AuditResults, level: float,
                       policy: Policy, rejections: dict) -> Standing:
    """Does ``arm`` meet the empirical requirement at ``level`` (α over the candidates)? Its verdict's decisions
    re-made at the requirement's tolerances (:func:`privleak.audit.decisions.decide`), on the audited model and
    every extra training seed measured; leak findings are the audit's (``rejections``, Holm at ``policy.alpha``)."""
    strict = replace(policy, alpha=level, auc_margin=req.auc,
                     tail_margins=(req.tpr_at_1pct_fpr, req.tpr_at_0_1pct_fpr)[:len(policy.tail_fprs)],
                     exposure_margin=req.exposure_bits, rate_margin=req.rate)
    p = arm.privacy
    _, together = _budget(results, name, "person")
    common = dict(arm=name, epsilon=person_epsilon(arm), delta=p.delta if p else None, unit="person",
                  verified=alarm_power(name, results)[0] if p is not None else None, epsilon_all_together=together,
                  **_utility(arm))
    if results.alarms is not None and name in results.alarms.violated:
        return Standing(meets=False, lacks=wording.lacks("alarm"), lacking="alarm", **common)
    models = [(name, arm)] + [(seed_label(name, k), s) for k, s in enumerate(arm.seed_results, 1)]
    for label, model in models:
        d = decide(label, model, results, strict, rejections)
        code, detail = "", ""
        on = "" if label == name else f"on {label}: "
        if d.leaking:
            code, detail = "leak", f"{on}a leak is found — {wording.leak_reason(d.leaking[0])}"
        elif d.gated:
            code = "blind"
        elif d.open or d.unbacked:
            code = "unshown"
            detail = f"{on}not shown within the tolerances — " + wording.inconclusive_items(d)[0]
        if code:
            return Standing(meets=False, lacks=wording.lacks(code, detail=detail), lacking=code, **common)
    return Standing(meets=True, **common)


def _defended(arm: ArmResult) -> str:
    """The data defences a non-DP arm has instead, in a few words."""
    d = arm.defences
    parts = []
    if d is not None and d.scrub is not None:
        parts.append("scrubbed: only the listed PII types are removed")
    if d is not None and d.dedup is not None:
        parts.append("deduplicated")
    return "; ".join(parts)


def _utility(arm: ArmResult) -> dict:
    """G over the audited model and its extra training seeds, with its interval's ingredients."""
    g = arm.utility.gain_recovered
    if g is None:
        ppl = arm.utility.ppl_non_members
        return dict(utility=-ppl if ppl is not None and math.isfinite(ppl) else None, utility_is_g=False, seeds=1,
                    utility_ci=None)
    vals = [g, *arm.utility.gain_recovered_seeds]
    mean = sum(vals) / len(vals)
    held = None
    ci = arm.utility.gain_recovered_ci95
    if ci is not None and ci[0] <= g <= ci[1]:
        held = (ci[1] - ci[0]) / (2 * Z95)
    sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 else None
    half = interval_half_width(held, sd, len(vals))
    return dict(utility=mean, utility_is_g=True, seeds=len(vals), seed_sd=sd,
                utility_ci=(mean - half, mean + half) if half is not None else None)


def interval_half_width(held_se: float | None, seed_sd: float | None, k: int) -> float | None:
    """Half-width of G's 95 % interval over k trained models: t₀.₉₇₅,ₖ₋₁ · √(se_held² + sd²/k) with k ≥ 2 (the
    seed spread measured: Student's t, not z, for 2–9 values — t₀.₉₇₅,₁ = 12.7), else 1.96 · se_held; None
    when neither is known."""
    if seed_sd is not None and k >= 2:
        se = math.sqrt((held_se or 0.0) ** 2 + seed_sd ** 2 / k)
        return float(stats.t.ppf(0.975, k - 1)) * se
    if held_se is not None:
        return Z95 * held_se
    return None


def _overlap(a: Standing, b: Standing) -> bool:
    if a.utility_ci is None or b.utility_ci is None:
        return a.utility == b.utility
    return a.utility_ci[1] >= b.utility_ci[0] and b.utility_ci[1] >= a.utility_ci[0]


def _eps_key(s: Standing) -> float:
    return math.inf if s.epsilon is None else s.epsilon


def choose(eligible: Sequence[Standing], utility_margin: float,
           seeds_allowed: int) -> tuple[str | None, list[str], list[str], list[str]]:
    """(chosen, tied, contenders, needs_seeds) among eligible standings (module docstring, steps 2 and 3).
    ``contenders``: the eligible arms the audit cannot tell from the best on utility; ``needs_seeds``: those of
    them not yet retrained when retraining is allowed (the pipeline trains them and asks again)."""
    cands = [s for s in eligible if s.utility is not None]
    if not cands:
        return None, [], [], []
    best = max(cands, key=lambda s: (s.utility, -_eps_key(s), s.arm))
    # Before any retraining, an arm within the utility margin of the best may be training noise away from it.
    pre = [s for s in cands if s is best or _overlap(s, best)
           or (s.utility_is_g and best.utility - s.utility <= utility_margin)]
    # Once each of them is measured on extra seeds, their t intervals decide.
    contenders = [s for s in pre if _overlap(s, best)] if len(pre) > 1 and all(s.seeds > 1 for s in pre) else pre
    needs = [s.arm for s in contenders if s.seeds == 1] if len(contenders) > 1 and seeds_allowed > 0 else []
    tied = sorted(contenders, key=lambda s: (_eps_key(s), s.arm)) if len(contenders) > 1 else [best]
    return tied[0].arm, [s.arm for s in tied], [s.arm for s in contenders], sorted(needs)


def recommend(results: AuditResults, requirement: Requirement, policy: Policy, seeds_allowed: int = 0,
              rejections: dict | None = None) -> Recommendation:
    """The typed recommendation (module docstring); its ``text`` is written by :mod:`privleak.audit.wording`.
    ``rejections``: the audit's leak decisions (:func:`privleak.audit.decisions.audit_leak_rejections`)."""
    arms = {n: a for n, a in results.arms.items() if recommendable(a)}
    if requirement.formal:
        standings = [formal_standing(n, a, requirement, results) for n, a in arms.items()]
    else:
        level = policy.alpha / max(1, len(arms))
        standings = [empirical_standing(n, a, requirement, results, level, policy, rejections or {})
                     for n, a in arms.items()]
    eligible = [s for s in standings if s.meets]
    chosen, tied, contenders, needs = choose(eligible, policy.utility_margin, seeds_allowed)
    deltas = sorted({a.privacy.delta for a in arms.values() if a.privacy is not None})
    rec = Recommendation(arm=chosen, requirement=requirement, audit_delta=deltas[0] if len(deltas) == 1 else None,
                         standings=standings, eligible=[s.arm for s in eligible], tied=tied, contenders=contenders,
                         needs_seeds=needs, text="", policy=policy.describe(), rule=RULE)
    return rec.model_copy(update={"text": wording.recommendation_text(rec, results, seeds_allowed),
                                  "requirement_text": wording.requirement_line(rec),
                                  "training_noise": wording.training_noise(rec, seeds_allowed)})


RULE = ("eligible: a formal requirement is met by the accountant's ε for the required unit at the required δ with no "
        "DP alarm (never by attack outcomes); an empirical one by every test that can judge showing its leakage within "
        "the tolerances at α over the candidate arms, on every measured seed. Among eligible arms the highest utility "
        "recovered G wins; arms within the utility margin of the best or with overlapping intervals are retrained on "
        "extra seeds and compared with t intervals; those still overlapping are tied, and the smallest ε on the "
        "requirement's unit among them is recommended, then the first by name")
