"""The accountants package beyond one DP-SGD run: person-level ε, a ledger of several trainings, the
stateful accountants and their registry, and inputs bounded by the grids they would allocate."""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting import pld as dp_pld
from scipy import integrate
from scipy.optimize import brentq
from scipy.stats import binom, norm

from privleak import accountants as acc
from privleak.accountants.analysis import grid, group, pld, prv
from privleak.core.errors import UserError


def _one_line(exc: pytest.ExceptionInfo[UserError], *words: str) -> str:
    msg = str(exc.value)
    assert "\n" not in msg
    for w in words:
        assert w in msg, (w, msg)
    return msg


# --------------------------------------------------------------------------- person-level ε


DP8 = dict(sample_rate=1 / 11, noise_multiplier=0.663, steps=33, delta=7.7e-5)  # README's clinical dp-8


def test_group_of_one_is_the_record_level_epsilon():
    record = acc.epsilon_pld(**DP8)
    r = acc.group_epsilon(**DP8, group_size=1)
    assert r.epsilon == r.epsilon_direct == r.epsilon_conversion == record
    assert acc.group_epsilon_direct(**DP8, group_size=1) == record


def test_mixture_machinery_at_k_one_matches_the_subsampled_gaussian():
    # Bin(1, q) = the Poisson-subsampled Gaussian: dp_accounting's mixture code and its dedicated code agree.
    q, s, t, d = 0.1, 1.0, 20, 1e-5
    ev = pld.PldEvent(noise_multiplier=s, count=t, sensitivities=(0.0, 1.0), probabilities=(1 - q, q))
    mixture = pld.adaptive_epsilon([ev], d, pld.REL_ERR, math.inf)
    assert mixture == pytest.approx(acc.epsilon_pld(sample_rate=q, noise_multiplier=s, steps=t, delta=d), rel=1e-3)


@pytest.mark.parametrize("q,s,t,k", [(0.01, 0.8, 100, 2), (0.1, 2.0, 10, 4), (0.1, 0.8, 30, 4), (0.3, 1.5, 5, 2),
                                     (0.3, 1.5, 5, 8)])
def test_direct_group_accounting_is_tighter_than_group_privacy(q, s, t, k):
    r = acc.group_epsilon(sample_rate=q, noise_multiplier=s, steps=t, delta=1e-5, group_size=k)
    assert r.epsilon_direct is not None and r.method == "direct"
    assert r.epsilon_direct <= r.epsilon_conversion
    record = acc.epsilon_pld(sample_rate=q, noise_multiplier=s, steps=t, delta=1e-5)
    assert record < r.epsilon  # a person of k > 1 records is less protected than one record


def test_group_privacy_conversion_certifies_its_own_record_level_pair():
    # (a): ε₁ at δ₁ = δ / Σ_{i<k} e^{iε₁} is a record-level guarantee, and 1 % less would not be one.
    q, s, t, d, k = 0.1, 1.0, 20, 1e-5, 3
    eps_k, eps1, log_d1 = group.conversion(q, s, t, d, k)
    assert eps_k == pytest.approx(k * eps1)
    assert log_d1 == pytest.approx(math.log(d) - math.log(sum(math.exp(i * eps1) for i in range(k))))
    assert group._record_epsilon_curve(q, s, t)(log_d1) <= eps1
    smaller = eps1 * 0.99
    log_d1_smaller = math.log(d) - math.log(sum(math.exp(i * smaller) for i in range(k)))
    assert group._record_epsilon_curve(q, s, t)(log_d1_smaller) > smaller


def test_direct_group_epsilon_grid_is_fine_enough():
    # The mixture's grid width follows the adaptive law alone (no 5e-3 cap): 100x tighter target, same figure.
    q, s, t, d, k = 1 / 7, 1.36, 60, 1e-5, 8
    ev = group.mixture_event(q, s, t, k)
    default = acc.group_epsilon_direct(sample_rate=q, noise_multiplier=s, steps=t, delta=d, group_size=k)
    finer = pld.adaptive_epsilon([ev], d, pld.REL_ERR / 100, math.inf)
    assert finer <= default <= finer * (1 + 1e-3)


def test_person_level_epsilon_grows_with_the_group():
    eps = [acc.group_epsilon_direct(**DP8, group_size=k) for k in (1, 2, 4)]
    assert eps[0] < eps[1] < eps[2]


