r"""Where the models run: the device, bf16 autocast, memory-sized batches, OOM as one line.

One :class:`ComputePolicy` per process says where models are placed and how
they compute; the pipeline sets it from the config (``device``,
``compute.*``) around a run, and every model call reads it:

* **device** — ``auto`` (CUDA when present, else the CPU), ``cpu``, ``cuda``,
  ``cuda:N`` or ``mps``. Models are loaded onto it (:func:`place`) and every
  batch is moved to its model's device (:func:`model_device`), so training
  (plain and every DP path), scoring, exposure, generation, shadows and the
  guard all run there.
* **precision** — ``bf16`` runs forward passes under ``torch.autocast`` (the
  weights, the optimiser state and the gradients stay fp32); on a CPU, evaluation runs on a bf16 copy of
  the weights instead (:func:`evaluation_model`: autocast's per-product weight cast dominates a decoding step). Training and
  evaluation resolve it apart (``precision`` and ``train_precision``):
  ``auto`` trains in bf16 wherever the device multiplies bf16 in hardware (a
  CUDA device with bf16, a CPU with AVX-512 BF16 or AMX: 1.8-2.6x the fp32
  tokens per second of the embedded model's plain and DP steps,
  ``bench/bench_dp_insitu.py``), and evaluates in bf16 on CUDA only: on a
  CPU every score, rank and sample an attack reads is fp32, as it always was.
  ``native`` evaluates in bf16 too wherever the device multiplies bf16 in hardware (the ``lite`` profile's
  choice for a 100 M+ model on such a CPU: 2-3x faster scoring and sampling). ``fp32`` and ``bf16`` set both.
  Exposure ranks are fp32 whatever the precision (``prefix_scoring``). DP-SGD's per-sample norms, clipping factors,
  clipped sums and noise are fp32 whatever the precision (``fp32_samplers``,
  ``book_keeping``).
* **training kernels** — on a CPU, training runs attention as plain matrix
  products (transformers' ``eager``) instead of the fused SDPA kernel, whose
  bf16 backward is slower than its fp32 one there (:func:`training_kernels`).
* **memory** — on CUDA, micro-batches are sized from the free device memory
  (``torch.cuda.mem_get_info``) times ``memory_fraction`` and a per-token
  cost estimate; on the CPU the configured sizes are used unchanged.
* **out of memory** — :func:`oom_as_error` turns a device OOM into one
  :class:`~privleak.core.errors.UserError` line naming the setting to lower
  (exit 2). Stages write their outputs atomically after their work, so an
  OOM never leaves a half-written arm behind.
"""

from __future__ import annotations

import contextlib
import copy
import re
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import torch

from ..core.errors import UserError

Precision = Literal["fp32", "bf16"]

_DEVICE = re.compile(r"^(auto|cpu|mps|cuda)(?::(\d+))?$")


@dataclass(frozen=True)
class ComputePolicy:
    """Resolved compute settings (see the module docstring)."""

    device: torch.device = torch.device("cpu")
    precision: Precision = "fp32"  # scoring, generation, attacks
    gradient_checkpointing: bool = False
    memory_fraction: float = 0.8
    train_precision: Precision = "fp32"  # forward passes of every training loop

    @property
    def autocast_dtype(self) -> torch.dtype | None:
        return torch.bfloat16 if self.precision == "bf16" else None

    @property
    def train_autocast_dtype(self) -> torch.dtype | None:
        return torch.bfloat16 if self.train_precision == "bf16" else None


_current = ComputePolicy()


def current() -> ComputePolicy:
    """The policy model calls follow now (CPU, fp32 unless a run set another)."""
    return _current


@contextlib.contextmanager
def use_policy(policy: ComputePolicy) -> Iterator[ComputePolicy]:
    """Make ``policy`` current for the duration of the block (restored after, also on error)."""
    global _current
    before, _current = _current, policy
    try:
        yield policy
    finally:
        _current = before


def cuda_available() -> bool:
    return torch.cuda.is_available()


