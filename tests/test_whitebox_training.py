"""White-box gradient canaries through PrivLeak's real DP steps (models.gradient_canaries): the readings follow
the model the test assumes (slope 1 per inclusion, noise σ·C per step), a correct step is not refuted, and a step
broken either way — no noise, no clipping — is, for record-level DP-SGD (book-keeping, ghost clipping and
per-sample hooks, through Opacus's optimiser) and for user-level DP-SGD (ULS's own loop; ELS through record-level DP-SGD)."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from privleak.audit.whitebox import whitebox_alarm_test, whitebox_statistic
from privleak.models.base import BaseModelSpec, build_model
from privleak.models.batching import Encoded
from privleak.models.dp_train import DPSettings, train_dp
from privleak.models.user_dp import UserDPSettings, train_user_dp

M = 2000


@pytest.fixture(scope="module")
def tiny():
    model = build_model(BaseModelSpec(vocab_size=50, n_layer=2, n_embd=16, n_head=2, max_length=16), eos_id=0)
    g = torch.Generator().manual_seed(0)
    data = Encoded([torch.randint(1, 50, (12,), generator=g).tolist() for _ in range(120)])
    return model, data


def _dp(tiny, **over):
    model, data = tiny
    kw = dict(target_epsilon=8.0, delta=1e-4, max_grad_norm=0.5, epochs=3, expected_batch_size=12, lr=1e-3, seed=1,
              gradient_canaries=M, grad_sample_mode="bk")
    kw.update(over)
    return train_dp(copy.deepcopy(model), data, DPSettings(**kw), 0, 16)[1]


def _test(log, clip=0.5):
    return whitebox_alarm_test("arm", log.gradient_canaries, log.sigma, log.sample_rate, clip, 1e-4)


def _model_holds(stats: dict, sigma: float) -> None:
    """The readings' slope is 1 (contributions clipped at C) within 4 standard errors, and their residual
    variance T·σ² within 4 standard errors of a χ²(m − 1)."""
    m, steps = stats["canaries"], stats["steps"]
    slope = stats["sum_ny"] / stats["sum_nn"]
    var = (stats["sum_yy"] - stats["sum_ny"] ** 2 / stats["sum_nn"]) / (m - 1)
    assert abs(slope - 1.0) <= 4 * sigma * math.sqrt(steps / stats["sum_nn"])
    assert abs(var / (steps * sigma ** 2) - 1.0) <= 4 * math.sqrt(2 / (m - 1))


@pytest.mark.parametrize("mode", ["bk", "ghost", "hooks"])
def test_record_level_step_reads_as_claimed_and_broken_steps_are_refuted(tiny, mode):
    ok = _dp(tiny, grad_sample_mode=mode)
    assert ok.gradient_canaries["steps"] == ok.steps and ok.gradient_canaries["canaries"] == M
    _model_holds(ok.gradient_canaries, ok.sigma)
    assert _test(ok).p_value > 1e-3
    for broken in ("no_noise", "no_clip"):
        log = _dp(tiny, grad_sample_mode=mode, debug_break=broken)
        assert log.sigma == pytest.approx(ok.sigma)  # it still claims the calibrated σ …
        assert _test(log).p_value < 1e-9, broken  # … and its own step says otherwise


def test_the_canaries_leave_the_training_otherwise_alone(tiny):
    """Same model, same data, same seed: with or without canaries the losses of the first step agree, and a run
    without canaries records none (the canaries' noise draws come after the weights' in each step)."""
    a = _dp(tiny, gradient_canaries=0)
    b = _dp(tiny)
    assert a.gradient_canaries is None and b.gradient_canaries is not None
    assert a.losses[0] == pytest.approx(b.losses[0], rel=0.05)


@pytest.mark.parametrize("method", ["uls", "els"])
def test_user_level_step_reads_as_claimed(tiny, method):
    model, data = tiny
    persons = [i // 3 for i in range(len(data))]  # 40 people, three records each
    s = UserDPSettings(target_epsilon=8.0, delta=1e-4, max_grad_norm=0.5, epochs=3, expected_batch_size=8, lr=1e-3,
                       seed=2, method=method, records_per_person=2, gradient_canaries=M)
    _, log = train_user_dp(copy.deepcopy(model), data, s, 0, 16, persons)
    stats = log.gradient_canaries
    assert stats is not None and stats["steps"] == log.steps
    _model_holds(stats, log.sigma)
    test = whitebox_alarm_test("arm", stats, log.sigma, log.sample_rate, 0.5, 1e-4)
    assert test.p_value > 1e-3
    t, _, _ = whitebox_statistic(stats)
    assert math.isfinite(t)


def test_no_systematic_bias_in_the_real_step_over_seeds(tiny):
    """Twelve seeds of the real book-keeping step, pooled: the readings' noise variance is T·σ²·C² and the
    contribution per inclusion C, to within 3 standard errors of the pooled estimates (≈ 0.9 % for the variance)
    — a bias of the step's noise or clip that one run's ±4.5 % cannot show would show here."""
    ratios, slopes, weights = [], [], []
    for seed in range(12):
        log = _dp(tiny, seed=100 + seed, epochs=2)
        g = log.gradient_canaries
        m, steps = g["canaries"], g["steps"]
        slope = g["sum_ny"] / g["sum_nn"]
        var = (g["sum_yy"] - g["sum_ny"] ** 2 / g["sum_nn"]) / (m - 1)
        ratios.append(var / (steps * log.sigma ** 2))
        slopes.append(slope)
        weights.append(g["sum_nn"] / (steps * log.sigma ** 2))  # 1 / Var(slope)
    mean_ratio = sum(ratios) / len(ratios)
    assert abs(mean_ratio - 1.0) <= 3 * math.sqrt(2 / (M - 1)) / math.sqrt(len(ratios)), ratios
    pooled = sum(w * s for w, s in zip(weights, slopes)) / sum(weights)
    assert abs(pooled - 1.0) <= 3 / math.sqrt(sum(weights)), slopes
