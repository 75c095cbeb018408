"""The f-DP one-run bound (Mahloujifar, Melis & Chaudhuri 2025) against hand-computed values, its known limits,
the accountant's trade-off curves it is read against, and its false-alarm rate on mechanisms exactly at their
claimed curves (Gaussian scores of the matching μ, the white-box likelihood ratio of DP-SGD itself)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special, stats

from privleak.accountants.analysis.profile import privacy_profile
from privleak.audit.alarms import alarm_decision, canary_curves, fdp_alarm_test, reconstruction_alarm_test
from privleak.audit.fdp import (
    EpsilonDeltaCurve,
    GaussianCurve,
    ProfileCurve,
    fdp_grid_p_value,
    fdp_min_correct,
    fdp_p_value,
    fdp_refutes,
)
from privleak.audit.one_run import guess_counts, reconstruction_counts, reconstruction_grid, steinke_p_value


def test_recursion_by_hand():
    # m = 4 canaries, r = v = 2 guesses right, pure ε = 1: B⁻¹(c) = max(e^{-1} c, 1 − e (1 − c)).
    # τ = 0.5: c₂ = 0.25, h₂ = 0; i = 1: h = e^{-1}·0.25 = 0.091970, c = 0.25 + 1/(2−1)·0.091970 = 0.341970;
    # i = 0: h = e^{-1}·0.341970 = 0.125805, c unchanged (factor 0/2): c + h = 0.467775 < r/m = 0.5 → not refuted.
    # τ = 0.6: c = 0.3 → 0.410364, h = 0.150965: c + h = 0.561329 > 0.5 → refuted.
    f = EpsilonDeltaCurve(1.0)
    assert f.inverse_blow_up(0.25) == pytest.approx(0.25 / math.e)
    assert not fdp_refutes(4, 2, 2, 0.5, f)
    assert fdp_refutes(4, 2, 2, 0.6, f)
    # … and the p-value between them is Steinke et al.'s: P[Bin(2, e/(1+e)) = 2] = 0.53444
    assert fdp_p_value(4, 2, 2, f) == pytest.approx(special.expit(1.0) ** 2, rel=2e-3)


@pytest.mark.parametrize("m,r,v,eps", [(1000, 1000, 1000, 5.0), (1000, 100, 100, 2.0), (500, 200, 180, 1.0),
                                       (100, 100, 100, 3.0), (10_000, 2000, 1990, 4.0)])
def test_pure_dp_reproduces_steinke(m, r, v, eps):
    """With f the curve of ε-DP the recursion is Steinke et al.'s binomial bound at δ = 0 (their Thm 3.1)."""
    p = fdp_p_value(m, r, v, EpsilonDeltaCurve(eps))
    assert p == pytest.approx(steinke_p_value(m, r, v, eps, 0.0), rel=0.02)


@pytest.mark.parametrize("r,eps,k", [(10, 2.0, 10), (50, 3.0, 100), (100, 5.0, 1000)])
def test_k_ary_perfect_guesses(r, eps, k):
    """k-ary guesses, all right, under ε-DP: no guess is right with probability above e^ε/(e^ε + k − 1), and the
    recursion's (k − 1) factor gives exactly that product."""
    p = fdp_p_value(10 * r, r, r, EpsilonDeltaCurve(eps), k=k)
    assert p == pytest.approx((math.exp(eps) / (math.exp(eps) + k - 1)) ** r, rel=0.02)


