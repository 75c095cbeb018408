"""Person-level and PRV accounting: PrivLeak's paths beside the libraries' own, in one run, equal to the bit.

    python bench/bench_accounting.py

Each row times the same answer two ways and checks the two answers are identical:

* **mixture PMF**: one step of a k-record group's mixture of Gaussians, dp_accounting's
  ``from_mixture_gaussian_mechanism`` (a recursive binary search, a Python call per tree node) ÷
  ``PldEvent.build`` (``pld._LevelMixture``: the same search a level at a time);
* **person ε**: ``group_epsilon`` for a person of k records in a DP-SGD run, with dp_accounting's mixture loss
  patched back in ÷ as shipped (first call), and the shipped call again (its memo: what an audit's second
  question about the same person costs);
* **PRV ε**: Opacus's ``PRVAccountant.get_epsilon`` after PrivLeak's grid check (the domain sized twice, as
  before) ÷ ``prv_upper`` (the domain from the check's memo).

Wall seconds on one thread; the settings are those of the suite's DP audits and the smoke profile's arms.
The last line (``RESULT``) carries the ratios.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import numpy as np  # noqa: E402
from dp_accounting.pld import privacy_loss_distribution as pld_lib  # noqa: E402
from dp_accounting.pld import privacy_loss_mechanism as plm  # noqa: E402

from privleak.accountants.analysis import group, pld, prv  # noqa: E402


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def same_pld(a, b) -> bool:
    for x, y in ((a._pmf_remove, b._pmf_remove), (a._pmf_add, b._pmf_add)):
        x, y = (p.to_dense_pmf() if hasattr(p, "to_dense_pmf") else p for p in (x, y))
        if not (np.array_equal(x._probs, y._probs) and x._lower_loss == y._lower_loss
                and x._infinity_mass == y._infinity_mass):
            return False
    return True


def mixture_rows() -> list[float]:
    ratios = []
    for q, s, k, vdi in [(0.07, 0.9, 8, 1e-3), (0.1, 1.2, 4, 3e-4), (0.03, 0.6, 10, 1e-3)]:
        ev = group.mixture_event(q, s, 1, k)
        own, t_own = timed(lambda: pld_lib.from_mixture_gaussian_mechanism(
            standard_deviation=s, sensitivities=list(ev.sensitivities), sampling_probs=list(ev.probabilities),
            value_discretization_interval=vdi))
        mine, t_mine = timed(lambda: ev.build(vdi))
        assert same_pld(own, mine), (q, s, k, vdi)
        ratios.append(t_own / t_mine)
        print(f"mixture PMF  q={q:<5} σ={s:<4} k={k:<3} Δ={vdi:g}: dp_accounting {t_own:6.2f} s, "
              f"PrivLeak {t_mine:6.3f} s, ×{t_own / t_mine:5.1f}, identical")
    return ratios


def person_rows() -> list[tuple[float, float]]:
    out = []
    for q, s, t, d, k in [(0.07, 0.95, 575, 1e-4, 8), (0.1, 1.1, 40, 1e-5, 4)]:
        kw = dict(sample_rate=q, noise_multiplier=s, steps=t, delta=d, group_size=k)
        real = pld._LevelMixture
        pld._LevelMixture = plm.MixtureGaussianPrivacyLoss  # dp_accounting's own inverse
        group._group_epsilon.cache_clear()
        try:
            before, t_before = timed(lambda: group.group_epsilon(**kw))
        finally:
            pld._LevelMixture = real
        group._group_epsilon.cache_clear()
        after, t_after = timed(lambda: group.group_epsilon(**kw))
        again, t_again = timed(lambda: group.group_epsilon(**kw))
        assert before == after == again, (before, after)
        out.append((t_before / t_after, t_before / max(t_again, 1e-9)))
        print(f"person ε     q={q:<5} σ={s:<4} T={t:<4} k={k:<3}: before {t_before:6.2f} s, now {t_after:6.3f} s "
              f"(×{t_before / t_after:5.1f}), asked again {t_again * 1e3:6.3f} ms, ε {after.epsilon:.4f} identical")
    return out


def prv_rows() -> list[float]:
    from opacus.accountants import PRVAccountant

    ratios = []
    for history, delta, ee in [([(0.6, 0.027, 222)], 8.8e-5, 0.016), ([(0.95, 0.07, 575)], 1e-4, 0.016),
                               ([(1.2, 0.05, 300), (2.0, 0.2, 50)], 1e-5, 5e-3)]:
        def before():
            prv._rdp_domain.cache_clear()
            prv.check_prv_feasible(history, delta, ee)
            acc = PRVAccountant()
            acc.history = list(history)
            with prv.quiet_rdp(), np.errstate(divide="ignore"):
                return acc.get_epsilon(delta, eps_error=ee)

        def after():
            prv._rdp_domain.cache_clear()
            return prv.prv_upper(history, delta, ee)

        want, t_before = timed(before)
        got, t_after = timed(after)
        assert got == want, (got, want)
        ratios.append(t_before / t_after)
        print(f"PRV ε        {len(history)} training(s), δ={delta:g}: check + Opacus {t_before:5.2f} s, "
              f"prv_upper {t_after:5.2f} s, ×{t_before / t_after:4.2f}, identical")
    return ratios


def main() -> None:
    mix = mixture_rows()
    person = person_rows()
    prv_r = prv_rows()
    print("RESULT mixture_pmf_speedup=" + ",".join(f"{r:.1f}" for r in mix)
          + " person_epsilon_speedup=" + ",".join(f"{a:.1f}" for a, _ in person)
          + " person_epsilon_again_speedup=" + ",".join(f"{b:.0f}" for _, b in person)
          + " prv_speedup=" + ",".join(f"{r:.2f}" for r in prv_r))


if __name__ == "__main__":
    main()
