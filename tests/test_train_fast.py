"""The training and scoring fast paths (issue 35) against the plain computations they replace.

* :func:`sequence_nll` (the LM head and a fused cross-entropy on real predicted tokens only) against the
  model's full logits through :func:`per_sequence_nll`: the same per-sequence means and the same gradients.
* Book-keeping DP-SGD with the flattened head against the same step with the head kept per sequence.
* :func:`training_kernels`: eager attention during training, the model's own kernel restored after; the
  two kernels give the same losses.
* The scoring pass without vocabulary moments: the same log p.
* The parallel executors' order: the longest chain of work first.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from privleak.attacks.scoring import score_texts
from privleak.models.base import BaseModelSpec, build_model
from privleak.models.batching import Encoded, pad_batch, per_sequence_nll, position_ids_for, sequence_nll
from privleak.models.book_keeping import BookKeeping
from privleak.models.device import ComputePolicy, training_kernels, use_policy
from privleak.models.dp_train import freeze_embeddings, untie_output_embedding
from privleak.models.handle import clone_model
from privleak.models.train import TrainSettings, train
from privleak.pipeline.graph import Graph, Task

# Rows of different lengths: padding on every row but the longest, and a row with a single token.
SEQS = [[0, 5, 7, 9, 3, 11, 2, 0], [0, 4, 4, 8, 0], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0], [0, 9], [3]]


def _tiny(seed: int = 0):
    return build_model(BaseModelSpec(vocab_size=40, n_layer=2, n_embd=32, n_head=2, max_length=24, seed=seed), eos_id=0)


def _plain_nll(model, ids, mask):
    logits = model(input_ids=ids, attention_mask=mask, position_ids=position_ids_for(mask)).logits
    return per_sequence_nll(logits, ids, mask)


def test_sequence_nll_equals_the_full_logits_and_gives_the_same_gradients():
    ids, mask = pad_batch(SEQS, 0)
    a, b = _tiny(), _tiny()
    fast, slow = sequence_nll(a, ids, mask), _plain_nll(b, ids, mask)
    torch.testing.assert_close(fast, slow, rtol=1e-5, atol=1e-6)
    assert float(fast[-1].detach()) == 0.0  # a one-token row predicts nothing, in both
    fast.sum().backward()
    slow.sum().backward()
    for (n, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters()):
        torch.testing.assert_close(pa.grad, pb.grad, rtol=1e-4, atol=1e-6, msg=n)


def test_sequence_nll_can_fail():
    # The comparison above is not vacuous: one changed target token moves its row's loss.
    ids, mask = pad_batch(SEQS, 0)
    other = ids.clone()
    other[0, 3] = 17
    m = _tiny()
    assert not torch.allclose(sequence_nll(m, ids, mask)[0], _plain_nll(m, other, mask)[0])


def test_sequence_nll_keeps_rows_when_the_head_is_hooked_per_sequence():
    ids, mask = pad_batch(SEQS, 0)
    m = _tiny()
    torch.testing.assert_close(sequence_nll(m, ids, mask, flat_head=False), _plain_nll(m, ids, mask))


def _bk_clipped_sum(model, flat_head: bool, train_output: bool) -> dict[str, torch.Tensor]:
    if train_output:
        untie_output_embedding(model)
    freeze_embeddings(model)
    model.train()
    bk = BookKeeping(model, max_grad_norm=0.05)
    ids, mask = pad_batch(SEQS[:4], 0)
    with bk.capture():
        per_seq = sequence_nll(model, ids, mask, flat_head=flat_head)
        per_seq.sum().backward()
    bk.write_clipped_sum()
    out = {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}
    bk.remove()
    return out


def test_book_keeping_clipped_sum_is_the_same_with_the_flattened_head():
    base = _tiny()
    fast = _bk_clipped_sum(clone_model(base), flat_head=True, train_output=False)
    slow = _bk_clipped_sum(clone_model(base), flat_head=False, train_output=False)
    assert fast.keys() == slow.keys() and fast
    for n in fast:
        torch.testing.assert_close(fast[n], slow[n], rtol=1e-4, atol=1e-7, msg=n)


def test_a_trainable_head_is_never_flattened_under_per_sample_clipping():
    # With a trainable head, book-keeping would see one row per token, not per sequence: the DP loop keeps
    # rows when head_trainable() says so; flattened, book-keeping's per-sample shapes do not match (an error,
    # never a silently wrong clipping).
    from privleak.models.batching import head_trainable

    m = _tiny()
    assert not head_trainable(freeze_embeddings(m) and m)
    untie_output_embedding(m)
    m.lm_head.weight.requires_grad_(True)
    assert head_trainable(m)
    base = _tiny()
    rows = _bk_clipped_sum(clone_model(base), flat_head=False, train_output=True)
    assert rows["lm_head.weight"].abs().sum() > 0
    with pytest.raises(RuntimeError):
        _bk_clipped_sum(clone_model(base), flat_head=True, train_output=True)


def test_training_kernels_switch_to_eager_and_restore():
    m = _tiny()
    before = m.config._attn_implementation
    with training_kernels(m):
        inside = m.config._attn_implementation
    assert m.config._attn_implementation == before
    if before == "sdpa":
        assert inside == "eager"


def test_eager_training_matches_the_default_kernel():
    data = Encoded([s for s in SEQS[:4]] * 4)
    settings = TrainSettings(epochs=2, batch_size=4, lr=1e-2)
    a, b = _tiny(), _tiny()
    log_a = train(a, data, settings, pad_id=0)  # eager inside train()
    # The reference: the same loop with the model's own (SDPA) kernel and the full logits.
    b.train()
    gen = torch.Generator().manual_seed(settings.seed)
    from privleak.models.train import bucketed_batches, lr_at, make_optimizer

    opt = make_optimizer(b, settings.lr, settings.weight_decay)
    step, total, losses = 0, log_a.steps, []
    lengths = [len(s) for s in data.ids]
    while step < total:
        epoch = []
        for idx in bucketed_batches(lengths, settings.batch_size, gen):
            for g in opt.param_groups:
                g["lr"] = lr_at(step, total, settings.lr, settings.warmup_fraction)
            opt.zero_grad(set_to_none=True)
            ids, mask = pad_batch([data.ids[i] for i in idx], 0)
            loss = _plain_nll(b, ids, mask).mean()
            loss.backward()
            opt.step()
            epoch.append(float(loss.detach()))
            step += 1
        losses.append(sum(epoch) / len(epoch))
    np.testing.assert_allclose(log_a.losses, losses, rtol=1e-4)
    # The trained models, compared by what they compute (not weight by weight: Adam turns the float noise of
    # a gradient that is zero in exact arithmetic, the key bias's, into full-size steps of either sign).
    ids, mask = pad_batch(SEQS, 0)
    with torch.no_grad():
        torch.testing.assert_close(_plain_nll(a.eval(), ids, mask), _plain_nll(b.eval(), ids, mask), rtol=1e-3, atol=1e-4)


def test_bf16_training_step_runs_bf16_and_keeps_fp32_weights():
    m = _tiny()
    seen = []
    m.lm_head.register_forward_hook(lambda mod, i, o: seen.append(o.dtype))
    with use_policy(ComputePolicy(train_precision="bf16")):
        train(m, Encoded([s for s in SEQS[:4]] * 2), TrainSettings(epochs=1, batch_size=4, lr=1e-2), pad_id=0)
    assert set(seen) == {torch.bfloat16}
    assert all(p.dtype == torch.float32 for p in m.parameters())


def test_scoring_without_moments_gives_the_same_logprob(tiny_handle):
    texts = ["Patient Ann Lee was seen on day 3.", "General advice: drink water.", "x"]
    full = score_texts(tiny_handle, texts)
    lean = score_texts(tiny_handle, texts, moments=False)
    assert full.has_moments and not lean.has_moments
    np.testing.assert_allclose(lean.logprob, full.logprob, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(lean.offsets, full.offsets)
    from privleak.attacks.membership.scores import min_k_pp_scores

    with pytest.raises(ValueError, match="moments"):
        min_k_pp_scores(lean)


def test_priorities_start_the_longest_chain_first():
    def noop(audit):
        return None

    g = Graph([Task("base", "k", noop, cost=10),
               Task("train/short", "k", noop, ("base",), cost=5),
               Task("train/long", "k", noop, ("base",), cost=50),
               Task("eval/short", "k", noop, ("train/short",), cost=3),
               Task("eval/long", "k", noop, ("train/long",), cost=3)])
    p = g.priorities()
    assert p["eval/long"] == 3 and p["train/long"] == 53 and p["train/short"] == 8 and p["base"] == 63
    assert max(("train/short", "train/long"), key=p.__getitem__) == "train/long"
