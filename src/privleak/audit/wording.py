"""The sentences of the verdicts and the recommendation, written from their typed decisions.

Prose without decisions: every function here reads a decision already made (:mod:`privleak.audit.decisions`'s
:class:`~privleak.audit.decisions.Decision`, :mod:`privleak.audit.recommend`'s standings) and says it in words;
none tests, counts or chooses anything. Every margin is printed beside the verdict it decides, and every ε with
its δ and its unit.
"""

from __future__ import annotations

import math

from ..attacks.base import FAMILY_TITLES, Finding, Policy
from ..core.stats import two_figures
from ..results import ArmResult, AuditResults, Recommendation, Standing
from .decisions import Decision, need

#: An arm that recovers less than this share of the best non-private fine-tune's gain learned little.
LOW_GAIN = 0.2
#: An arm whose held-out perplexity is within this fraction of the control's learned (almost) nothing.
UTILITY_SAME = 0.01
#: A person held to more than this many times the record's ε is not protected by record-level DP in the
#: recommendation's sentence: at 2 the person's guarantee is already that of two people, the point past
#: which group privacy stops being a rounding of the record's claim.
PERSON_EPSILON_FACTOR = 2.0


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def family_title(fam: str) -> str:
    return FAMILY_TITLES.get(fam, fam).lower() if fam != "pii" else FAMILY_TITLES[fam]


def finding_name(f: Finding) -> str:
    """"loss", "loss at 1 % FPR": which of an attack's tests a finding is."""
    if f.test.startswith("tail "):
        return f"{f.attack} at {100 * float(f.test.split()[1]):g} % FPR"
    return f.attack if not f.test else f"{f.attack} ({f.test})"


def unsettled(f: Finding) -> str:
    """One test that found no leak and could not show its figure within the margin, and what would settle it."""
    e = f.equivalence
    if e is None:
        return f"{finding_name(f)}: makes no equivalence claim (it can only find leaks)"
    if e.upper is not None:
        lo = "" if e.lower is None else f"{e.lower:+.3g}, "
        ci = (f"{100 * (1 - 2 * e.alpha):.0f}% CI [{lo}{e.upper:+.3g}]" if e.lower is not None
              else f"upper {100 * (1 - e.alpha):.0f}% bound {e.upper:+.3g}")
    else:
        ci = e.method or "no interval"
    text = f"{finding_name(f)}: {f.margin} not shown ({e.estimate:+.3g}, {ci}; {e.n:,} {f.items})"
    if e.n_needed is not None:
        text += f" — about {two_figures(e.n_needed):,} {f.items} would show it at this estimate"
    elif e.upper is not None and (abs(e.estimate) if not e.one_sided else e.estimate) >= e.margin:
        text += " — its estimate is at or beyond the margin, so more items would not show it within"
    elif not e.judgeable:
        text += " — too few items to show it even at a zero estimate"
    return text


def error_control(n_tests: int, alpha: float) -> str:
    """The verdict's error statement (Holm for leaks, TOST and intersection–union for near chance)."""
    return (f"Leak findings: Holm's step-down over the audit's {n_tests} leak test{'s' if n_tests != 1 else ''} (every "
            f"arm, every attack and each of its tests — the AUC and the tail at each FPR —, every family) at "
            f"family-wise α = {alpha:g}. NEAR CHANCE: every test shown within its margin of the control or chance at "
            f"α = {alpha:g} (an intersection–union test: the claim's error is at most {alpha:g}); it describes this "
            "arm against these attacks, and the recommendation does not rest on it. INCONCLUSIVE makes no claim.")


def utility_note(arm: ArmResult, control: ArmResult | None) -> str:
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


def verdict_text(d: Decision, arm: ArmResult, control: ArmResult | None, versus: str, policy: Policy) -> str:
    """The verdict in words, from its decision."""
    note = utility_note(arm, control)
    if d.level == "none":
        return "No attack results for this arm."
    if d.level in ("leaks", "some"):
        return "Leaks: " + "; ".join(leak_reasons(d)) + "." + note
    if d.level == "chance":
        return (f"Near chance: each of its {len(d.basis)} tests that can judge at this audit's size is shown within "
                f"its margin of {versus} (one- or two-sided tests at α = {policy.alpha:g}: the AUC within "
                f"±{policy.auc_margin:g}, the advantage TPR − FPR "
                + ", ".join(f"below {m:g} at {100 * f:g} % FPR" for f, m in zip(policy.tail_fprs, policy.tail_margins))
                + "), and none leaks."
                + (" Too small to show their margin here, and left out of the claim: "
                   + "; ".join(unsettled(f) for f in d.too_small) + "." if d.too_small else "")) + note
    items = inconclusive_items(d)
    return (f"No leak found, but not shown near chance: {len(items)} of its {len(d.judged_findings)} tests could not "
            f"show their figure within the margin of {versus} — " + "; ".join(items[:3])
            + (f"; and {len(items) - 3} more" if len(items) > 3 else "") + "." + note)


