"""The ``lite`` profile and ``compute.precision: native`` (issue 47, item 4): attack sizes for a 100 M+ model on a
CPU, bf16 scoring and sampling only where the CPU multiplies bf16 in hardware, exposure ranks fp32 always."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from privleak.attacks.prefix_scoring import shared_prefix_nll
from privleak.attacks.scoring import score_texts
from privleak.attacks.settings import PiiSizes
from privleak.config import build_config
from privleak.core.errors import UserError
from privleak.models import device as dev
from privleak.models.device import make_policy, resolve_precision, resolve_train_precision, use_policy
from privleak.policy import LITE_ATTACKS, PROFILES

CPU = torch.device("cpu")


@pytest.mark.parametrize("native", [True, False])
def test_native_precision_follows_the_hardware_for_training_and_evaluation(monkeypatch, native):
    monkeypatch.setattr(dev, "native_bf16", lambda device: native)
    want = "bf16" if native else "fp32"
    assert resolve_precision(CPU, "native") == want and resolve_train_precision(CPU, "native") == want
    policy = make_policy("cpu", "native")
    assert (policy.precision, policy.train_precision) == (want, want)
    # auto is unchanged: training follows the hardware, evaluation stays fp32 on a CPU
    assert resolve_precision(CPU, "auto") == "fp32" and resolve_train_precision(CPU, "auto") == want


def test_an_unknown_precision_names_the_choices():
    with pytest.raises(UserError, match="auto, native, fp32 or bf16"):
        resolve_precision(CPU, "fp16")
    with pytest.raises(UserError, match="compute.precision"):
        build_config({"compute": {"precision": "fp16"}})


def test_lite_is_quick_with_the_smollm2_attack_sizes_and_native_precision():
    quick, lite, smol = (build_config({"profile": p}) for p in ("quick", "lite", "smollm2"))
    assert lite.dp.epsilons == quick.dp.epsilons and lite.arms == quick.arms
    assert lite.compute.precision == "native" and quick.compute.precision == "auto"
    a, s = lite.attack_settings(), smol.attack_settings()
    assert a.canary_candidates == 100 and a.pii_sizes == PiiSizes.small() == s.pii_sizes
    for k, v in LITE_ATTACKS.items():
        assert getattr(a, k) == getattr(s, k) == v
    assert quick.attack_settings().extraction_samples > a.extraction_samples
    assert PROFILES["smollm2"]["attacks"] is LITE_ATTACKS  # one table for both


def test_the_attack_command_takes_the_lite_profile(tmp_path):
    """The library door builds its config with ``profile``; a profile it does not know is one line."""
    from privleak.api import attack

    with pytest.raises(UserError, match="unknown profile"):
        attack("nowhere", ["a"], ["b"], profile="tiny", out=tmp_path / "run")


def test_native_bf16_scores_move_and_exposure_ranks_do_not(tiny_handle):
    """Under bf16 autocast the membership scores are bf16's (they differ from fp32's, so this test can fail, and
    stay near them), while the exposure pass is the same fp32 whatever the policy."""
    from test_tree_llama import _handle

    h = _handle(tiny_handle, "llama")
    texts = [f"Patient Ann Lee was seen on day {i}, phone 555-01{i}" for i in range(6)]
    with use_policy(make_policy("cpu", "fp32")):
        s32 = score_texts(h, texts, moments=False, desc="fp32").logprob
        e32 = shared_prefix_nll(h, texts, max_nodes=512, desc="fp32")
    with use_policy(make_policy("cpu", "bf16")):
        s16 = score_texts(h, texts, moments=False, desc="bf16").logprob
        e16 = shared_prefix_nll(h, texts, max_nodes=512, desc="bf16")
    assert not np.array_equal(s32, s16)
    np.testing.assert_allclose(s16, s32, atol=0.5)  # bf16 rounding of the same model, not another model
    np.testing.assert_array_equal(e16, e32)


def test_evaluating_in_bf16_moves_the_evaluation_keys_only(tmp_path, monkeypatch):
    """A run directory never mixes fp32 and bf16 scores of one model: with the same training precision, the
    evaluation stages' keys follow the evaluation precision, the trainings' do not (and fp32's stay pinned:
    test_stage_keys)."""
    import stage_plan
    from conftest import SMALL

    monkeypatch.setattr(dev, "native_bf16", lambda device: True)  # auto and native then train alike, in bf16
    plans = {p: {r["name"]: r["key"] for r in stage_plan.stage_plan({**SMALL, "compute": {"precision": p}},
                                                                       tmp_path / p)}
             for p in ("auto", "native")}
    assert plans["auto"].keys() == plans["native"].keys()
    moved = {n for n in plans["auto"] if plans["auto"][n] != plans["native"][n]}
    evaluation = {n for n in plans["auto"] if n.split("/")[0] in ("scores", "samples", "membership", "canaries",
                                                                  "extraction", "pii", "utility")}
    assert evaluation and evaluation <= moved
    assert not {n for n in moved if n.startswith(("train/", "data", "base-model", "defend/"))}


def test_the_fallback_pass_is_fp32_too(tiny_handle):
    """A model the trie pass does not implement (GPT-NeoX) takes the plain pass, still in fp32 under bf16."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    from privleak.attacks.prefix_scoring import _tree_supported
    from privleak.models.handle import ModelHandle

    torch.manual_seed(0)
    model = GPTNeoXForCausalLM(GPTNeoXConfig(vocab_size=len(tiny_handle.tokenizer), hidden_size=32,
                                             num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                             max_position_embeddings=128)).eval()
    h = ModelHandle(model=model, tokenizer=tiny_handle.tokenizer, max_length=tiny_handle.max_length)
    assert not _tree_supported(model)
    texts = [f"Patient Ann Lee was seen on day {i}" for i in range(4)]
    with use_policy(make_policy("cpu", "fp32")):
        e32 = shared_prefix_nll(h, texts, desc="fp32")
        s32 = score_texts(h, texts, moments=False, desc="fp32").nll()
    with use_policy(make_policy("cpu", "bf16")):
        e16 = shared_prefix_nll(h, texts, desc="bf16")
        s16 = score_texts(h, texts, moments=False, desc="bf16").nll()
    assert not np.array_equal(s32, s16)  # bf16 reaches this model: the equality below can fail
    np.testing.assert_array_equal(e16, e32)


