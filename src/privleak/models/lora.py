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

We use PEFT. Target modules are found per architecture (:data:`LORA_TARGETS`,
by ``config.model_type``; any other model: every ``nn.Linear`` / ``Conv1D``
inside its decoder blocks), so GPT-2, GPT-NeoX / Pythia, Llama, Mistral and
Qwen2 get their attention and MLP projections adapted without the user
naming them. GPT-2's ``Conv1D`` stores W as (in, out), hence
``fan_in_fan_out=True`` there. PEFT implements A and B as ``nn.Linear``
layers, for which Opacus has per-sample gradient and norm samplers, so
``hooks``, ``ghost`` and ``bk`` clipping work unchanged. Dropout on the
adapters stays off: DP-SGD's noise already regularises, and determinism keeps
runs reproducible. After training, :func:`merge_lora` folds ``(α/r)·AB`` into
W and returns a plain ``transformers`` model, so saving and loading are
unchanged.

**QLoRA** (Dettmers et al. 2023, "QLoRA: efficient finetuning of quantized
LLMs"): the frozen base is held in 4-bit NF4 (``bitsandbytes``, CUDA only)
while the adapters train in full precision; the trained adapters are then
merged into the full-precision base (:func:`quantized_base`,
:func:`transfer_adapters`). The adapters are the only data-dependent weights
either way, so the DP guarantee carries over (post-processing).
"""

from __future__ import annotations

import importlib.util
import warnings

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers.pytorch_utils import Conv1D

from ..core.errors import UserError

#: GPT-2's attention (``c_attn``, ``attn.c_proj``) and MLP (``c_fc``, ``mlp.c_proj``) projections.
GPT2_TARGETS: tuple[str, ...] = ("c_attn", "c_proj", "c_fc")

_LLAMA_STYLE = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

#: Attention and MLP projections by ``config.model_type`` (PEFT matches a name against the end of a module path).
LORA_TARGETS: dict[str, tuple[str, ...]] = {
    "gpt2": GPT2_TARGETS,
    "gpt_neox": ("query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"),  # Pythia
    "llama": _LLAMA_STYLE,
    "mistral": _LLAMA_STYLE,
    "qwen2": _LLAMA_STYLE,
    "qwen3": _LLAMA_STYLE,
    "gemma": _LLAMA_STYLE,
    "gemma2": _LLAMA_STYLE,
    "phi3": ("qkv_proj", "o_proj", "gate_up_proj", "down_proj"),
    "gpt_neo": ("q_proj", "k_proj", "v_proj", "out_proj", "c_fc", "c_proj"),
    "opt": ("q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"),
    "falcon": ("query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"),
}

#: Written where the config asks for the architecture's own targets.
AUTO = "auto"


def _projection_names(model: nn.Module) -> list[str]:
    """Last path components of the Linear / Conv1D layers inside the decoder blocks (no embeddings, no LM head)."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    names = []
    for path, module in model.named_modules():
        if isinstance(module, (nn.Linear, Conv1D)) and module is not head and any(c.isdigit() for c in path.split(".")):
            names.append(path.rsplit(".", 1)[-1])
    return sorted(set(names))


def lora_targets_for(model: nn.Module, requested: tuple[str, ...] | str | None = AUTO) -> tuple[str, ...]:
    """The module names to adapt: ``requested`` as given, or (``auto`` / None) the architecture's projections.

    Named targets that match no module of the model are a :class:`UserError`
    listing the names it does have.
    """
    present = _projection_names(model)
    if not isinstance(requested, (str, type(None))):
        requested = tuple(requested)
    if requested in (None, AUTO) or requested == (AUTO,):
        model_type = getattr(getattr(model, "config", None), "model_type", "")
        targets = LORA_TARGETS.get(model_type) or tuple(present)
        targets = tuple(t for t in targets if t in present)
        if not targets:
            raise UserError(f"dp.lora_targets: a '{model_type}' model has no Linear/Conv1D projections in its blocks for "
                            "LoRA to adapt; use a full DP arm instead of +lora")
        return targets
    missing = [t for t in requested if t not in present]
    if missing:
        raise UserError(f"dp.lora_targets: no module named {', '.join(missing)} in this model; its projections are "
                        f"{', '.join(present[:12])} (or set dp.lora_targets: auto)")
    return tuple(requested)


def decoder_layer_count(model: nn.Module) -> int | None:
    """The number of decoder layers a transformers causal LM's config declares (None where it says none)."""
    cfg = getattr(model, "config", None)
    for name in ("num_hidden_layers", "n_layer", "num_layers"):
        value = getattr(cfg, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def top_layers(model: nn.Module, layers: int | None) -> list[int] | None:
    """Indices of the top ``layers`` decoder layers (None: every layer). More than the model has is one line."""
    if layers is None:
        return None
    total = decoder_layer_count(model)
    if total is None:
        raise UserError("dp.lora_layers: this model's config names no layer count; unset dp.lora_layers (every layer)")
    if not 1 <= layers <= total:
        raise UserError(f"dp.lora_layers {layers}: the model has {total} decoder layers; use 1 to {total}, or unset it")
    return list(range(total - layers, total))


def add_lora(model: PreTrainedModel, rank: int, alpha: float, targets: tuple[str, ...] | str | None = AUTO,
             layers: int | None = None):
    """Wrap ``model`` with trainable rank-``rank`` adapters on ``targets`` (in the top ``layers`` decoder layers
    only, when given); everything else frozen."""
    from peft import LoraConfig, get_peft_model

    if rank < 1:
        raise ValueError(f"lora_rank={rank} must be a positive integer")
    names = lora_targets_for(model, targets)
    which = top_layers(model, layers)
    # Conv1D keeps W as (in, out); PEFT must know, per model (GPT-2's projections are all Conv1D).
    conv1d = any(isinstance(m, Conv1D) and path.rsplit(".", 1)[-1] in names for path, m in model.named_modules())
    config = LoraConfig(
        r=rank,
        lora_alpha=alpha,
        target_modules=list(names),
        lora_dropout=0.0,
        bias="none",
        fan_in_fan_out=conv1d,
        task_type="CAUSAL_LM",
        **({"layers_to_transform": which} if which is not None else {}),
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


def check_qlora(device) -> None:
    """QLoRA's 4-bit base needs ``bitsandbytes`` on a CUDA device: say so in one line otherwise."""
    if getattr(device, "type", str(device)) != "cuda":
        raise UserError(f"dp.qlora: a 4-bit (bitsandbytes) base runs on CUDA only and this run's device is {device}; "
                        "use --device cuda on a GPU machine, or set dp.qlora: false (plain DP-LoRA)")
    if importlib.util.find_spec("bitsandbytes") is None:
        raise UserError("dp.qlora: bitsandbytes is not installed; pip install 'privleak[qlora]' (CUDA machines), "
                        "or set dp.qlora: false")


def quantized_base(model: PreTrainedModel) -> PreTrainedModel:
    """``model`` reloaded with NF4 4-bit linear layers (bf16 compute) on its CUDA device, ready for adapters."""
    import tempfile

    from peft import prepare_model_for_kbit_training
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    device = next(model.parameters()).device
    check_qlora(device)
    quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                               bnb_4bit_compute_dtype=torch.bfloat16)
    with tempfile.TemporaryDirectory(prefix="privleak-qlora-") as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        q = AutoModelForCausalLM.from_pretrained(tmp, quantization_config=quant, device_map={"": device},
                                                 use_safetensors=True, trust_remote_code=False)
    return prepare_model_for_kbit_training(q, use_gradient_checkpointing=False)


def bf16_base(model: PreTrainedModel) -> PreTrainedModel:
    """A copy of ``model`` with every weight in bf16, to hold the frozen base of a LoRA arm.

    PEFT keeps the adapters themselves in fp32 (``autocast_adapter_dtype``) and feeds them fp32 inputs, so the
    only data-dependent weights — and, under DP-SGD, their per-sample gradients, clipping and noise — stay in
    fp32; the base's matrix products run in bf16, which halves its memory traffic and, where the hardware has
    bf16 units (:func:`privleak.models.device.native_bf16`), its time. The trained adapters are merged into the
    fp32 base afterwards (:func:`transfer_adapters`), so the saved model is base + AB at full precision.
    """
    import copy

    return copy.deepcopy(model).to(torch.bfloat16)


def transfer_adapters(trained_peft, full_model: PreTrainedModel, rank: int, alpha: float,
                      targets: tuple[str, ...] | str | None = AUTO, layers: int | None = None) -> PreTrainedModel:
    """The adapters trained on a reduced-precision base (4-bit NF4 or bf16), merged into the full-precision
    ``full_model``."""
    from peft import get_peft_model_state_dict, set_peft_model_state_dict

    state = {k: v.detach().float() for k, v in get_peft_model_state_dict(trained_peft).items()}
    target = add_lora(full_model, rank, alpha, targets, layers)
    set_peft_model_state_dict(target, state)
    return merge_lora(target)
