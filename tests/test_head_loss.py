"""The fused LM head + cross-entropy (models.head_loss) against the plain ``cross_entropy(head(x).float())``."""

from __future__ import annotations

import gc

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from privleak.models import head_loss
from privleak.models.head_loss import fusable, linear_nll


def _both(head: nn.Linear, x: torch.Tensor, t: torch.Tensor, upstream: torch.Tensor, bf16: bool):
    """(NLL, grads of x, W, b) through linear_nll and through the plain path, under bf16 autocast or not."""
    out = []
    for fn in (linear_nll, lambda h, a, y: F.cross_entropy(h(a).float(), y, reduction="none")):
        x.grad = None
        head.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            nll = fn(head, x, t)
        (nll * upstream).sum().backward()
        grads = [x.grad, head.weight.grad] + ([head.bias.grad] if head.bias is not None else [])
        out.append((nll.detach(), [g.clone() if g is not None else None for g in grads]))
    return out


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max())


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("rows", [1, 37, 150])  # one row, fewer than a chunk's, several chunks and a remainder
def test_fp32_nll_and_gradients_equal_the_plain_path(bias, rows):
    torch.manual_seed(rows)
    head = nn.Linear(24, 300, bias=bias)
    x = torch.randn(rows, 24, requires_grad=True)
    t = torch.randint(0, 300, (rows,))
    (a, ga), (b, gb) = _both(head, x, t, torch.rand(rows), bf16=False)
    assert a.dtype == torch.float32
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    for u, v in zip(ga, gb):
        assert _rel(u, v) < 1e-5


@pytest.mark.parametrize("bias", [False, True])
def test_bf16_autocast_gradients_agree_to_bf16_rounding(bias):
    torch.manual_seed(1)
    head = nn.Linear(32, 500, bias=bias)
    x = torch.randn(150, 32, requires_grad=True)
    t = torch.randint(0, 500, (150,))
    (a, ga), (b, gb) = _both(head, x, t, torch.rand(150), bf16=True)
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)  # both normalise the same bf16 logits in fp32
    for u, v in zip(ga, gb):
        assert u.dtype == torch.float32
        assert _rel(u, v) < 2e-2  # a few bf16 ulps (2⁻⁸ each): the logits' gradient is rounded as autocast rounds it


def test_the_check_can_fail():
    """A head loss that forgot the log-partition term is caught by the same comparison."""
    torch.manual_seed(2)
    head = nn.Linear(16, 50)
    x = torch.randn(20, 16)
    t = torch.randint(0, 50, (20,))
    wrong = -head(x).gather(1, t[:, None]).squeeze(1)
    with pytest.raises(AssertionError):
        torch.testing.assert_close(wrong, linear_nll(head, x, t), rtol=1e-5, atol=1e-5)


def test_a_frozen_head_gives_only_the_input_gradient():
    torch.manual_seed(3)
    head = nn.Linear(16, 80).requires_grad_(False)
    x = torch.randn(30, 16, requires_grad=True)
    t = torch.randint(0, 80, (30,))
    linear_nll(head, x, t).sum().backward()
    ref = x.grad.clone()
    x.grad = None
    F.cross_entropy(head(x), t, reduction="sum").backward()
    assert head.weight.grad is None and head.bias.grad is None
    assert _rel(ref, x.grad) < 1e-5


def test_without_grad_nothing_is_kept_for_a_backward():
    head = nn.Linear(8, 40)
    x = torch.randn(10, 8)
    with torch.no_grad():
        nll = linear_nll(head, x, torch.randint(0, 40, (10,)))
    assert not nll.requires_grad and nll.shape == (10,)


def test_a_hooked_or_subclassed_head_runs_through_its_module():
    """Per-sample clipping hooks the head's module: the fused path would skip the hook, so it must not run."""
    head = nn.Linear(8, 40)
    assert fusable(head)
    seen = []
    handle = head.register_forward_hook(lambda *a: seen.append(1))
    assert not fusable(head)
    linear_nll(head, torch.randn(5, 8), torch.randint(0, 40, (5,)))
    assert seen == [1]
    handle.remove()

    class Scaled(nn.Linear):
        def forward(self, x):
            return 2 * super().forward(x)

    scaled = Scaled(8, 40)
    x, t = torch.randn(5, 8), torch.randint(0, 40, (5,))
    assert not fusable(scaled)
    torch.testing.assert_close(linear_nll(scaled, x, t), F.cross_entropy(scaled(x), t, reduction="none"))


def test_a_frozen_weights_bf16_copy_is_remade_when_the_weight_is_written_and_dropped_with_it():
    head = nn.Linear(8, 40, bias=False).requires_grad_(False)
    x, t = torch.randn(6, 8), torch.randint(0, 40, (6,))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        before = linear_nll(head, x, t)
        assert id(head.weight) in head_loss._FROZEN
        with torch.no_grad():
            head.weight.mul_(3.0)
        after = linear_nll(head, x, t)
        with torch.no_grad():
            ref = F.cross_entropy(head(x).float(), t, reduction="none")
    assert not torch.allclose(before, after)
    torch.testing.assert_close(after, ref, rtol=1e-5, atol=1e-5)
    key = id(head.weight)
    del head
    gc.collect()
    assert key not in head_loss._FROZEN


def test_a_training_step_through_sequence_nll_matches_the_unfused_step(tiny_handle, monkeypatch):
    """The same model, one AdamW step through sequence_nll with and without the fused head: the same weights."""
    import copy

    from privleak.models import batching
    from privleak.models.batching import pad_batch, sequence_nll

    texts = ["a note about a patient", "another record, longer than the first one", "short"]
    ids, mask = pad_batch([tiny_handle.tokenizer(t)["input_ids"] for t in texts], tiny_handle.pad_id)
    results = []
    for fused in (True, False):
        if not fused:
            monkeypatch.setattr(batching, "linear_nll",
                                lambda h, a, y: F.cross_entropy(h(a).float(), y, reduction="none"))
        model = copy.deepcopy(tiny_handle.model).train()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        sequence_nll(model, ids, mask).mean().backward()
        opt.step()
        results.append({k: v.detach().clone() for k, v in model.state_dict().items()})
    for k in results[0]:
        torch.testing.assert_close(results[0][k], results[1][k], rtol=1e-4, atol=1e-6)
