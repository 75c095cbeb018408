"""Inputs of every accountant, checked at the door.

One naming scheme for the whole package (keyword-only everywhere):
``sample_rate`` (Poisson rate q), ``noise_multiplier`` (σ: noise std / clip
norm), ``steps`` (T), ``delta`` (δ), ``target_epsilon`` (ε to calibrate for),
``group_size`` (k records of one person). Each check raises
:class:`~privleak.core.errors.UserError` with one line naming the setting,
its range and a fix. The ranges here are the ones that hold for every
setting; what depends on several settings at once (the size of the PLD and
PRV grids) is estimated in :mod:`.grid` before any grid is allocated.

Where the fixed ranges come from:

* ``noise_multiplier ≤ 1e100``: the accountants square σ (dp_accounting's
  RDP and PLD overflow from σ ≈ 1.3e154, Opacus's PRV multiplies σ² by its
  domain bound); at 1e100 every ε here is 0 to float precision.
* ``steps ≤ 2**53``: the accountants turn the count into a float; above
  2**53 a float no longer holds every whole number.
* ``delta ≥ 1e-12`` for PLD (and so for every function that reports PLD):
  dp_accounting truncates up to 1e-15 of probability mass into "loss = ∞"
  at every composition (``tail_mass_truncation``) plus e^-50 of each
  Gaussian's tails, so δ below ~1e-14 gives ε = ∞ (measured: q = 0.01,
  σ = 1, T = 100 gives ε = 3.52 at δ = 1e-14 and ∞ at 1e-15); 1e-12 keeps
  two decades of margin for ledgers of many trainings. RDP works in log δ
  and takes any δ > 0.
"""

from __future__ import annotations

import math
import numbers

from privleak.core.errors import UserError

NOISE_MULTIPLIER_MAX = 1e100
STEPS_MAX = 2**53
PLD_DELTA_MIN = 1e-12
GROUP_SIZE_MAX = 10_000

_HINTS = {
    "sample_rate": "the sample rate q must satisfy 0 < sample_rate <= 1 (q = expected batch size / dataset size)",
    "noise_multiplier": f"the noise multiplier must satisfy 0 < noise_multiplier <= {NOISE_MULTIPLIER_MAX:g} "
                        "(noise std = noise_multiplier * max_grad_norm)",
    "steps": f"steps must be a whole number with 1 <= steps <= 2**53 (optimizer steps = epochs * batches per epoch)",
    "delta": "delta must satisfy 0 < delta < 1; use delta below 1/n, e.g. 1/(10n) for n training records",
    "target_epsilon": "target_epsilon must be a finite number > 0 (typical DP-SGD targets are 1 to 10)",
    "group_size": f"group_size must be a whole number with 1 <= group_size <= {GROUP_SIZE_MAX} "
                  "(records of the largest person)",
}


def real(name: str, value: object, hint: str) -> float:
    """``value`` as a float, or a UserError naming ``name`` (bools and strings are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise UserError(f"{name}={value!r} is not a number; {hint}")
    return float(value)


def whole(name: str, value: object, hint: str) -> int:
    """``value`` as an int, or a UserError naming ``name`` (10.0 is not a whole number here: a count is an int)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise UserError(f"{name}={value!r} is not a whole number; {hint}")
    return int(value)


def check_sample_rate(value: object, name: str = "sample_rate") -> float:
    v = real(name, value, _HINTS["sample_rate"])
    if not 0.0 < v <= 1.0:
        raise UserError(f"{name}={value!r} is out of range; {_HINTS['sample_rate']}")
    return v


def check_noise_multiplier(value: object, name: str = "noise_multiplier") -> float:
    v = real(name, value, _HINTS["noise_multiplier"])
    if not 0.0 < v <= NOISE_MULTIPLIER_MAX:
        raise UserError(f"{name}={value!r} is out of range; {_HINTS['noise_multiplier']}")
    return v


def check_steps(value: object, name: str = "steps") -> int:
    v = whole(name, value, _HINTS["steps"])
    if not 1 <= v <= STEPS_MAX:
        raise UserError(f"{name}={value!r} is out of range; {_HINTS['steps']}")
    return v


def check_delta(value: object, *, floor: float = 0.0, floor_reason: str = "") -> float:
    """0 < δ < 1, and δ ≥ ``floor`` when an accountant cannot resolve smaller δ (``floor_reason`` says which)."""
    v = real("delta", value, _HINTS["delta"])
    if not 0.0 < v < 1.0:
        raise UserError(f"delta={value!r} is out of range; {_HINTS['delta']}")
    if v < floor:
        raise UserError(f"delta={value!r} is below {floor:g}, {floor_reason}; use delta >= {floor:g}")
    return v


def check_target_epsilon(value: object, name: str = "target_epsilon") -> float:
    v = real(name, value, _HINTS["target_epsilon"])
    if not (v > 0.0 and math.isfinite(v)):
        raise UserError(f"{name}={value!r} is out of range; {_HINTS['target_epsilon']}")
    return v


def check_group_size(value: object) -> int:
    v = whole("group_size", value, _HINTS["group_size"])
    if not 1 <= v <= GROUP_SIZE_MAX:
        raise UserError(f"group_size={value!r} is out of range; {_HINTS['group_size']}")
    return v


PLD_DELTA_REASON = ("the smallest delta the PLD accountant resolves (dp_accounting moves up to 1e-15 of "
                    "probability per composition to an infinite loss); the RDP accountant takes smaller delta")


def check_privacy_params(
    *,
    sample_rate: object = None,
    noise_multiplier: object = None,
    steps: object = None,
    delta: object = None,
    target_epsilon: object = None,
    pld: bool = True,
) -> None:
    """Check the settings that are given (``None`` = not checked), each against its fixed range.

    ``pld``: δ must also be one the PLD accountant resolves (``delta ≥`` :data:`PLD_DELTA_MIN`).
    The joint limits (grid sizes) are :func:`.grid.check_pld_feasible` and
    :func:`.grid.check_prv_feasible`.
    """
    if sample_rate is not None:
        check_sample_rate(sample_rate)
    if noise_multiplier is not None:
        check_noise_multiplier(noise_multiplier)
    if steps is not None:
        check_steps(steps)
    if delta is not None:
        check_delta(delta, floor=PLD_DELTA_MIN if pld else 0.0, floor_reason=PLD_DELTA_REASON)
    if target_epsilon is not None:
        check_target_epsilon(target_epsilon)