def _mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def resolve_device(spec: str, option: str = "--device") -> torch.device:
    """``auto|cpu|cuda|cuda:N|mps`` → a device that exists here, or a one-line :class:`UserError`.

    ``auto`` is the first CUDA device when one is visible, else the CPU
    (never MPS: its kernels differ enough from the CPU's that a silent switch
    would change figures; ask for it by name).
    """
    text = str(spec).strip().lower()
    m = _DEVICE.match(text)
    if not m or (m.group(2) is not None and m.group(1) != "cuda"):
        raise UserError(f"{option} {spec}: unknown device; use auto, cpu, cuda, cuda:N (e.g. cuda:0) or mps")
    kind, index = m.group(1), m.group(2)
    if kind == "auto":
        return torch.device("cuda", 0) if cuda_available() else torch.device("cpu")
    if kind == "cpu":
        return torch.device("cpu")
    if kind == "mps":
        if not _mps_available():
            raise UserError(f"{option} {spec}: no Apple MPS device here (PyTorch {torch.__version__}); use --device cpu")
        return torch.device("mps")
    if not cuda_available():
        why = "this PyTorch build has no CUDA" if torch.version.cuda is None else "no CUDA GPU is visible"
        raise UserError(f"{option} {spec}: {why} (PyTorch {torch.__version__}); use --device cpu or --device auto")
    n = torch.cuda.device_count()
    i = int(index) if index is not None else 0
    if i >= n:
        raise UserError(f"{option} {spec}: only {n} CUDA device(s) here (cuda:0 … cuda:{n - 1}); pick one of those")
    return torch.device("cuda", i)


def resolve_precision(device: torch.device, requested: str, option: str = "compute.precision") -> Precision:
    """``auto`` → bf16 on a CUDA device with bf16 support, else fp32; ``native`` → bf16 wherever the device
    multiplies bf16 in hardware (:func:`native_bf16`: a CPU with AVX-512 BF16 or AMX too), else fp32; ``bf16`` is
    refused where it cannot run."""
    if requested == "fp32":
        return "fp32"
    if requested not in ("auto", "native", "bf16"):
        raise UserError(f"{option} {requested}: unknown precision; use auto, native, fp32 or bf16")
    if requested == "native":
        return "bf16" if native_bf16(device) else "fp32"
    cuda_bf16 = device.type == "cuda" and torch.cuda.is_bf16_supported()
    if requested == "auto":
        return "bf16" if cuda_bf16 else "fp32"
    if device.type == "cuda" and not cuda_bf16:
        raise UserError(f"{option} bf16: {torch.cuda.get_device_name(device)} has no bf16 support; use fp32 or auto")
    return "bf16"  # CPU and MPS autocast support bf16 (slower than fp32 on most CPUs; asked for by name)


def resolve_train_precision(device: torch.device, requested: str) -> Precision:
    """Training's precision: ``auto`` and ``native`` → bf16 where ``device`` multiplies bf16 in hardware
    (:func:`native_bf16`), else fp32; ``fp32`` / ``bf16`` as asked (``requested`` was checked by
    :func:`resolve_precision`)."""
    if requested in ("auto", "native"):
        return "bf16" if native_bf16(device) else "fp32"
    return "bf16" if requested == "bf16" else "fp32"


def native_bf16(device: torch.device) -> bool:
    """Whether ``device`` multiplies bf16 matrices in hardware: a CUDA device with bf16, or a CPU with AVX-512 BF16
    / AMX (oneDNN's check). Elsewhere (AVX2 CPUs) bf16 matmuls are emulated and slower than fp32."""
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported())
    if device.type == "cpu":
        try:
            return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
        except (AttributeError, RuntimeError):
            return False
    return False


def make_policy(device: str = "auto", precision: str = "auto", gradient_checkpointing: bool = False,
                memory_fraction: float = 0.8) -> ComputePolicy:
    """Resolve user settings into a policy; a device or precision that cannot run here is a :class:`UserError`."""
    if not 0.05 <= memory_fraction <= 1.0:
        raise UserError(f"compute.memory_fraction {memory_fraction}: must be in [0.05, 1]; try 0.8")
    dev = resolve_device(device)
    return ComputePolicy(device=dev, precision=resolve_precision(dev, precision),
                         gradient_checkpointing=bool(gradient_checkpointing), memory_fraction=float(memory_fraction),
                         train_precision=resolve_train_precision(dev, precision))