def _mixture_pair(q: float, s: float, k: int):
    j = np.arange(k + 1)
    w = binom.pmf(j, k, q)

    def without(x):
        return norm.pdf(x, scale=s)

    def with_group(x):
        return np.sum(w[:, None] * norm.pdf(np.asarray(x)[None, :] - j[:, None], scale=s), axis=0)

    return without, with_group, j, w


@pytest.mark.parametrize("q,s,k", [(0.2, 1.0, 3), (0.5, 2.0, 4)])
def test_direct_group_epsilon_one_step_against_quadrature(q, s, k):
    """T = 1: the exact hockey-stick divergence of N(0, σ²) vs Σ_j Bin(j; k, q)·N(j, σ²), both directions,
    by numerical integration; the PLD figure is an upper bound within 0.2 % of it."""
    delta = 1e-4
    without, with_group, _, _ = _mixture_pair(q, s, k)

    def hockey(a, b, eps):
        f = lambda x: max(a(np.array([x]))[0] - math.exp(eps) * b(np.array([x]))[0], 0.0)  # noqa: E731
        return integrate.quad(f, -12 * s, k + 12 * s, points=list(range(k + 1)), limit=400, epsabs=1e-13)[0]

    def delta_of(eps):
        return max(hockey(with_group, without, eps), hockey(without, with_group, eps))

    exact = brentq(lambda e: delta_of(e) - delta, 0.0, 60.0, xtol=1e-10)
    got = acc.group_epsilon_direct(sample_rate=q, noise_multiplier=s, steps=1, delta=delta, group_size=k)
    assert exact - 1e-9 <= got <= exact * (1 + 2e-3) + 1e-4


def test_direct_group_epsilon_many_steps_against_monte_carlo():
    """T = 10, k = 3: Monte-Carlo privacy loss of the composed pair (200,000 draws per direction).
    At the PLD's ε the simulated δ is at most the target (it is an upper bound), and 3 % below that ε the
    simulated δ already exceeds it (the bound is tight)."""
    q, s, t, k, target = 0.2, 1.2, 10, 3, 1e-2
    eps = acc.group_epsilon_direct(sample_rate=q, noise_multiplier=s, steps=t, delta=target, group_size=k)
    without, with_group, j, w = _mixture_pair(q, s, k)
    rng = np.random.default_rng(0)
    n = 200_000

    def losses(sample_with_group: bool) -> np.ndarray:
        if sample_with_group:
            x = rng.choice(j, size=(n, t), p=w) + rng.normal(0.0, s, size=(n, t))
        else:
            x = rng.normal(0.0, s, size=(n, t))
        lw = np.log(with_group(x.ravel())).reshape(n, t)
        lo = norm.logpdf(x, scale=s)
        return (lw - lo).sum(axis=1) if sample_with_group else (lo - lw).sum(axis=1)

    l_remove, l_add = losses(True), losses(False)

    def mc_delta(e):
        return max(np.mean(np.maximum(1 - np.exp(e - l_remove), 0)), np.mean(np.maximum(1 - np.exp(e - l_add), 0)))

    se = math.sqrt(target / n)
    assert mc_delta(eps) <= target + 4 * se
    assert mc_delta(eps * 0.97) > target


