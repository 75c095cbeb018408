"""Canary exposure (Carlini et al. 2019, "The Secret Sharer").

For a canary with secret s in a frame, rank s among a candidate set R of
secrets drawn uniformly from the same space (R contains s) by the model's
log-likelihood of the canary continuation:

    exposure(s) = log2 |R| − log2 rank(s)

rank 1 (the model prefers the true secret to every other) gives the maximum
log2 |R|; a model that never saw the canary gives a uniformly random rank,
whose expected exposure is log2|R| − E[log2 U{1..|R|}] ≈ 1/ln 2 ≈ 1.44 bits.

Beyond |R|, exposure is extrapolated as −log2 P(X ≥ x_s) with X the
skew-normal fitted to the candidates' log-likelihoods (Carlini et al. §4.3),
capped at log2 of the whole secret space.
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict
from scipy import stats

from ..core.progress import progress_bar
from ..core.stats import bootstrap_mean_ci
from ..data.canaries import Canary, sample_candidates
from ..core.present import Block, Example, Plot, Table, n, num, t
from ..core.typed import Bits
from .base import AttackContext, AttackResult, Figure, Finding, Policy, PresentContext, Runs
from .exposure_stats import exposure_test

if TYPE_CHECKING:
    from ..models.handle import ModelHandle


class CanaryExposure(BaseModel):
    model_config = ConfigDict(extra="forbid")

    canary_id: str
    repeats: int
    exposure: Bits
    max_exposure: Bits
    rank: float
    n_candidates: int
    exposure_extrapolated: float


class ExposureResult(AttackResult):
    """Exposure of every planted canary; ``chance_exposure``: what a model that never saw a canary scores on average."""

    kind: Literal["exposure"] = "exposure"
    title: ClassVar[str] = "canary exposure"

    canaries: list[CanaryExposure]
    chance_exposure: Bits

    def by_repeats(self) -> dict[int, float]:
        """Mean exposure per repetition count."""
        groups: dict[int, list[float]] = {}
        for c in self.canaries:
            groups.setdefault(c.repeats, []).append(c.exposure)
        return {r: sum(v) / len(v) for r, v in sorted(groups.items())}

    @property
    def mean_exposure(self) -> float | None:
        return sum(c.exposure for c in self.canaries) / len(self.canaries) if self.canaries else None

    @property
    def n_ranked_first(self) -> int:
        return sum(c.rank <= 1 for c in self.canaries)

    @staticmethod
    def _with_canaries(runs: Runs) -> list[tuple[str, ExposureResult]]:
        return [(m, r) for rs in runs.values() for m, r in rs if isinstance(r, ExposureResult) and r.canaries]

    @classmethod
    def present(cls, runs: Runs, ctx: PresentContext) -> list[Block]:
        """Exposure by repetition count: a figure and a table, one row per model."""
        exps = cls._with_canaries(runs)
        if not exps:
            return []
        reps = sorted({c.repeats for _, e in exps for c in e.canaries})
        first = exps[0][1]
        size = first.canaries[0].n_candidates
        series = {m: [(c.repeats, c.exposure) for c in e.canaries] for m, e in exps}
        rows = [[m, *[n(e.by_repeats().get(r), ".2f") for r in reps], t(f"{e.n_ranked_first}/{len(e.canaries)}"),
                 n(max(c.exposure_extrapolated for c in e.canaries), ".1f")] for m, e in exps]
        return [Plot("canary_exposure", (series, first.canaries[0].max_exposure, first.chance_exposure),
                     f"Exposure = log2(candidates) − log2(rank of the true secret among {size:,}). At the red line "
                     "the secret is the model's top guess among the candidates; the dotted line is what a model "
                     "that never saw it scores on average."),
                Table(["model", *[f"{r}×" for r in reps], f"ranked first of {size:,}", "max extrapolated exposure (bits)"],
                      rows, caption="Mean exposure (bits) by repetition count. Extrapolated exposure: the skew-normal "
                                    "tail beyond the candidates (Carlini et al. 2019 §4.3), capped at the secret space.")]

    @classmethod
    def console(cls, runs: Runs, ctx: PresentContext) -> list[Table]:
        exps = cls._with_canaries(runs)
        if not exps:
            return []
        repeats = sorted({c.repeats for _, e in exps for c in e.canaries})
        first = exps[0][1]
        rows = [[m, *[num(e.by_repeats().get(r), ".1f") for r in repeats], f"{e.n_ranked_first}/{len(e.canaries)}"]
                for m, e in exps]
        return [Table(["arm", *[f"{r}×" for r in repeats], "ranked first"], rows,  # type: ignore[list-item]
                      console_title=f"Canary exposure in bits by repetition count (max "
                                    f"{first.canaries[0].max_exposure:.1f}, chance ≈ {first.chance_exposure:.1f}); "
                                    f"secrets ranked first of {first.canaries[0].n_candidates:,}")]

    def scorecard(self) -> list[Figure]:
        if not self.canaries:
            return []
        ci = bootstrap_mean_ci(np.array([c.exposure for c in self.canaries]), 0.05, seed=0)
        return [Figure("mean exposure (bits)", self.mean_exposure, "bits", chance=self.chance_exposure, ci=ci),
                Figure("secrets ranked first", self.n_ranked_first, "count", k=self.n_ranked_first, n=len(self.canaries))]

    def leakage_bits(self) -> float | None:
        return self.mean_exposure

    def quotes(self, ctx: PresentContext) -> list[Example]:
        out = []
        for c in self.canaries:
            if c.rank <= 1:
                text = ctx.canary_text(c.canary_id) or "(canary text not available: render with the run directory)"
                out.append(Example("canary ranked first", ctx.mask(text), c.repeats,
                                   f"rank {c.rank:g} of {c.n_candidates:,}"))
        return out

    def headline(self) -> list[Figure]:
        out = [Figure(f"{r}× (bits)", v, "bits", chance=self.chance_exposure) for r, v in self.by_repeats().items()]
        out.append(Figure("ranked first", self.n_ranked_first, "count", k=self.n_ranked_first, n=len(self.canaries)))
        return out

    def assess(self, attack: str, control: AttackResult | None, policy: Policy) -> Finding:
        """Leaks when :func:`exposure_test` says the planted secrets rank better than chance (and,
        when the control's own ranks are not uniform, better than the control's), at ``policy.alpha``.

        Replaces a fixed "+1 bit over the floor" line on the mean of a dozen canaries, which flipped
        with noise (2.41 vs 2.47 bits for one unchanged arm, issue 26): the verdict is now a test with
        a stated error rate, and the figure carries the mean difference with its interval."""
        if not self.canaries:
            return Finding(attack, None, "")
        ctrl = control if isinstance(control, ExposureResult) and control.canaries else None
        test = exposure_test(self, ctrl, policy.alpha, margin=policy.exposure_margin)
        mexp, n, n_first = self.mean_exposure, len(self.canaries), self.n_ranked_first
        size = self.canaries[0].n_candidates
        lo, hi = test.mean_diff_ci
        figure = (f"canaries: mean exposure {mexp:.2f} bits (chance {self.chance_exposure:.2f}"
                  + (f", control {ctrl.mean_exposure:.2f}" if ctrl else "")
                  + f"), {n_first}/{n} secrets ranked first of {size:,}; {test.mean_diff:+.2f} bits vs "
                  + f"{test.versus} [95% CI {lo:+.2f}, {hi:+.2f}], p = {test.p_chance:.2g} vs chance")
        reason = ""
        if test.leaks and n_first:
            reps = sorted({c.repeats for c in self.canaries if c.rank <= 1})
            first = [c for c in self.canaries if c.rank <= 1]
            ext = sum(c.exposure_extrapolated for c in first) / len(first)
            reason = (f"{n_first} of {n} planted secrets rank first among {size:,} sampled candidates (repeated "
                      f"{', '.join(map(str, reps))}× in training); extrapolated over the whole secret space their "
                      f"exposure is {ext:.1f} bits on average — measured ranks, not a recovery: greedy canary "
                      "extraction says whether the model also generates them")
        elif test.leaks:
            reason = (f"planted secrets rank better than chance (mean exposure {mexp:.2f} bits, "
                      f"{test.mean_diff:+.2f} vs {test.versus}; p = {test.p_chance:.2g})")
        return Finding(attack, test.leaks, figure, reason, p_leak=test.p_leak, equivalence=test.equivalence,
                       items="canaries",
                       margin=f"exposure within {policy.exposure_margin:g} bit{'s' if policy.exposure_margin != 1 else ''}"
                              " of chance at every level (no level reached 2^margin times as often as by chance)")


def chance_exposure(n_candidates: int) -> float:
    """Expected exposure of a secret whose rank is uniform on 1..|R|."""
    ranks = np.arange(1, n_candidates + 1, dtype=np.float64)
    return float(math.log2(n_candidates) - np.log2(ranks).mean())


def exposure_from_rank(rank: float, n_candidates: int) -> float:
    return math.log2(n_candidates) - math.log2(rank)


def _split_point(canary: Canary) -> tuple[str, str]:
    """Prefix without trailing space, and the continuation that carries the secret.

    Byte-level BPE attaches a space to the word after it, so splitting
    before the space tokenizes prefix and continuation exactly as the whole
    training text was tokenized.
    """
    prefix = canary.prefix.rstrip()
    return prefix, canary.text()[len(prefix) :]


def _extrapolated(true_ll: float, cand_ll: np.ndarray, space_size: int) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a, loc, scale = stats.skewnorm.fit(cand_ll)
        tail = float(stats.skewnorm.sf(true_ll, a, loc, scale))
    cap = math.log2(space_size)
    if tail <= 0.0:
        return cap
    return float(min(cap, max(0.0, -math.log2(tail))))


def canary_exposure(
    handle: ModelHandle, canaries: list[Canary], n_candidates: int = 10_000, seed: int = 0, desc: str = "exposure",
    tree: bool | None = None,
) -> list[CanaryExposure]:
    """Exposure of every canary against ``n_candidates`` − 1 random other secrets (|R| = n_candidates).

    ``tree``: as in :func:`continuation_loglik` (``False`` forces the per-candidate pass).
    """
    from .prefix_scoring import continuation_loglik  # torch: only when a canary is scored

    if n_candidates < 2:
        raise ValueError("exposure needs at least 2 candidates")
    results = []
    with progress_bar(desc, total=len(canaries)) as advance:
        for k, canary in enumerate(canaries):
            rng = np.random.default_rng([seed, k])
            others = sample_candidates(canary, n_candidates - 1, rng)
            prefix, cont = _split_point(canary)
            conts = [cont] + [canary.text(s)[len(prefix) :] for s in others]
            ll = continuation_loglik(handle, prefix, conts, tree=tree)
            true_ll, cand = ll[0], ll[1:]
            # Mid-rank for exact ties: neither side of a tie is favoured.
            rank = 1.0 + float((cand > true_ll).sum()) + 0.5 * float((cand == true_ll).sum())
            results.append(
                CanaryExposure(
                    canary_id=canary.canary_id,
                    repeats=canary.repeats,
                    exposure=exposure_from_rank(rank, n_candidates),
                    max_exposure=math.log2(n_candidates),
                    rank=rank,
                    n_candidates=n_candidates,
                    exposure_extrapolated=_extrapolated(true_ll, cand, canary.space_size()),
                )
            )
            advance(1)
    return results


def exposure(target: ModelHandle, ctx: AttackContext) -> ExposureResult:
    """The registered attack: every canary against ``canary_candidates`` candidates."""
    n = ctx.settings.canary_candidates
    return ExposureResult(canaries=canary_exposure(target, ctx.canaries, n_candidates=n, seed=ctx.seed,
                                                   desc=f"exposure {target.name}".strip()),
                          chance_exposure=chance_exposure(n))
