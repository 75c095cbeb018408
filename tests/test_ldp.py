"""CMS and HCMS (Apple 2017) against their analytical moments, their ε-LDP randomisers, and the term rule."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from privleak.defenses import ldp
from privleak.defenses.ldp_terms import discover, evaluate, record_terms

K, M = 16, 64
ITEMS = ["a"] * 60 + ["b"] * 30 + [f"x{i}" for i in range(110)]
TRIALS = 3000


@pytest.fixture(scope="module")
def hashed():
    h = ldp.HashFamily(K, M, seed=1)
    return h(ITEMS), h(["a", "b", "x3", "never-seen"])


@pytest.mark.parametrize("method", ["cms", "hcms"])
@pytest.mark.parametrize("eps", [1.0, 4.0])
def test_estimates_are_unbiased_with_the_stated_variance(hashed, method, eps):
    users, targets = hashed
    rng = np.random.default_rng(11)
    est = np.array([ldp.estimate(ldp.sketch(ldp.privatise(users, method, eps, M, rng)), len(ITEMS), targets)
                    for _ in range(TRIALS)])
    for j in range(targets.shape[0]):
        pi = ldp.collision_fractions(users, targets[j])
        mean, var = ldp.expected_estimate(pi, M), ldp.estimate_variance(pi, method, eps, M)
        # the mean of TRIALS draws has sd √(var/TRIALS); the sample variance ≈ var·(1 ± √(2/TRIALS)) (near-Gaussian sums)
        assert abs(est[:, j].mean() - mean) < 4.5 * math.sqrt(var / TRIALS), (j, est[:, j].mean(), mean)
        assert abs(est[:, j].var() / var - 1) < 5 * math.sqrt(2 / TRIALS), (j, est[:, j].var(), var)
    # the leading term the paper gives is within the collision terms of the exact variance
    pi = ldp.collision_fractions(users, targets[0])
    assert ldp.paper_variance(len(ITEMS), method, eps, M) == pytest.approx(
        ldp.estimate_variance(pi, method, eps, M), rel=0.5)


def test_unbiased_over_random_hashes():
    """Over the hash functions too, E f̂(d) = f(d): collisions cancel on average."""
    errs = []
    for seed in range(400):
        h = ldp.HashFamily(4, 16, seed=seed)
        users, target = h(ITEMS), h(["b"])[0]
        errs.append(ldp.expected_estimate(ldp.collision_fractions(users, target), 16) - 30)
    errs = np.array(errs)
    assert abs(errs.mean()) < 4.5 * errs.std() / math.sqrt(len(errs))


def test_hcms_beats_cms_on_bits_cms_beats_hcms_on_variance():
    assert ldp.bits_per_report("hcms", 128, 1024)["payload_bits"] == 1
    assert ldp.bits_per_report("cms", 128, 1024)["payload_bits"] == 1024
    for eps in (1, 2, 4, 8):
        assert ldp.paper_variance(1000, "cms", eps, 1024) < ldp.paper_variance(1000, "hcms", eps, 1024)
    # HCMS's variance floor: c_ε → 1 as ε grows, never below n
    assert ldp.paper_variance(1000, "hcms", 50, 1024) >= 1000


@pytest.mark.parametrize("eps", [0.5, 2.0, 6.0])
def test_cms_report_is_eps_ldp_exactly(eps):
    """Every output vector: P(ṽ | d) / P(ṽ | d') ≤ e^ε, with equality reached (a tight ε)."""
    m, q = 4, ldp.flip_probability(eps, "cms")
    worst = 0.0
    for p1, p2 in itertools.permutations(range(m), 2):  # the items' positions in the sampled row
        for out in itertools.product((-1, 1), repeat=m):
            def prob(p):
                v = [1 if i == p else -1 for i in range(m)]
                return math.prod((1 - q) if o == x else q for o, x in zip(out, v))
            worst = max(worst, math.log(prob(p1) / prob(p2)))
    assert worst == pytest.approx(eps)


@pytest.mark.parametrize("eps", [0.5, 2.0, 6.0])
def test_hcms_report_is_eps_ldp_exactly(eps):
    q = ldp.flip_probability(eps, "hcms")
    assert math.log((1 - q) / q) == pytest.approx(eps)


def test_flip_rates_and_coefficients_are_as_specified(hashed):
    users, _ = hashed
    rng = np.random.default_rng(3)
    n = users.shape[0]
    big = np.repeat(users, 50, axis=0)
    r = ldp.privatise(big, "cms", 2.0, M, rng)
    truth = -np.ones_like(r.values)
    truth[np.arange(len(big)), big[np.arange(len(big)), r.rows]] = 1
    flipped = (r.values != truth).mean()
    q = ldp.flip_probability(2.0, "cms")
    assert abs(flipped - q) < 5 * math.sqrt(q * (1 - q) / truth.size)
    h = ldp.privatise(big, "hcms", 2.0, M, rng)
    hadamard = ldp.fwht(np.eye(M))
    clean = hadamard[h.cols, big[np.arange(len(big)), h.rows]]
    q = ldp.flip_probability(2.0, "hcms")
    assert abs((h.values != clean).mean() - q) < 5 * math.sqrt(q * (1 - q) / len(big))
    assert n == len(ITEMS)


def test_fwht_is_the_sylvester_hadamard_matrix():
    H = np.array([[1]])
    while H.shape[0] < 16:
        H = np.block([[H, H], [H, -H]])
    x = np.random.default_rng(0).normal(size=(3, 16))
    assert np.allclose(ldp.fwht(x), x @ H.T)


def test_bad_parameters_refused():
    with pytest.raises(ValueError, match="power of two"):
        ldp.privatise(np.zeros((1, 2), dtype=np.int64), "hcms", 1.0, 100, np.random.default_rng(0))
    with pytest.raises(ValueError, match="ε"):
        ldp.frequencies(["a"], ["a"], "cms", 0.0, 2, 8, seed=0)


def test_terms_rule_never_counts_digit_strings():
    assert record_terms("SSN 394-72-1850, phone 555 0101; BP high. bp HIGH") == ["ssn", "phone", "bp", "high"]
    assert record_terms("a b c", ngram=2) == ["a b", "b c"]


def test_top_k_recovers_frequent_terms_at_high_epsilon():
    rng = np.random.default_rng(0)
    vocab = [f"w{i}" for i in range(60)]
    # each record is a single term drawn from a steep distribution: the top 5 are clear
    weights = np.array([2000, 1500, 1200, 1000, 800] + [20] * 55, dtype=float)
    texts = list(rng.choice(vocab, size=4000, p=weights / weights.sum()))
    ev = evaluate(texts, [1.0, 8.0], top_k=5, k=32, m=256, seed=0)
    by = {(s.method, s.epsilon): s for s in ev.scores}
    assert by[("cms", 8.0)].recall == 1.0 and ev.sampling_only_recall == 1.0
    assert by[("cms", 8.0)].total_bits == 256 + 5 and by[("hcms", 8.0)].total_bits == 1 + 5 + 8


def test_discover_lists_only_terms_above_the_noise():
    texts = ["alpha"] * 900 + ["beta"] * 300 + [f"rare{i}" for i in range(100)]
    found = discover(texts, ["alpha", "beta", "rare1", "gamma"], epsilon=4.0, method="cms", k=16, m=256, seed=0)
    names = [t for t, _ in found.terms]
    assert names[:2] == ["alpha", "beta"] and "rare1" not in names and "gamma" not in names
    assert found.epsilon == 4.0 and found.threshold > 0


def test_ldp_command_prints_one_score_per_method_and_epsilon(tmp_path, capsys):
    import json

    from privleak.cli import main

    rng = np.random.default_rng(1)
    words = ["fever", "cough", "rash", "pain"] + [f"rare{i}" for i in range(40)]
    p = np.array([0.4, 0.3, 0.15, 0.1] + [0.05 / 40] * 40)
    path = tmp_path / "notes.jsonl"
    path.write_text("".join(json.dumps({"text": f"{w} noted, MRN-{i:06d}"}) + "\n"
                            for i, w in enumerate(rng.choice(words, size=3000, p=p))))
    try:
        main(["ldp", str(path), "--epsilons", "2,8", "--top", "3", "--k", "16", "--m", "256", "--json"])
    except SystemExit as exc:
        assert exc.code in (0, None)
    out = json.loads(capsys.readouterr().out)
    assert [(s["method"], s["epsilon"]) for s in out["scores"]] == [("cms", 2.0), ("cms", 8.0), ("hcms", 2.0), ("hcms", 8.0)]
    assert out["n_users_reporting"] == 3000 and out["sampling_only_recall"] > 0.6
    best = {(s["method"], s["epsilon"]): s for s in out["scores"]}[("cms", 8.0)]
    assert best["recall"] >= 2 / 3 and best["total_bits"] == 256 + 4
