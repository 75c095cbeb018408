"""What an arm is: a named combination of defences, parsed from its name.

An arm name is ``+``-joined parts, each one defence:

* ``baseline`` — plain fine-tuning, no defence (only on its own): trained
  to the end, the overfit model that shows what leaks;
* ``best`` — the best non-private reference: plain fine-tuning early-stopped
  on the population split (only on its own). Its held-out loss is the L_best
  of every arm's utility gain recovered;
* ``dp-<ε>`` — DP-SGD at target ε (``dp-8``); ``lora`` after it trains
  LoRA adapters under DP instead of the full model (``dp-8+lora``);
* ``scrub`` — the members are PII-scrubbed (Presidio) before training;
* ``dedup`` — exact and near duplicates are removed before training;
* ``guard`` — the *baseline* model served behind the output guard (only on
  its own: the guard filters outputs, it changes no training).

So ``dp-8+scrub`` is Lukas et al.'s "DP + scrubbing" column and
``dedup+scrub`` a data-only defence. Parts may come in any order; the
canonical name orders them dp, lora, dedup, scrub.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

_DATA_PARTS = ("dedup", "scrub")


@dataclass(frozen=True)
class ArmSpec:
    dp_epsilon: float | None = None
    lora: bool = False
    dedup: bool = False
    scrub: bool = False
    guard: bool = False
    best: bool = False

    @property
    def name(self) -> str:
        if self.guard:
            return "guard"
        if self.best:
            return "best"
        parts = []
        if self.dp_epsilon is not None:
            parts.append(dp_arm_name(self.dp_epsilon))
        if self.lora:
            parts.append("lora")
        parts += [p for p in _DATA_PARTS if getattr(self, p)]
        return "+".join(parts) or "baseline"

    @property
    def trained(self) -> bool:
        """Whether the arm has a model of its own (the guard reuses the baseline's)."""
        return not self.guard

    @property
    def data_defences(self) -> tuple[str, ...]:
        return tuple(p for p in _DATA_PARTS if getattr(self, p))


def dp_arm_name(epsilon: float) -> str:
    return f"dp-{epsilon:g}"


def parse_arm(name: str) -> ArmSpec:
    """The :class:`ArmSpec` of ``name``; ``ValueError`` with the fix if malformed."""
    parts = [p.strip().lower() for p in str(name).split("+")]
    if not parts or any(not p for p in parts):
        raise ValueError(f"arm {name!r}: empty part; write parts joined by '+', e.g. dp-8+scrub")
    if len(set(parts)) != len(parts):
        raise ValueError(f"arm {name!r}: a part appears twice")
    fields: dict[str, object] = {}
    for p in parts:
        if p in ("baseline", "guard", "best"):
            if len(parts) > 1:
                raise ValueError(f"arm {name!r}: '{p}' stands alone; combine defences as e.g. dp-8+scrub")
            fields["guard"] = p == "guard"
            fields["best"] = p == "best"
        elif p.startswith("dp-"):
            if "dp_epsilon" in fields:
                raise ValueError(f"arm {name!r}: only one dp-ε per arm")
            try:
                eps = float(p[3:])
            except ValueError:
                raise ValueError(f"arm {name!r}: '{p}' is not dp-<ε>; write e.g. dp-8") from None
            if not (eps > 0 and math.isfinite(eps)):
                raise ValueError(f"arm {name!r}: ε must be > 0 and finite")
            fields["dp_epsilon"] = eps
        elif p == "lora":
            fields["lora"] = True
        elif p in _DATA_PARTS:
            fields[p] = True
        else:
            raise ValueError(f"arm {name!r}: unknown part '{p}'; use baseline, best, guard, dp-<ε>, lora, scrub, dedup")
    if fields.get("lora") and "dp_epsilon" not in fields:
        raise ValueError(f"arm {name!r}: lora is the DP-SGD LoRA path; combine it with a dp-ε part, e.g. dp-8+lora")
    return ArmSpec(**fields)  # type: ignore[arg-type]