def test_direct_accounting_falls_back_to_group_privacy_when_its_grid_cannot_fit(monkeypatch):
    q, s, t = 0.1, 2.0, 5
    # A one-step limit that a 3-record group's mixture just fits and a 6-record group's does not.
    three = group.mixture_event(q, s, t, 3)
    kw = dict(sample_rate=q, noise_multiplier=s, steps=t, delta=1e-5)
    # Asked first under the real limits: group_epsilon's memo must not hand that answer back under the narrow ones.
    assert acc.group_epsilon(**kw, group_size=6).method == "direct"
    monkeypatch.setattr(pld, "MIXTURE_POINT_COST", grid.SINGLE_POINTS_MAX // three.single_points(three.max_vdi))
    r = acc.group_epsilon(**kw, group_size=6)
    assert r.method == "conversion" and r.epsilon_direct is None and r.epsilon == r.epsilon_conversion
    with pytest.raises(UserError) as info:
        acc.group_epsilon_direct(**kw, group_size=6)
    msg = _one_line(info, "group_size=6", "group_size <=")
    kmax = int(msg.split("group_size <= ")[1].split(",")[0])
    assert 3 <= kmax < 6 and group.direct_fits(q, s, t, kmax) and not group.direct_fits(q, s, t, kmax + 1)
    assert acc.group_epsilon(**kw, group_size=kmax).epsilon_direct is not None  # it runs up to the stated size


@pytest.mark.parametrize("bad", [0, -1, 2.0, True, "3", 10**6])
def test_group_size_is_checked(bad):
    with pytest.raises(UserError) as info:
        acc.group_epsilon(**DP8, group_size=bad)
    _one_line(info, "group_size")


# --------------------------------------------------------------------------- the ledger: several trainings


THREE = [acc.Training(sample_rate=0.01, noise_multiplier=1.0, steps=1000),
         acc.Training(sample_rate=0.05, noise_multiplier=2.0, steps=300),
         acc.Training(sample_rate=1 / 7, noise_multiplier=1.36, steps=210)]


def test_three_trainings_compose_like_dp_accounting():
    delta = 1e-5
    ref = dp_pld.PLDAccountant(value_discretization_interval=1e-4)
    ref.compose(dp_accounting.ComposedDpEvent([dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(t.sample_rate, dp_accounting.GaussianDpEvent(t.noise_multiplier)),
        t.steps) for t in THREE]))
    expected = ref.get_epsilon(delta)
    got_pld = acc.compose_epsilon(trainings=THREE, delta=delta)
    got_prv = acc.compose_epsilon(trainings=THREE, delta=delta, accountant="prv")
    assert got_pld == pytest.approx(expected, rel=1e-2)
    assert got_prv == pytest.approx(expected, rel=1e-2)
    singles = [acc.epsilon_pld(sample_rate=t.sample_rate, noise_multiplier=t.noise_multiplier, steps=t.steps,
                               delta=delta) for t in THREE]
    assert max(singles) < got_pld < sum(singles)  # more than any one, less than adding ε's (basic composition)
    assert acc.compose_epsilon(trainings=THREE, delta=delta, accountant="rdp") >= got_pld


def test_one_training_composes_to_its_own_epsilon():
    t = THREE[2]
    kw = dict(sample_rate=t.sample_rate, noise_multiplier=t.noise_multiplier, steps=t.steps, delta=1e-5)
    assert acc.compose_epsilon(trainings=[t], delta=1e-5) == acc.epsilon_pld(**kw)
    assert acc.compose_epsilon(trainings=[t], delta=1e-5, accountant="prv") == acc.epsilon_prv(**kw)


def test_composition_does_not_depend_on_order():
    a = acc.compose_epsilon(trainings=THREE, delta=1e-5)
    b = acc.compose_epsilon(trainings=THREE[::-1], delta=1e-5)
    assert a == pytest.approx(b, rel=1e-3)


def test_training_checks_its_settings():
    with pytest.raises(UserError) as info:
        acc.Training(sample_rate=0.0, noise_multiplier=1.0, steps=10)
    _one_line(info, "sample_rate")
    with pytest.raises(UserError):
        acc.compose_epsilon(trainings=[], delta=1e-5)


# --------------------------------------------------------------------------- stateful accountants, registry


def test_stateful_accountant_records_steps_and_composes():
    a = acc.create_accountant("pld")
    assert isinstance(a, acc.PLDAccountant) and a.get_epsilon(delta=1e-5) == 0.0
    for _ in range(50):
        a.step(noise_multiplier=1.0, sample_rate=0.05)
    assert len(a) == 50 and len(a.history) == 1  # one entry per (q, σ)
    assert a.get_epsilon(delta=1e-5) == acc.epsilon_pld(sample_rate=0.05, noise_multiplier=1.0, steps=50, delta=1e-5)
    a.step(noise_multiplier=2.0, sample_rate=0.01, steps=100)
    assert len(a.history) == 2
    assert a.get_epsilon(delta=1e-5) == acc.compose_epsilon(trainings=a.history, delta=1e-5)


@pytest.mark.parametrize("name", ["pld", "prv", "rdp"])
def test_registry_names_each_accountant(name):
    kw = dict(sample_rate=0.05, noise_multiplier=1.0, steps=50, delta=1e-5)
    assert acc.create_accountant(name).mechanism == name
    assert acc.epsilon(accountant=name, **kw) == acc.EPSILON_FUNCTIONS[name](**kw)


def test_registry_refuses_unknown_names():
    with pytest.raises(UserError) as info:
        acc.create_accountant("moments")
    _one_line(info, "moments", "'pld'")


# --------------------------------------------------------------------------- bounded inputs (issue 30)