def test_limits_and_monotonicity():
    f = GaussianCurve(1.0)
    assert fdp_p_value(1000, 100, 0, f) == 1.0 and not fdp_refutes(1000, 100, 0, 1.0, f)
    ps = [fdp_p_value(1000, 200, v, f) for v in (120, 150, 180, 200)]
    assert ps == sorted(ps, reverse=True)  # more right guesses: more evidence
    assert fdp_p_value(1000, 200, 200, GaussianCurve(2.0)) > ps[-1]  # a weaker claim is harder to refute
    # a perfect auditor of m = 1,000 cannot refute μ-GDP beyond μ ≈ 1.7 (the audit's size is the limit)
    assert fdp_p_value(1000, 1000, 1000, GaussianCurve(1.75)) > 0.002
    with pytest.raises(ValueError):
        fdp_p_value(10, 5, 6, f)
    with pytest.raises(ValueError):
        fdp_p_value(10, 5, 3, f, k=1)
    # the fewest right guesses that refute, and the grid's union bound
    v = fdp_min_correct(1000, 200, 0.01, f)
    assert fdp_refutes(1000, 200, v, 0.01, f) and not fdp_refutes(1000, 200, v - 1, 0.01, f)
    assert fdp_min_correct(1000, 10, 1e-9, f) is None
    assert fdp_grid_p_value(1000, [(100, 90), (200, 150)], f) == pytest.approx(
        min(1.0, 2 * min(fdp_p_value(1000, 100, 90, f), fdp_p_value(1000, 200, 150, f))))



@pytest.mark.parametrize("curve", [GaussianCurve(0.8), EpsilonDeltaCurve(2.0, 1e-5)])
def test_grid_p_value_is_the_smallest_candidates_bisected_or_not(curve):
    """fdp_grid_p_value skips the bisection of a count not refuted at the best level so far: the minimum, and so
    the p-value, is exactly the one of bisecting every count."""
    rng = np.random.default_rng(3)
    for _ in range(40):
        m = int(rng.integers(50, 600))
        counts = []
        for r in sorted(set(rng.integers(1, m + 1, size=int(rng.integers(1, 9))).tolist())):
            counts.append((r, int(rng.binomial(r, rng.uniform(0.5, 1.0)))))
        full = min(1.0, len(counts) * min(fdp_p_value(m, r, v, curve) for r, v in counts))
        assert fdp_grid_p_value(m, counts, curve) == full
def test_profile_curve_is_exact_envelope_and_below_the_true_curve():
    # One (ε, δ) point: the curve of (ε, δ)-DP exactly.
    one, ref = ProfileCurve((2.0,), (1e-5,)), EpsilonDeltaCurve(2.0, 1e-5)
    for c in (0.0, 1e-6, 2e-5, 0.1, 0.5, 0.9, 1 - 1e-7, 1.0):
        assert one.inverse_blow_up(c) == pytest.approx(ref.inverse_blow_up(c), abs=1e-15)
    # DP-SGD with q = 1 and one step is the Gaussian mechanism, exactly 1/σ-GDP: the accountant's curve must lie
    # below G_μ (B⁻¹ never above the Gaussian's: a correct Gaussian is never over-refuted) and close to it.
    p = privacy_profile(sample_rate=1.0, noise_multiplier=0.8, steps=1)
    curve, gauss = ProfileCurve(p.epsilons, p.deltas), GaussianCurve(1 / 0.8)
    for c in np.geomspace(1e-9, 0.999, 60):
        b, g = curve.inverse_blow_up(float(c)), gauss.inverse_blow_up(float(c))
        assert b <= g * (1 + 1e-9) + 1e-15
        assert b >= 0.9 * g - 1e-12, c


def test_profile_matches_accountant_epsilon():
    from privleak.accountants import epsilon_pld

    q, s, t = 0.15, 1.25, 120
    p = privacy_profile(sample_rate=q, noise_multiplier=s, steps=t)
    assert abs(p.epsilon(1e-5) - epsilon_pld(sample_rate=q, noise_multiplier=s, steps=t, delta=1e-5)) < 0.02
    rep = privacy_profile(sample_rate=q, noise_multiplier=s, steps=t, relation="replace")
    assert rep.epsilon(1e-5) > p.epsilon(1e-5)  # replacing a record is a larger change than adding it
    assert all(a >= b for a, b in zip(p.deltas, p.deltas[1:]))


