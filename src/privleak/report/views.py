"""What the console and the HTML report share: the attacks grouped for their result types, the context they
present in, and the arm kinds' hooks — so neither renderer knows an attack or a kind by name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..arms import KINDS, ArmJudging, ArmPresentation, judging, presentation
from ..attacks.base import AttackResult, PresentContext, Runs
from ..attacks.registry import ATTACKS
from ..results import CONTROL, ArmResult, AuditResults


def title(attack: str) -> str:
    """"title (citation)" of a registered attack; its own name otherwise."""
    spec = ATTACKS.get(attack)
    return f"{spec.title} ({spec.cite})" if spec and spec.cite else attack


def short(attack: str) -> str:
    spec = ATTACKS.get(attack)
    return spec.title if spec else attack


def context(results: AuditResults, mask: Callable[[str], str] = lambda s: s,
            canary_text: Callable[[str], str | None] = lambda cid: None) -> PresentContext:
    design = results.data.membership_design
    return PresentContext(title=title, short=short, mask=mask, canary_text=canary_text, blind=results.blind_baseline,
                          membership_unit=design.unit if design else None)


def family_runs(results: AuditResults, family: str) -> list[tuple[type[AttackResult], Runs]]:
    """The attacks of ``family`` present in any model, grouped by result type (registry order), each attack with
    its (model, result) pairs in model order."""
    groups: dict[type[AttackResult], Runs] = {}
    models = results.models()
    for spec in ATTACKS.values():
        if spec.family != family:
            continue
        rows = [(n, m.attacks[spec.name]) for n, m in models if spec.name in m.attacks]
        if rows:
            groups.setdefault(type(rows[0][1]), {})[spec.name] = rows
    return list(groups.items())


def shown(arm: ArmResult) -> ArmPresentation:
    """How the arm's kind is shown (:class:`privleak.arms.ArmPresentation`; the default for an unknown kind)."""
    return presentation(arm.kind)


def judged(arm: ArmResult) -> ArmJudging:
    """How the arm's kind is judged (:class:`privleak.arms.ArmJudging`: whether it is compared, recommendable)."""
    return judging(arm.kind)


def kinds_present(results: AuditResults) -> list[ArmPresentation]:
    """The presentations of this run's arms' kinds, once each, in arm order (registered kinds only)."""
    return list(dict.fromkeys(presentation(a.kind) for a in results.arms.values() if a.kind in KINDS))


def is_control(results: AuditResults, name: str, arm: ArmResult) -> bool:
    return arm is results.base_model or name == CONTROL


# --------------------------------------------------------------------------- what a newcomer reads first

#: The smoke profile's own words about itself, where its figures are printed (issue 49 item 6): the docs and
#: `--help` said it; its console and report did not.
TOUR = ("This is the smoke profile: a tour of every stage, attack family and report section on a tiny corpus and a "
        "1-layer model, sized to finish in about a minute. Its figures are not evidence of anything — for an audit, "
        "run the default profile (or --profile full).")


def tour_note(results: AuditResults) -> str | None:
    """:data:`TOUR` when the run is the smoke profile's, else None."""
    return TOUR if results.config.get("profile") == "smoke" else None


def gain_note(results: AuditResults) -> str | None:
    """Why an arm's G is above 1 — it beat the utility reference — in words (None: every G ≤ 1)."""
    above = [(n, g) for n, a in results.arms.items()
             if a.serves is None and (g := a.utility.gain_recovered) is not None and g > 1.005]
    if not above:
        return None
    ref = next((n for n, a in results.arms.items() if a.kind in KINDS and judged(a).utility_reference
                and a.defences is None), "best")
    names = ", ".join(f"{n} (G = {g:.2f})" for n, g in above)
    return (f"G above 1 — {names}: the arm's held-out log-perplexity is lower than the utility reference's ({ref}, "
            "the best non-private fine-tune: early-stopped on held-out data, public text replayed beside the "
            "members), so it recovered more than the reference's gain; G is measured against that reference, not "
            "bounded by it. A baseline — the memorisation stress test — trains far longer without replay, so it can "
            "fit this corpus's held-out notes more closely, and memorises more.")


def _eps(p: Any) -> str:
    """An arm's accountant figures on its units, each with its δ: "ε ≤ 8.00 per record, ≤ 115.6 per person
    (8 records) at δ = 6.3e-04"."""
    own = f"ε ≤ {p.epsilon:.4g} per {p.unit}"
    other = []
    if p.unit == "record" and p.epsilon_person is not None:
        other.append(f"≤ {p.epsilon_person:.4g} per person" + (f" ({p.person_records} records)"
                                                                 if p.person_records else ""))
    if p.unit != "record" and p.epsilon_record is not None:
        other.append(f"≤ {p.epsilon_record:.4g} per record")
    if p.unit == "client" and p.epsilon_person is not None:
        other.append(f"≤ {p.epsilon_person:.4g} per person")
    return ", ".join([own, *other]) + f" at δ = {p.delta:.1e}"


def verdict_figures(name: str, arm: ArmResult, results: AuditResults) -> str:
    """The figures a verdict line rests on, in one clause: G (utility recovered), the ε the arm is accounted at
    (per record and per person), and its strongest membership attack beside the control's figure for it."""
    parts = []
    g = arm.utility.gain_recovered
    if g is not None:
        ci = arm.utility.gain_recovered_ci95
        parts.append(f"G = {g:.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""))
    elif arm.utility.ppl_non_members is not None:
        parts.append(f"held-out perplexity {arm.utility.ppl_non_members:.2f}")
    if arm.privacy is not None:
        parts.append(_eps(arm.privacy))
    elif arm.serves is not None:
        parts.append(f"serves {arm.serves}'s model")
    else:
        guarantee = shown(arm).guarantee(arm) if arm.kind in KINDS else None
        parts.append(guarantee or "no formal ε (not DP)")
    attack, best = arm.best_membership()
    if best is not None and attack is not None:
        versus = ""
        if results.base_model is not None:
            same = results.base_model.membership().get(attack)
            if same is not None:
                versus = f" (control {same.auc:.3f})"
            else:  # an attack the control cannot run (the reference attack: the control is the reference)
                c_attack, c_best = results.base_model.best_membership()
                if c_best is not None and c_attack is not None:
                    versus = f" (the control's strongest: {short(c_attack)} AUC {c_best.auc:.3f})"
        parts.append(f"strongest attack: {short(attack)} AUC {best.auc:.3f}{versus}")
    return "; ".join(parts)