@pytest.fixture
def pld_builds(monkeypatch):
    """Every one-step PMF the PLD code builds, with the number of points it allocated (a spy around the
    real constructor)."""
    sizes: list[int] = []
    real_build = pld.PldEvent.build

    def build(self, vdi):
        sizes.append(self.single_points(vdi))
        return real_build(self, vdi)

    monkeypatch.setattr(pld.PldEvent, "build", build)
    return sizes


def test_tiny_noise_multiplier_is_refused_with_its_range(pld_builds):
    # Was: 18 GB and killed by the kernel.
    kw = dict(sample_rate=0.01, steps=100, delta=1e-5)
    with pytest.raises(UserError) as info:
        acc.epsilons(**kw, noise_multiplier=0.001)
    msg = _one_line(info, "noise_multiplier=0.001", "noise_multiplier >=", "points")
    assert all(n <= grid.SINGLE_POINTS_MAX for n in pld_builds)
    lo = float(msg.split("noise_multiplier >= ")[1].rstrip(";. "))
    # The stated range is the one the grid allows: it fits at the bound and not 2 % below it.
    assert pld.PldEvent(noise_multiplier=lo, sample_rate=0.01).single_points(grid.VDI_MAX) <= grid.SINGLE_POINTS_MAX
    assert pld.PldEvent(noise_multiplier=lo * 0.98, sample_rate=0.01).single_points(grid.VDI_MAX) > grid.SINGLE_POINTS_MAX


@pytest.mark.parametrize("sigma", [1e-300, 1e-160, 1e200, float("inf")])
def test_noise_multipliers_that_overflow_are_refused(sigma):
    # Was: ZeroDivisionError (1e-300) / OverflowError (σ² overflows above ~1e154).
    with pytest.raises(UserError) as info:
        acc.epsilons(sample_rate=0.01, steps=100, delta=1e-5, noise_multiplier=sigma)
    _one_line(info, "noise_multiplier")


def test_too_many_steps_is_refused_with_its_range(pld_builds):
    # Was: MemoryError.
    with pytest.raises(UserError) as info:
        acc.epsilons(sample_rate=0.01, noise_multiplier=1.0, delta=1e-5, steps=10**12)
    msg = _one_line(info, "steps=1000000000000", "steps <=")
    hi = int(msg.split("steps <= ")[1].split(" ")[0])
    assert 10**6 < hi < 10**12
    assert all(n <= grid.SINGLE_POINTS_MAX for n in pld_builds)
    ev = pld.gaussian_event(sample_rate=0.01, noise_multiplier=1.0, steps=hi)
    assert pld.estimate_grid([ev], grid.VDI_MAX).composed_points <= grid.COMPOSED_POINTS_MAX
    with pytest.raises(UserError):
        acc.epsilons(sample_rate=0.01, noise_multiplier=1.0, delta=1e-5, steps=2**60)  # beyond 2**53: fixed range


def test_prv_grid_limit_states_the_steps_that_fit():
    with pytest.raises(UserError) as info:
        acc.epsilon_prv(sample_rate=0.01, noise_multiplier=1.0, delta=1e-5, steps=10**6)
    msg = _one_line(info, "PRV", "steps <=")
    hi = int(msg.split("steps <= ")[1].split(" ")[0])
    assert prv.prv_grid_points([(1.0, 0.01, hi)], 1e-5, prv.EPS_ERROR_MAX) <= prv.PRV_POINTS_MAX
    assert prv.prv_grid_points([(1.0, 0.01, int(hi * 1.05))], 1e-5, prv.EPS_ERROR_MAX) > prv.PRV_POINTS_MAX
    # The PLD accountant alone handles a million steps at this σ.
    assert math.isfinite(acc.epsilon_pld(sample_rate=0.01, noise_multiplier=1.0, delta=1e-5, steps=10**6))


