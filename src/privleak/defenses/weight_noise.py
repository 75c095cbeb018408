"""DP-Weights: Gaussian noise added to a trained model's weights.

θ_private = θ_trained + N(0, σ²I) (source document 002, "DP-Weights
(post-training differential privacy)"). It is *not* differentially private
at any stated ε: a DP guarantee needs a bound on how far one record can move
θ_trained (the sensitivity), and ordinary training gives none — one record
repeated or weighted enough can move the weights arbitrarily far. PrivLeak
therefore reports no accountant ε for it and audits it with the attacks
instead.

Every floating-point parameter gets independent noise, tied parameters
(GPT-2's input embedding and output head) once, with a seeded generator so
the same seed gives the same noisy model.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import torch

NO_FORMAL_EPSILON = "no formal ε: weight sensitivity unbounded"


@dataclass(frozen=True)
class WeightNoiseReport:
    """What the noise was, against the scale of what it perturbs.

    ``weight_rms``: root mean square of the trained weights; ``update_rms``:
    of θ_trained − θ_start (what fine-tuning changed), when the starting
    weights are given. σ / update_rms ≈ 1 is where noise and the learned
    change have the same per-coordinate size.
    """

    sigma: float
    n_parameters: int
    weight_rms: float
    update_rms: float | None
    seed: int
    guarantee: str = NO_FORMAL_EPSILON

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _rms(tensors: list[torch.Tensor]) -> float:
    n = sum(t.numel() for t in tensors)
    if n == 0:
        return float("nan")
    return math.sqrt(sum(float(t.double().pow(2).sum()) for t in tensors) / n)


def add_weight_noise(model: torch.nn.Module, sigma: float, seed: int,
                     start: torch.nn.Module | None = None) -> WeightNoiseReport:
    """Add N(0, σ²) to every floating-point parameter of ``model`` in place.

    ``start``: the model fine-tuning started from (same architecture), to
    report the size of the fine-tuning update beside σ.
    """
    if not (sigma > 0 and math.isfinite(sigma)):
        raise ValueError(f"DP-Weights σ must be > 0 and finite, got {sigma}")
    params = [(n, p) for n, p in model.named_parameters(remove_duplicate=True) if p.is_floating_point()]
    weights = [p.detach() for _, p in params]
    weight_rms = _rms(weights)
    update_rms = None
    if start is not None:
        ref = dict(start.named_parameters(remove_duplicate=True))
        diffs = [p.detach() - ref[n].detach().to(p.device, p.dtype) for n, p in params if n in ref]
        update_rms = _rms(diffs)
    gen = torch.Generator(device="cpu").manual_seed(int(seed) % (2**63))
    with torch.no_grad():
        for _, p in params:
            # fp32 noise drawn on the CPU: the same draws whatever device or dtype the model uses.
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float32) * sigma
            p.add_(noise.to(p.device, p.dtype))
    return WeightNoiseReport(sigma=float(sigma), n_parameters=int(sum(p.numel() for _, p in params)),
                             weight_rms=weight_rms, update_rms=update_rms, seed=int(seed))
