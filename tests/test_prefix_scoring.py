"""The shared-prefix scoring pass against the plain one: the same NLL for every text (issue 35)."""

from __future__ import annotations

import numpy as np
import pytest

import privleak.attacks.prefix_scoring as ps
from privleak.attacks.pii_scoring import score_windows
from privleak.attacks.prefix_scoring import shared_prefix_nll
from privleak.attacks.scoring import score_texts

LEFT = ["Patient Ann Lee was seen on day ", "General advice: drink water and ", "phone 555-01"]
FILLS = ["3 for asthma.", "12 for gout; phone 555-0103.", "7", "", "31 for flu", "sleep well.", "05."]


@pytest.fixture(autouse=True)
def every_call_in_the_trie(monkeypatch):
    """The tests below check the trie pass: every call takes it, however few its texts."""
    monkeypatch.setattr(ps, "MIN_TREE_TEXTS", 1)


def test_narrow_calls_run_dense_beside_wide_ones(tiny_handle, monkeypatch):
    texts = [left + fill for left in LEFT for fill in FILLS] + ["x", "General"]
    groups = [list(range(k * len(FILLS), (k + 1) * len(FILLS))) for k in range(len(LEFT))] + [[len(texts) - 2],
                                                                                               [len(texts) - 1]]
    monkeypatch.setattr(ps, "MIN_TREE_TEXTS", 5)  # the 7-window slots in the trie, the one-text groups dense
    tree = []
    real = ps._tree_forward
    monkeypatch.setattr(ps, "_tree_forward", lambda *a, **k: tree.append(1) or real(*a, **k))
    got = shared_prefix_nll(tiny_handle, texts, groups=groups)
    assert len(tree) == len(LEFT)
    np.testing.assert_allclose(got, score_texts(tiny_handle, texts).nll(), rtol=2e-5, atol=2e-5)


def test_shared_prefix_nll_equals_the_scoring_pass(tiny_handle):
    texts = [left + fill for left in LEFT for fill in FILLS] + ["x", "General"]
    fast = shared_prefix_nll(tiny_handle, texts, max_nodes=40)  # several calls, so the split is exercised too
    plain = score_texts(tiny_handle, texts).nll()
    np.testing.assert_allclose(fast, plain, rtol=2e-5, atol=2e-5)
    assert len(set(np.round(plain, 4))) > 10  # distinct values: a constant could not pass


def test_score_windows_keeps_each_slot_aligned(tiny_handle):
    windows = [[left + f for f in FILLS] for left in LEFT]
    got = score_windows(tiny_handle, windows)
    for ws, nll in zip(windows, got):
        np.testing.assert_allclose(nll, score_texts(tiny_handle, ws).nll(), rtol=2e-5, atol=2e-5)


def test_texts_without_a_common_first_token_get_one_trie_per_first_token(tiny_handle):
    from privleak.models.handle import ModelHandle

    plain = ModelHandle(model=tiny_handle.model, tokenizer=tiny_handle.tokenizer, max_length=tiny_handle.max_length)
    plain.text_format = "plain"  # GPT-2's tokenizer adds nothing: texts start with their own first token
    texts = [left + fill for left in ["Patient Ann", "General advice", "phone 555"] for fill in FILLS] + ["x", "General"]
    got = shared_prefix_nll(plain, texts, max_nodes=25)
    np.testing.assert_allclose(got, score_texts(plain, texts).nll(), rtol=2e-5, atol=2e-5)


def test_groups_score_each_slot_below_its_common_left_context(tiny_handle):
    # Groups as score_windows makes them: a slot's windows share a long left context, which becomes the
    # call's dense prefix; a one-text group is all prefix; texts identical to the shared prefix have no trie path.
    texts = [left + fill for left in LEFT for fill in FILLS] + ["x", "General"]
    groups = [list(range(k * len(FILLS), (k + 1) * len(FILLS))) for k in range(len(LEFT))] + [[len(texts) - 2],
                                                                                               [len(texts) - 1]]
    got = shared_prefix_nll(tiny_handle, texts, groups=groups)
    np.testing.assert_allclose(got, score_texts(tiny_handle, texts).nll(), rtol=2e-5, atol=2e-5)
