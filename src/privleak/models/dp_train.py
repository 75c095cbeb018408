"""DP-SGD fine-tuning with Opacus (Abadi et al. 2016), mirroring ``train.py``.

Differences from the plain loop, each one required by DP-SGD:

* batches are drawn by **Poisson sampling** (each record independently with
  probability q), so batch size varies and can be zero;
* each record's gradient is clipped to norm C and Gaussian noise
  N(0, σ²C²) is added to the sum before dividing by the expected batch size;
* σ is chosen by Opacus ``make_private_with_epsilon`` for the target (ε, δ)
  and the planned number of steps, and the accountant reports the ε spent.

GPT-2 specifics: batch-shaped ``position_ids`` (see ``batching``), the tied
input/output embedding (Opacus sums the two per-sample contributions on the
shared parameter), ``Conv1D`` (``conv1d_grad``), and a per-sequence mean loss.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from opacus import PrivacyEngine
from torch.utils.data import DataLoader, TensorDataset
from transformers import PreTrainedModel

from ..progress import progress_bar
from . import conv1d_grad  # noqa: F401  (registers the Conv1D grad sampler)
from .batching import Encoded, pad_batch, per_sequence_nll, position_ids_for
from .train import TrainLog, lr_at, make_optimizer


@dataclass(frozen=True)
class DPSettings:
    target_epsilon: float
    delta: float
    max_grad_norm: float
    epochs: int
    expected_batch_size: int
    lr: float
    weight_decay: float = 0.0
    warmup_fraction: float = 0.05
    seed: int = 0
    accountant: str = "prv"


@dataclass
class DPTrainLog(TrainLog):
    sigma: float = 0.0
    sample_rate: float = 0.0
    epsilon: float = 0.0
    accountant: str = ""
    empty_batches: int = 0


def _step_on_empty_batch(optimizer) -> None:
    """An empty Poisson batch is still a DP-SGD step: noise only.

    Skipping it would change the sampling distribution the accountant
    assumes; so every parameter gets an empty per-sample gradient and the
    optimiser adds noise to the zero sum.
    """
    for p in optimizer.params:
        p.grad_sample = torch.zeros((0, *p.shape), dtype=p.dtype, device=p.device)
    optimizer.step()


def train_dp(model: PreTrainedModel, data: Encoded, settings: DPSettings, pad_id: int, max_length: int, desc: str = "dp-train") -> tuple[PreTrainedModel, DPTrainLog]:
    """Fine-tune ``model`` with DP-SGD; returns the trained (unwrapped) model and its privacy log."""
    torch.manual_seed(settings.seed)
    ids, mask = pad_batch([s[:max_length] for s in data.ids], pad_id)
    dataset = TensorDataset(ids, mask)
    loader = DataLoader(
        dataset,
        batch_size=settings.expected_batch_size,
        generator=torch.Generator().manual_seed(settings.seed),
    )
    model.train()
    optimizer = make_optimizer(model, settings.lr, settings.weight_decay)
    engine = PrivacyEngine(accountant=settings.accountant, secure_mode=False)
    with warnings.catch_warnings():
        # Opacus warns that secure_mode is off: reproducible runs are the point here.
        warnings.simplefilter("ignore")
        private, optimizer, loader = engine.make_private_with_epsilon(
            module=model,
            optimizer=optimizer,
            data_loader=loader,
            target_epsilon=settings.target_epsilon,
            target_delta=settings.delta,
            epochs=settings.epochs,
            max_grad_norm=settings.max_grad_norm,
            poisson_sampling=True,
            noise_generator=torch.Generator().manual_seed(settings.seed + 1),
            grad_sample_mode="hooks",
        )
    log = DPTrainLog(sigma=float(optimizer.noise_multiplier), sample_rate=float(loader.sample_rate), accountant=settings.accountant)
    total = settings.epochs * len(loader)
    step = 0
    with progress_bar(desc, total=total) as advance:
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
                    # Trim the padding every row shares: cheaper, same gradients.
                    width = int(batch_mask.sum(1).max())
                    batch_ids, batch_mask = batch_ids[:, :width], batch_mask[:, :width]
                    logits = private(
                        input_ids=batch_ids, attention_mask=batch_mask, position_ids=position_ids_for(batch_mask)
                    ).logits
                    loss = per_sequence_nll(logits, batch_ids, batch_mask).mean()
                    with warnings.catch_warnings():
                        # Benign: the input ids need no gradient, only the parameters do.
                        warnings.filterwarnings("ignore", message="Full backward hook is firing")
                        loss.backward()
                    optimizer.step()
                    epoch_losses.append(loss.item())
                step += 1
                advance(1, loss=epoch_losses[-1] if epoch_losses else 0.0)
            log.losses.append(sum(epoch_losses) / max(1, len(epoch_losses)))
    log.steps = step
    log.epsilon = float(engine.get_epsilon(settings.delta))
    optimizer.zero_grad(set_to_none=True)
    private._close()
    trained = private._module
    trained.eval()
    return trained, log
