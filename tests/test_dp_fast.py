"""Ghost clipping and book-keeping are the same DP-SGD as the per-sample-gradient reference.

The reference (``grad_sample_mode="hooks"``) materialises every per-sample
gradient; ghost clipping and book-keeping compute only their norms. Same norms ⇒ same clipping
factors ⇒ same clipped sum ⇒ (same noise) same step ⇒ same privacy.
"""

import functools

import pytest
import torch
from opacus import GradSampleModule
from opacus.grad_sample import GradSampleModuleFastGradientClipping
from torch.utils.data import DataLoader, TensorDataset

from privleak.models import ghost_norms
from privleak.accountants import epsilon_prv
from privleak.models.base import BaseModelSpec, build_model
from privleak.models.batching import (
    encode,
    pad_batch,
    per_sequence_nll,
    position_ids_for,
)
from privleak.models.book_keeping import BookKeeping
from privleak.models.dp_train import (
    DPSettings,
    _logical_step,
    _step_on_empty_batch,
    freeze_embeddings,
    make_private,
    train_dp,
    untie_output_embedding,
)
from privleak.models.handle import ModelHandle, clone_model, load_handle, save_handle

# Padded to T = 14 through 24-wide layers: c_attn (24×72) and the MLP take the
# ghost norm (T·(in+out) < in·out), attn.c_proj (24×24) the explicit one —
# both branches of the mixed norm run in one batch.
SEQS = [[0, 5, 7, 9, 3, 0], [0, 4, 4, 0], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0], [0, 9, 8, 7, 0]]


def _tiny(train_embeddings: bool, train_output: bool = False):
    model = build_model(BaseModelSpec(vocab_size=50, n_layer=2, n_embd=24, n_head=2, max_length=16), eos_id=0).train()
    assert ghost_norms.use_ghost_form(14, 24, 72) and not ghost_norms.use_ghost_form(14, 24, 24)
    if train_embeddings:
        assert untie_output_embedding(model)
    else:
        if train_output:
            assert untie_output_embedding(model)
        freeze_embeddings(model)
    return model


def _hooks_norms(model) -> torch.Tensor:
    gsm = GradSampleModule(model, loss_reduction="mean")
    ids, mask = pad_batch(SEQS, 0)
    out = gsm(input_ids=ids, attention_mask=mask, position_ids=position_ids_for(mask)).logits
    per_sequence_nll(out, ids, mask).mean().backward()
    flat = torch.cat([p.grad_sample.reshape(len(SEQS), -1) for p in model.parameters() if p.requires_grad], 1)
    gsm._close()
    model.zero_grad(set_to_none=True)
    return flat.norm(2, dim=1)


def _ghost_norms(model) -> torch.Tensor:
    gsm = GradSampleModuleFastGradientClipping(model, loss_reduction="mean", max_grad_norm=1.0, use_ghost_clipping=True)
    ids, mask = pad_batch(SEQS, 0)
    out = gsm(input_ids=ids, attention_mask=mask, position_ids=position_ids_for(mask)).logits
    per_sequence_nll(out, ids, mask).mean().backward()
    norms = gsm.get_norm_sample()
    gsm._close()
    return norms


def test_conv1d_norm_forms_equal_explicit_per_sample_gradient_norms():
    torch.manual_seed(0)
    a, b = torch.randn(3, 7, 5), torch.randn(3, 7, 6)
    explicit = torch.einsum("nti,ntj->nij", a, b).reshape(3, -1).norm(2, dim=1)
    assert ghost_norms.use_ghost_form(2, 5, 6) and not ghost_norms.use_ghost_form(7, 5, 6)
    torch.testing.assert_close(ghost_norms.weight_grad_norms(a, b), explicit)  # explicit branch (7·11 > 30)
    wide_a, wide_b = torch.randn(3, 2, 5), torch.randn(3, 2, 6)
    torch.testing.assert_close(
        ghost_norms.weight_grad_norms(wide_a, wide_b),  # ghost branch (2·11 < 30)
        torch.einsum("nti,ntj->nij", wide_a, wide_b).reshape(3, -1).norm(2, dim=1),
    )


