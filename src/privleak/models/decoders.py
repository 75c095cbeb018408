"""Which causal LMs split into a decoder and an LM head that may run on the scored rows alone.

Its own module because three parts read it and it must sit under all of them: training's ``sequence_nll``
(``models/batching.py``, which imports the frozen prefix), the frozen prefix (``models/frozen_prefix.py``: the
decoder's block list) and the attacks' scoring passes. In ``batching.py`` it made a circle with the frozen prefix.
"""

from __future__ import annotations

from torch import nn
from transformers import GPT2LMHeadModel


#: Causal LMs whose logits are exactly ``head(decoder(...).last_hidden_state)`` — nothing scaled, soft-capped or
#: added after the head (Gemma 2's ``final_logit_softcapping`` or Cohere's ``logit_scale`` would be) — by
#: ``config.model_type``: for them the head may run on the rows that are scored alone (:func:`decoder_and_head`).
FLAT_HEAD_TYPES = frozenset({"gpt2", "llama", "mistral", "qwen2", "qwen3", "gpt_neox"})


def decoder_and_head(model: nn.Module) -> tuple[nn.Module, nn.Module] | None:
    """(decoder, LM head) of a causal LM of :data:`FLAT_HEAD_TYPES` (a PEFT-wrapped one too: its adapters sit in
    the decoder's layers), or None: then only the model's own forward gives its logits.

    GPT-2 must be exactly ``GPT2LMHeadModel`` (its double-heads class adds a head of its own); the others a
    ``…ForCausalLM`` class, whose forward is ``lm_head(model(...).last_hidden_state)``.
    """
    base = model.get_base_model() if hasattr(model, "peft_config") and hasattr(model, "get_base_model") else model
    if getattr(getattr(base, "config", None), "model_type", None) not in FLAT_HEAD_TYPES:
        return None
    if not (type(base) is GPT2LMHeadModel or type(base).__name__.endswith("ForCausalLM")):
        return None
    get_decoder, get_head = getattr(base, "get_decoder", None), getattr(base, "get_output_embeddings", None)
    decoder = get_decoder() if get_decoder is not None else None
    head = get_head() if get_head is not None else None
    if decoder is None or decoder is base or not isinstance(head, nn.Linear):
        return None
    return decoder, head
