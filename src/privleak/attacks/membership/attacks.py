"""The score-based membership attacks as registered attacks, and their one result type.

Each attack turns the shared scoring pass into one score per text (higher =
member; the pure score functions with their papers are in
:mod:`.membership`, :mod:`.rmia`, :mod:`.lira`) and hands the scores of the
evaluated members and non-members to :func:`membership_result`, which
computes AUC and TPR at 1 % / 0.1 % FPR with bootstrap CIs and ROC points
(:mod:`privleak.core.metrics`). The scores themselves stay on the result
object (not in the JSON) for the audit's empirical-ε bound, which compares
attacks on the same evaluation sets.
"""

from __future__ import annotations

import hashlib
import math
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict
from scipy.stats import norm

from ...core.inputs import Input, provides
from ...core.metrics import delong_paired, mia_metrics, roc_points
from ...core.stats import auc_null_se, tost_normal
from ...core.tails import TailCounts, tail_counts, tail_leak_p, tail_within
from ...data.splits import unit_of
from ...core.present import Block, Cell, Plot, Table, interval, n, t
from ...core.typed import Probability, ProbabilityInterval
from ..base import AttackContext, AttackResult, Figure, Finding, KeepsScores, Policy, PresentContext, Runs
from ..inputs import SCORES, SELECTION, SETTINGS, SHADOWS
from .scores import (
    loss_scores,
    min_k_pp_scores,
    min_k_scores,
    reference_scores,
    zlib_scores,
)
from .rmia import rmia_scores
from .shadows import shadow_scores

if TYPE_CHECKING:
    from ...models.handle import ModelHandle


class Roc(BaseModel):
    """ROC points for plotting (:func:`privleak.core.metrics.roc_points`); threshold None = +∞."""

    model_config = ConfigDict(extra="forbid")

    fpr: list[Probability]
    tpr: list[Probability]
    threshold: list[float | None]


