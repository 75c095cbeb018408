"""Utility on what a model should learn (issue 38 item 6): held-out loss and G on the tokens outside PII spans."""

from __future__ import annotations

import numpy as np
import pytest

from privleak.attacks.scoring import score_texts
from privleak.audit.utility import gain_recovered, mean_loss, pii_token_mask, text_losses

TEXTS = ["Patient Ann Lee was seen on day 3 for asthma; phone 555-0103.", "General advice: drink water."]
SPANS = [[(8, 15), (52, 60)], []]  # "Ann Lee", "555-0103"; the second text has none


def test_the_mask_marks_exactly_the_tokens_that_overlap_a_span(tiny_handle):
    scores = score_texts(tiny_handle, TEXTS, moments=False)
    lead = len(tiny_handle.lead_ids())
    mask = pii_token_mask(tiny_handle.tokenizer, TEXTS, SPANS, scores, lead)
    assert mask.shape == scores.logprob.shape
    enc = tiny_handle.tokenizer(TEXTS, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    start = int(scores.offsets[0])
    expect = [any(a < e and s < z for s, e in SPANS[0]) for a, z in enc[0]]
    got = [bool(mask[start + lead + b - 1]) for b in range(len(enc[0])) if lead + b - 1 >= 0]
    assert got == expect[len(expect) - len(got):] and any(got) and not all(got)
    # Nothing of the span-free text, nor the format's tail, is PII.
    assert not mask[int(scores.offsets[1]):].any()


def test_losses_outside_pii(tiny_handle):
    scores = score_texts(tiny_handle, TEXTS, moments=False)
    everything = np.ones(len(scores.logprob), dtype=bool)
    np.testing.assert_allclose(text_losses(scores, everything)[0], text_losses(scores)[0], rtol=1e-6)
    mask = pii_token_mask(tiny_handle.tokenizer, TEXTS, SPANS, scores, len(tiny_handle.lead_ids()))
    sums, counts = text_losses(scores, ~mask)
    assert counts[0] == (~mask[: int(scores.offsets[1])]).sum() and counts[1] == np.diff(scores.offsets)[1]
    lp = scores.logprob.astype(np.float64)
    assert mean_loss((sums, counts)) == pytest.approx(-lp[~mask].mean())


def test_gain_outside_pii_is_the_same_formula():
    assert gain_recovered(4.0, 2.0, 1.0) == pytest.approx(2 / 3)
