"""The one runner every attack goes through: select, run, time, mask.

:func:`run_family` runs the selected attacks of one family on one target
model (a plain handle, or a guarded one: the guard arm is this same runner
over the baseline behind the guard), times each, adds the family's summary
(for membership: the empirical ε, computed from the attacks' scores while
they are still in memory) and masks every string of every result, so no raw
PII value leaves the stage. The pipeline caches one :class:`AttackStage` per
(arm, family).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..attacks.base import AttackContext, AttackResult, AttackSpec
from ..attacks.one_run_canaries import OneRunCanaryResult
from ..attacks.membership.attacks import MembershipResult
from ..core.masking import PiiMasker
from ..core.typed import Typed
from ..results import AnyAttackResult, EmpiricalEpsilon, ExposedPerson, OneRunEpsilon
from .summaries import empirical_epsilon_summary, exposed_people, one_run_summary

if TYPE_CHECKING:
    from ..models.handle import ModelHandle

#: Keys never masked: the result-type discriminator must survive masking.
_KEEP = frozenset({"kind"})


class AttackStage(Typed):
    """What one (arm, family) stage writes: the results, their timings and the family's summary."""

    results: dict[str, AnyAttackResult]
    seconds: dict[str, float]
    empirical_epsilon: EmpiricalEpsilon | None = None
    one_run_epsilon: OneRunEpsilon | None = None
    exposed_people: list[ExposedPerson] | None = None
    # A served arm: what its wrapper did while these attacks ran (e.g. the guard's interventions per attack).
    wrapper: dict[str, Any] | None = None


def mask_strings(obj: Any, masker: PiiMasker) -> Any:
    """Every string inside ``obj`` (JSON-like) with known and pattern-shaped PII masked."""
    if isinstance(obj, str):
        return masker.mask(obj)
    if isinstance(obj, list):
        return [mask_strings(x, masker) for x in obj]
    if isinstance(obj, dict):
        return {k: v if k in _KEEP else mask_strings(v, masker) for k, v in obj.items()}
    return obj


def masked(result: AttackResult, masker: PiiMasker) -> AttackResult:
    """A copy of ``result`` with every string masked (same type, same figures)."""
    data = result.model_dump(mode="json")
    clean = mask_strings(data, masker)
    return result if clean == data else type(result).model_validate(clean)


def run_family(specs: Sequence[AttackSpec], target: ModelHandle, ctx: AttackContext, *,
               delta: float | None = None, alpha: float = 0.05, unit_claim: tuple[float, float, int] | None = None,
               fdp: bool = True, on_start: Callable[[str], None] | None = None) -> AttackStage:
    """Run ``specs`` (one family) on ``target``, each with the inputs it declares (``ctx.for_attack``); attacks
    whose ``needs`` are not there are skipped.

    ``delta`` / ``alpha``: for the membership family's empirical-ε bound and the one-run bounds of the
    audit canaries (``fdp``: also the μ-GDP bound); ``unit_claim``: a DP arm's (ε, δ) for the units the
    membership attacks evaluate, and their most records (the ROC band diagnostic). ``on_start(name)`` is
    called before each attack.
    """
    results: dict[str, AttackResult] = {}
    seconds: dict[str, float] = {}
    for spec in specs:
        mine = ctx.for_attack(spec)  # what it declares, and what every attack reads
        if not spec.applicable(mine):
            continue
        if on_start is not None:
            on_start(spec.name)
        t0 = time.perf_counter()
        results[spec.name] = spec.run(target, mine)
        seconds[spec.name] = round(time.perf_counter() - t0, 2)
    summary = None
    mia = {k: v for k, v in results.items() if isinstance(v, MembershipResult)}
    if mia and delta is not None:
        summary = empirical_epsilon_summary(mia, delta=delta, alpha=alpha, seed=ctx.seed, unit_claim=unit_claim)
    exposed = None
    if mia:
        members = [r for r in ctx.members if r.kind != "canary"]
        exposed = exposed_people(mia, members, ctx.mia_members, ctx.masker.mask, seed=ctx.seed)
    one_run = None
    canary_scores = [v for v in results.values() if isinstance(v, OneRunCanaryResult)]
    if canary_scores and delta is not None:
        one_run = one_run_summary(canary_scores[0], delta=delta, alpha=alpha, fdp=fdp)
    return AttackStage(results={k: masked(v, ctx.masker) for k, v in results.items()}, seconds=seconds,
                       empirical_epsilon=summary, one_run_epsilon=one_run, exposed_people=exposed)