class MembershipResult(KeepsScores):
    """AUC and TPR at low FPR (strict <) with percentile-bootstrap 95 % CIs, on equal-size member/non-member sets.

    ``scores``: (member scores, non-member scores) of the evaluated sets.
    """

    kind: Literal["membership"] = "membership"
    title: ClassVar[str] = "membership inference"

    auc: Probability
    tpr_at_1pct_fpr: Probability
    tpr_at_0_1pct_fpr: Probability
    n_members: int
    n_non_members: int
    auc_ci95: ProbabilityInterval | None = None
    tpr_at_1pct_fpr_ci95: ProbabilityInterval | None = None
    tpr_at_0_1pct_fpr_ci95: ProbabilityInterval | None = None
    roc: Roc
    parameters: dict[str, float | int | bool | str] = {}
    #: The evaluated records' scores (higher = member), kept so the verdict can compare this model with the
    #: control on the same records (DeLong, paired); ``evaluated`` names which records, in which order.
    member_scores: list[float] | None = None
    non_member_scores: list[float] | None = None
    evaluated: str | None = None

    def headline(self) -> list[Figure]:
        return [Figure("AUC", self.auc, "auc", ci=self.auc_ci95, chance=0.5),
                Figure("TPR@1%FPR", self.tpr_at_1pct_fpr, "auc", ci=self.tpr_at_1pct_fpr_ci95, chance=0.01),
                Figure("TPR@0.1%FPR", self.tpr_at_0_1pct_fpr, "auc", ci=self.tpr_at_0_1pct_fpr_ci95, chance=0.001)]

    @classmethod
    def present(cls, runs: Runs, ctx: PresentContext) -> list[Block]:
        """Every score-based attack on every model in one table (with the model-free baseline under each
        model), and the ROC curves."""
        rows: list[list[Cell | str]] = []
        b = ctx.blind
        models = list(dict.fromkeys(m for rs in runs.values() for m, _ in rs))
        curves: dict[str, dict[str, tuple[list[float], list[float]]]] = {}
        for model in models:
            for attack, rs in runs.items():
                for m, r in rs:
                    if m != model or not isinstance(r, MembershipResult):
                        continue
                    rows.append([model, ctx.title(attack), n(r.auc), t(interval(r.auc_ci95)), n(r.tpr_at_1pct_fpr),
                                 t(interval(r.tpr_at_1pct_fpr_ci95)), n(r.tpr_at_0_1pct_fpr), n(r.n_members, "d")])
                    curves.setdefault(model, {})[ctx.short(attack)] = (r.roc.fpr, r.roc.tpr)
            if b is not None and model in curves:
                rows.append([model, t("blind baseline (no model)" + (" — RIVALS THE ATTACKS" if model in b.rivalled else "")),
                             n(b.auc), t(interval(b.auc_ci95)), n(b.tpr_at_1pct_fpr), t(interval(b.tpr_at_1pct_fpr_ci95)), t("—"),
                             n(b.n_members, "d")])
        return [Table(["arm", "attack", "AUC", "AUC 95% CI", "TPR@1%FPR", "95% CI", "TPR@0.1%FPR",
                       "members (= non-members)"], rows,
                      caption="Every membership attack on every model; TPR at a fixed FPR is strict (< 1 %, < 0.1 %)."),
                Plot("roc_curves", (curves,), "True against false positive rate on log axes, which magnifies the low-FPR "
                                              "region that matters for privacy; the dashed diagonal is chance. One panel per "
                                              "model, one curve per attack (legend below the panels).")]

    @classmethod
    def console(cls, runs: Runs, ctx: PresentContext) -> list[Table]:
        """AUC (TPR at 1 % FPR) per model and attack, the blind baseline beside them."""
        b = ctx.blind
        names = list(runs)
        by_model: dict[str, dict[str, MembershipResult]] = {}
        for attack, rs in runs.items():
            for m, r in rs:
                by_model.setdefault(m, {})[attack] = r  # type: ignore[assignment]
        rows: list[list[Cell | str]] = []
        for model, mia in by_model.items():
            cells: list[Cell | str] = ["—" if a not in mia else f"{mia[a].auc:.3f} ({mia[a].tpr_at_1pct_fpr:.2f})"
                                       for a in names]
            if b is not None:
                cells.append(f"{b.auc:.3f} ({b.tpr_at_1pct_fpr:.2f})" + (" !!" if model in b.rivalled else ""))
            rows.append([model, *cells])
        first = next(iter(runs.values()))[0][1]
        cols = ["arm", *[ctx.short(a) for a in names]] + (["blind (no model)"] if b is not None else [])
        unit = f", one record per {ctx.membership_unit}" if ctx.membership_unit else ""
        return [Table(cols, rows, console_title=f"Membership inference — AUC (TPR at 1 % FPR) on {first.n_members} "  # type: ignore[attr-defined]
                                                f"members vs as many non-members{unit}")]

    def auc_se(self) -> float | None:
        """The AUC's standard error: DeLong's (1988) from the kept scores, else read off the bootstrap interval
        (its width / 2·1.96); None with neither."""
        if self.member_scores and self.non_member_scores and len(self.member_scores) > 1 \
                and len(self.non_member_scores) > 1:
            pos, neg = np.asarray(self.member_scores), np.asarray(self.non_member_scores)
            return float(np.sqrt(max(delong_paired(pos, neg, pos, neg).var_a, 0.0)))
        if self.auc_ci95 is not None:
            return (self.auc_ci95[1] - self.auc_ci95[0]) / (2 * 1.959963984540054)
        return None

    def paired_with(self, other: MembershipResult) -> bool:
        """Whether both results kept their scores on the same evaluated records (a paired test applies)."""
        return (self.evaluated is not None and self.evaluated == other.evaluated and bool(self.member_scores)
                and bool(other.member_scores) and len(self.member_scores) == len(other.member_scores or [])
                and len(self.non_member_scores or []) == len(other.non_member_scores or []))

    def assess(self, attack: str, control: AttackResult | None, policy: Policy) -> Finding:
        """Against the control's AUC on the same records (what distribution shift alone gives), else chance
        (0.5): d = AUC − reference with DeLong's standard error — paired (DeLong, DeLong & Clarke-Pearson 1988)
        when both models kept their scores on the same records, else the two standard errors combined, which
        is conservative for two models scored on the same texts.

        Leaks when d > ``auc_margin`` (one-sided z). Within the margin when TOST shows |d| < ``auc_margin``. The
        low-FPR tail is tested apart (:meth:`assess_all`, :meth:`assess_tail`), each test its own finding."""
        ctrl = control if isinstance(control, MembershipResult) else None
        ref = ctrl.auc if ctrl else 0.5
        d, se, how = self.auc - ref, None, "no standard error"
        if ctrl is not None and self.paired_with(ctrl):
            pd = delong_paired(np.asarray(self.member_scores), np.asarray(self.non_member_scores),
                               np.asarray(ctrl.member_scores), np.asarray(ctrl.non_member_scores))
            d, se, how = pd.diff, pd.se_diff, "DeLong, paired"
        elif ctrl is not None:
            se_a, se_c = self.auc_se(), ctrl.auc_se()
            if se_a is not None and se_c is not None:
                se, how = float(np.hypot(se_a, se_c)), "DeLong, unpaired"
        else:
            se, how = self.auc_se(), "DeLong"
        if se is None:
            p_auc = 0.0 if d > policy.auc_margin else 1.0
            eq = None
        else:
            p_auc = float(norm.sf((d - policy.auc_margin) / se)) if se > 0 else (0.0 if d > policy.auc_margin else 1.0)
            # Judgeable by the sizes alone (not by this comparison's observed se, which the outcome sets): the
            # null se of one AUC against the coin flip, of two independent AUCs against the control.
            design = auc_null_se(self.n_members, self.n_non_members) * (math.sqrt(2.0) if ctrl else 1.0)
            eq = tost_normal(d, se, policy.auc_margin, policy.alpha, n=self.n_members, method=how, design_se=design)
        p_leak = min(1.0, p_auc)
        leaks = p_leak <= policy.alpha
        ci = f" (95% CI {self.auc_ci95[0]:.3f}–{self.auc_ci95[1]:.3f})" if self.auc_ci95 else ""
        figure = (f"{attack} MIA AUC {self.auc:.3f}{ci} vs {ref:.3f} for the {'control' if ctrl else 'coin flip'}, "
                  f"TPR@1%FPR {self.tpr_at_1pct_fpr:.3f}")
        if eq is not None and eq.upper is not None and eq.lower is not None:
            figure += f"; Δ AUC {d:+.3f} [{100 * (1 - 2 * policy.alpha):.0f}% CI {eq.lower:+.3f}, {eq.upper:+.3f}] ({how})"
        reason = ""
        if leaks:
            reason = (f"the {attack} membership attack tells members from non-members (AUC {self.auc:.2f} vs {ref:.2f} "
                      f"for the {'control' if ctrl else 'coin flip'}" + (f"; it flags {self.tpr_at_1pct_fpr:.0%} of "
                                                                        "members at a 1% false-alarm rate"
                                                                        if self.tpr_at_1pct_fpr > 0 else "") + ")")
        return Finding(attack, leaks, figure, reason, p_leak=p_leak, equivalence=eq, items="members per side",
                       margin=f"AUC within ±{policy.auc_margin:g} of the {'control' if ctrl else 'coin flip'}'s")

    def tail(self, fpr: float) -> TailCounts | None:
        """The members above the threshold that target FPR ``fpr`` sets on the non-members, from the kept
        scores (:func:`privleak.core.tails.tail_counts`); None when the scores were not kept."""
        if not self.member_scores or not self.non_member_scores:
            return None
        return tail_counts(self.member_scores, self.non_member_scores, fpr)

    def assess_tail(self, attack: str, control: AttackResult | None, fpr: float, margin: float,
                    policy: Policy) -> Finding | None:
        """The advantage TPR − FPR at target FPR ``fpr`` (:mod:`privleak.core.tails`). Leaks when it exceeds the
        control's by more than ``margin`` (exact: the arm's lower bound minus the control's upper bound, each at
        half the level; against the chance line without a control); within the margin when its exact upper
        bound is below ``margin`` — against chance, which a control on an exchangeable split sits on (a shifted
        split only makes the claim harder). None without kept scores."""
        c = self.tail(fpr)
        if c is None:
            return None
        ctrl = control.tail(fpr) if isinstance(control, MembershipResult) else None
        eq = tail_within(c, margin, policy.alpha)
        p_leak = tail_leak_p(c, ctrl, margin)
        leaks = p_leak <= policy.alpha
        at = f"{100 * fpr:g}% FPR"
        figure = (f"{attack} at {at}: {c.k_pos}/{c.n_pos} members above the threshold ({c.k}-th highest of {c.n_neg} "
                  f"non-members), advantage TPR − FPR {c.advantage:+.3f} (upper {100 * (1 - policy.alpha):.0f}% bound "
                  f"{eq.upper:+.3f}" + (f"; control {ctrl.advantage:+.3f}" if ctrl else "") + ")")
        reason = ""
        if leaks:
            reason = (f"the {attack} membership attack flags {c.tpr:.1%} of the members at a threshold where about "
                      f"{c.expected_fpr:.1%} of non-members score higher (advantage {c.advantage:+.3f}"
                      + (f" against the control's {ctrl.advantage:+.3f}" if ctrl else "") + ")")
        return Finding(attack, leaks, figure, reason, p_leak=p_leak, equivalence=eq, items="members per side",
                       margin=f"advantage TPR − FPR at {at} below {margin:g}", test=f"tail {fpr:g}")

    def assess_all(self, attack: str, control: AttackResult | None, policy: Policy) -> list[Finding]:
        """The AUC (:meth:`assess`) and the advantage at each of ``policy.tail_fprs`` (:meth:`assess_tail`)."""
        out = [self.assess(attack, control, policy)]
        for fpr, margin in zip(policy.tail_fprs, policy.tail_margins):
            f = self.assess_tail(attack, control, fpr, margin, policy)
            if f is not None:
                out.append(f)
        return out


