"""Client-level membership inference: was clinic X's data in training?

The unit of a federated deployment's guarantee (DP-FedAvg, McMahan et al.
2018) is the client, so the attack that matches it asks about a whole client.
Each client's score is the mean of its records' scores — the reference
attack's NLL_ref(x) − NLL_target(x) (Carlini et al. 2021; the base model is
the reference) when the target has one, else LOSS's −NLL(x) — so it
aggregates the membership signal of every record a clinic holds (higher =
member). The **member clients** are the training clients (the non-canary
members grouped by :func:`privleak.data.clients.client_labels`); the
**held-out clients** are the non-members grouped the same way: the same
number of clinics, of the same size law, none of whose records was trained
on. AUC over clients (and its bootstrap CI) is the figure; with K = 20 a
side, TPR at low FPR has no resolution and is not reported.

It runs where clients exist — the synthetic corpus's clinics, a user's
``--client-field``, an audit with federated arms — on every arm, central
ones too: under central training a clinic's records are in the model just
the same, and this is the question a consortium member asks of any release.
It never invents a partition for a corpus without clients. Its AUC is never
turned into an ε.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, ClassVar, Literal

import numpy as np
from scipy.stats import norm

from ...core.metrics import mia_metrics
from ...core.stats import auc_null_se, tost_normal
from ...core.typed import Probability, ProbabilityInterval
from ...data.clients import client_labels
from ...core.present import Table, interval
from ..base import AttackContext, AttackResult, Figure, Finding, Policy, PresentContext, Runs
from .scores import loss_scores, reference_scores

if TYPE_CHECKING:
    from ...models.handle import ModelHandle


class ClientMembershipResult(AttackResult):
    """AUC of per-client mean scores, member clients vs held-out clients, with a bootstrap 95 % CI."""

    kind: Literal["client_membership"] = "client_membership"
    title: ClassVar[str] = "client-level membership"

    auc: Probability
    auc_ci95: ProbabilityInterval | None = None
    score: Literal["reference", "loss"]
    n_member_clients: int
    n_heldout_clients: int
    records_per_client: tuple[int, int, int]  # min, median, max over both sides

    def headline(self) -> list[Figure]:
        return [Figure("AUC over clients", self.auc, "auc", ci=self.auc_ci95, chance=0.5)]

    @classmethod
    def console(cls, runs: Runs, ctx: PresentContext) -> list[Table]:
        """Its own table, which says what a client is: the attack runs on every arm, central ones too, and a row
        for an arm no federation trained reads as a mistake without it."""
        rows = [[m, f"{r.auc:.3f}" + (f" [{interval(r.auc_ci95, '.2f')}]" if r.auc_ci95 else ""),
                 f"{r.n_member_clients} / {r.n_heldout_clients}", "{} / {} / {}".format(*r.records_per_client)]
                for rs in runs.values() for m, r in rs if isinstance(r, ClientMembershipResult)]
        if not rows:
            return []
        return [Table(["arm", "AUC over clients [95% CI]", "clients: members / held out",
                       "records per client: min / median / max"], rows,  # type: ignore[arg-type]
                      console_title="Client-level membership inference — was a client's data trained on?",
                      console_caption="A client is a group of records one party holds (the synthetic corpus's clinics, "
                                      "or your --client-field); each client's score is the mean of its records'. It "
                                      "asks of every arm, federated or not: under central training a clinic's records "
                                      "are in the model just the same. AUC 0.5 = chance.")]

    def auc_se(self) -> float:
        """Hanley & McNeil's (1982) standard error of the client AUC from the AUC and the client counts alone:
        se² = (A(1−A) + (n₁−1)(Q₁−A²) + (n₂−1)(Q₂−A²)) / (n₁n₂), Q₁ = A/(2−A), Q₂ = 2A²/(1+A) — with a few
        clients and few bootstrap replicates the percentile interval is too rough to test with."""
        a, n1, n2 = self.auc, max(1, self.n_member_clients), max(1, self.n_heldout_clients)
        q1, q2 = a / (2 - a), 2 * a * a / (1 + a)
        return float(np.sqrt(max(a * (1 - a) + (n1 - 1) * (q1 - a * a) + (n2 - 1) * (q2 - a * a), 0.0) / (n1 * n2)))

    def assess(self, attack: str, control: AttackResult | None, policy: Policy) -> Finding:
        """As record-level membership: against the control's AUC — only when it used the same score (an arm's
        reference score against the control's LOSS compares two different statistics) — else chance, 0.5.
        Leaks when d = AUC − reference > ``auc_margin`` (one-sided z, standard errors by :meth:`auc_se`,
        unpaired); within the margin when TOST shows |d| < ``auc_margin`` — which twenty clinics per side
        cannot show (se ≈ 0.09): the finding then says how many clients would."""
        ctrl = control if isinstance(control, ClientMembershipResult) and control.score == self.score else None
        ref = ctrl.auc if ctrl else 0.5
        d = self.auc - ref
        se = float(np.hypot(self.auc_se(), ctrl.auc_se())) if ctrl else self.auc_se()
        p_leak = float(norm.sf((d - policy.auc_margin) / se)) if se > 0 else (0.0 if d > policy.auc_margin else 1.0)
        # A model must never "leak" against a copy of itself: d = 0 gives p ≥ ½ whatever the se.
        leaks = p_leak <= policy.alpha
        design = auc_null_se(self.n_member_clients, self.n_heldout_clients) * (math.sqrt(2.0) if ctrl else 1.0)
        eq = tost_normal(d, se, policy.auc_margin, policy.alpha, n=self.n_member_clients,
                         method="Hanley–McNeil" + (", unpaired" if ctrl else ""), design_se=design)
        figure = (f"{attack} client AUC {self.auc:.3f}"
                  + (f" (95% CI {self.auc_ci95[0]:.3f}–{self.auc_ci95[1]:.3f})" if self.auc_ci95 else "")
                  + f" over {self.n_member_clients} vs {self.n_heldout_clients} clients, "
                  + (f"control {ref:.3f} ({self.score} score)" if ctrl else f"chance 0.5 ({self.score} score)"))
        reason = (f"a client's records together give it away: client-level AUC {self.auc:.2f} vs {ref:.2f} for "
                  + ("the control" if ctrl else "chance")) if leaks else ""
        return Finding(attack, leaks, figure, reason, p_leak=p_leak, equivalence=eq, items="clients per side",
                       margin=f"client AUC within ±{policy.auc_margin:g} of the {'control' if ctrl else 'coin flip'}'s")


def _client_means(labels: list[str], scores: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """(each client's mean finite score, its record count), clients in sorted order."""
    sums: dict[str, list[float]] = {}
    for lab, v in zip(labels, scores):
        if np.isfinite(v):
            sums.setdefault(lab, []).append(float(v))
    return np.array([np.mean(sums[k]) for k in sorted(sums)]), [len(sums[k]) for k in sorted(sums)]


def run(target: ModelHandle, ctx: AttackContext) -> ClientMembershipResult:
    n_clients, field = ctx.settings.clients
    s = ctx.scoring
    members = [r for r in ctx.members if r.kind != "canary"]  # the scored member texts, in order
    use_ref = s.reference("members") is not None
    if use_ref:
        pos_r = reference_scores(s.target("members"), s.reference("members"))
        neg_r = reference_scores(s.target("non_members"), s.reference("non_members"))
    else:
        pos_r, neg_r = loss_scores(s.target("members")), loss_scores(s.target("non_members"))
    pos, n_pos = _client_means(client_labels(members, n_clients, ctx.seed, field), np.asarray(pos_r))
    neg, n_neg = _client_means(client_labels(ctx.non_members, n_clients, ctx.seed, field), np.asarray(neg_r))
    m = mia_metrics(pos, neg, bootstrap=ctx.settings.bootstrap, seed=ctx.seed)
    sizes = n_pos + n_neg
    return ClientMembershipResult(auc=m.auc, auc_ci95=m.auc_ci95, score="reference" if use_ref else "loss",
                                  n_member_clients=int(pos.size), n_heldout_clients=int(neg.size),
                                  records_per_client=(int(min(sizes)), int(np.median(sizes)), int(max(sizes))))
