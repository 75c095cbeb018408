"""Every arm kind, by name, and the grammar of arm names.

The way :mod:`privleak.attacks.registry` maps attack names to attacks, this
maps kind names to :class:`~.base.ArmKind` objects. An arm name is
``+``-joined parts: at most one kind part (``dp-8``, ``baseline``), the
kind's modifiers (``lora``) and data defences (``scrub``, ``dedup``); parts
in any order, the canonical name orders them kind, modifiers, defences. A
name of data defences alone (``scrub``) is the :data:`DATA_ONLY_KIND` arm
with those defences.
"""

from __future__ import annotations

import math

from ..core.typed import register_details
from .base import (  # noqa: F401  (the registry's names)
    DATA_DEFENCES,
    DATA_ONLY_KIND,
    JUDGING,
    KINDS,
    PRESENTATION,
    ArmJudging,
    ArmKind,
    ArmPresentation,
    ArmSpec,
    get,
)


def register(kind: ArmKind, judging: ArmJudging | None = None,
             presentation: ArmPresentation | None = None) -> ArmKind:
    """Add ``kind`` (an instance) to the registry, with how its arms are judged and shown (the defaults judge
    them by the attacks and show nothing of their own); its name must be new. Returns it, so a module can write
    ``DP = register(DPKind())``."""
    if not getattr(kind, "name", None):
        raise ValueError("an arm kind needs a name")
    if kind.name in KINDS and type(KINDS[kind.name]) is not type(kind):
        raise ValueError(f"arm kind {kind.name!r} is registered twice")
    KINDS[kind.name] = kind
    JUDGING[kind.name] = judging or ArmJudging()
    PRESENTATION[kind.name] = presentation or ArmPresentation()
    if kind.Details is not None:
        register_details(kind.name, kind.Details)
    return kind


def unregister(name: str) -> None:
    """Remove a kind (tests that register a toy kind clean up with this)."""
    KINDS.pop(name, None)
    JUDGING.pop(name, None)
    PRESENTATION.pop(name, None)
    register_details(name, None)


def _positive(name: str, part: str, kind: ArmKind) -> float:
    example = kind.example or f"{kind.name}-8"
    try:
        v = float(part[len(kind.name) + 1:])
    except ValueError:
        raise ValueError(f"arm {name!r}: '{part}' is not {kind.name}-<{kind.param}>; write e.g. {example}") from None
    low, high = kind.param_range
    if not (v > 0 and math.isfinite(v)):
        raise ValueError(f"arm {name!r}: {kind.param} must be > 0 and finite; write e.g. {example}")
    if not low <= v <= high:
        bounds = f"from {low:g} to {high:g}" if low > 0 else f"at most {high:g}"
        raise ValueError(f"arm {name!r}: {kind.param} = {v:g} is out of range ({kind.param} must be {bounds}); write "
                         f"e.g. {example}")
    return v


def _kind_of(part: str) -> ArmKind | None:
    """The kind a name part belongs to: its exact name, or ``name-<number>`` for a kind with a parameter. Longer
    names are tried first, so ``fed-dp-8`` is not read as ``fed…`` nor ``dpw-0.1`` as ``dp-…``."""
    for kind in sorted(KINDS.values(), key=lambda k: -len(k.name)):
        if kind.model == "provided":  # the model `privleak attack` audits: never an arm to build
            continue
        if part == kind.name if kind.param is None else part.startswith(kind.name + "-"):
            return kind
    return None


def parse_arm(name: str) -> ArmSpec:
    """The :class:`ArmSpec` of ``name``; ``ValueError`` with the fix if malformed."""
    parts = [p.strip().lower() for p in str(name).split("+")]
    if not parts or any(not p for p in parts):
        raise ValueError(f"arm {name!r}: empty part; write parts joined by '+', e.g. dp-8+scrub")
    if len(set(parts)) != len(parts):
        raise ValueError(f"arm {name!r}: a part appears twice")
    kind: ArmKind | None = None
    param: float | None = None
    modifiers: set[str] = set()
    data: list[str] = []
    all_modifiers = {m for k in KINDS.values() for m in k.modifiers}
    for p in parts:
        k = _kind_of(p)
        if k is not None:
            if kind is not None:
                what = f"only one {k.name}-{k.param} per arm" if k is kind and k.param else \
                    f"'{p}' and '{kind.name}' are two kinds; list them as two arms"
                raise ValueError(f"arm {name!r}: {what}")
            kind = k
            param = _positive(name, p, k) if k.param is not None else None
        elif p in DATA_DEFENCES:
            data.append(p)
        elif p in all_modifiers:
            modifiers.add(p)
        else:
            known = ", ".join(k.name if k.param is None else f"{k.name}-<{k.param}>" for k in KINDS.values()
                              if k.model != "provided")
            raise ValueError(f"arm {name!r}: unknown part '{p}'; use {known}, "
                             f"{', '.join(sorted(all_modifiers | set(DATA_DEFENCES)))}")
    if kind is None:
        if modifiers:
            owner = next(k for k in KINDS.values() if set(k.modifiers) & modifiers)
            m = sorted(modifiers)[0]
            raise ValueError(f"arm {name!r}: {m} modifies {owner.name} arms; combine it with a {owner.name}-"
                             f"{owner.param or ''} part, e.g. {owner.example}+{m}".replace("-+", "+"))
        kind = get(DATA_ONLY_KIND)
    elif kind.alone and (data or modifiers):
        raise ValueError(f"arm {name!r}: '{kind.name if kind.param is None else parts[0]}' stands alone; "
                         "combine defences as e.g. dp-8+scrub, or list it as its own arm")
    bad = modifiers - set(kind.modifiers)
    if bad:
        raise ValueError(f"arm {name!r}: {sorted(bad)[0]} does not apply to {kind.name} arms")
    return ArmSpec(kind=kind.name, param=param, modifiers=frozenset(modifiers), data=tuple(d for d in DATA_DEFENCES
                                                                                         if d in data))