def test_canary_curves_per_unit():
    base = {"sigma": 1.25, "sample_rate": 0.15, "steps": 120}
    rec, per, cli = (canary_curves({**base, "unit": u}) for u in ("record", "person", "client"))
    assert rec.relations == ("add_remove", "replace") == per.relations
    assert cli.relations == ("both", "replace") and cli.claim_relation == "replace"
    for c in (1e-6, 1e-3, 0.1):  # the client curve (either relation) is the weaker promise
        assert cli.inclusion.inverse_blow_up(c) <= rec.inclusion.inverse_blow_up(c) + 1e-18
    assert canary_curves({**base, "sigma": 0.0, "unit": "record"}) is None
    assert canary_curves({"unit": "record"}) is None


# ----------------------------------------------------------------------------- false alarms

ALPHA = 0.05


def _flag_rate(flags: list[bool]) -> tuple[int, int]:
    return sum(flags), len(flags)


def _assert_at_most_alpha(flags: list[bool], alpha: float = ALPHA) -> None:
    # At most α in expectation: allow the binomial's 99.9 % quantile over the seeds.
    k, n = _flag_rate(flags)
    assert k <= stats.binom.ppf(0.999, n, alpha), f"{k} of {n} flagged"


def test_gaussian_scores_at_their_mu_are_flagged_at_most_alpha():
    """The in/out game on a mechanism exactly μ-GDP (score = μ·S + N(0, 1)), μ = 1.5, claimed f = G_μ: every
    candidate of the fixed grid, union bound inside, at level α — flagged in at most an α share of seeds."""
    mu, m, f = 1.5, 1000, GaussianCurve(1.5)
    rng = np.random.default_rng(0)
    flags = []
    for _ in range(200):
        s = rng.random(m) < 0.5
        counts = [(r, v) for _, _, r, v in guess_counts(mu * s + rng.normal(size=m), s)]
        flags.append(fdp_grid_p_value(m, counts, f) <= ALPHA)
    _assert_at_most_alpha(flags)


def test_k_ary_gaussian_at_its_mu_is_flagged_at_most_alpha():
    """The reconstruction game on a mechanism exactly μ-GDP between any two values of a secret: y = (μ/√2)·e_Z +
    N(0, I_k) (every pair of values moves the mean by μ), guess argmax, confidence max, k = 64."""
    mu, m, k = 3.0, 300, 64
    f = GaussianCurve(mu)
    rng = np.random.default_rng(1)
    flags = []
    for _ in range(150):
        z = rng.integers(0, k, size=m)
        y = rng.normal(size=(m, k))
        y[np.arange(m), z] += mu / math.sqrt(2)
        counts = reconstruction_counts(y.max(1), y.argmax(1) == z)
        flags.append(fdp_grid_p_value(m, counts, f, k=k) <= ALPHA)
    _assert_at_most_alpha(flags)


def _dpsgd_lr_scores(rng, s: np.ndarray, q: float, sigma: float, steps: int) -> np.ndarray:
    """White-box DP-SGD on a canary whose clipped gradient is a unit Dirac: the noisy sum of each step in the
    canary's coordinate, y_t = b_t·S + N(0, σ²), b_t ~ Bernoulli(q), read by the optimal (likelihood-ratio) test
    Σ_t log((1 − q) + q·exp((2 y_t − 1) / 2σ²)) — the test that attains the mechanism's own trade-off curve."""
    y = (rng.random((s.size, steps)) < q) * s[:, None] + rng.normal(0.0, sigma, size=(s.size, steps))
    return np.log1p(q * np.expm1((2 * y - 1) / (2 * sigma**2))).sum(1)