@pytest.mark.parametrize("train_embeddings", [False, True], ids=["frozen-tied-embeddings", "trained-untied-embeddings"])
def test_ghost_per_sample_norms_equal_hooks_reference(train_embeddings):
    """The issue's acceptance test: ghost clipping's per-sample gradient norms
    (Conv1D, LayerNorm, and with trained embeddings Embedding + untied lm_head)
    equal the norms of Opacus's materialised per-sample gradients."""
    model = _tiny(train_embeddings)
    reference = _hooks_norms(model)
    ghost = _ghost_norms(model)
    assert reference.shape == ghost.shape == (len(SEQS),)
    torch.testing.assert_close(ghost, reference, rtol=1e-5, atol=1e-6)


# Padded to T = 3: every layer of the tiny model takes book-keeping's ghost branch (G_i would hold more than twice
# the floats of A_i and B_i); at T = 14 every layer keeps its explicit per-sample gradients.
SHORT_SEQS = [[0, 5, 0], [0, 4], [0, 9, 8]]


def _bk_norms(model, seqs=SEQS) -> torch.Tensor:
    bk = BookKeeping(model, max_grad_norm=1.0)
    ids, mask = pad_batch(seqs, 0)
    with bk.capture():
        out = model(input_ids=ids, attention_mask=mask, position_ids=position_ids_for(mask)).logits
        per_sequence_nll(out, ids, mask).sum().backward()
    norms = bk.write_clipped_sum()
    bk.remove()
    return norms


@pytest.mark.parametrize("seqs", [SEQS, SHORT_SEQS], ids=["explicit-grads", "ghost-norms"])
@pytest.mark.parametrize("train_output", [False, True], ids=["frozen-tied-head", "trained-untied-head"])
def test_book_keeping_per_sample_norms_and_clipped_sum_equal_hooks_reference(train_output, seqs):
    """One backward pass without weight gradients: same norms as the materialised
    per-sample gradients, and p.grad is exactly Σ_i min(1, C/‖g_i‖)·g_i — also with
    the output layer trained as its own Linear (the DP arms' default), by either of
    book-keeping's two ways (kept per-sample gradients, ghost norms)."""
    from privleak.models.book_keeping import keeps_grads

    assert all(keeps_grads(14, i, o) for i, o in ((24, 72), (24, 24), (24, 96), (96, 24)))
    assert not any(keeps_grads(3, i, o) for i, o in ((24, 72), (24, 24), (24, 96), (96, 24)))
    model = _tiny(train_embeddings=False, train_output=train_output)
    assert model.lm_head.weight.requires_grad == train_output
    gsm = GradSampleModule(model, loss_reduction="sum")
    ids, mask = pad_batch(seqs, 0)
    out = gsm(input_ids=ids, attention_mask=mask, position_ids=position_ids_for(mask)).logits
    per_sequence_nll(out, ids, mask).sum().backward()
    params = [p for p in model.parameters() if p.requires_grad]
    samples = [p.grad_sample.clone() for p in params]
    gsm._close()
    model.zero_grad(set_to_none=True)
    reference = torch.cat([g.reshape(len(seqs), -1) for g in samples], 1).norm(2, dim=1)
    norms = _bk_norms(model, seqs)
    torch.testing.assert_close(norms, reference, rtol=1e-5, atol=1e-6)
    c = (1.0 / (reference + 1e-6)).clamp(max=1.0)
    for p, g in zip(params, samples):
        torch.testing.assert_close(p.grad, torch.einsum("n,n...->...", c, g), rtol=1e-5, atol=1e-6)


def _one_step(handle, mode: str, max_tokens: int, sigma: float, empty: bool = False):
    texts = [f"note {i} " + "word " * (i % 7) for i in range(24)]
    data = encode(handle.tokenizer, texts, handle.max_length)
    ids, mask = pad_batch(data.ids, handle.pad_id)
    model = clone_model(handle.model).train()
    freeze_embeddings(model)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    loader = DataLoader(TensorDataset(ids, mask), batch_size=24)  # one batch: q = 1, expected batch 24
    settings = DPSettings(target_epsilon=1.0, delta=1e-5, max_grad_norm=0.5, epochs=1, expected_batch_size=24, lr=0.1,
                          seed=6, grad_sample_mode=mode)  # noise generator seeded with seed + 1 in every mode
    private, opt, criterion, _, _ = make_private(model, opt, loader, sigma, settings)
    opt.zero_grad(set_to_none=True)
    if empty:
        _step_on_empty_batch(opt)
    else:
        _logical_step(private, opt, ids, mask, max_tokens, criterion)
    return {n: p.detach().clone() for n, p in private._module.named_parameters()}