def model_device(model: torch.nn.Module) -> torch.device:
    """The device of ``model``'s weights (where its inputs must go)."""
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def place(model: torch.nn.Module) -> torch.nn.Module:
    """Move ``model`` to the current device (a no-op on the CPU, where models are loaded)."""
    dev = current().device
    if model_device(model) != dev:
        model.to(dev)
    return model


def autocast(device: torch.device | None = None, training: bool = False,
             model: torch.nn.Module | None = None) -> contextlib.AbstractContextManager:
    """bf16 autocast on ``device`` when the policy asks for it (``training``: a training loop's forward, which
    follows ``train_precision``), else nothing (fp32). Nothing either for a ``model`` whose weights are bf16
    already (:func:`evaluation_model`'s copy): autocast would only add casts around its ops (SmolLM2's sampling,
    one thread: 682 new tokens/s without, 131 with)."""
    dtype = current().train_autocast_dtype if training else current().autocast_dtype
    if dtype is None or (model is not None and next(model.parameters(), None) is not None
                         and next(model.parameters()).dtype == dtype):
        return contextlib.nullcontext()
    dev = device if device is not None else current().device
    return torch.autocast(device_type=dev.type, dtype=dtype)


#: Per model, the bf16 copy :func:`evaluation_model` made of it and the parameters' state it was made from.
_EVAL_COPIES: weakref.WeakKeyDictionary[torch.nn.Module, tuple[tuple[tuple[int, int], ...], torch.nn.Module]] = (
    weakref.WeakKeyDictionary())


def evaluates_on_bf16_copy(device: torch.device) -> bool:
    """Whether bf16 evaluation on ``device`` runs on a bf16 copy of the weights (:func:`evaluation_model`; the
    CPU) rather than under autocast (CUDA). The evaluation keys name which (``pipeline.audit.evaluated_key``)."""
    return device.type == "cpu"


def evaluation_model(model: torch.nn.Module) -> torch.nn.Module:
    """The module an evaluation pass (scoring, generation) runs: ``model`` itself, or — when the policy evaluates in
    bf16 and ``model`` is an fp32 model on the CPU — a bf16 copy of it, made once and remade when a weight changes.

    Under autocast the weights stay fp32 and every matrix product first casts its weight to bf16: on a CPU that
    cast costs more than the product itself when few tokens share it (a decoding step). SmolLM2-135M, one thread,
    autocast → bf16 weights: greedy generation 139 → 246 new tokens/s, sampled 458 → 682, scoring 689 → 963
    tokens/s; the NLLs of 120 member records moved by ≤ 0.039 from fp32 (autocast: ≤ 0.030). Callers pass the
    module to :func:`autocast`, which leaves a bf16 one alone (log-softmaxes are taken of fp32 logits). On CUDA the cast is a
    fused kernel and device memory the scarcer resource: there the model runs as it is. Quantised or already
    reduced-precision models run as they are too. Passes that need fp32 (exposure ranks, PII windows) set an fp32
    policy and so get ``model``."""
    if current().autocast_dtype != torch.bfloat16 or not evaluates_on_bf16_copy(model_device(model)):
        return model
    params = list(model.parameters())
    if not params or any(p.dtype != torch.float32 for p in params):
        return model
    try:
        # A weight changed in place bumps its version; a replaced one has another address.
        stamp = tuple((p.data_ptr(), p._version) for p in params)
    except RuntimeError:  # inference tensors carry no version: no way to tell a change, so no copy
        return model
    hit = _EVAL_COPIES.get(model)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    with torch.inference_mode(False), torch.no_grad():
        low = copy.deepcopy(model).to(torch.bfloat16).eval()
    # Every weight of the copy "requires grad" (its callers run without autograd): for a bf16 weight that does
    # not, torch's matmul sends generation's first LM-head product ((batch, 1, d) of a sliced hidden state) through
    # a batched product over a copy of the head per row — SmolLM2 sampling ran 5x slower (665 → 132 new tokens/s)
    # on a copy whose weights were frozen, as a merged LoRA model's are.
    for p in low.parameters():
        p.requires_grad_(True)
    _EVAL_COPIES[model] = (stamp, low)
    return low