def test_dpsgd_at_its_own_curve_is_flagged_at_most_alpha():
    """The f-DP route against the accountant's curve, on a correct DP-SGD read as well as it can be read: three
    such arms per audit, α split over their three f-DP tests alone (α/3 each: a larger level than an audit's
    α/9 over three routes of three arms, so a harder test of the guarantee)."""
    q, sigma, steps, m = 0.2, 1.0, 50, 1000
    privacy = {"sigma": sigma, "sample_rate": q, "steps": steps, "unit": "record"}
    curves = canary_curves(privacy)
    rng = np.random.default_rng(2)
    flags = []
    for _ in range(40):
        tests = []
        for arm in ("a", "b", "c"):
            s = rng.random(m) < 0.5
            counts = [(r, v) for _, _, r, v in guess_counts(_dpsgd_lr_scores(rng, s, q, sigma, steps), s)]
            tests.append(fdp_alarm_test(arm, m, counts, curves, 1e-5))
        flags.append(bool(alarm_decision(tests, ALPHA).violated))
    _assert_at_most_alpha(flags)
    # … and the test can fail: the same reading of a run with a third of the noise refutes the σ = 3 claim
    s = rng.random(m) < 0.5
    counts = [(r, v) for _, _, r, v in guess_counts(_dpsgd_lr_scores(rng, s, q, 1.0, steps), s)]
    claim = canary_curves({**privacy, "sigma": 3.0})
    assert fdp_alarm_test("a", m, counts, claim, 1e-5).p_value < 1e-3


def test_reconstruction_route_on_dpsgd_sums_is_flagged_at_most_alpha():
    """Replace-one DP-SGD on a canary whose clipped gradient is e_Z (one of k directions): the summed noisy
    gradients y = B·e_Z + N(0, Tσ² I), B ~ Binomial(T, q); guess argmax, against the replace-one curve."""
    q, sigma, steps, m, k = 0.2, 1.0, 50, 300, 256
    curves = canary_curves({"sigma": sigma, "sample_rate": q, "steps": steps, "unit": "record"})
    rng = np.random.default_rng(3)
    flags = []
    for _ in range(100):
        z = rng.integers(0, k, size=m)
        y = rng.normal(0.0, sigma * math.sqrt(steps), size=(m, k))
        y[np.arange(m), z] += rng.binomial(steps, q, size=m)
        counts = reconstruction_counts(y.max(1), y.argmax(1) == z)
        flags.append(reconstruction_alarm_test("a", m, k, counts, curves, 1e-5).p_value <= ALPHA)
    _assert_at_most_alpha(flags)


def test_reconstruction_grid_is_fixed_by_m():
    assert reconstruction_grid(500) == [10, 50, 150, 500]
    assert reconstruction_grid(3) == [1, 3]
    conf, right = np.array([0.9, 0.1, 0.5, 0.7]), np.array([True, False, False, True])
    assert reconstruction_counts(conf, right, [1, 2, 4]) == [(1, 1), (2, 2), (4, 2)]


# ----------------------------------------------------------------------------- the reconstruction game's parts

def test_audit_canaries_have_unique_queries_and_uniform_words():
    from privleak.core.errors import UserError
    from privleak.data.audit_canaries import make_audit_canaries

    pool = [f" w{i:02d}" for i in range(30)]
    cans = make_audit_canaries(pool, 400, 4, 2, seed=3, query_words=2)
    queries = [tuple(c.text.split()[:2]) for c in cans]
    assert len(set(queries)) == 400 and all(len(c.text.split()) == 6 for c in cans)
    # the words after the query are not constrained: every value of the last word appears about 400/30 times
    last = np.bincount([int(c.text.split()[-1][1:]) for c in cans], minlength=30)
    assert stats.chisquare(last).pvalue > 1e-3
    with pytest.raises(UserError, match="query_words"):
        make_audit_canaries(pool, 500, 4, 2, seed=3, query_words=2)  # 500 > 30² / 2