def inconclusive_items(d: Decision) -> list[str]:
    """What keeps an arm INCONCLUSIVE, each with the number that would settle it."""
    items = [unsettled(f) for f in d.open]
    if d.gated:
        items.insert(0, "membership: the blind baseline (no model) rivals the strongest attack on this split, so the "
                        "membership figures cannot show any margin")
    if not items:  # every figure within its margin, but a whole family rests on tests too small
        items = []
        for fam in d.unbacked:
            small = [f for f in d.too_small if f.attack in d.family_attacks.get(fam, ())]
            items.append(f"{family_title(fam)}: none of its {len(small)} tests can show its margin at this audit's "
                         "size" + (f" (e.g. {unsettled(min(small, key=need))})" if small else ""))
    return items


def scrub_reach(labels: list[str], mode: str) -> str:
    """What a scrub arm protects, said where its verdict is read: only the entity types its scrubber lists."""
    return (f" Scrubbing ({mode}) removes only the entity types it lists — {', '.join(labels)}; a secret outside them "
            "(a passphrase, an account detail in free text, a rare diagnosis) stays in the training data and is not "
            "covered by this verdict.")


def blind_caution(blind_auc: float) -> str:
    return (" Caution: a classifier that never sees the model tells these members from non-members "
            f"(blind AUC {blind_auc:.2f}), so the membership figures are not evidence of memorisation.")


def dp_violation(route: str, claim: str, level: float, bound: float | None, p: float) -> str:
    b = f" (ε ≥ {bound:.2f} at its level)" if bound is not None else ""
    return f"the {route.replace('_', '-')} test refutes {claim} at level {level:.3g}{b}, p = {p:.2g}: DP guarantee violated"


def leak_reason(f: Finding) -> str:
    """Why one test finds a leak: the attack's own reason, else its figure."""
    return f.reason or f"{f.attack} finds leakage ({f.figure})"


def leak_reasons(d: Decision) -> list[str]:
    """Why the arm leaks, the DP alarm's refutation first (its sentence from the rejected test), then each leak
    finding's reason by family."""
    o = d.violation
    first = [dp_violation(o.route, o.claim, o.level, o.bound_at_level, o.p_value)] if o is not None else []
    return first + [leak_reason(f) for f in d.leaking]


# ----------------------------------------------------------------------------- the recommendation

def lacks(code: str, *, eps: float | None = None, delta: float | None = None, required: float | None = None,
          unit: str = "person", records: int | None = None, summary: str = "", detail: str = "",
          own_unit: str = "") -> str:
    """What an arm lacks to meet the requirement, from its standing's code and figures."""
    if code == "no_dp":
        return "no formal guarantee: it is not trained with DP" + (f" ({summary})" if summary else "")
    if code == "alarm":
        return "its DP guarantee is refuted by the one-run audit (DP GUARANTEE VIOLATED)"
    if code == "delta":
        return f"its δ = {delta:.2g} is above the required δ = {required:.2g}"
    if code == "unit":
        return (f"it states no ε per {unit} (its accountant's unit is the {own_unit}, and a {unit}'s records are not "
                "all in one)")
    if code == "epsilon":
        who = "a person" if unit == "person" else "a record"
        most = f" (the person with the most records, {records})" if records else ""
        return f"it holds {who}{most} only to ε ≤ {eps:.4g} at δ = {delta:.2g}, above the required {required:g}"
    if code == "blind":
        return ("the blind baseline rivals the membership attacks on this split, so their figures cannot show the "
                "tolerances")
    return detail


def _eps(s: Standing, delta: float | None) -> str:
    if s.epsilon is None:
        return "no DP guarantee"
    return f"ε ≤ {s.epsilon:.3g} per {s.unit} at δ = {s.delta if s.delta is not None else delta:.2g}"


def _reads(s: Standing) -> str:
    if s.utility is None:
        return "no utility figure"
    if not s.utility_is_g:
        return f"held-out perplexity {-s.utility:.2f}"
    ci = f" [{s.utility_ci[0]:.2f}–{s.utility_ci[1]:.2f}]" if s.utility_ci is not None else ""
    return f"G = {s.utility:.2f}{ci}" + (f" over {s.seeds} training seeds" if s.seeds > 1 else "")


def requirement_line(rec: Recommendation) -> str:
    """The report's first line: what the user asked for."""
    return "Privacy requirement: " + rec.requirement.describe(rec.audit_delta) + "."


def training_noise(rec: Recommendation, seeds_allowed: int) -> str:
    by = {s.arm: s for s in rec.standings}
    measured = [by[n] for n in rec.contenders if n in by and by[n].seeds > 1]
    if len(rec.contenders) <= 1:
        return ("Training noise did not enter the choice: no other eligible arm's utility is within the utility "
                "margin of the recommended one's or overlaps its interval.")
    if measured:
        k = max(s.seeds for s in measured)
        return (f"Training noise entered the choice: the contenders {', '.join(rec.contenders)} were retrained on up "
                f"to {k - 1} extra training seeds, and their intervals are mean ± t(0.975, k−1)·se over their k "
                "trained models (held-out and seed variance).")
    if seeds_allowed == 0:
        return ("Training noise was not measured (recommendation.seeds = 0): the contenders "
                f"{', '.join(rec.contenders)} are treated as tied.")
    return (f"The contenders {', '.join(rec.contenders)} await retraining on extra seeds; until then they are treated "
            "as tied.")