@contextlib.contextmanager
def training_kernels(model: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """Train ``model`` with the attention kernel that is fastest for training here, restored after.

    On a CPU: transformers' ``eager`` attention (matrix products and a softmax) in place of the fused SDPA
    kernel. Measured on the embedded model's training step (``bench/bench_dp_insitu.py``): eager is 1.08x
    SDPA's tokens per second in fp32 and 1.8x in bf16, where SDPA's CPU backward is slow. The same
    attention, computed in another order: equal to float tolerance. Elsewhere (CUDA) nothing changes.
    """
    config = getattr(model, "config", None)
    switch = getattr(model, "set_attn_implementation", None)
    before = getattr(config, "_attn_implementation", None)
    change = model_device(model).type == "cpu" and before == "sdpa" and switch is not None
    if change:
        switch("eager")
    try:
        yield model
    finally:
        if change:
            switch(before)


def free_bytes(device: torch.device) -> int | None:
    """Free memory on a CUDA device; None where it is not measured (CPU, MPS: the configured sizes apply)."""
    if device.type != "cuda":
        return None
    free, _total = torch.cuda.mem_get_info(device)
    return int(free)


def token_budget(device: torch.device, bytes_per_token: float, default: int, floor: int = 256) -> int:
    """Tokens one micro-batch may hold: ``default`` off CUDA; on CUDA free memory × fraction ÷ cost per token."""
    free = free_bytes(device)
    if free is None:
        return default
    return max(floor, int(free * current().memory_fraction / max(1.0, bytes_per_token)))


def _shape(model: torch.nn.Module) -> tuple[int, int, int, int]:
    """(layers, width, heads, vocab) of a transformers causal LM, from its config."""
    cfg = getattr(model, "config", None)
    get = (lambda *names, d: next((int(getattr(cfg, n)) for n in names if getattr(cfg, n, None)), d))
    layers = get("n_layer", "num_hidden_layers", d=12)
    width = get("n_embd", "hidden_size", d=768)
    heads = get("n_head", "num_attention_heads", d=12)
    vocab = get("vocab_size", d=50257)
    return layers, width, heads, vocab


def activation_bytes_per_token(model: torch.nn.Module, seq_len: int, training: bool) -> float:
    """Rough device bytes one token costs in a forward (and backward) pass.

    Training keeps about ``34·d + 5·a·T`` 16-bit values per token per layer
    (Korthikanti et al. 2022, "Reducing activation recomputation in large
    transformer models", §4.1; ×2 in fp32), plus the (vocab)-wide logits, their
    log-softmax and gradient in fp32. Inference keeps one layer's worth at a
    time plus the logits. An estimate with headroom, not a measurement: the
    free-memory fraction is the user's knob when it is off.
    """
    layers, width, heads, vocab = _shape(model)
    elem = 2 if current().precision == "bf16" else 4
    per_layer = (34 * width + 5 * heads * seq_len) * elem / 2
    logits = 3 * vocab * 4
    if training:
        if current().gradient_checkpointing:
            return layers * width * elem + per_layer + logits  # one block's activations recomputed at a time
        return layers * per_layer + logits
    return 4 * per_layer + logits


class DeviceOutOfMemory(UserError):
    """The device ran out of memory; the message names the setting to lower."""


def _is_oom(exc: BaseException) -> bool:
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    # MPS reports exhaustion as a plain RuntimeError, the CPU allocator as "can't allocate memory".
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)


@contextlib.contextmanager
def oom_as_error(what: str, setting: str) -> Iterator[None]:
    """Turn a device out-of-memory error inside the block into one line naming ``setting`` to lower."""
    try:
        yield
    except (torch.OutOfMemoryError, RuntimeError) as exc:
        if not _is_oom(exc):
            raise
        dev = current().device
        if dev.type == "cuda":
            torch.cuda.empty_cache()
        raise DeviceOutOfMemory(
            f"out of memory on {dev} while {what}; lower {setting}, or run on a device with more free memory"
        ) from None
