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
  its own: the guard filters outputs, it changes no training);
* ``dpw-<σ>`` — DP-Weights: the *baseline*'s trained weights plus
  N(0, σ²I) (``dpw-0.01``; only on its own). It carries no formal ε: the
  sensitivity of trained weights to one record is unbounded, so no σ
  buys a guarantee; the audit measures what it does;
* ``fedavg`` — federated averaging over K clients (clinics) on Flower (only
  on its own): no DP, shows what federation alone leaves exposed;
* ``fed-dp-<ε>`` — DP-FedAvg at target *client-level* ε (``fed-dp-8``; only
  on its own): each client's update clipped, Gaussian noise on the sum.

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
    dpw_sigma: float | None = None
    best: bool = False
    fed: bool = False
    fed_epsilon: float | None = None  # DP-FedAvg's client-level target ε (fed-dp-ε); None with fed: FedAvg

    @property
    def name(self) -> str:
        if self.guard:
            return "guard"
        if self.dpw_sigma is not None:
            return dpw_arm_name(self.dpw_sigma)
        if self.best:
            return "best"
        if self.fed:
            return "fedavg" if self.fed_epsilon is None else fed_arm_name(self.fed_epsilon)
        parts = []
        if self.dp_epsilon is not None:
            parts.append(dp_arm_name(self.dp_epsilon))
        if self.lora:
            parts.append("lora")
        parts += [p for p in _DATA_PARTS if getattr(self, p)]
        return "+".join(parts) or "baseline"

    @property
    def trained(self) -> bool:
        """Whether the arm has a model of its own (the guard reuses the baseline's; a DP-Weights arm
        has its own, derived from the baseline's)."""
        return not self.guard

    @property
    def derived(self) -> bool:
        """Whether the arm's model is made from the baseline's model rather than trained."""
        return self.dpw_sigma is not None

    @property
    def data_defences(self) -> tuple[str, ...]:
        return tuple(p for p in _DATA_PARTS if getattr(self, p))


def dp_arm_name(epsilon: float) -> str:
    return f"dp-{epsilon:g}"


def fed_arm_name(epsilon: float) -> str:
    return f"fed-dp-{epsilon:g}"


def dpw_arm_name(sigma: float) -> str:
    return f"dpw-{sigma:g}"


def _positive(name: str, part: str, prefix: str, what: str, example: str) -> float:
    try:
        v = float(part[len(prefix):])
    except ValueError:
        raise ValueError(f"arm {name!r}: '{part}' is not {prefix}<{what}>; write e.g. {example}") from None
    if not (v > 0 and math.isfinite(v)):
        raise ValueError(f"arm {name!r}: {what} must be > 0 and finite; write e.g. {example}")
    return v


def parse_arm(name: str) -> ArmSpec:
    """The :class:`ArmSpec` of ``name``; ``ValueError`` with the fix if malformed."""
    parts = [p.strip().lower() for p in str(name).split("+")]
    if not parts or any(not p for p in parts):
        raise ValueError(f"arm {name!r}: empty part; write parts joined by '+', e.g. dp-8+scrub")
    if len(set(parts)) != len(parts):
        raise ValueError(f"arm {name!r}: a part appears twice")
    fields: dict[str, object] = {}
    for p in parts:
        if p == "fedavg" or p.startswith("fed-dp-"):
            if len(parts) > 1:
                raise ValueError(f"arm {name!r}: '{p}' stands alone (a federated arm); list it as its own arm, "
                                 "e.g. baseline,fedavg,fed-dp-8")
            fields["fed"] = True
            if p != "fedavg":
                fields["fed_epsilon"] = _positive(name, p, "fed-dp-", "ε", "fed-dp-8")
        elif p in ("baseline", "guard", "best"):
            if len(parts) > 1:
                raise ValueError(f"arm {name!r}: '{p}' stands alone; combine defences as e.g. dp-8+scrub")
            fields["guard"] = p == "guard"
            fields["best"] = p == "best"
        elif p.startswith("dpw-"):
            if len(parts) > 1:
                raise ValueError(f"arm {name!r}: '{p}' stands alone (noise on the baseline's weights); "
                                 "list it as its own arm, e.g. baseline,dpw-0.01")
            fields["dpw_sigma"] = _positive(name, p, "dpw-", "σ", "dpw-0.01")
        elif p.startswith("dp-"):
            if "dp_epsilon" in fields:
                raise ValueError(f"arm {name!r}: only one dp-ε per arm")
            fields["dp_epsilon"] = _positive(name, p, "dp-", "ε", "dp-8")
        elif p == "lora":
            fields["lora"] = True
        elif p in _DATA_PARTS:
            fields[p] = True
        else:
            raise ValueError(f"arm {name!r}: unknown part '{p}'; use baseline, best, guard, dp-<ε>, dpw-<σ>, fedavg, fed-dp-<ε>, lora, scrub, dedup")
    if fields.get("lora") and "dp_epsilon" not in fields:
        raise ValueError(f"arm {name!r}: lora is the DP-SGD LoRA path; combine it with a dp-ε part, e.g. dp-8+lora")
    return ArmSpec(**fields)  # type: ignore[arg-type]
