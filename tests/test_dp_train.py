"""DP-SGD through Opacus on GPT-2: per-sample gradients, empty batches, accounting."""

import numpy as np
import pytest
import torch
from opacus import GradSampleModule

from privleak.models import conv1d_grad  # noqa: F401
from privleak.accountants import epsilon_pld
from privleak.models.base import BaseModelSpec, build_model
from privleak.models.batching import (
    encode,
    pad_batch,
    per_sequence_nll,
    position_ids_for,
)
from privleak.models.dp_train import DPSettings, train_dp
from privleak.models.handle import clone_model


def test_per_sample_gradients_equal_per_example_autograd():
    """Tied wte/lm_head, Conv1D and padded rows: Opacus hooks must give each
    record exactly the gradient it would get alone — the quantity DP-SGD clips."""
    model = build_model(BaseModelSpec(vocab_size=50, n_layer=2, n_embd=16, n_head=2, max_length=16), eos_id=0)
    assert model.lm_head.weight is model.transformer.wte.weight
    seqs = [[0, 5, 7, 9, 3, 0], [0, 4, 4, 0], [0, 1, 2, 3, 4, 5, 6, 7, 0]]
    reference = []
    for s in seqs:
        ids, mask = pad_batch([s], 0)
        model.zero_grad()
        out = model(input_ids=ids, attention_mask=mask, position_ids=position_ids_for(mask)).logits
        per_sequence_nll(out, ids, mask).sum().backward()
        reference.append({n: p.grad.clone() for n, p in model.named_parameters()})
    gsm = GradSampleModule(model, loss_reduction="mean")
    ids, mask = pad_batch(seqs, 0)
    out = gsm(input_ids=ids, attention_mask=mask, position_ids=position_ids_for(mask)).logits
    per_sequence_nll(out, ids, mask).mean().backward()
    for name, p in model.named_parameters():
        for k in range(len(seqs)):
            torch.testing.assert_close(p.grad_sample[k], reference[k][name], atol=1e-5, rtol=1e-4)


def _tiny_dp_run(tiny_handle, **over):
    texts = [f"record {i} of the ward, value {i * 7 % 13}" for i in range(60)]
    data = encode(tiny_handle.tokenizer, texts, tiny_handle.max_length)
    kw = dict(target_epsilon=4.0, delta=1e-3, max_grad_norm=1.0, epochs=2, expected_batch_size=12, lr=1e-3, seed=0)
    kw.update(over)
    model, log = train_dp(clone_model(tiny_handle.model), data, DPSettings(**kw), tiny_handle.pad_id, tiny_handle.max_length)
    return model, log


def test_dp_run_reports_parameters_and_stays_within_target(tiny_handle):
    model, log = _tiny_dp_run(tiny_handle)
    assert log.sample_rate == pytest.approx(1 / 5)  # ceil(60/12) batches per epoch
    assert log.steps == 10
    assert log.sigma > 0
    assert log.epsilon <= 4.0
    # The accountant Opacus used agrees with Google's PLD accountant within 1 %.
    assert log.epsilon == pytest.approx(epsilon_pld(sample_rate=log.sample_rate, noise_multiplier=log.sigma, steps=log.steps, delta=1e-3), rel=0.01)
    assert all(np.isfinite(log.losses))
    assert not any(hasattr(p, "grad_sample") and p.grad_sample is not None for p in model.parameters())


def test_empty_poisson_batches_are_noise_steps(tiny_handle):
    # Expected batch 1 of 60 records: about e^-1 ≈ 37 % of batches are empty.
    before = {n: p.detach().clone() for n, p in tiny_handle.model.named_parameters()}
    model, log = _tiny_dp_run(tiny_handle, expected_batch_size=1, epochs=1, target_epsilon=8.0)
    assert log.empty_batches > 0
    assert log.steps == 60
    changed = any(not torch.equal(before[n], p) for n, p in model.named_parameters())
    assert changed