@pytest.mark.parametrize("sigma", [0.0, 0.8])
def test_ghost_micro_batched_step_equals_hooks_one_batch_step(tiny_handle, sigma):
    """Same records, same noise generator: the ghost step over length-sorted
    micro-batches (skip-step accumulation of clipped sums) gives the same
    weights as the reference step over one padded batch."""
    reference = _one_step(tiny_handle, "hooks", 10_000, sigma)
    for mode in ("ghost", "bk"):
        fast = _one_step(tiny_handle, mode, 40, sigma)
        moved = 0
        for name, value in reference.items():
            torch.testing.assert_close(fast[name], value, atol=1e-6, rtol=1e-5, msg=f"{mode}: {name}")
            moved += not torch.equal(value, tiny_handle.model.state_dict()[name])
        assert moved > 0


def test_fast_paths_take_the_same_noise_step_on_an_empty_batch(tiny_handle):
    reference = _one_step(tiny_handle, "hooks", 10_000, 0.8, empty=True)
    for mode in ("ghost", "bk"):
        fast = _one_step(tiny_handle, mode, 10_000, 0.8, empty=True)
        for name, value in reference.items():
            torch.testing.assert_close(fast[name], value, atol=1e-7, rtol=1e-6, msg=f"{mode}: {name}")


def _run(handle, **over):
    texts = [f"record {i} of the ward, value {i * 7 % 13}" for i in range(36)]
    data = encode(handle.tokenizer, texts, handle.max_length)
    kw = dict(target_epsilon=4.0, delta=1e-3, max_grad_norm=1.0, epochs=1, expected_batch_size=6, lr=1e-3, seed=0)
    kw.update(over)
    return train_dp(clone_model(handle.model), data, DPSettings(**kw), handle.pad_id, handle.max_length)


@pytest.fixture
def calibrate_once(monkeypatch):
    """σ's calibration is a pure function of (ε, δ, q, T); computing it once per test keeps runs fast."""
    from privleak.models import dp_sigma

    monkeypatch.setattr(dp_sigma, "calibrate_sigma", functools.lru_cache(dp_sigma.calibrate_sigma))


def test_fast_paths_report_the_same_epsilon_as_the_reference(tiny_handle, calibrate_once):
    """Nothing about privacy depends on how the clipped sum is computed: for
    the same (q, σ, steps, δ) every path reports the same ε, the accountant's
    (read back from the steps Opacus's accountant recorded in each run)."""
    _, ref = _run(tiny_handle)
    for over in (dict(grad_sample_mode="ghost"), dict(grad_sample_mode="bk"), dict(lora_rank=2), dict(lora_rank=2, grad_sample_mode="bk")):
        _, log = _run(tiny_handle, **over)
        assert (log.sample_rate, log.sigma, log.steps) == (ref.sample_rate, ref.sigma, ref.steps), over
        assert log.epsilon == ref.epsilon, over
    assert ref.epsilon == epsilon_prv(sample_rate=ref.sample_rate, noise_multiplier=ref.sigma, steps=ref.steps,
                                      delta=1e-3) <= 4.0


def test_fast_training_runs_match_the_reference_run(tiny_handle, calibrate_once):
    """Same seed: same Poisson batches, same noise, same clipped sums — the
    whole ghost run trains the same model as the hooks run."""
    m_ref, l_ref = _run(tiny_handle, accountant="rdp")  # the fast accountant: ε is not the point here
    for mode in ("ghost", "bk"):
        m_fast, l_fast = _run(tiny_handle, accountant="rdp", grad_sample_mode=mode)
        assert l_fast.losses == pytest.approx(l_ref.losses, rel=1e-5), mode
        for (name, a), (_, b) in zip(m_ref.named_parameters(), m_fast.named_parameters()):
            torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-4, msg=f"{mode}: {name}")
        assert not any(hasattr(p, "_norm_sample") or hasattr(p, "grad_sample") for p in m_fast.parameters())
        assert all(p.requires_grad == q.requires_grad for p, q in zip(m_ref.parameters(), m_fast.parameters()))


