"""ReCaLL, Con-ReCall, DC-PDD and the neighbourhood attack: their formulas on numbers worked out by hand, their
passes against a plain forward pass, and what they read (public data only, never the judged non-members)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hand import make_context

from privleak.attacks import registry
from privleak.attacks.membership.attacks import MembershipResult
from privleak.attacks.membership.calibrated import (
    MEMBER_PREFIX,
    NEIGHBOURS,
    NON_MEMBER_PREFIX,
    REFERENCE_CORPUS,
    con_recall_scores,
    dc_pdd_scores,
    make_neighbours,
    neighbourhood_scores,
    prefix_budget,
    prefixed_likelihoods,
    recall_scores,
    token_frequencies,
)
from privleak.attacks.scoring import score_texts
from privleak.attacks.settings import AttackSettings
from privleak.audit.runner import run_family
from privleak.data.records import Record
from privleak.models.batching import encode, token_ids

# --------------------------------------------------------------------------- the formulas, by hand


def test_recall_is_the_ratio_of_the_prefixed_to_the_plain_log_likelihood():
    # LL(x | P) = −2, LL(x) = −1: the prefix halved the likelihood's log → 2 (a member, by the paper's finding);
    # −3 / −2 = 1.5; LL(x) = 0 (every token certain): no relative change, 1.
    np.testing.assert_allclose(recall_scores([-2.0, -3.0, -0.5], [-1.0, -2.0, 0.0]), [2.0, 1.5, 1.0])


def test_con_recall_subtracts_gamma_times_the_member_prefixed_likelihood():
    # (−2 − 0.5·(−1.2)) / −1 = (−2 + 0.6) / −1 = 1.4; (−1 − 0.5·(−1)) / −2 = 0.25
    np.testing.assert_allclose(con_recall_scores([-2.0, -1.0], [-1.2, -1.0], [-1.0, -2.0], gamma=0.5), [1.4, 0.25])


def test_token_frequencies_are_laplace_smoothed():
    # counts over 4 tokens: v0 1, v1 3, v2 0, v3 0; f = (count + 1) / (4 + 4)
    np.testing.assert_allclose(token_frequencies([[0, 1, 1], [1]], 4), [2 / 8, 4 / 8, 1 / 8, 1 / 8])


def test_dc_pdd_caps_each_first_occurrence_and_averages():
    f = np.array([0.25, 0.5, 0.125, 0.125])
    # text 0 predicts tokens 1, 2, 1 with p = 0.5, 0.001, 0.9:
    #   token 1: 0.5 · −ln 0.5 = 0.3466 → capped at a = 0.01; token 2: 0.001 · −ln 0.125 = 0.0020794;
    #   the second 1 is not a first occurrence. β = (0.01 + 0.0020794) / 2.
    # text 1 predicts nothing: 0. text 2 predicts token 3 with p = 0.002: 0.002 · ln 8 = 0.0041589.
    logprob = np.log([0.5, 0.001, 0.9, 0.002])
    got = dc_pdd_scores(logprob, np.array([0, 3, 3, 4]), np.array([1, 2, 1, 3]), f, a=0.01)
    np.testing.assert_allclose(got, [(0.01 + 0.001 * math.log(8)) / 2, 0.0, 0.002 * math.log(8)], rtol=1e-9)
    with pytest.raises(ValueError, match="token ids"):
        dc_pdd_scores(logprob, np.array([0, 4]), np.array([1, 2]), f)


def test_neighbourhood_is_the_neighbours_mean_loss_minus_the_texts():
    # NLL(x) = 1 with neighbours at 1.5 and 2.5 → 1.0 (x is preferred to its neighbours: member-like); 2 vs 2, 2 → 0
    np.testing.assert_allclose(neighbourhood_scores([1.0, 2.0], [[1.5, 2.5], [2.0, 2.0]]), [1.0, 0.0])


def test_the_prefix_keeps_room_for_the_record():
    assert prefix_budget(160, 150, 400) == 40  # a quarter of the context at least: the record is cut
    assert prefix_budget(128, 64, 400) == 64  # what fits beside the longest record
    assert prefix_budget(128, 64, 10) == 10  # no more than the prefix has


# --------------------------------------------------------------------------- the passes

TEXTS = ["Patient Ann Lee was seen on day 3 for asthma.", "Bo Kim, gout, seen again on day 7.", "x"]


def test_without_a_prefix_the_pass_is_the_scoring_pass(tiny_handle):
    passes = score_texts(tiny_handle, TEXTS)
    p = prefixed_likelihoods(tiny_handle, [], TEXTS, [passes] * 3, [0, 1, 2])
    assert p.prefix_tokens == 0
    np.testing.assert_allclose(p.ll_prefixed, p.ll, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(p.ll[:2], -passes.nll()[:2], rtol=1e-6)


def test_the_prefixed_likelihood_matches_a_plain_forward_pass(tiny_handle):
    prefix = ["Cy Ray was seen for flu.", "General advice: drink water."]
    passes = score_texts(tiny_handle, TEXTS)
    p = prefixed_likelihoods(tiny_handle, prefix, TEXTS[:2], [passes] * 2, [0, 1])
    pre = token_ids(tiny_handle.tokenizer, ["\n\n".join(prefix) + "\n\n"])[0]
    assert p.prefix_tokens == len(pre)  # the tiny model's 96 positions hold both
    for k, text in enumerate(TEXTS[:2]):
        x = encode(tiny_handle.tokenizer, [text], tiny_handle.max_length).ids[0]
        with torch.no_grad():
            logits = tiny_handle.model(input_ids=torch.tensor([pre + x])).logits[0, :-1].double()
        lp = torch.log_softmax(logits, -1)[torch.arange(len(pre) + len(x) - 1), torch.tensor((pre + x)[1:])]
        assert p.ll_prefixed[k] == pytest.approx(float(lp[-(len(x) - 1):].mean()), rel=1e-5)


# --------------------------------------------------------------------------- what they read, end to end

WORDS = ("asthma gout flu acne fever cough rash sprain migraine anemia ulcer angina eczema colic croup gastritis "
         "otitis sinusitis bronchitis hernia lupus psoriasis tinnitus vertigo").split()


def _records(kind: str, n: int, start: int = 0) -> list[Record]:
    """Records distinct enough that the evaluation sets keep every person (no near-duplicates merged)."""
    rng = np.random.default_rng(start)
    return [Record(f"{' '.join(rng.choice(WORDS, 6))} {start + i} {' '.join(rng.choice(WORDS, 5))}.", None,
                   {"kind": "phi", "person_id": f"{kind}-{start + i}"}) for i in range(n)]


def test_the_attacks_run_and_read_public_data_only(tiny_handle):
    members, non_members = _records("m", 8), _records("n", 8, start=20)
    population, public = _records("p", 3, start=40), _records("q", 3, start=60)
    settings = AttackSettings(bootstrap=0, neighbours=2)
    ctx = make_context(members, non_members, population, public, settings=settings, target=tiny_handle)
    held_out = {r.text for r in non_members}
    assert set(ctx[NON_MEMBER_PREFIX]) <= {r.text for r in population}  # the population first, never non-members
    assert set(ctx[REFERENCE_CORPUS]) == {r.text for r in population + public}
    assert not held_out & (set(ctx[NON_MEMBER_PREFIX]) | set(ctx[REFERENCE_CORPUS]))
    # every member person is evaluated here and no canary is planted: Con-ReCall has no member prefix
    assert len(ctx.mia_members) == 8 and ctx[MEMBER_PREFIX] == [] and not ctx.has(MEMBER_PREFIX)
    texts = [r.text for r in members] + [r.text for r in non_members]
    hood = make_neighbours(tiny_handle, texts, 2, seed=0)
    assert len(hood) == 16 and all(len(h) == 2 for h in hood) and sum(h != [t] * 2 for h, t in zip(hood, texts)) > 8
    ctx = make_context(members, non_members, population, public, settings=settings, target=tiny_handle,
                       given={NEIGHBOURS: hood})
    out = run_family(registry.family("membership"), tiny_handle, ctx)
    for name in ("recall", "dc_pdd", "neighbourhood"):
        r = out.results[name]
        assert isinstance(r, MembershipResult) and r.n_members == r.n_non_members == 8, name
        assert np.isfinite(r.member_scores).all() and np.isfinite(r.non_member_scores).all(), name
    assert "con_recall" not in out.results


def test_con_recall_draws_its_member_prefix_from_people_never_evaluated(tiny_handle):
    members, non_members = _records("m", 10), _records("n", 6, start=20)
    canary = Record("Verification record for Zed Q: social security number 123-45-6789.", None, {"kind": "canary"})
    ctx = make_context([*members, canary], non_members, _records("p", 2, start=40), settings=AttackSettings(bootstrap=0),
                       target=tiny_handle)
    plain = [r for r in members]
    evaluated = {plain[int(i)].text for i in ctx.mia_members}
    prefix = ctx[MEMBER_PREFIX]
    assert prefix and not set(prefix) & evaluated and set(prefix) <= {r.text for r in members}
    out = run_family([registry.ATTACKS["recall"], registry.ATTACKS["con_recall"]], tiny_handle, ctx)
    assert out.results["con_recall"].parameters["gamma"] == 0.5 and out.results["recall"].n_members == 6
    # With every person evaluated, the planted canary is the member prefix (a member never evaluated).
    ctx = make_context([*members[:6], canary], non_members, _records("p", 2, start=40),
                       settings=AttackSettings(bootstrap=0), target=tiny_handle)
    assert ctx[MEMBER_PREFIX] == [canary.text]
