"""Steps from a sample rate and epochs, the way Opacus runs them and the way it calibrates for them."""

from __future__ import annotations

from .validation import check_sample_rate, whole


def _check_rate_epochs(sample_rate: object, epochs: object) -> tuple[float, int]:
    q = check_sample_rate(sample_rate)
    e = whole("epochs", epochs, "epochs must be a whole number >= 1")
    if e < 1:
        from privleak.core.errors import UserError

        raise UserError(f"epochs={epochs!r} is invalid; epochs must be a whole number >= 1")
    return q, e


def steps_for(*, sample_rate: float, epochs: int) -> int:
    """Optimizer steps Opacus actually takes for ``epochs`` epochs at ``sample_rate``.

    Opacus 1.6 ``DPDataLoader(sample_rate=q)`` builds a
    ``UniformWithReplacementSampler`` whose length is ``int(1 / sample_rate)``
    (opacus/utils/uniform_sampler.py: ``self.steps = int(1 / self.sample_rate)``),
    one optimizer step per batch, empty Poisson batches included; with
    ``make_private*`` the rate is ``1 / len(data_loader)`` (opacus/data_loader.py,
    ``DPDataLoader.from_data_loader``). Note the float quirk: 93 batches give
    ``int(1 / (1 / 93)) = 92`` steps per epoch, exactly as Opacus runs it.
    These are the steps the privacy guarantee must cover.
    """
    q, e = _check_rate_epochs(sample_rate, epochs)
    return e * int(1 / q)


def opacus_calibration_steps(*, sample_rate: float, epochs: int) -> int:
    """Steps ``PrivacyEngine.make_private_with_epsilon`` calibrates σ for.

    Opacus 1.6 opacus/privacy_engine.py ``make_private_with_epsilon`` sets
    ``sample_rate = 1 / len(data_loader)`` and calls
    ``get_noise_multiplier(..., epochs=epochs)``, which
    (opacus/accountants/utils.py) uses ``steps = int(epochs / sample_rate)``.
    This can be one step *fewer* than :func:`steps_for` (e.g. 75 batches,
    3 epochs: 224 vs 225), so Opacus's own σ can leave the spent ε slightly
    above target; calibrate with :func:`steps_for` instead.
    """
    q, e = _check_rate_epochs(sample_rate, epochs)
    return int(e / q)
