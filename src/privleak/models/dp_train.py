"""DP-SGD fine-tuning with Opacus (Abadi et al. 2016), mirroring ``train.py``.

Differences from the plain loop, each one required by DP-SGD:

* batches are drawn by **Poisson sampling** (each record independently with
  probability q), so batch size varies and can be zero;
* each record's gradient is clipped to norm C and Gaussian noise
  N(0, σ²C²) is added to the sum before dividing by the expected batch size;
* σ is calibrated for the target (ε, δ) and the number of steps the run will
  really take, and the accountant reports the ε spent.

Why not ``make_private_with_epsilon``: Opacus calibrates σ there for
``int(epochs / q)`` steps while its Poisson loader runs ``int(1 / q)`` batches
per epoch; floating-point rounding makes the two differ by a step for many
dataset sizes (75 batches × 3 epochs: σ for 224 steps, 225 taken), so the ε
spent could exceed the target. We calibrate σ with the same accountant
Opacus reports (PRV by default) for ``steps_for(sample_rate=q, epochs=E)`` — exactly the
steps taken — and pass it to ``make_private``.

Devices (``device``): batches go to the model's device and forward passes
run under the compute policy's autocast (bf16 on a capable GPU); per-sample
norms, clipping factors, clipped sums and noise stay fp32 (``fp32_samplers``,
``book_keeping``). On CUDA, micro-batches are sized from free memory
(:func:`dp_token_budget`); an out-of-memory step is one line naming the
setting to lower.

GPT-2 specifics: batch-shaped ``position_ids`` (see ``batching``), the tied
input/output embedding (Opacus sums the two per-sample contributions on the
shared parameter), ``Conv1D`` (``conv1d_grad``), and a per-sequence mean loss.

Interchangeable ways to compute the same DP-SGD step (``DPSettings``); the
reference and the fast paths agree to float tolerance (``tests/test_dp_fast.py``):

* ``grad_sample_mode="hooks"`` — the reference: Opacus materialises every
  per-sample gradient, clips, sums.
* ``grad_sample_mode="ghost"`` — ghost clipping (Li et al. 2022): per-sample
  gradient *norms* only (``ghost_norms``), then a second backward pass of the
  loss re-weighted by the clipping factors gives the clipped sum. Same flat
  clipping, same noise, same Poisson sampling, same accountant; only the
  arithmetic differs. Ghost clipping cannot clip a parameter used twice in
  one forward pass, so with ``train_embeddings=True`` the output embedding
  is untied from the input one (frozen embeddings are tied and frozen, which
  is fine).
* ``grad_sample_mode="bk"`` — book-keeping (Bu et al. 2023, ``book_keeping``):
  the same norms from one backward pass that computes no weight gradients,
  then the clipped sum as one matrix product per layer. Frozen embeddings
  (or LoRA) only.
* ``lora_rank=r`` — DP-LoRA (Yu et al. 2022, see ``lora``): only rank-r
  adapters train (with any mode); they are merged into the weights before
  the model is returned, so it saves and loads as a plain model.
"""

from __future__ import annotations

import dataclasses
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

import torch
from opacus import PrivacyEngine
from opacus.data_loader import DPDataLoader
from opacus.optimizers import DPOptimizerFastGradientClipping
from torch.utils.data import DataLoader, TensorDataset
from transformers import PreTrainedModel

from ..accountants import steps_for
from ..core.errors import UserError
from ..core.progress import progress_bar
from . import (
    conv1d_grad,  # noqa: F401  (registers the Conv1D grad sampler)
    ghost_norms,  # noqa: F401  (registers the Conv1D norm sampler)
)
from .batching import (  # noqa: F401  (dp_train.micro_batches: the DP step's name for it)
    Encoded, head_trainable, micro_batches, pad_batch, per_sequence_nll, position_ids_for, sequence_nll)
