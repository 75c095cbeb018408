"""The one-run lower bounds (audit/one_run.py: ε by Steinke et al., μ of μ-GDP by Mahloujifar et al.): known values, limits, and validity on simulated DP mechanisms."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize

from privleak.audit import one_run as o


def _p_value_by_hand(m: int, r: int, v: int, eps: float, delta: float) -> float:
    """Steinke et al. 2023, Algorithm 3, written out with math.comb (independent of scipy's binomial)."""
    q = math.exp(eps) / (1 + math.exp(eps))
    pmf = [math.comb(r, j) * q**j * (1 - q) ** (r - j) for j in range(r + 1)]
    beta = sum(pmf[v:])
    alpha = max((sum(pmf[v - i:v]) / i for i in range(1, v + 1)), default=0.0)
    return min(1.0, beta + 2 * m * delta * alpha)


@pytest.mark.parametrize("m,r,v,eps,delta", [(1000, 100, 90, 1.5, 0.0), (1000, 100, 90, 1.5, 1e-5),
                                             (200, 40, 35, 0.7, 1e-4), (50, 10, 10, 2.0, 1e-3)])
def test_p_value_matches_the_papers_formula(m, r, v, eps, delta):
    assert o.steinke_p_value(m, r, v, eps, delta) == pytest.approx(_p_value_by_hand(m, r, v, eps, delta), rel=1e-9)


def test_all_guesses_right_gives_the_closed_form():
    # δ = 0, v = r: P[B ≥ r] = q^r = alpha  ⇒  ε = logit(alpha^(1/r)).
    for r in (10, 100, 500):
        p = 0.05 ** (1 / r)
        assert o.steinke_epsilon(1000, r, r, 0.05) == pytest.approx(math.log(p / (1 - p)), abs=1e-5)
    # r = 100 all right: 3.49 — the "top 100 of 1000 all correct" figure (Steinke et al. Fig. 2's scale).
    assert o.steinke_epsilon(1000, 100, 100, 0.05) == pytest.approx(3.493, abs=1e-3)


def test_bound_behaves():
    # More correct guesses, more ε; δ > 0 costs some; chance-level guessing gives nothing.
    assert o.steinke_epsilon(1000, 100, 95) > o.steinke_epsilon(1000, 100, 85) > 0
    assert o.steinke_epsilon(1000, 100, 100, delta=1e-4) < o.steinke_epsilon(1000, 100, 100)
    assert o.steinke_epsilon(1000, 100, 50) == 0.0
    assert o.steinke_epsilon(1000, 0, 0) == 0.0


def test_gaussian_mu_is_exactly_eps_delta():
    for eps, delta in ((1.0, 1e-5), (4.0, 1e-5), (8.0, 1e-6)):
        mu = o.gaussian_mu(eps, delta)
        assert o.gaussian_delta(mu, eps) == pytest.approx(delta, rel=1e-6)
    # The known calibration: ε = 1, δ = 1e-5 ⇒ σ ≈ 3.73 (Balle & Wang 2018, analytic Gaussian), μ = 1/σ.
    assert 1 / o.gaussian_mu(1.0, 1e-5) == pytest.approx(3.73, abs=0.01)


def test_gdp_refutes_the_gaussian_mechanism_the_binomial_bound_refutes():
    # The point of Mahloujifar et al.: for the same guesses the f-DP analysis refutes at least the
    # Gaussian mechanism that is exactly (ε_steinke, δ)-DP.
    for r, v in ((100, 100), (100, 90), (200, 180)):
        eps = o.steinke_epsilon(1000, r, v, 0.05, 1e-5)
        assert o.gdp_mu_lower_bound(1000, r, v, 0.05) >= o.gaussian_mu(eps, 1e-5)
    assert o.gdp_mu_lower_bound(1000, 100, 50) == 0.0 and o.gdp_mu_lower_bound(1000, 0, 0) == 0.0


def test_a_mu_bound_is_not_an_epsilon_bound():
    """Issue 26: the old "ε ≥ … under Gaussian f-DP" read μ_lb as the ε of the Gaussian mechanism with
    the same (ε, δ). On exactly ε-DP Laplace canaries that reading exceeds the true ε almost always,
    while the Steinke bound (an (ε, δ) bound) never does: μ-GDP is a stronger claim than ε-DP."""
    eps, delta, above_as_eps, above_steinke = 1.0, 1e-5, 0, 0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        inc = rng.random(1000) < 0.5
        audit = o.one_run_audit(inc * eps + rng.laplace(size=1000), inc, delta=delta)
        above_as_eps += audit.mu_gdp_lb > o.gaussian_mu(eps, delta)
        above_steinke += audit.epsilon_steinke > eps
    assert above_as_eps >= 15 and above_steinke <= 1


def test_dpsgd_mu_by_the_clt():
    # μ = q √(T (e^{1/σ²} − 1)) (Bu et al. 2020): σ = 1, q = 0.01, T = 1000 → 0.01 · √(1000 (e − 1)).
    assert o.dpsgd_mu_clt(1.0, 0.01, 1000) == pytest.approx(0.01 * math.sqrt(1000 * (math.e - 1)))
    assert o.dpsgd_mu_clt(2.0, 0.01, 1000) < o.dpsgd_mu_clt(1.0, 0.01, 1000)
    with pytest.raises(ValueError):
        o.dpsgd_mu_clt(0.0, 0.01, 10)


def test_one_run_p_value_pays_the_grid_and_matches_the_bound():
    counts = [(50, 50), (200, 180), (500, 400), (1000, 700)]
    ps = [o.steinke_p_value(1000, r, v, 1.0, 1e-5) for r, v in counts]
    assert o.one_run_p_value(1000, counts, 1.0, 1e-5) == pytest.approx(min(1.0, 4 * min(ps)))
    # p ≤ a exactly when the bound at a / |grid| exceeds ε.
    for eps in (0.5, 1.0, 1.5, 2.0):
        p = o.one_run_p_value(1000, counts, eps, 1e-5)
        bound = max(o.steinke_epsilon(1000, r, v, 0.01 / 4, 1e-5) for r, v in counts)
        assert (p <= 0.01) == (bound > eps)


def _randomised_response(eps: float, m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """An exactly ε-DP mechanism per canary: the inclusion bit, flipped with probability 1/(1+e^ε)."""
    rng = np.random.default_rng(seed)
    inc = rng.random(m) < 0.5
    keep = rng.random(m) < math.exp(eps) / (1 + math.exp(eps))
    bit = np.where(keep, inc, ~inc)
    return bit + 1e-3 * rng.random(m), inc  # tiny jitter: ties broken at random, not by outcome


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_never_above_the_true_epsilon_of_randomised_response(eps):
    bounds = [o.one_run_audit(*_randomised_response(eps, 500, s), alpha=0.05, gdp=False).epsilon_steinke
              for s in range(60)]
    exceed = sum(b > eps for b in bounds)
    assert exceed <= 3, f"{exceed}/60 bounds above the true ε = {eps}: {sorted(bounds)[-5:]}"
    if eps >= 1.0:  # and the audit has power: it finds most of the ε
        assert np.median(bounds) > 0.4 * eps


def test_never_above_the_true_epsilon_or_mu_of_a_gaussian_mechanism():
    delta = 1e-5
    for mu in (1.0, 3.0):
        true_eps = optimize.brentq(lambda e: o.gaussian_delta(mu, e) - delta, 0.0, 100.0)
        for seed in range(20):
            rng = np.random.default_rng(seed)
            inc = rng.random(500) < 0.5
            audit = o.one_run_audit(inc * mu + rng.normal(size=500), inc, delta=delta, grid=[(25, 25), (50, 0)])
            assert audit.epsilon_steinke <= true_eps
            assert audit.mu_gdp_lb is not None and audit.mu_gdp_lb <= mu


def test_perfect_separation_and_no_signal():
    rng = np.random.default_rng(1)
    inc = rng.random(1000) < 0.5
    perfect = o.one_run_audit(inc.astype(float), inc, delta=1e-5)
    assert perfect.epsilon_steinke > 3 and perfect.mu_gdp_lb > o.gaussian_mu(perfect.epsilon_steinke, 1e-5)
    noise = o.one_run_audit(rng.normal(size=1000), inc, delta=1e-5)
    assert noise.epsilon_steinke < 0.5
    # The union bound over the grid: each candidate at alpha / |grid|.
    assert perfect.alpha_each == pytest.approx(0.05 / len(o.guess_grid(1000)))


def test_guess_grid_depends_on_m_only_and_inputs_are_checked():
    assert o.guess_grid(1000) == [(25, 25), (100, 100), (250, 250), (500, 500)]
    assert all(a + b <= 7 for a, b in o.guess_grid(7)) and o.guess_grid(1) == [(1, 0)]
    assert o.guess_grid(20) == o.guess_grid(20)
    with pytest.raises(ValueError):
        o.one_run_audit(np.zeros(3), np.zeros(4, bool))
    with pytest.raises(ValueError):
        o.one_run_audit(np.array([np.nan, 1.0]), np.array([True, False]))
    with pytest.raises(ValueError):
        o.steinke_epsilon(10, 5, 6)


def test_canary_score_is_the_loss_of_every_token_after_the_first(tiny_handle):
    """The one-run canaries are random words end to end: every token but the first (whose only context is
    the start of a record) is evidence. canary_nll = mean NLL of tokens 2..k, checked against the model."""
    import torch

    from privleak.attacks.one_run_canaries import canary_nll
    from privleak.data.audit_canaries import AuditCanary

    tok, model = tiny_handle.tokenizer, tiny_handle.model.eval()
    canaries = [AuditCanary("a0", "asthma gout", " flu acne", True), AuditCanary("a1", "water", " sleep well", False)]
    got = canary_nll(tiny_handle, canaries)
    for c, value in zip(canaries, got):
        body = tok(c.text, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([[tok.eos_token_id] + body])).logits[0].float(), -1)
        per_token = [-float(logp[k, body[k]]) for k in range(len(body))]
        assert len(body) >= 3
        assert value == pytest.approx(np.mean(per_token[1:]), rel=1e-4)  # not the closing <eos> either
        assert value != pytest.approx(np.mean(per_token), rel=1e-3)  # the first token is left out
