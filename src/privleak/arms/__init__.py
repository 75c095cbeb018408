"""Arms as plug-ins: every kind of arm is one module and one :func:`register` line.

``privleak.arms`` imports the built-in kinds (:mod:`.plain`: baseline, best;
:mod:`.dp`; :mod:`.dp_user`; :mod:`.dpw`; :mod:`.federated`: fedavg, fed-dp; :mod:`.guard`;
:mod:`.external`; the unlearning kinds :mod:`.retrain`, :mod:`.unlearn_ga`, :mod:`.unlearn_sisa`), so importing it is what makes them known. A plug-in kind
(a user's, or a test's toy kind) subclasses :class:`ArmKind` and calls
:func:`register`; the pipeline, ``results.json``, the verdicts and the
report then handle it like the built-in ones. :func:`resolve` checks an
audit's arms before any work and makes their names canonical.
"""

from __future__ import annotations

from pydantic import ValidationError

from ..config import AuditConfig
from ..core.errors import UserError
from ..policy import default_arms
from . import plain, dp, dp_user, dpw, federated, guard, external  # noqa: F401, I001  (the built-in kinds register themselves, in this order)
from . import retrain, unlearn_ga, unlearn_sisa  # noqa: F401, I001  (unlearning: forget on request, judged by the audit)
from .base import (
    ArmInputs,
    ArmJudging,
    ArmKind,
    ArmPresentation,
    BuildContext,
    DeriveContext,
    ExtraStage,
    FitContext,
    KindSettings,
    Served,
    judging,
    presentation,
)
from .registry import (
    DATA_DEFENCES,
    DATA_ONLY_KIND,
    KINDS,
    ArmSpec,
    get,
    parse_arm,
    register,
    unregister,
)

__all__ = ["DATA_DEFENCES", "DATA_ONLY_KIND", "KINDS", "ArmInputs", "ArmJudging", "ArmKind", "ArmPresentation",
           "ArmSpec", "BuildContext", "DeriveContext", "ExtraStage", "FitContext", "KindSettings", "Served", "arm_names",
           "get", "judging", "parse_arm", "presentation", "register", "resolve", "specs", "unregister"]


def specs(cfg: AuditConfig) -> list[ArmSpec]:
    """The audit's arms: ``cfg.arms``, or the profile's default arms (with a person-level DP arm at the
    requirement's ε where people have several records: :func:`privleak.policy.default_arms`)."""
    names = cfg.arms if cfg.arms is not None else default_arms(cfg.profile, cfg.dp.epsilons, cfg.dp_weights.sigmas,
                                                               _person_requirement(cfg))
    return [parse_arm(n) for n in names]


def _person_requirement(cfg: AuditConfig) -> float | None:
    """The ε of a formal per-person requirement when the corpus's people can have several records (the synthetic
    corpus's repeat patients; a ``--group-field`` names them in the user's data) and the audit has DP arms."""
    req = cfg.recommendation.require
    if not req.formal or req.unit != "person" or not cfg.dp.epsilons:
        return None
    syn = cfg.data.synthetic
    several = cfg.data.group_field is not None if cfg.data.path is not None else syn.repeat_fraction > 0
    return req.epsilon if several else None


def arm_names(cfg: AuditConfig) -> list[str]:
    return [s.name for s in specs(cfg)]


def resolve(cfg: AuditConfig) -> AuditConfig:
    """``cfg`` with its arms checked and named canonically; a :class:`UserError` naming the problem and the fix.

    Checks: every name parses; no arm twice; a derived or served arm's source arm is in the audit; each kind's
    own checks (e.g. QLoRA needs CUDA); plug-in kinds' ``arm_options``; the config's references to arms
    (``shadows.arms``; each kind's :meth:`ArmKind.check_audit`)."""
    try:
        found = specs(cfg)
        names = [s.name for s in found]
        if len(set(names)) != len(names):
            raise ValueError("an arm is listed twice")
        for s in found:
            k = s.kind_obj
            if k.source is not None and k.source not in names:
                raise ValueError(f"arm {s.name!r} is made from the {k.source} arm's model ({k.summary}); list "
                                 f"{k.source} too")
            k.check(cfg, s, names)
        for name, options in cfg.arm_options.items():
            k = get(name)
            if k.Options is None:
                raise ValueError(f"arm_options.{name}: the {name} kind reads its settings from its own config section")
            try:
                k.Options.model_validate(options)
            except ValidationError as exc:  # the first error, named by its field: the fix is one edit
                err = exc.errors()[0]
                field = ".".join(str(x) for x in err["loc"])
                raise ValueError(f"arm_options.{name}.{field}: {err['msg']}") from None
        by_name = {s.name: s for s in found}
        for a in cfg.shadows.arms or ():
            s = by_name.get(parse_arm(a).name)
            if s is None or not s.kind_obj.shadows:
                raise ValueError(f"shadows.arms: '{a}' is not a trained arm of this audit")
        for k in KINDS.values():
            k.check_audit(cfg, found)
    except ValueError as exc:
        raise UserError(f"config field 'arms': {str(exc).splitlines()[0]}") from None
    if cfg.arms is None:
        return cfg
    return cfg.model_copy(update={"arms": tuple(names)})
