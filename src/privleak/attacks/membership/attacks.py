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

from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from ...core.metrics import mia_metrics, roc_points
from ...data.splits import unit_of
from ...models.handle import ModelHandle
from ...core.present import Block, Cell, Plot, Table, interval, n, t
from ..base import AttackContext, AttackResult, Figure, Finding, KeepsScores, Policy, PresentContext, Runs
from .scores import (
    loss_scores,
    min_k_pp_scores,
    min_k_scores,
    reference_scores,
    zlib_scores,
)
from .rmia import rmia_scores
from .shadows import shadow_scores


class Roc(BaseModel):
    """ROC points for plotting (:func:`privleak.core.metrics.roc_points`); threshold None = +∞."""

    model_config = ConfigDict(extra="forbid")

    fpr: list[float]
    tpr: list[float]
    threshold: list[float | None]


class MembershipResult(KeepsScores):
    """AUC and TPR at low FPR (strict <) with percentile-bootstrap 95 % CIs, on equal-size member/non-member sets.

    ``scores``: (member scores, non-member scores) of the evaluated sets.
    """

    kind: Literal["membership"] = "membership"
    title: ClassVar[str] = "membership inference"

    auc: float
    tpr_at_1pct_fpr: float
    tpr_at_0_1pct_fpr: float
    n_members: int
    n_non_members: int
    auc_ci95: tuple[float, float] | None = None
    tpr_at_1pct_fpr_ci95: tuple[float, float] | None = None
    tpr_at_0_1pct_fpr_ci95: tuple[float, float] | None = None
    roc: Roc
    parameters: dict[str, float | int | bool | str] = {}

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

    def assess(self, attack: str, control: AttackResult | None, policy: Policy) -> Finding:
        """Near chance when the AUC's CI reaches within ``auc_margin`` of the control's AUC (what
        distribution shift alone gives), and the TPR@1%FPR CI within ``tpr_margin`` of max(1 %,
        the control's TPR@1%FPR): strong at low FPR counts even when the AUC looks harmless."""
        ctrl = control if isinstance(control, MembershipResult) else None
        ref = ctrl.auc if ctrl else 0.5
        low = self.auc_ci95[0] if self.auc_ci95 else self.auc
        ok = low <= ref + policy.auc_margin
        tref = max(0.01, ctrl.tpr_at_1pct_fpr if ctrl else 0.0)
        tci = self.tpr_at_1pct_fpr_ci95
        if tci is not None and tci[0] > tref + policy.tpr_margin:
            ok = False
        ci = f" (95% CI {self.auc_ci95[0]:.3f}–{self.auc_ci95[1]:.3f})" if self.auc_ci95 else ""
        figure = (f"{attack} MIA AUC {self.auc:.3f}{ci} vs {ref:.3f} for the {'control' if ctrl else 'coin flip'}, "
                  f"TPR@1%FPR {self.tpr_at_1pct_fpr:.3f}")
        reason = ""
        if not ok:
            reason = (f"the {attack} membership attack tells members from non-members (AUC {self.auc:.2f} vs {ref:.2f} "
                      "for the control" + (f"; it flags {self.tpr_at_1pct_fpr:.0%} of members at a 1% false-alarm rate"
                                           if self.tpr_at_1pct_fpr > 0 else "") + ")")
        return Finding(attack, not ok, figure, reason)


def membership_result(ctx: AttackContext, member_scores: np.ndarray, non_member_scores: np.ndarray,
                      **parameters: Any) -> MembershipResult:
    """Metrics of scores over all non-canary members / non-members, on the context's evaluation subsets."""
    pos = np.asarray(member_scores, dtype=np.float64)[ctx.mia_members]
    neg = np.asarray(non_member_scores, dtype=np.float64)[ctx.mia_non_members]
    m = mia_metrics(pos, neg, bootstrap=ctx.settings.bootstrap, seed=ctx.seed)
    res = MembershipResult(auc=m.auc, tpr_at_1pct_fpr=m.tpr_at_1pct_fpr, tpr_at_0_1pct_fpr=m.tpr_at_0_1pct_fpr,
                           n_members=m.n_members, n_non_members=m.n_non_members, auc_ci95=m.auc_ci95,
                           tpr_at_1pct_fpr_ci95=m.tpr_at_1pct_fpr_ci95, tpr_at_0_1pct_fpr_ci95=m.tpr_at_0_1pct_fpr_ci95,
                           roc=Roc(**roc_points(pos, neg)), parameters=parameters)
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


def _shadow_scores(ctx: AttackContext) -> Any:
    """LiRA and RMIA-with-shadows scores of the evaluated candidates, computed once per target."""
    def build() -> Any:
        sh, s = ctx.shadows, ctx.scoring
        tx = np.concatenate([s.target("members").nll()[ctx.mia_members], s.target("non_members").nll()[ctx.mia_non_members]])
        return shadow_scores(tx, s.target("population").nll(), sh.nll_x, sh.nll_z, sh.in_x,
                             global_variance=ctx.settings.global_variance, default_a=ctx.settings.rmia_a)
    return ctx.memo("shadow_scores", build)


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
