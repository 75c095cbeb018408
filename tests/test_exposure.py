"""Canary exposure: the definition, the KV-cache scoring, and a real memorisation signal."""

import math

import numpy as np
import pytest
import torch

from privleak.attacks.exposure import canary_exposure, chance_exposure, exposure_from_rank
from privleak.attacks.prefix_scoring import continuation_loglik
from privleak.data.canaries import make_canaries
from privleak.models.batching import encode
from privleak.models.handle import ModelHandle, clone_model
from privleak.models.train import TrainSettings, train


def test_rank_one_gives_log2_R():
    assert exposure_from_rank(1, 10_000) == pytest.approx(math.log2(10_000))
    assert exposure_from_rank(10_000, 10_000) == 0.0


def test_chance_exposure_is_about_1_44_bits():
    # E[log2 R − log2 U{1..R}] → 1/ln 2 as R grows (Stirling).
    assert chance_exposure(10_000) == pytest.approx(1 / math.log(2), abs=0.01)


def test_kv_cache_scoring_equals_full_sequence(tiny_handle):
    prefix = "Patient Ann Lee phone"
    conts = [" 555-0101.", " 555-0199 and more", " 1", " 555-0101."]
    fast = continuation_loglik(tiny_handle, prefix, conts, batch_size=3)
    tok = tiny_handle.tokenizer
    for c, got in zip(conts, fast):
        p = [tok.eos_token_id] + tok(prefix, add_special_tokens=False)["input_ids"]
        q = tok(c, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logp = torch.log_softmax(tiny_handle.model(input_ids=torch.tensor([p + q])).logits[0].double(), -1)
        want = sum(float(logp[len(p) - 1 + j, q[j]]) for j in range(len(q)))
        assert got == pytest.approx(want, abs=1e-4)
    assert fast[0] == pytest.approx(fast[3])


def test_memorised_canary_has_high_exposure_and_unseen_one_does_not(tiny_handle):
    seen, unseen = make_canaries(repeats=(1,), per_repeat=2, seed=3)
    model = clone_model(tiny_handle.model)
    texts = [seen.text()] * 40
    data = encode(tiny_handle.tokenizer, texts, tiny_handle.max_length)
    train(model, data, TrainSettings(epochs=8, batch_size=8, lr=5e-3), pad_id=tiny_handle.pad_id)
    handle = ModelHandle(model=model, tokenizer=tiny_handle.tokenizer, max_length=tiny_handle.max_length)
    res = canary_exposure(handle, [seen, unseen], n_candidates=500, seed=0)
    assert res[0].rank == 1.0 and res[0].exposure == pytest.approx(math.log2(500))
    assert res[1].exposure < res[0].exposure - 3
    assert res[0].exposure_extrapolated >= res[1].exposure_extrapolated


# --- the trie pass against a plain forward pass per candidate -------------

from privleak.attacks.exposure import _split_point
from privleak.attacks.prefix_scoring import _Trie
from privleak.data.canaries import sample_candidates


def _loglik_by_hand(handle, prefix, conts):
    """Σ log p(continuation tokens) from one unbatched, uncached forward pass per candidate, in float64."""
    tok = handle.tokenizer
    p = [tok.eos_token_id] + tok(prefix, add_special_tokens=False)["input_ids"]
    out = []
    for c in conts:
        q = tok(c, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logp = torch.log_softmax(handle.model(input_ids=torch.tensor([p + q])).logits[0].double(), -1)
        out.append(sum(float(logp[len(p) - 1 + j, q[j]]) for j in range(len(q))))
    return np.array(out)


def _canary_candidates(n):
    canary = make_canaries(repeats=(1,), per_repeat=1, seed=5)[0]
    prefix, cont = _split_point(canary)
    others = sample_candidates(canary, n - 1, np.random.default_rng(1))
    return canary, prefix, [cont] + [canary.text(s)[len(prefix) :] for s in others]


def test_trie_merges_shared_leading_tokens():
    trie = _Trie.build([[5, 6, 7], [5, 6, 8], [5, 9], [], [5, 6, 7]])
    # root, 5, 5→6, 5→9, 5→6→7, 5→6→8
    assert len(trie.parent) == 6
    assert trie.path[0].tolist() == trie.path[4].tolist()
    assert trie.path[3].tolist() == [-1, -1, -1]
    logp = np.arange(6, dtype=np.float32)  # node i contributes i
    np.testing.assert_array_equal(trie.sums(logp), [1 + 2 + 4, 1 + 2 + 5, 1 + 3, 0, 1 + 2 + 4])


@pytest.mark.parametrize("tree", [True, False])
def test_fast_loglik_equals_full_forward_per_candidate(tiny_handle, tree):
    _, prefix, conts = _canary_candidates(300)
    # Different lengths, a continuation that is a prefix of others, an empty one, duplicates.
    conts += [" 1", " 12", " 555-0101.", " 555", "", " 555-0101.", " 000-00-0000 and more text."]
    lengths = {len(ids) for ids in tiny_handle.tokenizer(conts, add_special_tokens=False)["input_ids"]}
    assert len(lengths) >= 4
    want = _loglik_by_hand(tiny_handle, prefix, conts)
    # A small batch splits every trie level into several chunks.
    got = continuation_loglik(tiny_handle, prefix, conts, batch_size=37, tree=tree)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert got[conts.index(" 555-0101.")] == got[len(conts) - 2]


def test_tree_pass_is_the_default_for_gpt2_and_matches_the_fallback(tiny_handle):
    _, prefix, conts = _canary_candidates(200)
    fast = continuation_loglik(tiny_handle, prefix, conts)
    slow = continuation_loglik(tiny_handle, prefix, conts, tree=False)
    np.testing.assert_allclose(fast, slow, rtol=1e-5, atol=1e-5)


def test_exposure_ranks_equal_reference_ranks(tiny_handle):
    canary, prefix, conts = _canary_candidates(300)
    # canary_exposure draws its candidates from rng([seed, k]); rebuild them.
    others = sample_candidates(canary, 299, np.random.default_rng([0, 0]))
    conts = [conts[0]] + [canary.text(s)[len(prefix) :] for s in others]
    ll = _loglik_by_hand(tiny_handle, prefix, conts)
    want_rank = 1.0 + float((ll[1:] > ll[0]).sum()) + 0.5 * float((ll[1:] == ll[0]).sum())
    (res,) = canary_exposure(tiny_handle, [canary], n_candidates=300, seed=0)
    assert res.rank == want_rank
    assert res.exposure == pytest.approx(exposure_from_rank(want_rank, 300))


def _exposure_result(ranks, n_candidates=200):
    from privleak.attacks.exposure import CanaryExposure, ExposureResult, chance_exposure

    return ExposureResult(chance_exposure=chance_exposure(n_candidates), canaries=[
        CanaryExposure(canary_id=f"c{i}", repeats=4, exposure=exposure_from_rank(r, n_candidates),
                       max_exposure=math.log2(n_candidates), rank=r, n_candidates=n_candidates,
                       exposure_extrapolated=exposure_from_rank(r, n_candidates)) for i, r in enumerate(ranks)])


def test_exposure_verdict_is_a_test_against_chance_and_the_control():
    """Issue 26: the verdict was a "+1 bit over max(chance, control)" line on the mean of a few canaries,
    which flipped with noise; it is now a test (exposure_test) at policy.alpha. Changed on purpose:
    four canaries at a mean of 2.67 bits (ranks 23, 44, 27, 35 of 200) are within chance (p ≈ 0.12), so
    they no longer leak against chance or against a control below chance (the old line called both a
    leak); an arm that scores what the control scores has still not leaked."""
    from privleak.attacks.base import Policy

    policy = Policy()
    middling = _exposure_result([23, 44, 27, 35])  # mean 2.67 bits, chance 1.44
    assert not middling.assess("exposure", None, policy).leaks
    assert not middling.assess("exposure", _exposure_result([23, 44, 27, 35]), policy).leaks
    assert not middling.assess("exposure", _exposure_result([190, 180, 190, 170]), policy).leaks
    assert _exposure_result([6, 9, 8, 12]).assess("exposure", middling, policy).leaks  # Fisher: many a little high
    assert _exposure_result([1, 140, 140, 140]).assess("exposure", middling, policy).leaks  # Tippett: one ranked first
    f = _exposure_result([6, 9, 8, 12]).assess("exposure", middling, policy)
    assert "vs control [95% CI" in f.figure and "p = " in f.figure


def test_exposure_against_a_control_whose_ranks_are_not_uniform():
    """If the control itself ranks the secrets high (candidates not exchangeable with the secret), beating
    chance is not enough: the arm must also beat the control, paired by canary."""
    from privleak.attacks.exposure_stats import exposure_test

    biased = _exposure_result([10, 12, 8, 9, 11, 10, 12, 9])
    same, better = _exposure_result([10, 12, 8, 9, 11, 10, 12, 9]), _exposure_result([2, 3, 1, 2, 2, 3, 1, 2])
    t_same, t_better = exposure_test(same, biased), exposure_test(better, biased)
    assert t_same.control_p_chance <= 0.05 and t_same.p_chance <= 0.05
    assert t_same.p_control == 1.0 and not t_same.leaks and t_same.mean_diff == 0.0
    assert t_better.p_control == pytest.approx(1 / 256) and t_better.leaks and t_better.versus == "control"
    alone = exposure_test(better, None)
    assert alone.versus == "chance" and alone.mean_diff_ci[0] > 0 and alone.leaks


def test_exposure_test_false_leak_rate_on_uniform_ranks():
    """A model that never saw its canaries ranks each secret uniformly: 15 canaries of 10,000
    candidates, 600 simulated arms (against chance and against an independent control): leaks in
    ≤ 5 % (one-sided 99 % CP lower bound of the rate not above 5 %)."""
    from privleak.attacks.exposure_stats import exposure_test
    from privleak.core.stats import clopper_pearson

    rng = np.random.default_rng(26)
    leaks_chance = leaks_control = 0
    runs = 600
    for _ in range(runs):
        arm = _exposure_result(rng.integers(1, 10_001, 15), 10_000)
        control = _exposure_result(rng.integers(1, 10_001, 15), 10_000)
        leaks_chance += exposure_test(arm, None).leaks
        leaks_control += exposure_test(arm, control).leaks
    for k in (leaks_chance, leaks_control):
        assert clopper_pearson(k, runs, 0.01, "lower")[0] <= 0.05, (leaks_chance, leaks_control)


def test_exposure_within_chance_errs_at_most_alpha_at_its_margin():
    """Issue 44 item 3: the canaries' near-chance claim is an exact rank-based test. At its margin — every
    exposure level reached twice as often as by chance (rank/|R| halved), or a few canaries fully exposed on top
    of chance — it is claimed in ≤ α of draws (the paired t it replaces: 7.2 % at α = 0.05). 100 canaries, 500
    draws each: a true 2α would exceed the bound."""
    from privleak.attacks.exposure_stats import exposure_within

    rng = np.random.default_rng(44)
    n, size, runs = 100, 10_000, 500
    for make in (lambda: rng.random(n) / 2,  # P[exposure ≥ b] = 2^(1−b) at every level: the margin
                 lambda: np.where(rng.random(n) < 1 / 16, 1e-6, rng.random(n))):  # 1 in 16 memorised: the 4-bit level at its margin
        claims = 0
        for _ in range(runs):
            ranks = np.maximum(1, np.ceil(make() * size))
            claims += exposure_within(_exposure_result(ranks, size).canaries, 1.0, 0.05).equivalent
        assert claims / runs <= 0.05 + 2.33 * math.sqrt(0.05 * 0.95 / runs)


def test_exposure_within_is_judgeable_by_the_sizes_alone():
    """Which canary claims can be made is decided by the number of canaries and candidates (the uniform-rank
    null), never by where the ranks fell: 15 canaries cannot show 1 bit whatever they score; 100 can."""
    from privleak.attacks.exposure_stats import exposure_within

    rng = np.random.default_rng(45)
    for ranks in ([5000] * 15, list(rng.integers(1, 10_001, 15))):
        e = exposure_within(_exposure_result(ranks, 10_000).canaries)
        assert not e.judgeable and not e.equivalent
    judge = {exposure_within(_exposure_result(rng.integers(1, 10_001, 100), 10_000).canaries).judgeable
             for _ in range(20)}
    assert judge == {True}
    at_chance = sum(exposure_within(_exposure_result(rng.integers(1, 10_001, 100), 10_000).canaries).equivalent
                    for _ in range(100))
    assert at_chance >= 30  # the claim is makeable at 100 canaries