def _greedy_by_hand(handle, canary, pool, query_words):
    """The decoder, spelled out one canary at a time: at each step the likeliest token that continues a pool word."""
    import torch

    tok = handle.tokenizer
    seqs = [tok(w, add_special_tokens=False)["input_ids"] for w in pool]
    query, secret = canary.text.split()[:query_words], canary.text.split()[query_words:]
    ctx = handle.lead_ids() + tok(" ".join(query), add_special_tokens=False)["input_ids"]
    out = []
    for _ in secret:
        done: list[int] = []
        while True:
            live = [i for i, s in enumerate(seqs) if s[:len(done)] == done and len(s) > len(done)]
            allowed = sorted({seqs[i][len(done)] for i in live})
            with torch.no_grad():
                logits = handle.model(torch.tensor([ctx])).logits[0, -1]
            t = allowed[int(torch.argmax(logits[allowed]))]
            done.append(t)
            ctx.append(t)
            ended = [i for i, s in enumerate(seqs) if s == done]
            if ended:
                out.append(ended[0])
                break
    return tuple(out)


def test_decoder_reads_the_query_only(tiny_handle):
    from privleak.attacks.one_run_canaries import rare_word_pool, reconstruct_secrets
    from privleak.data.audit_canaries import AuditCanary, make_audit_canaries

    pool = rare_word_pool(tiny_handle.tokenizer, [])
    cans = make_audit_canaries(pool, 6, 2, 2, seed=1, query_words=2)
    guesses, conf = reconstruct_secrets(tiny_handle, cans, pool, 2)
    assert conf.shape == (6,) and (conf <= 0).all()
    for c, g in zip(cans, guesses):
        assert g == _greedy_by_hand(tiny_handle, c, pool, 2)
    # the guess is a function of the query: another secret after the same query, the same guess
    other = [AuditCanary(c.canary_id, c.prefix, pool[0] + pool[1], c.included) for c in cans]
    assert reconstruct_secrets(tiny_handle, other, pool, 2)[0] == guesses


def test_alarm_power_reads_the_reference():
    from privleak.audit.alarms import alarm_power

    curves = canary_curves({"sigma": 1.25, "sample_rate": 0.15, "steps": 120, "unit": "record"})
    m, k = 200, 16.0 ** 5
    own = alarm_decision([reconstruction_alarm_test("dp-8", m, k, [(4, 0), (20, 0), (60, 0), (200, 0)], curves, 1e-5)],
                         ALPHA).alarms
    strong = [reconstruction_alarm_test("dp-8", m, k, [(4, 4), (20, 20), (60, 55), (200, 90)], curves, 1e-5)]
    weak = [reconstruction_alarm_test("dp-8", m, k, [(4, 0), (20, 0), (60, 1), (200, 1)], curves, 1e-5)]
    ok = alarm_power("dp-8", own, strong, "baseline")
    assert ok.verified and ok.route == "one_run_kary" and ok.p_value <= ok.level and ok.text.startswith("Checked")
    no = alarm_power("dp-8", own, weak, "baseline")
    assert not no.verified and "unverified" in no.text
    # the fewest right guesses each candidate needs, as fdp_min_correct gives them at the allotted level / grid
    assert no.needed == [("one_run_kary", r, fdp_min_correct(m, r, own[0].level / 4, curves.secret, k))
                         for r in (4, 20, 60, 200)]


def test_decoding_past_a_small_models_window_keeps_its_last_tokens(tiny_model_dir):
    """A canary longer than the model's positions (a user's small model through the callback): the decoder
    reads the last tokens that fit instead of indexing past the position embeddings (IndexError before)."""
    import transformers

    from privleak.attacks.one_run_canaries import rare_word_pool, reconstruct_secrets
    from privleak.data.audit_canaries import make_audit_canaries
    from privleak.models.handle import ModelHandle

    tok = transformers.AutoTokenizer.from_pretrained(tiny_model_dir)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=len(tok), n_positions=6, n_embd=16,
                                                                 n_layer=1, n_head=2)).eval()
    handle = ModelHandle(model=model, tokenizer=tok, max_length=6, name="window-6")
    pool = rare_word_pool(tok, [])
    cans = make_audit_canaries(pool, 3, 6, 4, seed=2, query_words=6)
    guesses, conf = reconstruct_secrets(handle, cans, pool, 6)
    assert len(guesses) == 3 and all(len(g) == 4 for g in guesses) and np.isfinite(conf).all()