def test_cpu_bf16_evaluation_runs_on_one_bf16_copy_of_the_weights(tiny_handle):
    """Under a bf16 policy on a CPU, scoring and generation run on a bf16 copy of the weights (not autocast over fp32
    ones): the same numbers as that copy run in fp32 mode, one copy while the weights stand, a new one when they
    change; the model itself stays fp32 and fp32 evaluation runs it."""
    import copy

    from test_tree_llama import _handle

    from privleak.models.generation import GenerationSettings, generate

    h = _handle(tiny_handle, "llama")
    texts = [f"Patient Ann Lee was seen on day {i}, phone 555-01{i}" for i in range(6)]
    bf16 = make_policy("cpu", "bf16")
    with use_policy(make_policy("cpu", "fp32")):
        assert dev.evaluation_model(h.model) is h.model
    with use_policy(bf16):
        low = dev.evaluation_model(h.model)
        assert low is not h.model and dev.evaluation_model(h.model) is low
        assert {p.dtype for p in low.parameters()} == {torch.bfloat16}
        assert {p.dtype for p in h.model.parameters()} == {torch.float32}
        assert all(p.requires_grad for p in low.parameters())  # the fast bf16 product (see evaluation_model)
        s16 = score_texts(h, texts, moments=False, desc="bf16").logprob
        g16 = generate(h, texts[:3], GenerationSettings(max_new_tokens=6, greedy=False, num_return_sequences=2))
    direct = copy.copy(h)
    direct.model = low
    with use_policy(make_policy("cpu", "fp32")):  # the copy, run as it is
        np.testing.assert_array_equal(score_texts(direct, texts, moments=False, desc="copy").logprob, s16)
        assert generate(direct, texts[:3], GenerationSettings(max_new_tokens=6, greedy=False,
                                                              num_return_sequences=2)) == g16
    with torch.no_grad():
        next(h.model.parameters()).mul_(1.5)  # a changed weight: the next evaluation copies again
    with use_policy(bf16):
        again = dev.evaluation_model(h.model)
        assert again is not low
        assert not np.array_equal(score_texts(h, texts, moments=False, desc="bf16").logprob, s16)


def test_cpu_bf16_evaluation_keys_differ_from_the_autocast_ones():
    """A run directory evaluated under autocast (before the bf16 copy) redoes its evaluation: the CPU mark is new."""
    from privleak.core.io import stable_hash
    from privleak.pipeline.audit import evaluated_key

    cfg = build_config({"profile": "lite"})
    with use_policy(make_policy("cpu", "bf16")):
        key = evaluated_key("k", cfg)
    assert key not in ("k", stable_hash("k", "eval-bf16"))
    with use_policy(make_policy("cpu", "fp32")):
        assert evaluated_key("k", build_config({"profile": "lite", "compute": {"precision": "fp32"}})) == "k"


@pytest.mark.parametrize("corpus", ["forum", "email"])
def test_bf16_copy_on_texts_of_other_generators(tiny_handle, corpus):
    """Long free text from the forum and e-mail generators (not the clinical one the profile was sized on): the bf16
    copy scores them near fp32 and exactly as the copy run directly, the fp32 window pass is untouched, and sampling
    from their prefixes returns what was asked."""
    import copy
    import sys
    from pathlib import Path

    from test_tree_llama import _handle

    from privleak.models.generation import GenerationSettings, generate

    sys.path.insert(0, str(Path(__file__).parent))
    from corpora.email import build_email_corpus
    from corpora.forum import build_forum_corpus

    rows = (build_forum_corpus(n=12, seed=5) if corpus == "forum" else build_email_corpus(n=12, seed=5))
    texts = [r["text"] for r in rows][:8]
    h = _handle(tiny_handle, "llama")
    with use_policy(make_policy("cpu", "fp32")):
        s32 = score_texts(h, texts, moments=True, desc="fp32")
        w32 = shared_prefix_nll(h, texts, desc="fp32")
    with use_policy(make_policy("cpu", "bf16")):
        s16 = score_texts(h, texts, moments=True, desc="bf16")
        w16 = shared_prefix_nll(h, texts, desc="bf16")
        outs = generate(h, [t[:40] for t in texts], GenerationSettings(max_new_tokens=5, greedy=False,
                                                                         num_return_sequences=3, batch_size=4))
        low = dev.evaluation_model(h.model)
    direct = copy.copy(h)
    direct.model = low
    with use_policy(make_policy("cpu", "fp32")):
        np.testing.assert_array_equal(score_texts(direct, texts, moments=True, desc="copy").logprob, s16.logprob)
    assert not np.array_equal(s16.nll(), s32.nll())
    np.testing.assert_allclose(s16.nll(), s32.nll(), atol=0.01)  # the same model, rounded (seen: ≤ 8e-4)
    np.testing.assert_array_equal(w16, w32)
    assert [len(o) for o in outs] == [3] * len(texts) and all(isinstance(c, str) for o in outs for c in o)
