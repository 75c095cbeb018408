"""Turning texts into padded token batches, in the format a model was trained in.

A model is scored (and prompted) in the text format it saw in training
(``TEXT_FORMATS``):

* ``privleak`` — ``<eos> text <eos>``: how PrivLeak trains its arms and the
  embedded base model. The leading ``<eos>`` makes the first real token
  predictable, so its log-probability counts like every other token's.
* ``plain`` — ``tokenizer(text)``: the tokenizer's own special tokens (BOS
  for Llama-family tokenizers, nothing for GPT-2's), as plain
  ``transformers`` fine-tuning code feeds a model. The default for models
  PrivLeak did not train (``privleak attack``).
* ``plain+eos`` — ``tokenizer(text)`` then ``<eos>``: training scripts that
  append ``tokenizer.eos_token`` to every example.

A format is a fixed run of tokens before the text (``lead``) and after it
(``tail``); the tokenizer's own special tokens are found by encoding one
probe string with and without them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import PreTrainedTokenizerBase

from ..core.errors import UserError
from . import frozen_prefix
from .decoders import decoder_and_head
from .head_loss import linear_nll

TEXT_FORMATS = ("privleak", "plain", "plain+eos")
_PROBE = "privleak probe"


@dataclass
class Encoded:
    """Token ids of each text (variable length, unpadded); every sequence is ``lead + body + tail`` before
    truncation, ``lead`` tokens long at its start."""

    ids: list[list[int]]
    lead: int = 0

    def __len__(self) -> int:
        return len(self.ids)


def token_ids(tokenizer: PreTrainedTokenizerBase, texts: list[str]) -> list[list[int]]:
    """``tokenizer(texts, add_special_tokens=False)["input_ids"]``, the same ids, faster.

    A fast (Rust) tokenizer with neither truncation nor padding set on its
    backend is asked directly: the same ``encode_batch`` call, without a
    Python ``BatchEncoding`` built per text (a third of exposure's time with
    10,000 candidate secrets per canary). Any other tokenizer goes the usual way.
    """
    texts = list(texts)
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if texts and backend is not None and backend.truncation is None and backend.padding is None:
        return [e.ids for e in backend.encode_batch(texts, add_special_tokens=False)]
    return tokenizer(texts, add_special_tokens=False)["input_ids"] if texts else []


@dataclass(frozen=True)
class Frame:
    """The tokens a format puts before and after every text."""

    lead: tuple[int, ...]
    tail: tuple[int, ...]
    name: str

    def describe(self, tokenizer: PreTrainedTokenizerBase) -> str:
        """One line for the results: what the sequences scored look like."""
        def show(ids: tuple[int, ...]) -> str:
            return " ".join(tokenizer.convert_ids_to_tokens(list(ids))) if ids else "nothing"
        return f"{self.name}: {show(self.lead)} before each text, {show(self.tail)} after"


def _end_token(tokenizer: PreTrainedTokenizerBase) -> int | None:
    eos = tokenizer.eos_token_id
    return tokenizer.bos_token_id if eos is None else eos


def check_format(fmt: str, option: str = "--format") -> str:
    if fmt not in TEXT_FORMATS:
        raise UserError(f"{option} {fmt}: unknown text format; use one of {', '.join(TEXT_FORMATS)} (the format the "
                        "model was trained in: plain = tokenizer(text), privleak = <eos> text <eos>)")
    return fmt


def frame(tokenizer: PreTrainedTokenizerBase, fmt: str = "privleak") -> Frame:
    """The lead and tail tokens of format ``fmt`` for ``tokenizer`` (module docstring)."""
    check_format(fmt)
    end = _end_token(tokenizer)
    if fmt == "privleak":
        edge = () if end is None else (int(end),)
        return Frame(edge, edge, fmt)
    full = list(tokenizer(_PROBE)["input_ids"])
    body = list(tokenizer(_PROBE, add_special_tokens=False)["input_ids"])
    at = next((i for i in range(len(full) - len(body) + 1) if full[i:i + len(body)] == body), None)
    if at is None:  # a post-processor that rewrites the text's own tokens: score the text alone
        lead, tail = (), ()
    else:
        lead, tail = tuple(full[:at]), tuple(full[at + len(body):])
    if fmt == "plain+eos" and end is not None and tail[-1:] != (int(end),):
        tail = tail + (int(end),)
    return Frame(lead, tail, fmt)


def encode(tokenizer: PreTrainedTokenizerBase, texts: list[str], max_length: int, fmt: str = "privleak") -> Encoded:
    """``lead + tokens(text) + tail`` of format ``fmt`` for each text, truncated to ``max_length`` tokens."""
    f = frame(tokenizer, fmt)
    body = token_ids(tokenizer, texts)
    return Encoded([(list(f.lead) + list(ids) + list(f.tail))[:max_length] for ids in body], lead=len(f.lead))


def pad_batch(seqs: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad to the longest sequence: (input_ids, attention_mask)."""
    width = max((len(s) for s in seqs), default=0)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        mask[i, : len(s)] = 1
    return ids, mask


