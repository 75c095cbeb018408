"""Top-k sampling drawn among the k kept tokens (issue 47) is transformers' top-k / top-p sampling.

:class:`~privleak.models.generation.TopKDraw` replaces the decoding loop's multinomial over the whole
vocabulary. The distribution it draws from must be the one transformers' own warpers (temperature, top-k,
top-p) give; its draws must follow it; and a seeded call must give the same texts whatever ran before it.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from privleak.models.generation import GenerationSettings, TopKDraw, generate


def _hf_probs(scores: torch.Tensor, top_k: int, top_p: float, temperature: float) -> torch.Tensor:
    """The distribution transformers samples from: its warpers in its order, then a softmax."""
    s = TemperatureLogitsWarper(temperature)(None, scores.clone())
    s = TopKLogitsWarper(top_k)(None, s)
    if top_p < 1.0:
        s = TopPLogitsWarper(top_p)(None, s)
    return torch.softmax(s, dim=-1)


@pytest.mark.parametrize("top_k, top_p, temperature", [(5, 1.0, 1.0), (8, 0.7, 1.0), (40, 1.0, 0.7), (3, 0.5, 1.5)])
def test_draws_follow_transformers_sampling_distribution(top_k, top_p, temperature):
    torch.manual_seed(0)
    scores = torch.randn(1, 50) * 2.0
    want = _hf_probs(scores, top_k, top_p, temperature)[0].numpy()
    draw = TopKDraw(top_k, top_p, temperature, torch.Generator().manual_seed(1))
    n = 20_000
    batch = scores.expand(n, -1)
    out = draw(None, batch)
    assert torch.isfinite(out).sum(-1).eq(1).all()  # one finite score per row: the loop's greedy pick is the draw
    picked = out.argmax(-1).numpy()
    freq = np.bincount(picked, minlength=50) / n
    assert set(np.flatnonzero(freq)) <= set(np.flatnonzero(want > 0))  # never outside the kept set
    # 20,000 draws: each frequency within 4.5 binomial standard errors of its probability (all 50 tokens).
    se = np.sqrt(want * (1 - want) / n)
    assert np.all(np.abs(freq - want) <= 4.5 * se + 1e-9)


def test_the_distribution_check_can_fail():
    # Not vacuous: draws at another temperature are outside the bounds above.
    torch.manual_seed(0)
    scores = torch.randn(1, 50) * 2.0
    want = _hf_probs(scores, 8, 1.0, 1.0)[0].numpy()
    out = TopKDraw(8, 1.0, 2.0, torch.Generator().manual_seed(1))(None, scores.expand(20_000, -1))
    freq = np.bincount(out.argmax(-1).numpy(), minlength=50) / 20_000
    se = np.sqrt(want * (1 - want) / 20_000)
    assert not np.all(np.abs(freq - want) <= 4.5 * se + 1e-9)


def test_seeded_sampling_is_the_same_whatever_ran_before(tiny_handle):
    s = GenerationSettings(max_new_tokens=8, greedy=False, top_k=40, seed=5, batch_size=4, num_return_sequences=3)
    first = generate(tiny_handle, ["", "Patient"], s)
    torch.manual_seed(123)
    torch.rand(1000)  # the global RNG moved: nothing here reads it
    again = generate(tiny_handle, ["", "Patient"], s)
    assert first == again and [len(o) for o in first] == [3, 3]
    other = generate(tiny_handle, ["", "Patient"], GenerationSettings(max_new_tokens=8, greedy=False, top_k=40,
                                                                      seed=6, batch_size=4, num_return_sequences=3))
    assert other != first


def test_greedy_is_transformers_greedy(tiny_handle):
    out = generate(tiny_handle, ["Patient"], GenerationSettings(max_new_tokens=6, greedy=True))
    ids = torch.tensor([tiny_handle.lead_ids() + tiny_handle.tokenizer("Patient", add_special_tokens=False)["input_ids"]])
    with torch.inference_mode():
        want = tiny_handle.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=6,
                                          do_sample=False, pad_token_id=tiny_handle.pad_id, eos_token_id=None)
    assert out[0][0] == tiny_handle.tokenizer.decode(want[0, ids.shape[1]:], skip_special_tokens=True)