def _kept(x: np.ndarray) -> list[float]:
    """Scores as JSON keeps them: 7 significant digits (float32's precision) — ties this makes are mid-ranked."""
    return [float(f"{v:.7g}") for v in np.asarray(x, dtype=np.float64)]


def _digest(members: np.ndarray, non_members: np.ndarray) -> str:
    """Which records were evaluated, in order: equal digests make two models' scores a paired sample."""
    h = hashlib.sha256(np.asarray(members, dtype=np.int64).tobytes() + b"|"
                       + np.asarray(non_members, dtype=np.int64).tobytes())
    return h.hexdigest()[:16]


def scores_result(member_scores, non_member_scores, evaluated: str | None, **parameters: Any) -> MembershipResult:
    """A membership result straight from two score arrays (no bootstrap): what another attack's own
    member / non-member design (the one-run audit canaries, in or out) is judged by."""
    pos, neg = np.asarray(member_scores, dtype=np.float64), np.asarray(non_member_scores, dtype=np.float64)
    m = mia_metrics(pos, neg, bootstrap=0)
    return MembershipResult(auc=m.auc, tpr_at_1pct_fpr=m.tpr_at_1pct_fpr, tpr_at_0_1pct_fpr=m.tpr_at_0_1pct_fpr,
                            n_members=m.n_members, n_non_members=m.n_non_members, roc=Roc(fpr=[], tpr=[], threshold=[]),
                            parameters=parameters, member_scores=_kept(pos), non_member_scores=_kept(neg),
                            evaluated=evaluated)


