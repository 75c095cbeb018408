"""What the console and the HTML report share: the attacks grouped for their result types, the context they
present in, and the arm kinds' hooks — so neither renderer knows an attack or a kind by name."""

from __future__ import annotations

from collections.abc import Callable

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