from .book_keeping import BookKeeping, unsupported_layers
from .dp_sigma import calibrated_sigma, epsilon_of, public_sample_rate, spent_epsilon
from .device import activation_bytes_per_token, autocast, current, model_device, oom_as_error, token_budget, training_kernels
from .fp32_samplers import ensure_fp32_samplers
from .gradient_canaries import GradientCanaries
from .frozen_prefix import frozen_prefix
from .lora import AUTO, add_lora, bf16_base, check_qlora, merge_lora, quantized_base, transfer_adapters
from .public_grad import PublicTerm
from .train import TrainLog, lr_at, make_optimizer


@dataclass(frozen=True)
class DPSettings:
    target_epsilon: float
    delta: float
    max_grad_norm: float
    epochs: int
    expected_batch_size: int
    lr: float
    # The data size the recipe was made for, a public quantity: q = expected_batch_size / data_size, and the
    # noisy sum is divided by expected_batch_size. None: q = 1 / ⌈N / B⌉ from the records actually given, as
    # Opacus derives it from a plain loader — which makes q, σ and the steps depend on N (on an audit's
    # randomly included one-run canaries, say).
    data_size: int | None = None
    weight_decay: float = 0.0
    warmup_fraction: float = 0.05
    seed: int = 0
    accountant: str = "prv"
    micro_batch_tokens: int = 4096
    train_embeddings: bool = False
    # With frozen embeddings: untie a tied output layer and train it (a Linear, which every clipping mode
    # handles); an untied output layer trains either way, as it always did.
    train_output: bool = False
    grad_sample_mode: Literal["hooks", "ghost", "bk"] = "hooks"
    lora_rank: int | None = None  # None: full fine-tuning; r: DP-LoRA with rank-r adapters
    lora_alpha: float = 16.0  # LoRA scale α (update = α/r · AB)
    lora_targets: tuple[str, ...] | str = AUTO  # module names, or "auto": the architecture's projections (``lora``)
    # Adapters in the top N decoder layers only (None: every layer); the frozen layers below then run once per
    # record (``frozen_prefix``).
    lora_layers: int | None = None
    qlora: bool = False  # LoRA on a 4-bit NF4 base (bitsandbytes, CUDA only); adapters merged into the full base
    lora_base_bf16: bool = False  # LoRA on a bf16 copy of the frozen base (lora.bf16_base); merged into the fp32 one
    # A deliberately broken DP step, to prove the audit catches one (never for real use): "no_noise"
    # trains with σ = 0, "no_clip" clips at a bound no gradient reaches (noise std kept at σC); the log
    # still reports the calibrated σ and the target's ε, as a silently buggy DP library would.
    debug_break: Literal["no_noise", "no_clip"] | None = None
    # With ``train_dp(..., public=...)``: each step adds public_weight · ∇(mean NLL of public_batch_size
    # public records) outside the noised private sum (``public_grad``: no privacy cost, ε unchanged).
    public_weight: float = 0.0
    public_batch_size: int = 64
    # White-box gradient canaries (``gradient_canaries``) observed through the step's own clipping and noise; 0: none.
    gradient_canaries: int = 0


#: The clipping bound "no_clip" uses instead of C: far above any per-sample gradient norm here.
_NO_CLIP = 1e6


@dataclass
class DPTrainLog(TrainLog):
    sigma: float = 0.0
    sample_rate: float = 0.0
    epsilon: float = 0.0
    accountant: str = ""
    empty_batches: int = 0
    # The white-box canaries' statistics (gradient_canaries.GradientCanaryStats as a dict); None: not run.
    gradient_canaries: dict | None = None


def _step_on_empty_batch(optimizer) -> None:
    """An empty Poisson batch is still a DP-SGD step: noise only.

    Skipping it would change the sampling distribution the accountant
    assumes; so every parameter gets an empty per-sample gradient and the
    optimiser adds noise to the zero sum.
    """
    ghost = isinstance(optimizer, DPOptimizerFastGradientClipping)
    for p in optimizer.params:
        if ghost:  # ghost clipping hands the optimiser the clipped sum in p.grad
            p.grad = torch.zeros_like(p)  # (the gradient canaries' sum, if any, enters at accumulation)
        else:
            p.grad_sample = torch.zeros((0, *p.shape), dtype=p.dtype, device=p.device)
    optimizer.step()