def membership_result(ctx: AttackContext, member_scores: np.ndarray, non_member_scores: np.ndarray,
                      **parameters: Any) -> MembershipResult:
    """Metrics of scores over all non-canary members / non-members, on the context's evaluation subsets."""
    pos = np.asarray(member_scores, dtype=np.float64)[ctx.mia_members]
    neg = np.asarray(non_member_scores, dtype=np.float64)[ctx.mia_non_members]
    m = mia_metrics(pos, neg, bootstrap=ctx.settings.bootstrap, seed=ctx.seed)
    res = MembershipResult(auc=m.auc, tpr_at_1pct_fpr=m.tpr_at_1pct_fpr, tpr_at_0_1pct_fpr=m.tpr_at_0_1pct_fpr,
                           n_members=m.n_members, n_non_members=m.n_non_members, auc_ci95=m.auc_ci95,
                           tpr_at_1pct_fpr_ci95=m.tpr_at_1pct_fpr_ci95, tpr_at_0_1pct_fpr_ci95=m.tpr_at_0_1pct_fpr_ci95,
                           roc=Roc(**roc_points(pos, neg)), parameters=parameters, member_scores=_kept(pos),
                           non_member_scores=_kept(neg), evaluated=_digest(ctx.mia_members, ctx.mia_non_members))
    res._scores = (pos, neg)
    return res


# --------------------------------------------------------------------------- the attacks

def loss(target: ModelHandle, ctx: AttackContext) -> MembershipResult:
    s = ctx.scoring
    return membership_result(ctx, loss_scores(s.target("members")), loss_scores(s.target("non_members")))


def zlib(target: ModelHandle, ctx: AttackContext) -> MembershipResult:
    s, t = ctx.scoring, ctx.scoring.texts
    return membership_result(ctx, zlib_scores(s.target("members"), t["members"]),
                             zlib_scores(s.target("non_members"), t["non_members"]))


def min_k(target: ModelHandle, ctx: AttackContext) -> MembershipResult:
    k, s = ctx.settings.min_k_percent / 100.0, ctx.scoring
    return membership_result(ctx, min_k_scores(s.target("members"), k), min_k_scores(s.target("non_members"), k), k=k)