def test_ghost_with_trained_embeddings_unties_and_saves_as_trained(tiny_handle, tmp_path):
    model, _ = _run(tiny_handle, accountant="rdp", grad_sample_mode="ghost", train_embeddings=True)
    assert model.lm_head.weight is not model.transformer.wte.weight
    assert not torch.equal(model.lm_head.weight, model.transformer.wte.weight)  # each trained on its own
    save_handle(ModelHandle(model, tiny_handle.tokenizer, tiny_handle.max_length), tmp_path)
    loaded = load_handle(tmp_path).model
    for (name, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a, b), name


def test_book_keeping_falls_back_to_the_reference_for_unsupported_layers(tiny_handle):
    """A trainable layer book-keeping cannot clip (here: a trained embedding) means
    the hooks path, with a warning — never a silently wrong clipped sum."""
    model = clone_model(tiny_handle.model).train()
    model.transformer.wpe.weight.requires_grad_(False)  # wte (tied to lm_head) stays trainable
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    ids, mask = pad_batch([[0, 1, 2, 0]] * 4, 0)
    loader = DataLoader(TensorDataset(ids, mask), batch_size=4)
    settings = DPSettings(target_epsilon=1.0, delta=1e-5, max_grad_norm=1.0, epochs=1, expected_batch_size=4, lr=0.1,
                          grad_sample_mode="bk")
    with pytest.warns(UserWarning, match="using 'hooks'"):
        private, _, criterion, _, _ = make_private(model, opt, loader, 1.0, settings)
    assert criterion is None
    private._close()


def test_train_output_trains_the_head_and_keeps_the_embeddings(tiny_handle):
    """dp.train_output (the DP arms' default): the tied output layer gets its own copy, which DP-SGD moves;
    the input and position embeddings stay as pre-trained; the saved model loads untied, as trained."""
    from privleak.models.batching import encode
    from privleak.models.dp_train import prepare_trainable

    settings = DPSettings(target_epsilon=8.0, delta=1e-3, max_grad_norm=1.0, epochs=2, expected_batch_size=8,
                          lr=1e-2, grad_sample_mode="bk", train_output=True)
    probe = prepare_trainable(clone_model(tiny_handle.model), settings)
    assert probe.lm_head.weight is not probe.transformer.wte.weight and probe.lm_head.weight.requires_grad
    assert not probe.transformer.wte.weight.requires_grad and not probe.transformer.wpe.weight.requires_grad
    untouched = prepare_trainable(clone_model(tiny_handle.model), DPSettings(**{**settings.__dict__, "train_output": False}))
    assert untouched.lm_head.weight is untouched.transformer.wte.weight and not untouched.lm_head.weight.requires_grad

    wte0 = tiny_handle.model.transformer.wte.weight.detach().clone()
    data = encode(tiny_handle.tokenizer, ["Patient Ann Lee was seen on day 3 for asthma."] * 24, 64)
    model, _ = train_dp(clone_model(tiny_handle.model), data, settings, tiny_handle.tokenizer.pad_token_id, 64)
    assert torch.equal(model.transformer.wte.weight, wte0)
    assert not torch.allclose(model.lm_head.weight, wte0)
    assert model.config.tie_word_embeddings is False


@pytest.mark.parametrize("mode,over", [("bk", {}), ("hooks", {}), ("bk", {"lora_rank": 2}),
                                       ("bk", {"lora_rank": 2, "lora_base_bf16": True})])
def test_the_dp_step_is_adamw_on_the_noised_sum(tiny_handle, calibrate_once, monkeypatch, mode, over):
    """Opacus wraps the optimizer train_dp builds; its step must be the per-tensor AdamW's on the noised clipped
    sum. torch's fused AdamW under Opacus's DPOptimizer did not learn (SmolLM2 DP-LoRA's loss rose 4.8 → 6.3 where
    the per-tensor AdamW's fell to 2.6): a run on the per-tensor optimizer is the reference."""
    from privleak.models import dp_train

    model, log = _run(tiny_handle, accountant="rdp", grad_sample_mode=mode, lr=1e-2, **over)

    def per_tensor(m, lr, wd, fused=True):
        return torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=lr, weight_decay=wd,
                                 foreach=False)

    monkeypatch.setattr(dp_train, "make_optimizer", per_tensor)
    ref, ref_log = _run(tiny_handle, accountant="rdp", grad_sample_mode=mode, lr=1e-2, **over)
    assert log.losses == pytest.approx(ref_log.losses, rel=1e-5)
    for (name, a), (_, b) in zip(ref.named_parameters(), model.named_parameters()):
        torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-4, msg=name)
