r"""LoRA adapters for DP fine-tuning (Hu et al. 2021; Yu et al. 2022).

LoRA (Hu et al. 2021, "LoRA: Low-rank adaptation of large language models")
freezes every pre-trained weight ``W`` and learns a low-rank update::

    W' = W + (α / r) · A B        A: (in, r), B: (r, out), r ≪ min(in, out)

with ``B`` initialised to zero, so training starts from the pre-trained model.
Yu et al. 2022 ("Differentially private fine-tuning of language models")
showed why this suits DP-SGD: the noise norm grows like σC√d with the number
d of trainable weights, and LoRA cuts d by orders of magnitude while keeping
utility. Privacy is unchanged in kind: DP-SGD clips and noises the gradients
of the adapter weights, the only ones that depend on the private data, so the
accountant's (ε, δ) covers the merged model too (post-processing).

We use PEFT on GPT-2's ``Conv1D`` projections (``fan_in_fan_out=True`` because
``Conv1D`` stores W as (in, out)). PEFT implements A and B as ``nn.Linear``
layers, for which Opacus has per-sample gradient and norm samplers, so both
``hooks`` and ``ghost`` clipping work unchanged. Dropout on the adapters stays
off: DP-SGD's noise already regularises, and determinism keeps runs
reproducible. After training, :func:`merge_lora` folds ``(α/r)·AB`` into W and
returns a plain ``transformers`` model, so saving and loading are unchanged.
"""

from __future__ import annotations

import warnings

from transformers import PreTrainedModel

#: GPT-2's attention (``c_attn``, ``attn.c_proj``) and MLP (``c_fc``, ``mlp.c_proj``) projections.
GPT2_TARGETS: tuple[str, ...] = ("c_attn", "c_proj", "c_fc")


def add_lora(model: PreTrainedModel, rank: int, alpha: float, targets: tuple[str, ...] = GPT2_TARGETS):
    """Wrap ``model`` with trainable rank-``rank`` adapters on ``targets``; everything else frozen."""
    from peft import LoraConfig, get_peft_model

    if rank < 1:
        raise ValueError(f"lora_rank={rank} must be a positive integer")
    config = LoraConfig(
        r=rank,
        lora_alpha=alpha,
        target_modules=list(targets),
        lora_dropout=0.0,
        bias="none",
        fan_in_fan_out=True,  # GPT-2's Conv1D keeps W as (in, out)
        task_type="CAUSAL_LM",
    )
    with warnings.catch_warnings():
        # PEFT notes that Conv1D needs fan_in_fan_out=True — which we set.
        warnings.simplefilter("ignore")
        return get_peft_model(model, config)


def merge_lora(peft_model) -> PreTrainedModel:
    """Fold the adapters into the base weights; returns the plain base model."""
    merged = peft_model.merge_and_unload()
    for p in merged.parameters():
        p.requires_grad_(True)  # as a freshly loaded model: nothing stays marked frozen
    return merged