def position_ids_for(mask: torch.Tensor) -> torch.Tensor:
    """Explicit per-row position ids, shape (batch, length).

    Opacus computes per-sample gradients of the position embedding from its
    input; the (1, length) ids GPT-2 builds by default have no batch
    dimension, so DP training must pass batch-shaped ids.
    """
    return torch.arange(mask.shape[1], dtype=torch.long, device=mask.device).unsqueeze(0).expand(mask.shape[0], -1).contiguous()


def per_sequence_nll(logits: torch.Tensor, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean next-token NLL of each sequence, shape (batch,).

    Per-sequence means (not a token-weighted batch mean) keep each record's
    contribution to the loss independent of the others', which is what
    per-sample clipping in DP-SGD assumes.
    """
    logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    target = ids[:, 1:]
    tok_mask = mask[:, 1:].to(logp.dtype)
    nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1) * tok_mask
    return nll.sum(1) / tok_mask.sum(1).clamp_min(1.0)


def sequence_nll(model: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor, flat_head: bool = True) -> torch.Tensor:
    """:func:`per_sequence_nll` of ``model``'s forward pass, with the LM head run on real predicted tokens only.

    For a model whose logits are ``head(decoder(...))`` (:func:`~privleak.models.decoders.decoder_and_head`:
    GPT-2, Llama, Mistral, Qwen2/3, GPT-NeoX) the (vocab)-wide head, its log-softmax and their gradients run on
    the tokens that predict a real token — no padding, no last position — through the fused ``cross_entropy``,
    instead of on every position of a padded (batch, length, vocab) tensor: on the embedded model that is most
    of a step's memory traffic, on SmolLM2 (a 49,152-token vocabulary) a (batch, length, 49,152) fp32 array and
    its gradient. The same per-sequence means, summed in another order: equal to float tolerance
    (``tests/test_train_fast.py``, ``tests/test_llama_fast.py``). The head and its loss run as one step
    (:func:`~privleak.models.head_loss.linear_nll`) where nothing hooks the head.

    ``flat_head=False`` keeps the head's input (batch, length, width): per-sample clipping that hooks a
    *trainable* head (book-keeping, ``dp.train_output``) must see one row per sequence, not one per token.
    Any other model goes through its own forward and :func:`per_sequence_nll`.
    """
    split = decoder_and_head(model) if flat_head else None
    if split is None:
        logits = model(input_ids=ids, attention_mask=mask, position_ids=position_ids_for(mask)).logits
        return per_sequence_nll(logits, ids, mask)
    decoder, head = split
    pos = position_ids_for(mask)
    prefix = frozen_prefix.active(model)  # the trainer's kept bottom layers, when only the top ones train
    if prefix is not None:
        hidden = prefix.top(prefix.hidden(ids, mask, pos), mask, pos)
    else:
        hidden = decoder(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=False).last_hidden_state
    keep = mask[:, 1:].bool()
    tok_nll = linear_nll(head, hidden[:, :-1][keep], ids[:, 1:][keep])
    rows = keep.nonzero()[:, 0]  # boolean indexing is row-major: token j of the flat list is in row rows[j]
    sums = torch.zeros(ids.shape[0], dtype=tok_nll.dtype, device=ids.device).index_add(0, rows, tok_nll)
    return sums / keep.sum(1).to(sums.dtype).clamp_min(1.0)


def head_trainable(model: torch.nn.Module) -> bool:
    """Whether ``model``'s output layer has a trainable weight (then per-sample clipping must see its rows)."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    return head is not None and any(p.requires_grad for p in head.parameters())


def micro_batches(lengths: list[int], max_tokens: int) -> list[list[int]]:
    """Split one logical batch into length-sorted physical micro-batches.

    A Poisson batch mixes short and long records, and one padded tensor
    pads every row to the longest; sorted micro-batches of at most
    ``max_tokens`` padded tokens cut that waste and bound memory.
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    out: list[list[int]] = []
    cur: list[int] = []
    for i in order:
        if cur and lengths[i] * (len(cur) + 1) > max_tokens:
            out.append(cur)
            cur = []
        cur.append(i)
    if cur:
        out.append(cur)
    return out
