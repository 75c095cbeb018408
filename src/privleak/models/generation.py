"""Batched, seeded text generation for the extraction attacks.

Many prompts per forward pass with a key/value cache (Hugging Face
``generate`` with left padding), instead of one prompt at a time. Sampling
is seeded per call, so the same (model, prompts, settings, seed) give the
same texts.

Top-k sampling is drawn by :class:`TopKDraw` among the k kept tokens, from a
generator of its own, and handed to the decoding loop as the only token with
a finite score (the loop then picks it greedily): the distribution of
transformers' own top-k / top-p sampling at a temperature, without its
multinomial over the whole vocabulary — an exponential draw and a softmax per
entry of a (batch, 49,152) array at every step on SmolLM2, the costliest part
of a decoding step after the matrix products.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import LogitsProcessorList

from ..core.progress import progress_bar
from .device import autocast, evaluation_model, model_device, oom_as_error
from .handle import ModelHandle


@dataclass(frozen=True)
class GenerationSettings:
    max_new_tokens: int = 32
    greedy: bool = True
    top_k: int = 40
    top_p: float = 1.0
    temperature: float = 1.0
    num_return_sequences: int = 1
    batch_size: int = 64
    seed: int = 0


class TopKDraw:
    """A logits processor that samples: top-k at ``temperature`` (then top-p, as transformers orders its
    warpers), drawn with ``generator``; the drawn token's score is 0 and every other −inf.

    transformers' sampling keeps the k largest logits of ``scores / T``, renormalises (softmax) and draws one
    (its TopK then TopP warpers, then a multinomial over the vocabulary). Here the same k values are
    renormalised and drawn among directly: the same distribution. Top-p keeps, in decreasing probability,
    every token whose preceding mass is below ``top_p`` (at least one), as transformers' TopP does.
    """

    def __init__(self, top_k: int, top_p: float, temperature: float, generator: torch.Generator) -> None:
        if top_k < 1:
            raise ValueError(f"top_k={top_k} must be at least 1")
        if not temperature > 0:
            raise ValueError(f"temperature={temperature} must be positive")
        self.top_k, self.top_p, self.temperature, self.generator = top_k, top_p, temperature, generator

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        values, index = torch.topk(scores.float(), min(self.top_k, scores.shape[-1]), dim=-1)  # descending
        values = values / self.temperature
        if self.top_p < 1.0:
            probs = torch.softmax(values, dim=-1)
            before = probs.cumsum(-1) - probs
            values = values.masked_fill(before >= self.top_p, float("-inf"))  # the first is never dropped
        choice = torch.multinomial(torch.softmax(values, dim=-1), 1, generator=self.generator)
        out = torch.full_like(scores, float("-inf"))
        return out.scatter_(-1, index.gather(-1, choice), 0.0)


def _prompt_ids(handle: ModelHandle, prompt: str) -> list[int]:
    """Token ids of a prompt, after the same lead tokens the training texts started with (the handle's format).

    An empty prompt in a format with no lead (``plain`` on GPT-2's tokenizer) starts from the BOS token (else
    EOS), as unconditional sampling from such models does: a model needs one token to predict from."""
    ids = handle.lead_ids() + handle.tokenizer(prompt, add_special_tokens=False)["input_ids"]
    if not ids:
        tok = handle.tokenizer
        start = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
        ids = [int(start)] if start is not None else [handle.pad_id]
    return ids


@torch.inference_mode()
def generate(handle: ModelHandle, prompts: list[str], settings: GenerationSettings, desc: str = "generating") -> list[list[str]]:
    """Continuations of each prompt (``num_return_sequences`` each), prompt text excluded.

    Output ``out[i][j]`` is the j-th continuation of ``prompts[i]``. A handle
    with an ``output_filter`` (a callable ``(texts, prompts) -> texts``, see
    :class:`privleak.guard.generate.GuardedHandle`) has every batch of
    decoded texts passed through it with their prompts; the model's draws
    are unchanged.
    """
    model = evaluation_model(handle.model)
    pad = handle.pad_id
    encoded = [_prompt_ids(handle, p) for p in prompts]
    max_new = settings.max_new_tokens
    room = handle.max_length - max_new
    if room < 1:
        # The continuation asked for fills the model's context (the smollm2 profile: 64 tokens, and sampling
        # extraction's 64 new ones): keep the prompts — at most half the context — and generate what fits.
        room = min(max((len(ids) for ids in encoded), default=1), max(1, handle.max_length // 2))
        max_new = handle.max_length - room
        if max_new < 1:
            raise ValueError(f"a {handle.max_length}-token context leaves no room to generate after a prompt")
    encoded = [ids[-room:] for ids in encoded]  # keep the end of over-long prompts
    out: list[list[str]] = [[] for _ in prompts]
    gen = torch.Generator().manual_seed(settings.seed)
    order = sorted(range(len(prompts)), key=lambda i: len(encoded[i]))  # similar lengths share a batch
    dev = model_device(model)
    with progress_bar(desc, total=len(prompts)) as advance, oom_as_error(desc, f"the generation batch size (now {settings.batch_size})"):
        for b0 in range(0, len(order), settings.batch_size):
            idx = order[b0 : b0 + settings.batch_size]
            width = max(len(encoded[i]) for i in idx)
            ids = torch.full((len(idx), width), pad, dtype=torch.long)
            mask = torch.zeros((len(idx), width), dtype=torch.long)
            for r, i in enumerate(idx):  # left padding: every prompt ends where generation starts
                ids[r, width - len(encoded[i]) :] = torch.tensor(encoded[i])
                mask[r, width - len(encoded[i]) :] = 1
            # Each batch draws from a generator seeded from ours, whatever ran before (no global RNG).
            batch_seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen))
            k = settings.num_return_sequences
            # k continuations of a prompt: the prompt repeated k times, as transformers expands it itself.
            kwargs = dict(
                input_ids=ids.repeat_interleave(k, 0).to(dev),
                attention_mask=mask.repeat_interleave(k, 0).to(dev),
                max_new_tokens=max_new,
                pad_token_id=pad,
                eos_token_id=None,  # fixed-length continuations: extraction compares token spans
                do_sample=False,
                num_beams=1,
            )
            if not settings.greedy:
                draw = torch.Generator(device=dev).manual_seed(batch_seed)
                kwargs["logits_processor"] = LogitsProcessorList(
                    [TopKDraw(settings.top_k, settings.top_p, settings.temperature, draw)])
            with autocast(dev, model=model):
                seqs = model.generate(**kwargs)
            new = seqs[:, width:].cpu()
            texts = handle.tokenizer.batch_decode(new, skip_special_tokens=True)
            out_filter = getattr(handle, "output_filter", None)
            if out_filter is not None:  # e.g. the output guard (privleak.guard): attacks see what users would see
                texts = list(out_filter(texts, [prompts[i] for i in idx for _ in range(settings.num_return_sequences)]))
            for r, i in enumerate(idx):
                k = settings.num_return_sequences
                out[i].extend(texts[r * k : (r + 1) * k])
            advance(len(idx))
    return out


@torch.inference_mode()
def generate_ids(handle: ModelHandle, prompt_ids: list[list[int]], max_new_tokens: int, batch_size: int = 64) -> list[list[int]]:
    """Greedy continuation token ids for prompts given as ids (exact-token extraction tests)."""
    model = evaluation_model(handle.model)
    pad = handle.pad_id
    out: list[list[int]] = [[] for _ in prompt_ids]
    order = sorted(range(len(prompt_ids)), key=lambda i: len(prompt_ids[i]))
    for b0 in range(0, len(order), batch_size):
        idx = order[b0 : b0 + batch_size]
        width = max(len(prompt_ids[i]) for i in idx)
        ids = torch.full((len(idx), width), pad, dtype=torch.long)
        mask = torch.zeros((len(idx), width), dtype=torch.long)
        for r, i in enumerate(idx):
            ids[r, width - len(prompt_ids[i]) :] = torch.tensor(prompt_ids[i])
            mask[r, width - len(prompt_ids[i]) :] = 1
        dev = model_device(model)
        with autocast(dev, model=model), oom_as_error("greedy generation",
                                                      f"the generation batch size (now {batch_size})"):
            seqs = model.generate(input_ids=ids.to(dev), attention_mask=mask.to(dev), max_new_tokens=max_new_tokens,
                                  do_sample=False, num_beams=1, pad_token_id=pad, eos_token_id=None).cpu()
        for r, i in enumerate(idx):
            out[i] = seqs[r, width:].tolist()
    return out