def test_dp_training_is_reproducible(tiny_handle):
    m1, l1 = _tiny_dp_run(tiny_handle)
    m2, l2 = _tiny_dp_run(tiny_handle)
    assert l1.losses == l2.losses
    for (n, a), (_, b) in zip(m1.named_parameters(), m2.named_parameters()):
        assert torch.equal(a, b), n


def test_sigma_is_calibrated_for_the_steps_really_taken(tiny_handle):
    """93 batches: Opacus's loader runs int(1/(1/93)) = 92 per epoch, while
    make_private_with_epsilon would calibrate for int(3/(1/93)) = 279 steps.
    Our σ is calibrated for the 276 steps taken, so ε spent ≤ target."""
    texts = [f"entry {i}" for i in range(93)]
    data = encode(tiny_handle.tokenizer, texts, tiny_handle.max_length)
    settings = DPSettings(target_epsilon=2.0, delta=1e-3, max_grad_norm=1.0, epochs=3, expected_batch_size=1, lr=1e-4)
    _, log = train_dp(clone_model(tiny_handle.model), data, settings, tiny_handle.pad_id, tiny_handle.max_length)
    assert log.steps == 3 * int(1 / (1 / 93))
    assert log.epsilon <= 2.0
    assert log.epsilon == pytest.approx(2.0, rel=0.02)  # and not wastefully below it


def test_micro_batched_step_equals_one_big_batch(tiny_handle):
    """Splitting a logical batch into micro-batches must not change the DP-SGD
    step: with noise off (σ = 0 in the optimiser), both give the same weights."""
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    from privleak.models.dp_train import _logical_step

    texts = [f"note {i} " + "word " * (i % 7) for i in range(24)]
    data = encode(tiny_handle.tokenizer, texts, tiny_handle.max_length)
    ids, mask = pad_batch(data.ids, tiny_handle.pad_id)
    results = []
    for max_tokens in (10_000, 40):  # one forward pass vs many
        model = clone_model(tiny_handle.model).train()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = DataLoader(TensorDataset(ids, mask), batch_size=24)
        private, opt, _ = PrivacyEngine().make_private(
            module=model, optimizer=opt, data_loader=loader, noise_multiplier=0.0, max_grad_norm=0.5,
            poisson_sampling=False,
        )
        opt.zero_grad(set_to_none=True)
        _logical_step(private, opt, ids, mask, max_tokens)
        results.append({n: p.detach().clone() for n, p in private._module.named_parameters()})
    for name in results[0]:
        torch.testing.assert_close(results[0][name], results[1][name], atol=1e-6, rtol=1e-5)


def test_calibrated_sigma_is_remembered_and_is_the_accountants(monkeypatch, tmp_path):
    """σ's calibration is a pure function of (ε, δ, q, T, accountant): asked twice, the second answer comes from
    the model cache and is the same number; another question is calibrated afresh."""
    from privleak.models import dp_sigma
    from privleak.accountants import calibrate_sigma

    monkeypatch.setenv("PRIVLEAK_CACHE", str(tmp_path))
    calls = []

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return calibrate_sigma(*args, **kwargs)

    monkeypatch.setattr(dp_sigma, "calibrate_sigma", spy)
    first = dp_sigma.calibrated_sigma(4.0, 1e-3, 0.1, 50, "rdp")
    again = dp_sigma.calibrated_sigma(4.0, 1e-3, 0.1, 50, "rdp")
    other = dp_sigma.calibrated_sigma(4.0, 1e-3, 0.1, 60, "rdp")
    assert first == again == calibrate_sigma(target_epsilon=4.0, delta=1e-3, sample_rate=0.1, steps=50, accountant="rdp")
    assert other == calibrate_sigma(target_epsilon=4.0, delta=1e-3, sample_rate=0.1, steps=60, accountant="rdp") != first
    assert len(calls) == 2 and list((tmp_path / "sigma").glob("*.json"))