class PerSequenceNLL:
    """The DP loss as an Opacus criterion: one mean NLL per sequence, shape (batch,).

    Ghost clipping needs per-sample losses to re-weight by the clipping
    factors; Opacus's ``DPLossFastGradientClipping`` sets ``reduction`` to
    "none" while it calls us and reduces by itself, so ``reduction`` only
    names the reduction (mean over the batch) the first backward pass uses.
    """

    reduction = "mean"

    def __call__(self, logits: torch.Tensor, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return per_sequence_nll(logits, ids, mask)


def untie_output_embedding(model: PreTrainedModel) -> bool:
    """Give ``lm_head`` its own copy of the token embedding; True if it was tied.

    Ghost clipping computes a norm per parameter per layer and cannot add the
    two uses of one shared matrix; two matrices (same initial values) can be
    clipped exactly. The config records the untying so the saved model loads
    as trained.
    """
    head, wte = model.get_output_embeddings(), model.get_input_embeddings()
    if head is None or head.weight is not wte.weight:
        return False
    head.weight = torch.nn.Parameter(wte.weight.detach().clone(), requires_grad=wte.weight.requires_grad)
    model.config.tie_word_embeddings = False
    if hasattr(model.config, "get_text_config"):
        model.config.get_text_config().tie_word_embeddings = False
    return True


def freeze_embeddings(model: PreTrainedModel) -> int:
    """Freeze every embedding table (token and position); returns how many weights.

    DP-SGD's noise has norm ≈ σC√d over d trainable weights, so the large,
    already-pre-trained embedding tables cost much noise for little gain; with
    GPT-2's tied output layer this also freezes ``lm_head``. The standard
    recipe for DP fine-tuning (e.g. Yu et al. 2022, Li et al. 2022).
    """
    frozen = 0
    for module in model.modules():
        if isinstance(module, torch.nn.Embedding) and module.weight.requires_grad:
            module.weight.requires_grad_(False)
            frozen += module.weight.numel()
    return frozen


def _logical_step(private, optimizer, ids: torch.Tensor, mask: torch.Tensor, max_tokens: int, criterion=None) -> float:
    """One DP-SGD step over a Poisson batch, processed in micro-batches.

    Each micro-batch's per-sample gradients are clipped and added to the
    running sum (Opacus's skip-step mechanism, as in its
    ``BatchMemoryManager``); only the last one adds noise, divides by the
    expected batch size, updates the weights and counts as a step for the
    accountant. Per-sample gradients do not depend on which rows share a
    forward pass, so this is the same step as one big batch.

    With ghost clipping (``criterion`` is Opacus's ``DPLossFastGradientClipping``
    around :class:`PerSequenceNLL`) each micro-batch's two backward passes leave
    its clipped-gradient sum in ``p.grad``, and the same skip-step mechanism
    adds it to the running sum (``DPOptimizerFastGradientClipping.accumulate``);
    noise and scaling again happen once, on the last micro-batch. Book-keeping
    (``criterion`` is a :class:`BookKeeping`) writes the same clipped sum to
    ``p.grad`` after one backward pass and takes the same path from there.
    """
    lengths = mask.sum(1).tolist()
    parts = micro_batches(lengths, max_tokens)
    total_loss = 0.0
    dev = model_device(private)
    # Asked before capture(), which freezes every trainable weight for the forward: a trainable head must
    # see one row per sequence (book-keeping clips per row).
    flat_head = not head_trainable(private._module)
    for k, rows in enumerate(parts):
        width = max(lengths[r] for r in rows)
        ids_k, mask_k = ids[rows, :width].to(dev), mask[rows, :width].to(dev)
        if isinstance(criterion, BookKeeping):
            with criterion.capture():
                with autocast(dev, training=True):  # the forward only: norms, clipping and noise are fp32 (see ``device``)
                    # Opacus's own hooks are off under book-keeping: its wrapper's forward is the module's.
                    per_seq = sequence_nll(private._module, ids_k, mask_k, flat_head=flat_head)
                per_seq.sum().backward()  # a sum: each row's output gradients are its own per-sample ones
            criterion.write_clipped_sum()  # p.grad = Σ_i c_i g_i, as after ghost clipping's second pass
            total_loss += float(per_seq.detach().sum())
            optimizer.signal_skip_step(do_skip=k < len(parts) - 1)
            optimizer.step()
            if k < len(parts) - 1:
                optimizer.zero_grad(set_to_none=True)
            continue
        with autocast(dev, training=True):
            if criterion is None:
                # Opacus's hooks sit on the layers, so the wrapper's forward (a pass-through) may be skipped: the
                # head then runs on the real predicted tokens only, unless it is trainable (hooked per sequence).
                per_seq = sequence_nll(private._module, ids_k, mask_k, flat_head=flat_head)
            else:
                logits = private(input_ids=ids_k, attention_mask=mask_k, position_ids=position_ids_for(mask_k)).logits
        with warnings.catch_warnings():
            # Benign: the input ids need no gradient, only the parameters do.
            warnings.filterwarnings("ignore", message="Full backward hook is firing")
            if criterion is None:
                per_seq.mean().backward()  # "mean" reduction: Opacus rescales to per-sample gradients
            else:
                loss = criterion(logits, ids_k, mask_k)
                per_seq = loss.loss_per_sample
                loss.backward()  # norms pass, then the re-weighted pass: p.grad = Σ_i c_i g_i
        total_loss += float(per_seq.detach().sum())
        optimizer.signal_skip_step(do_skip=k < len(parts) - 1)
        optimizer.step()
        if k < len(parts) - 1:
            optimizer.zero_grad(set_to_none=True)  # keeps the clipped running sum
    return total_loss / len(lengths)


def train_dp(model: PreTrainedModel, data: Encoded, settings: DPSettings, pad_id: int, max_length: int, desc: str = "dp-train",
             public: Encoded | None = None) -> tuple[PreTrainedModel, DPTrainLog]:
    """Fine-tune ``model`` with DP-SGD; returns the trained (unwrapped) model and its privacy log.

    ``public``: public records whose gradient (weight ``settings.public_weight``) joins each step
    after the noise (:mod:`public_grad`); the private mechanism and its accounting are unchanged."""
    check_settings(settings)
    if public is None and settings.public_weight > 0:
        raise UserError(f"public_weight={settings.public_weight:g} needs public records; pass public= or set it to 0")
    torch.manual_seed(settings.seed)
    ids, mask = pad_batch([s[:max_length] for s in data.ids], pad_id)
    dataset = TensorDataset(ids, mask)
    loader = DataLoader(
        dataset,
        batch_size=settings.expected_batch_size,
        generator=torch.Generator().manual_seed(settings.seed),
    )
    if settings.data_size is not None:
        sample_rate = public_sample_rate(settings.expected_batch_size, settings.data_size)
    else:  # q exactly as Opacus's DPDataLoader derives it from the plain loader
        sample_rate = 1 / len(loader)
    planned_steps = steps_for(sample_rate=sample_rate, epochs=settings.epochs)
    sigma = calibrated_sigma(settings.target_epsilon, settings.delta, sample_rate, planned_steps, settings.accountant)
    full_model = None
    if settings.qlora:
        check_qlora(model_device(model))
        # The 4-bit copy trains; the full-precision weights wait in host memory for the adapters.
        model, full_model = quantized_base(model), model.cpu()
    elif settings.lora_rank is not None and settings.lora_base_bf16:
        model, full_model = bf16_base(model), model
    model = prepare_trainable(model, settings)
    model.train()
    optimizer = make_optimizer(model, settings.lr, settings.weight_decay, fused=False)  # Opacus wraps it (make_optimizer)
    used_sigma, used = broken_step(settings, sigma)
    private, optimizer, criterion, loader, engine = make_private(
        model, optimizer, loader, used_sigma, used, sample_rate=sample_rate if settings.data_size is not None else None)
    if public is not None:
        attach_public_term(optimizer, PublicTerm(private._module, public, settings.public_weight, settings.public_batch_size,
                                                 settings.seed + 2, pad_id, max_length, quiet=lambda: _hooks_off(private)))
    canaries = _attach_canaries(private, optimizer, criterion, settings, sample_rate)
    log = DPTrainLog(sigma=float(sigma), sample_rate=float(sample_rate), accountant=settings.accountant)
    total = settings.epochs * len(loader)
    if total != planned_steps:
        raise RuntimeError(f"DP loader runs {total} steps but σ was calibrated for {planned_steps}")
    step = 0
    max_tokens = dp_token_budget(private._module, settings, max(1, int(mask.sum(1).float().mean())))  # unwrapped: its config
    lower = ("compute.memory_fraction (now {:g})".format(current().memory_fraction) if model_device(private).type == "cuda"
             else f"dp.micro_batch_tokens (now {settings.micro_batch_tokens})")
    with progress_bar(desc, total=total) as advance, oom_as_error(desc, lower), training_kernels(private._module), \
            frozen_prefix(private._module):
        for _ in range(settings.epochs):
            epoch_losses = []
            for batch_ids, batch_mask in loader:
                for group in optimizer.param_groups:
                    group["lr"] = lr_at(step, total, settings.lr, settings.warmup_fraction)
                optimizer.zero_grad(set_to_none=True)
                if batch_ids.shape[0] == 0:
                    _step_on_empty_batch(optimizer)
                    log.empty_batches += 1
                else:
                    epoch_losses.append(_logical_step(private, optimizer, batch_ids, batch_mask, max_tokens, criterion))
                step += 1
                advance(1, loss=epoch_losses[-1] if epoch_losses else 0.0)
            log.losses.append(sum(epoch_losses) / max(1, len(epoch_losses)))
    log.steps = step
    if settings.debug_break is None:
        log.epsilon = spent_epsilon(engine, settings, sample_rate)
    else:  # the claim a broken library would make: the ε of the σ it calibrated
        log.epsilon = epsilon_of(settings.accountant, sample_rate=sample_rate, noise_multiplier=sigma, steps=step,
                                 delta=settings.delta)
    if canaries is not None:
        log.gradient_canaries = canaries.stats().as_dict()
    optimizer.zero_grad(set_to_none=True)
    private._close()
    if isinstance(criterion, BookKeeping):
        criterion.remove()
    trained = private._module
    for p in trained.parameters():
        for attr in ("_norm_sample", "_forward_counter"):  # ghost clipping's scratch state
            if hasattr(p, attr):
                delattr(p, attr)
    if settings.lora_rank is not None and (settings.qlora or settings.lora_base_bf16):
        trained = transfer_adapters(trained, full_model.to(model_device(trained)), settings.lora_rank,
                                    settings.lora_alpha, settings.lora_targets, settings.lora_layers)
    elif settings.lora_rank is not None:
        trained = merge_lora(trained)
    trained.eval()
    return trained, log


def _attach_canaries(private, optimizer, criterion, settings: DPSettings,
                     sample_rate: float) -> GradientCanaries | None:
    """``settings.gradient_canaries`` white-box canaries joined to the step (:mod:`.gradient_canaries`), clipped at
    the bound the step clips its records at (book-keeping's own; Opacus's for ghost clipping and per-sample hooks)
    and judged against the claimed C; None when none are asked for."""
    if not settings.gradient_canaries:
        return None
    bound = criterion.max_grad_norm if isinstance(criterion, BookKeeping) else None
    canaries = GradientCanaries(settings.gradient_canaries, sample_rate, settings.max_grad_norm, settings.seed + 5,
                                device=model_device(private))
    canaries.attach(optimizer, bound)
    return canaries


def broken_step(settings: DPSettings, sigma: float) -> tuple[float, DPSettings]:
    """The (noise multiplier, settings) the DP step really runs with: σ and ``settings`` unless
    ``settings.debug_break`` breaks it on purpose — "no_noise": σ = 0; "no_clip": clipping at a bound no
    gradient reaches, the noise std kept at σC (so σ·C / bound)."""
    if settings.debug_break == "no_noise":
        return 0.0, settings
    if settings.debug_break == "no_clip":
        return sigma * settings.max_grad_norm / _NO_CLIP, dataclasses.replace(settings, max_grad_norm=_NO_CLIP)
    return sigma, settings


@contextmanager
def _hooks_off(private):
    """Opacus's per-sample hooks off for a forward/backward that is not part of the private sum."""
    before = getattr(private, "hooks_enabled", False)
    private.disable_hooks()
    try:
        yield
    finally:
        if before:
            private.enable_hooks()


def attach_public_term(optimizer, term: PublicTerm) -> None:
    """Run ``term`` after Opacus has noised and scaled the private sum (its step hook), before the update.

    Opacus calls the step hook (the accountant's) right after ``add_noise`` and
    ``scale_grad``; chaining ours behind it adds the public gradient to
    ``p.grad`` = the noised private mean, so the private mechanism is untouched.
    """
    previous = optimizer.step_hook

    def hook(opt) -> None:
        if previous is not None:
            previous(opt)
        term.apply(opt.params)

    optimizer.step_hook = hook


def dp_token_budget(model, settings: DPSettings, mean_len: int) -> int:
    """Padded tokens per DP micro-batch: ``settings.micro_batch_tokens`` off CUDA; on CUDA from free memory.

    Per token, a DP step holds the training activations, plus for ``hooks``
    every trainable weight's per-sample gradient (twice: the gradient and its
    clipped copy) spread over the tokens of its sequence, and for ``ghost`` /
    ``bk`` each trainable matrix's kept output gradient and its norm's work
    space (the T×T Gram matrices or the per-sample (in, out) gradient,
    whichever ``ghost_norms`` picks), 4 bytes each: DP arithmetic is fp32.
    """
    trainable = [p for p in model.parameters() if p.requires_grad]
    per_token = activation_bytes_per_token(model, mean_len, training=True)
    if settings.grad_sample_mode == "hooks":
        per_token += 2 * 4 * sum(p.numel() for p in trainable) / mean_len
    else:
        for p in trainable:
            if p.dim() == 2:
                fan_in, fan_out = p.shape
                per_token += 4 * (max(fan_in, fan_out) + min(2 * mean_len, fan_in * fan_out / mean_len))
            else:
                per_token += 4 * p.numel() / mean_len
    return token_budget(model_device(model), per_token, default=settings.micro_batch_tokens)


def check_settings(settings: DPSettings) -> None:
    """Reject option combinations that have no meaning, before any work starts."""
    if settings.grad_sample_mode not in ("hooks", "ghost", "bk"):
        raise UserError(f"grad_sample_mode={settings.grad_sample_mode!r} is unknown; use 'hooks', 'ghost' or 'bk'")
    g = settings.gradient_canaries
    if isinstance(g, bool) or not isinstance(g, int) or g < 0 or 0 < g < 3:
        raise UserError(f"gradient_canaries={g!r} must be 0 (no white-box check) or an integer of at least 3")
    if settings.grad_sample_mode == "bk" and settings.train_embeddings:
        raise UserError("grad_sample_mode='bk' clips Conv1D/Linear/LayerNorm weights only; with train_embeddings=True use 'ghost' or 'hooks'")
    if settings.lora_rank is not None:
        if isinstance(settings.lora_rank, bool) or not isinstance(settings.lora_rank, int) or settings.lora_rank < 1:
            raise UserError(f"lora_rank={settings.lora_rank!r} must be a positive integer (e.g. 8) or unset")
        if settings.train_embeddings:
            raise UserError("train_embeddings=True with lora_rank set: LoRA trains only its adapters; drop one of the two")
        if settings.lora_layers is not None and (isinstance(settings.lora_layers, bool)
                                                 or not isinstance(settings.lora_layers, int)
                                                 or settings.lora_layers < 1):
            raise UserError(f"lora_layers={settings.lora_layers!r} must be a positive integer (the top N layers) "
                            "or unset (every layer)")
        if not settings.lora_alpha > 0:
            raise UserError(f"lora_alpha={settings.lora_alpha!r} must be positive (e.g. 2 × lora_rank)")
    elif settings.qlora:
        raise UserError("dp.qlora applies to the +lora arms (a 4-bit base cannot be fully fine-tuned); use an arm like dp-8+lora")


def prepare_trainable(model: PreTrainedModel, settings: DPSettings) -> PreTrainedModel:
    """Choose what DP-SGD trains: LoRA adapters, or the weights (embeddings frozen by default).

    ``train_output`` with frozen embeddings trains GPT-2's tied output layer as
    its own matrix (d·V more weights under noise): the private domain's word
    frequencies live there, and the transformer blocks alone cannot move
    them, at the same step cost with book-keeping clipping; off by default
    (``DPConfig.train_output`` says why; measured: docs/results/2026-11-25-figures-from-code.md)."""
    check_settings(settings)
    if settings.lora_rank is not None:
        return add_lora(model, settings.lora_rank, settings.lora_alpha, settings.lora_targets, settings.lora_layers)
    if not settings.train_embeddings:
        if settings.train_output:
            untie_output_embedding(model)  # before freezing: the head's own copy keeps requires_grad
        freeze_embeddings(model)
    elif settings.grad_sample_mode == "ghost":
        untie_output_embedding(model)
    return model


def make_private(model, optimizer, loader, sigma: float, settings: DPSettings, sample_rate: float | None = None):
    """Opacus's ``make_private`` for the chosen mode; returns (module, optimizer, criterion or None, loader, engine).

    ``sample_rate``: Poisson-sample each record with this q (a public quantity, :func:`public_sample_rate`) and
    divide the noisy sum by ``settings.expected_batch_size``; None: q = 1 / len(loader), as Opacus derives it.

    A model with trainable layers book-keeping cannot clip (e.g. a user's
    model with RMSNorm) runs the reference ``hooks`` path instead, with a
    warning: the same DP-SGD step and guarantee, only slower.
    """
    if settings.grad_sample_mode == "bk" and (unsupported := unsupported_layers(model)):
        warnings.warn(
            f"grad_sample_mode='bk' cannot clip {', '.join(unsupported[:3])}{' …' if len(unsupported) > 3 else ''}; "
            "using 'hooks' (same DP-SGD, slower)",
            stacklevel=2,
        )
        settings = dataclasses.replace(settings, grad_sample_mode="hooks")
    ensure_fp32_samplers()
    if sample_rate is not None:
        loader = DPDataLoader(loader.dataset, sample_rate=sample_rate,
                              generator=torch.Generator().manual_seed(settings.seed))
    kwargs = dict(
        module=model,
        optimizer=optimizer,
        data_loader=loader,
        noise_multiplier=sigma,
        max_grad_norm=settings.max_grad_norm,
        poisson_sampling=sample_rate is None,  # else the loader above samples already
        # The noise is drawn on the weights' device (a CPU generator cannot feed CUDA tensors).
        noise_generator=torch.Generator(device=next(model.parameters()).device).manual_seed(settings.seed + 1),
        # Book-keeping uses Opacus's ghost-clipping optimiser (noise on the clipped sum in p.grad),
        # loader and accountant; only the clipped sum is computed by us.
        grad_sample_mode="ghost" if settings.grad_sample_mode == "bk" else settings.grad_sample_mode,
    )
    with warnings.catch_warnings():
        # Opacus warns that secure_mode is off: reproducible runs are the point here.
        warnings.simplefilter("ignore")
        engine = PrivacyEngine(accountant=settings.accountant, secure_mode=False)
        if settings.grad_sample_mode == "bk":
            private, optimizer, _, loader = engine.make_private(criterion=PerSequenceNLL(), **kwargs)
            private.remove_hooks()  # Opacus's norm hooks: book-keeping installs its own
            criterion = BookKeeping(private._module, settings.max_grad_norm)
        elif settings.grad_sample_mode == "ghost":
            private, optimizer, criterion, loader = engine.make_private(criterion=PerSequenceNLL(), **kwargs)
        else:
            private, optimizer, loader = engine.make_private(**kwargs)
            criterion = None
    if sample_rate is not None:
        # Opacus sets the divisor to int(N·q) from the records given; the recipe's B is the public one.
        optimizer.expected_batch_size = settings.expected_batch_size
        if hasattr(private, "forbid_grad_accumulation"):
            private.forbid_grad_accumulation()  # what make_private does for its own Poisson loader
    return private, optimizer, criterion, loader, engine
