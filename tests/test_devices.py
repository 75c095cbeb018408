"""Devices, precision and memory (issue 14): device choice, bf16 autocast with fp32 DP arithmetic, OOM as one line."""

from __future__ import annotations

import contextlib
import io

import pytest
import torch
import yaml
from torch.utils.data import DataLoader, TensorDataset

from privleak.arms import arm_names
from privleak.config import build_config
from privleak.policy import PROFILES, default_profile
from privleak.core.errors import UserError
from privleak.models.base import BaseModelSpec, build_model
from privleak.models.batching import Encoded, pad_batch
from privleak.models.device import (
    ComputePolicy,
    DeviceOutOfMemory,
    make_policy,
    resolve_device,
    native_bf16,
    resolve_precision,
    resolve_train_precision,
    use_policy,
)
from privleak.models.dp_train import DPSettings, _logical_step, make_private, prepare_trainable, train_dp
from privleak.models.handle import clone_model
from privleak.models.train import TrainSettings, train

from conftest import SMALL

SEQS = [[0, 5, 7, 9, 3, 11, 2, 0], [0, 4, 4, 8, 0], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0], [0, 9, 9, 9, 0]]


# ---------------------------------------------------------------- choosing the device

def test_device_names_resolve_or_fail_in_one_line():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("CPU ") == torch.device("cpu")
    auto = resolve_device("auto")
    assert auto.type == ("cuda" if torch.cuda.is_available() else "cpu")
    for bad in ("tpu", "cpu:1", "cuda:x", "gpu", ""):
        with pytest.raises(UserError, match="unknown device"):
            resolve_device(bad)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without CUDA")
def test_unavailable_cuda_is_a_user_error():
    for spec in ("cuda", "cuda:0", "cuda:3"):
        with pytest.raises(UserError, match="--device cpu"):
            resolve_device(spec)


def test_precision_auto_is_fp32_on_cpu_and_bf16_asks_for_autocast():
    cpu = torch.device("cpu")
    assert resolve_precision(cpu, "auto") == "fp32"
    # Training follows the hardware: bf16 where the CPU multiplies it natively, else fp32; named, as named.
    assert resolve_train_precision(cpu, "auto") == ("bf16" if native_bf16(cpu) else "fp32")
    assert resolve_train_precision(cpu, "fp32") == "fp32" and resolve_train_precision(cpu, "bf16") == "bf16"
    assert make_policy("cpu", "fp32").train_autocast_dtype is None
    assert resolve_precision(cpu, "bf16") == "bf16"
    assert make_policy("cpu").autocast_dtype is None
    assert make_policy("cpu", "bf16").autocast_dtype is torch.bfloat16
    with pytest.raises(UserError, match="memory_fraction"):
        make_policy("cpu", memory_fraction=0.0)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without CUDA")