@pytest.mark.parametrize("q,s,k,vdi", [(0.1, 2.0, 4, 1e-2), (0.3, 1.0, 3, 1e-2), (0.01, 0.8, 2, 1e-2)])
def test_a_group_s_pmf_is_dp_accountings_own_bit_for_bit(q, s, k, vdi):
    """The mixture's inverse runs a level of the binary search at a time (pld._LevelMixture): the PMFs it gives
    are those of dp_accounting's from_mixture_gaussian_mechanism, to the last bit, and so is a composed ε."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    ev = group.mixture_event(q, s, 1, k)
    mine = ev.build(vdi)
    own = pld_lib.from_mixture_gaussian_mechanism(standard_deviation=s, sensitivities=list(ev.sensitivities),
                                                  sampling_probs=list(ev.probabilities),
                                                  value_discretization_interval=vdi)
    for a, b in ((mine._pmf_remove, own._pmf_remove), (mine._pmf_add, own._pmf_add)):
        a, b = (p.to_dense_pmf() if hasattr(p, "to_dense_pmf") else p for p in (a, b))
        assert np.array_equal(a._probs, b._probs)
        assert (a._lower_loss, a._infinity_mass) == (b._lower_loss, b._infinity_mass)
    assert mine.self_compose(20).get_epsilon_for_delta(1e-5) == own.self_compose(20).get_epsilon_for_delta(1e-5)


@pytest.mark.parametrize("history,delta,eps_error", [
    ([(0.6, 0.027, 222)], 8.8e-5, 0.016),
    ([(1.2, 0.05, 300), (2.0, 0.2, 50)], 1e-5, 5e-3),  # two trainings composed
])
def test_prv_upper_is_opacus_own_prv_accountant_bit_for_bit(history, delta, eps_error):
    """prv_upper builds Opacus's domain from the memo of its size check rather than letting Opacus size it
    again (half of a PRV evaluation's cost): the same ε to the last bit, on a fresh memo and from it."""
    from opacus.accountants import PRVAccountant

    own = PRVAccountant()
    own.history = list(history)
    with prv.quiet_rdp(), np.errstate(divide="ignore"):
        want = own.get_epsilon(delta, eps_error=eps_error)
    prv._rdp_domain.cache_clear()
    assert prv.prv_upper(history, delta, eps_error) == want
    assert prv.prv_upper(history, delta, eps_error) == want


def test_delta_below_the_pld_resolution_is_refused():
    with pytest.raises(UserError) as info:
        acc.epsilons(sample_rate=0.01, noise_multiplier=1.0, steps=100, delta=1e-16)
    _one_line(info, "delta=1e-16", "1e-12")
    # RDP works in log δ and takes it.
    assert math.isfinite(acc.epsilon_rdp(sample_rate=0.01, noise_multiplier=1.0, steps=100, delta=1e-16))


def test_delta_near_one_gives_zero_epsilon_without_a_huge_grid(pld_builds):
    # Was: a 1e-6-wide grid of 11 million points per pass (~6 minutes).
    kw = dict(sample_rate=0.01, noise_multiplier=1.0, steps=100, delta=0.999999)
    assert acc.epsilon_pld(**kw) == 0.0
    assert max(pld_builds) <= grid.SINGLE_POINTS_MAX
    with pytest.raises(UserError) as info:
        acc.epsilons(**kw)
    _one_line(info, "delta=0.999999", "1/n")


def test_composed_grid_estimate_matches_what_is_allocated():
    # The up-front estimate (a coarse one-step PMF) against the exact FFT length of the real one.
    for q, s, t, vdi in [(0.01, 1.0, 1000, 1e-4), (0.2, 0.8, 50, 5e-4), (1.0, 2.0, 10, 1e-3), (0.05, 0.3, 200, 5e-3)]:
        ev = pld.gaussian_event(sample_rate=q, noise_multiplier=s, steps=t)
        exact = max(pld.composed_points(p, t) for p in pld._pmfs(ev.build(vdi)))
        est = pld.estimate_grid([ev], vdi)
        assert est.single_points == sum(p.size for p in pld._pmfs(ev.build(vdi)))
        assert est.composed_points == pytest.approx(exact, rel=0.1)


def test_a_grid_beyond_the_limit_is_coarsened_into_a_sound_bound(monkeypatch):
    kw = dict(sample_rate=0.01, noise_multiplier=1.0, steps=1000, delta=1e-5)
    fine = acc.epsilon_pld(**kw)
    monkeypatch.setattr(pld, "COMPOSED_POINTS_MAX", 20_000)
    coarse = acc.epsilon_pld(**kw)
    assert fine <= coarse <= fine * 1.05


def test_calibration_refuses_a_target_whose_search_leaves_the_grid(monkeypatch):
    # A one-step limit that only σ ≳ 1 fits: a loose target drives the search below it, and the refusal
    # names the target instead of allocating.
    monkeypatch.setattr(pld, "SINGLE_POINTS_MAX", pld.gaussian_event(sample_rate=0.5, noise_multiplier=1.0,
                                                                       steps=1).single_points(grid.VDI_MAX))
    with pytest.raises(UserError) as info:
        acc.calibrate_sigma(target_epsilon=50.0, delta=1e-5, sample_rate=0.5, steps=10)
    _one_line(info, "target_epsilon=50")
