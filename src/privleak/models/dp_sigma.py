"""DP-SGD's noise multiplier and spent ε, from the public sizes of a run (shared by record- and person-level DP).

σ is calibrated on the sampling rate q = B/N of the config's sizes (:func:`public_sample_rate`), remembered in
the model cache (:func:`calibrated_sigma`), and the ε a run spent is recomputed from Opacus's step history with
the very function σ was calibrated with (:func:`spent_epsilon`), so "spent ≤ target" compares one bound.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..accountants import calibrate_sigma, epsilon_prv, epsilon_rdp
from ..core.errors import UserError


def public_sample_rate(expected_batch: int, data_size: int) -> float:
    """q = B / N for Poisson sampling, from the expected batch B and the data size N the recipe was made for.

    Both are public (the config's sizes), so q, the steps T = E·⌊1/q⌋ and the σ calibrated for them are the
    same whichever records a run's random draws put in the data (issue 37: q = 1/⌈N/B⌉ moved with the
    one-run canaries each audit includes at random)."""
    if expected_batch < 1 or data_size < 1:
        raise UserError(f"DP-SGD needs a positive batch and data size, got B = {expected_batch}, N = {data_size}")
    return min(1.0, expected_batch / data_size)


def calibrated_sigma(target_epsilon: float, delta: float, q: float, steps: int, accountant: str) -> float:
    """:func:`calibrate_sigma`, remembered in the model cache: the same (ε, δ, q, T, accountant) always give the
    same σ, and the PRV search costs seconds (dp-8 and dp-8+scrub ask the same question). The key holds the
    accounting code itself, so an edit to it never reads a stale σ."""
    import hashlib
    import json

    from .. import accountants
    from ..core.cache import cache_root

    args = [float(target_epsilon), float(delta), float(q), int(steps), str(accountant)]
    source = hashlib.sha256()
    for file in sorted(Path(accountants.__file__).parent.rglob("*.py")):
        source.update(file.read_bytes())
    code = source.hexdigest()[:16]
    key = hashlib.sha256(json.dumps([args, code, calibrate_sigma.__module__, calibrate_sigma.__qualname__]).encode())
    path = cache_root() / "sigma" / f"{key.hexdigest()[:24]}.json"
    try:
        saved = json.loads(path.read_text())
        if saved.get("args") == args:
            return float(saved["sigma"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    sigma = calibrate_sigma(target_epsilon=target_epsilon, delta=delta, sample_rate=q, steps=steps, accountant=accountant)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"args": args, "sigma": sigma}))
        os.replace(tmp, path)  # atomic: a concurrent reader sees the old file or the whole new one
    except OSError:
        pass  # a read-only cache only costs the search next time
    return float(sigma)


def epsilon_of(accountant: str, *, sample_rate: float, noise_multiplier: float, steps: int, delta: float) -> float:
    """ε at ``delta`` of ``steps`` Poisson-subsampled Gaussian steps, by the accountant σ is calibrated with
    (``prv`` or ``rdp``)."""
    fn = {"prv": epsilon_prv, "rdp": epsilon_rdp}[accountant]
    return float(fn(sample_rate=sample_rate, noise_multiplier=noise_multiplier, steps=steps, delta=delta))


def spent_epsilon(engine: Any, settings: Any, sample_rate: float) -> float:
    """ε spent by the steps Opacus's accountant recorded, at the true sampling rate.

    Two Opacus details make us recompute rather than call ``get_epsilon``:
    its accountant records q = 1 / len(DP loader), which for some sizes is
    1/(k−1) while the Poisson sampler really samples at 1/k (a slight
    over-statement), and its PRV ``get_epsilon`` adds a looser default error
    margin than the bound σ was calibrated with. We use the sampler's rate and
    the very function σ was calibrated with, so "spent ≤ target" is checked
    against one bound.
    """
    history = engine.accountant.history
    sigmas = {float(s) for s, _, _ in history}
    if len(sigmas) != 1:
        raise RuntimeError(f"unexpected DP history {history}: one σ per run is assumed")
    steps = sum(int(n) for _, _, n in history)
    return epsilon_of(settings.accountant, sample_rate=sample_rate, noise_multiplier=sigmas.pop(), steps=steps,
                      delta=settings.delta)