def test_cli_unavailable_device_exits_2_before_any_work(tmp_path, capsys):
    from privleak.cli import main

    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exc:
        main(["run", "--device", "cuda:1", "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2
    assert err.startswith("error: --device cuda:1") and "\n" not in err and "Traceback" not in err
    assert not out.exists()
    with pytest.raises(SystemExit) as exc:
        main(["run", "--device", "tpu", "--out", str(out)])
    assert exc.value.code == 2 and "unknown device" in capsys.readouterr().err


# ---------------------------------------------------------------- profiles

def test_gpu_profile_is_chosen_on_cuda_only_and_cpu_default_is_unchanged():
    assert default_profile(torch.device("cuda", 0)) == "gpu"
    assert default_profile(torch.device("cpu")) == "quick"
    assert default_profile(torch.device("mps")) == "quick"
    cfg = build_config({}, {"device": "cpu"})
    assert cfg.profile == "quick" and cfg.device == "cpu"
    # The CPU default is the quick profile exactly as before: same model, arms and sizes.
    assert PROFILES["quick"] == {"dp": {"epsilons": [1.0, 8.0]}}
    e = cfg.model.embedded
    assert (e.n_layer, e.n_embd, e.n_head, e.vocab_size, cfg.model.max_length) == (2, 128, 4, 2048, 160)
    assert arm_names(cfg) == ["baseline", "best", "dp-1", "dp-8", "dp-user-10", "scrub", "dp-8+scrub", "guard"]
    assert not cfg.shadows.enabled
    assert build_config({}, {"device": "cpu", "profile": "full"}).profile == "full"


def test_gpu_profile_is_gpt2_small_sized_with_every_arm_and_8_shadows():
    from transformers import GPT2Config, GPT2LMHeadModel

    from privleak.pipeline.data import base_spec

    cfg = build_config({}, {"profile": "gpu", "device": "cpu"})
    spec = base_spec(cfg)
    config = GPT2Config(vocab_size=spec.vocab_size, n_positions=spec.max_length, n_embd=spec.n_embd,
                        n_layer=spec.n_layer, n_head=spec.n_head)
    with torch.device("meta"):  # counts the parameters without allocating 0.5 GB
        n = sum(p.numel() for p in GPT2LMHeadModel(config).parameters())
    assert (spec.n_layer, spec.n_embd, spec.n_head) == (12, 768, 12)
    assert 120e6 < n < 130e6, n
    assert cfg.data.synthetic.n_public >= 10 * build_config({}, {"device": "cpu"}).data.synthetic.n_public
    assert cfg.shadows.enabled and cfg.shadows.n_shadows == 8 and cfg.shadows.arms is None
    names = arm_names(cfg)
    for kind in ("baseline", "best", "dp-1", "dp-8", "dp-user-10", "scrub", "dp-8+scrub", "dedup", "dp-8+lora", "guard"):
        assert kind in names
    assert any(a.startswith("dpw-") for a in names)


def test_qlora_off_cuda_is_one_line_before_work():
    """The DP kind's own check (run by arms.resolve, which `privleak run` and run_audit call before any work)."""
    from privleak.arms import resolve

    cfg = build_config({"arms": ["baseline", "dp-8+lora"], "dp": {"qlora": True}}, {"device": "cpu"})
    with pytest.raises(UserError, match="CUDA only"):
        resolve(cfg)
    # Without a +lora arm the setting has nothing to act on and costs nothing.
    resolve(build_config({"arms": ["baseline", "dp-8"], "dp": {"qlora": True}}, {"device": "cpu"}))


def test_bf16_precision_is_part_of_the_arm_key_and_fp32_keys_are_unchanged():
    from privleak.arms import parse_arm
    from privleak.pipeline.training import arm_settings

    cfg = build_config({}, {"device": "cpu"})
    plain = arm_settings(cfg, parse_arm("dp-8"), 1000).key()
    assert "precision" not in plain and "qlora" not in plain and "lora_targets" not in plain
    with use_policy(ComputePolicy(train_precision="bf16")):
        assert arm_settings(cfg, parse_arm("dp-8"), 1000).key()["precision"] == "bf16"
    # Evaluating in bf16 changes no trained weights: the arm's key stays.
    with use_policy(ComputePolicy(precision="bf16")):
        assert "precision" not in arm_settings(cfg, parse_arm("dp-8"), 1000).key()


# ---------------------------------------------------------------- bf16 autocast, fp32 DP arithmetic

def _tiny():
    return build_model(BaseModelSpec(vocab_size=40, n_layer=2, n_embd=32, n_head=2, max_length=16), eos_id=0)


def _one_dp_step(model, mode: str, sigma: float, policy: ComputePolicy):
    """The parameter change of one DP-SGD step with plain SGD (lr 1): −(Σ clipped + noise) / B."""
    settings = DPSettings(target_epsilon=8.0, delta=1e-5, max_grad_norm=0.05, epochs=1, expected_batch_size=4,
                          lr=1.0, seed=3, grad_sample_mode=mode)
    model = prepare_trainable(model, settings)
    model.train()
    start = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    ids, mask = pad_batch(SEQS, 0)
    loader = DataLoader(TensorDataset(ids, mask), batch_size=4)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1.0)
    seen = []
    hook = model.lm_head.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    with use_policy(policy):
        private, opt, criterion, _, _ = make_private(model, opt, loader, sigma, settings)
        opt.zero_grad(set_to_none=True)
        _logical_step(private, opt, ids, mask, max_tokens=24, criterion=criterion)  # 24 tokens: 2+ micro-batches
    hook.remove()
    grads_fp32 = all(p.grad.dtype == torch.float32 for p in opt.params)
    norms = getattr(criterion, "per_sample_norms", None)
    delta = torch.cat([(p.detach() - start[n]).flatten() for n, p in private._module.named_parameters() if n in start])
    private._close()
    return delta, seen, grads_fp32, norms


@pytest.mark.parametrize("mode", ["hooks", "ghost", "bk"])
def test_clipped_noisy_step_under_bf16_autocast_matches_fp32(mode):
    base = _tiny()
    fp32 = ComputePolicy(precision="fp32")
    bf16 = ComputePolicy(precision="bf16", train_precision="bf16")
    for sigma in (0.0, 1.0):
        ref, seen32, ok32, _ = _one_dp_step(clone_model(base), mode, sigma, fp32)
        got, seen16, ok16, norms = _one_dp_step(clone_model(base), mode, sigma, bf16)
        assert set(seen32) == {torch.float32}
        assert set(seen16) == {torch.bfloat16}, "the forward pass did not run under bf16 autocast"
        assert ok32 and ok16, "the noisy clipped gradient must be fp32"
        if norms is not None:
            assert norms.dtype == torch.float32
        assert ref.abs().max() > 0
        # Clipping at C = 0.05 binds for every row, so each clipped gradient has norm C in both runs: what bf16
        # changes is the direction, by about its rounding error. The noise (σ = 1) is the same fp32 draw.
        rel = (got - ref).norm() / ref.norm()
        assert rel < 0.02, (mode, sigma, float(rel))
        if sigma:  # bf16 noise would differ by ~4e-3 of its norm
            assert rel < 1e-3, "the same fp32 noise should dominate both steps"


def test_bf16_step_differs_from_fp32_so_the_comparison_can_fail():
    base = _tiny()
    ref, *_ = _one_dp_step(clone_model(base), "bk", 0.0, ComputePolicy(precision="fp32"))
    got, *_ = _one_dp_step(clone_model(base), "bk", 0.0, ComputePolicy(train_precision="bf16"))
    assert not torch.equal(ref, got)


def test_plain_training_under_bf16_autocast_keeps_fp32_weights():
    model = _tiny()
    with use_policy(ComputePolicy(train_precision="bf16")):
        log = train(model, Encoded([s for s in SEQS] * 3), TrainSettings(epochs=1, batch_size=4, lr=1e-2), pad_id=0)
    assert log.steps == 3 and all(p.dtype == torch.float32 for p in model.parameters())
    assert all(torch.isfinite(torch.tensor(x)) for x in log.losses)


def test_gradient_checkpointing_gives_the_same_plain_training():
    a, b = _tiny(), _tiny()
    data = Encoded([s for s in SEQS] * 3)
    s = TrainSettings(epochs=1, batch_size=4, lr=1e-2)
    train(a, data, s, pad_id=0)
    recomputed = []
    b.transformer.h[0].attn.register_forward_hook(lambda *args: recomputed.append(1))
    with use_policy(ComputePolicy(gradient_checkpointing=True)):
        train(b, data, s, pad_id=0)
    assert len(recomputed) == 2 * 3, "each step runs block 0's attention twice: forward, then recomputed in backward"
    # The attention's key bias has a gradient of exactly zero in exact arithmetic (softmax ignores a constant
    # added to every score): its float noise, which Adam scales to steps of either sign, is the one thing two
    # backward orders may differ in, and it changes nothing the model computes. Compared: every other weight,
    # and what the two models compute.
    hidden = b.config.n_embd
    for (n, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        if n.endswith("attn.c_attn.bias"):
            p, q = torch.cat([p[:hidden], p[2 * hidden:]]), torch.cat([q[:hidden], q[2 * hidden:]])
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6, msg=n)
    ids, mask = pad_batch(SEQS, 0)
    with torch.no_grad():
        la = a.eval()(input_ids=ids, attention_mask=mask).logits
        lb = b.eval()(input_ids=ids, attention_mask=mask).logits
    torch.testing.assert_close(la, lb, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- out of memory

def _oom_forward(model):
    def forward(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
    model.forward = forward
    model.transformer.forward = forward  # the training loss runs the body and the head apart (sequence_nll)
    return model


def test_oom_in_plain_training_is_one_line_naming_the_setting():
    with pytest.raises(DeviceOutOfMemory, match=r"lower train\.batch_size \(now 4\)") as exc:
        train(_oom_forward(_tiny()), Encoded(SEQS), TrainSettings(epochs=1, batch_size=4, lr=1e-2), pad_id=0)
    assert "\n" not in str(exc.value)


def test_oom_in_a_dp_step_is_one_line_naming_the_setting():
    settings = DPSettings(target_epsilon=8.0, delta=1e-5, max_grad_norm=1.0, epochs=1, expected_batch_size=4,
                          lr=1e-3, micro_batch_tokens=512)
    model = _tiny()
    real_forward = model.forward
    calls = []

    def forward(*args, **kwargs):  # the OOM comes from inside a DP step, after the privacy engine is attached
        calls.append(1)
        raise torch.OutOfMemoryError("CUDA out of memory")

    model.forward = forward
    model.transformer.forward = forward  # DP's loss runs the body and the head apart too (sequence_nll)
    with pytest.raises(DeviceOutOfMemory, match=r"dp\.micro_batch_tokens \(now 512\)"):
        train_dp(model, Encoded(SEQS * 4), settings, pad_id=0, max_length=16)
    assert calls and real_forward is not None


def test_cli_oom_mid_arm_exits_2_and_writes_no_arm(tmp_path, capsys, monkeypatch):
    from privleak.cli import main
    from privleak.models import train as stages  # the plain kinds import their trainer from here at call time

    real_train = stages.train

    def train_until_oom(model, *args, **kwargs):  # the baseline arm's third step runs out of memory
        # The body's forward: the training loss runs it (then the head) however the loss is computed.
        forward, calls = model.transformer.forward, []

        def step(*a, **k):
            calls.append(1)
            if len(calls) > 2:
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
            return forward(*a, **k)

        model.transformer.forward = step
        return real_train(model, *args, **kwargs)

    monkeypatch.setattr(stages, "train", train_until_oom)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({**SMALL, "arms": ["baseline"], "one_run": {"canaries": 0}}))
    out = tmp_path / "run"
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(SystemExit) as exc:
        main(["run", "--config", str(path), "--out", str(out), "--device", "cpu"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2
    assert err[-1].startswith("error: out of memory on cpu while train baseline; lower train.batch_size (now 16)")
    assert not any("Traceback" in line for line in err)
    assert (out / "splits").exists()  # the run got as far as the arm
    assert not (out / "arms" / "baseline" / "model").exists()
    assert not (out / "arms" / "baseline" / "train.json").exists()


# ---------------------------------------------------------------- memory-sized batches

def test_plain_micro_batches_give_the_same_gradient():
    from privleak.models.train import _batch_backward

    seqs = SEQS * 2
    grads = []
    for budget in (0, 30):  # 0: one forward pass (the CPU path); 30 tokens: several micro-batches
        model = _tiny().train()
        loss = _batch_backward(model, seqs, 0, torch.device("cpu"), budget)
        grads.append((loss, torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])))
    (l0, g0), (l1, g1) = grads
    assert l0 == pytest.approx(l1, rel=1e-5)
    torch.testing.assert_close(g1, g0, rtol=1e-4, atol=1e-6)


def test_cuda_budgets_follow_free_memory_and_cpu_keeps_the_configured_size(monkeypatch):
    from privleak.models import device as dev_mod
    from privleak.models.dp_train import dp_token_budget

    with torch.device("meta"):  # a 256-wide GPT-2 block pair, never allocated
        model = build_model(BaseModelSpec(vocab_size=512, n_layer=2, n_embd=256, n_head=4, max_length=128), eos_id=0)
    settings = DPSettings(target_epsilon=8.0, delta=1e-5, max_grad_norm=1.0, epochs=1, expected_batch_size=4, lr=1e-3)
    prepare_trainable(model, settings)  # embeddings frozen, as the DP arms train
    assert dp_token_budget(model, settings, 100) == settings.micro_batch_tokens  # the CPU: as configured
    # What torch.cuda.mem_get_info would report on a GPU with 8 GiB free (no GPU here).
    monkeypatch.setattr(dev_mod, "free_bytes", lambda device: 8 * 2**30)
    cuda = torch.device("cuda", 0)
    with use_policy(ComputePolicy(device=cuda, memory_fraction=0.5)):
        assert dev_mod.token_budget(cuda, 1024.0, default=4096) == 4 * 2**20
        half = dev_mod.token_budget(cuda, 2048.0, default=4096)
    assert half == 2 * 2**20
    from privleak.models import dp_train as dp_mod

    monkeypatch.setattr(dp_mod, "model_device", lambda m: cuda)
    with use_policy(ComputePolicy(device=cuda, memory_fraction=0.5)):
        hooks = dp_token_budget(model, settings, 100)
        bk = dp_token_budget(model, DPSettings(**{**settings.__dict__, "grad_sample_mode": "bk"}), 100)
    # Sized by memory, not the CPU's 4096; per-sample gradients (hooks) cost more per token than norms (bk).
    assert bk > settings.micro_batch_tokens and hooks < bk