def recommendation_text(rec: Recommendation, results: AuditResults, seeds_allowed: int) -> str:
    """The recommendation in words: the requirement first, the choice and why, then every arm that does not
    meet the requirement with what it lacks."""
    req = rec.requirement
    by = {s.arm: s for s in rec.standings}
    parts = [requirement_line(rec)]
    if rec.arm is None:
        if not rec.standings:
            parts.append("No arm of this audit is a candidate for release.")
        elif rec.eligible:
            parts.append("No eligible arm has a utility figure to choose by.")
        else:
            parts.append("No arm meets it; none is recommended.")
            parts.append(_why_none(rec, results))
    else:
        s = by[rec.arm]
        head = f"Recommended arm: {rec.arm} ({_eps(s, rec.audit_delta)}, {_reads(s)})"
        if req.formal:
            head += f" meets it by its accountant"
            if s.verified is True:
                head += ", and the audit's alarm had the power to catch it broken at this size"
            elif s.verified is False:
                # the power figure's own sentence ("Implementation unverified: …."), as a clause of this one
                why = (s.power or "Implementation unverified: the one-run audit could not have caught a broken "
                                  "DP-SGD at this arm's ε at this size").rstrip(".")
                head += "; " + why[:1].lower() + why[1:]
        else:
            head += (" meets it: every test that can judge at this size shows its leakage within the tolerances at "
                     f"level α/{len(rec.standings)} (Bonferroni over the candidate arms), on every measured training "
                     "seed. This protects against the attacks run, not against every attacker")
            blind = results.blind_baseline
            if blind is not None:
                head += (f"; the blind baseline (no model) reads AUC {blind.auc:.2f} on this split"
                         + (", which rivals the attacks" if blind.shifted else ", so the split is not shifted"))
        parts.append(head + ".")
        others = [n for n in rec.eligible if n != rec.arm]
        if len(rec.tied) > 1:
            parts.append(f"{', '.join(t for t in rec.tied if t != rec.arm)} also meet{'s' if len(rec.tied) == 2 else ''} "
                         "it, and the audit cannot tell their utility from the best's: the smaller ε "
                         f"per {s.unit} decided, then the name.")
        elif others:
            parts.append(f"It has the most utility of the {len(rec.eligible)} arms that meet it "
                         f"({', '.join(f'{n}: {_reads(by[n])}' for n in others)}).")
        parts.append(training_noise(rec, seeds_allowed))
        if s.epsilon is not None:
            together = (f"; everything trained on the same people, composed: ε ≤ {s.epsilon_all_together:.3g} per "
                        f"{s.unit}" if s.epsilon_all_together is not None else "")
            parts.append(f"Released alone it holds ε ≤ {s.epsilon:.3g} per {s.unit}{together} (choosing it read "
                         "private held-out text, which this audit does not account; Papernot & Steinke 2022).")
        arm = results.arms[rec.arm]
        if (p := people_sentence(rec.arm, arm, results.arms)):
            parts.append(p)
        g = arm.utility.gain_recovered
        if g is not None and g < LOW_GAIN:
            parts.append(f"Caution: its utility recovered is only G = {g:.2f} of the best non-private fine-tune's "
                         "gain — consider a larger ε within the requirement, more steps or a larger batch.")
    missing = [s for s in rec.standings if not s.meets]
    if missing:
        parts.append("Not meeting it: " + "; ".join(f"{s.arm} — {s.lacks}" for s in missing) + ".")
    return " ".join(parts)


def _why_none(rec: Recommendation, results: AuditResults) -> str:
    """The one reason no arm qualifies, and what would make one."""
    req = rec.requirement
    codes = {s.lacking for s in rec.standings}
    if req.formal:
        dp = [s for s in rec.standings if s.epsilon is not None]
        if not dp:
            return (f"No arm of this audit is trained with DP, and only a DP arm's accountant can meet a formal "
                    f"requirement: add dp-user-{req.epsilon:g} (ε per person) or dp-{req.epsilon:g}, or ask for an "
                    "empirical requirement (--require empirical).")
        best = min(dp, key=lambda s: s.epsilon)
        if codes <= {"no_dp", "epsilon", "unit"} and req.unit == "person":
            return (f"The DP arms hold a person only to ε ≤ {best.epsilon:.4g} at best ({best.arm}); an arm with a "
                    f"person-level guarantee, dp-user-{req.epsilon:g}, would meet it.")
        return f"The closest is {best.arm} ({_eps(best, rec.audit_delta)})."
    return ("Each candidate's shortfall is below; a larger audit (more members per side) settles tests that are "
            "not shown, and a formal requirement does not depend on them.")


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