def min_k_pp(target: ModelHandle, ctx: AttackContext) -> MembershipResult:
    k, s = ctx.settings.min_k_percent / 100.0, ctx.scoring
    return membership_result(ctx, min_k_pp_scores(s.target("members"), k), min_k_pp_scores(s.target("non_members"), k),
                             k=k)


def _unit_mean(records, values: np.ndarray) -> np.ndarray:
    """Each record's value replaced by the mean over all records of its unit (person / group / text)."""
    keys = [unit_of(r) for r in records]
    sums: dict = {}
    for k, v in zip(keys, values):
        a = sums.setdefault(k, [0.0, 0])
        a[0] += float(v)
        a[1] += 1
    return np.array([sums[k][0] / sums[k][1] for k in keys])


def loss_group(target: ModelHandle, ctx: AttackContext) -> MembershipResult:
    """Group-level LOSS: a person's (group's) score is the mean −NLL over *all* their records, so the
    test is "was this person in the training data" — a group-privacy question (k records: ≈ kε), which
    is why its figures are never turned into a record-level ε."""
    s = ctx.scoring
    members = [r for r in ctx.members if r.kind != "canary"]
    return membership_result(ctx, _unit_mean(members, loss_scores(s.target("members"))),
                             _unit_mean(ctx.non_members, loss_scores(s.target("non_members"))), group=True)


def reference(target: ModelHandle, ctx: AttackContext) -> MembershipResult:
    s = ctx.scoring
    return membership_result(ctx, reference_scores(s.target("members"), s.reference("members")),
                             reference_scores(s.target("non_members"), s.reference("non_members")))


def rmia(target: ModelHandle, ctx: AttackContext) -> MembershipResult:
    """Offline RMIA with the reference model as the one reference, the population as z (log p = −NLL)."""
    s, a = ctx.scoring, ctx.settings.rmia_a
    z_t, z_r = -s.target("population").nll(), -s.reference("population").nll()[None, :]
    pos = rmia_scores(-s.target("members").nll(), -s.reference("members").nll()[None, :], z_t, z_r, a=a)
    neg = rmia_scores(-s.target("non_members").nll(), -s.reference("non_members").nll()[None, :], z_t, z_r, a=a)
    return membership_result(ctx, pos, neg, a=a)


SHADOW_SCORES: Input[Any] = Input("shadow-scores", "LiRA's and RMIA-with-shadows' scores of the evaluated "
                                                  "candidates", per_model=True)


@provides(SHADOW_SCORES, needs=(SHADOWS, SCORES, SELECTION, SETTINGS), pure=True)
def _shadow_scores_of(view: Any) -> Any:
    sh, scores, sel, settings = view[SHADOWS], view[SCORES], view[SELECTION], view[SETTINGS]
    tx = np.concatenate([scores("members").nll()[sel.members], scores("non_members").nll()[sel.non_members]])
    return shadow_scores(tx, scores("population").nll(), sh.nll_x, sh.nll_z, sh.in_x,
                         global_variance=settings.global_variance, default_a=settings.rmia_a)


def _shadow_scores(ctx: AttackContext) -> Any:
    """LiRA and RMIA-with-shadows scores of the evaluated candidates, computed once per model."""
    return ctx[SHADOW_SCORES]


def _on_subsets(ctx: AttackContext, attack: str, **parameters: Any) -> MembershipResult:
    """A shadow attack's scores (defined on the evaluated subsets only) placed back into full-length arrays."""
    sc = _shadow_scores(ctx).scores[attack]
    n_m, n_n = len(ctx.scoring.texts["members"]), len(ctx.scoring.texts["non_members"])
    pos, neg = np.full(n_m, np.nan), np.full(n_n, np.nan)
    pos[ctx.mia_members], neg[ctx.mia_non_members] = sc[: len(ctx.mia_members)], sc[len(ctx.mia_members) :]
    return membership_result(ctx, pos, neg, n_shadows=int(ctx.shadows.nll_x.shape[0]), **parameters)


def lira_online(target: ModelHandle, ctx: AttackContext) -> MembershipResult:
    return _on_subsets(ctx, "lira_online", global_variance=ctx.settings.global_variance)


def lira_offline(target: ModelHandle, ctx: AttackContext) -> MembershipResult:
    return _on_subsets(ctx, "lira_offline", global_variance=ctx.settings.global_variance)


def rmia_shadows(target: ModelHandle, ctx: AttackContext) -> MembershipResult:
    res = _shadow_scores(ctx)
    return _on_subsets(ctx, "rmia_shadows", a=res.rmia_a, a_tuned=res.rmia_a_tuned)
