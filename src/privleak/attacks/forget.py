"""The forget set through the attacks: does a model still know the people it was asked to forget?

Two registered attacks run on every model of an audit that forgets someone
(the control, the arm the request is made to, ``retrain``, each unlearning
arm), so an unlearning arm can be compared with the model retrained without
the forget set on identical inputs:

* :func:`forget_membership` — every membership attack that scores records
  from the target's own scoring passes (LOSS, zlib, min-k%, min-k%++, the
  reference attack, RMIA, LOSS per person; not those that need shadow
  models, which score only the main evaluation sets) on the forgotten
  persons against held-out non-members: one record per forgotten person
  (the one a seeded draw picks), matched with as many non-members by
  :func:`~privleak.attacks.membership.selection.mia_selection`, the same
  records for every model. The per-record scores are kept, so the verdict can
  test one model's AUC against another's (DeLong, paired). Also the mean token
  NLL on the forget set, the retain set and the held-out non-members.
* :func:`forget_pii` — Lukas et al.'s PII extraction (the same tagged samples
  as ``pii_extraction``) counted against the forgotten persons' identifying
  values that no retained person also carries, beside the same count on the
  non-members' values (the floor), base-model emissions subtracted; and per
  forgotten person whether any of their own values came out, so two models are
  compared person by person (McNemar: a person's values are not independent
  trials, and both models are asked about the same persons).

The forgotten canaries need no attack of their own: the exposure and canary
extraction results hold every canary by id. None of these judge member
leakage (:meth:`assess` finds nothing): the unlearning kinds judge them.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, ClassVar, Literal

import numpy as np

from ..core.inputs import as_need
from ..core.present import Block, Cell, Heading, Note, Table, interval, n, t
from ..core.typed import Nats, Probability, ProbabilityInterval, Typed
from ..data.canaries import derive_seed
from ..data.unlearning import person_of
from .base import AttackContext, AttackResult, Figure, Finding, Policy, PresentContext, Runs
from .inputs import ATTACK_SPECS, POPULATION, REFERENCE, SCORES
from .membership.attacks import MembershipResult
from .membership.selection import mia_selection
from .pii_extraction import base_emissions, count_extraction, pii_analyzer, target_emissions, usable_labels
from .pii_inventory import IDENTIFYING, PiiInventory, build_inventory

if TYPE_CHECKING:
    from ..models.handle import ModelHandle


class ForgetAttack(Typed):
    """One membership attack on the forget set: forgotten persons' records (positive) vs held-out non-members."""

    auc: Probability
    auc_ci95: ProbabilityInterval | None = None
    tpr_at_1pct_fpr: Probability
    forget_scores: list[float]  # higher = "member"; in the order of ForgetMembershipResult.forget_records
    holdout_scores: list[float]


class ForgetMembershipResult(AttackResult):
    """Membership attacks on the forget set against held-out non-members, and the NLL on forget / retain / held-out
    text (mean token NLL, nats)."""

    kind: Literal["forget_membership"] = "forget_membership"
    title: ClassVar[str] = "forget-set membership"

    forget_records: list[int]  # evaluated forgotten records: positions among the non-canary members
    holdout_records: list[int]  # evaluated non-members: positions in the non-member split
    n_forget_persons: int  # forgotten persons (canaries apart)
    attacks: dict[str, ForgetAttack]
    nll_forget: Nats | None
    nll_retain: Nats | None
    nll_holdout: Nats | None

    def strongest(self) -> tuple[str | None, ForgetAttack | None]:
        if not self.attacks:
            return None, None
        name = max(self.attacks, key=lambda a: (self.attacks[a].auc, a))
        return name, self.attacks[name]

    def headline(self) -> list[Figure]:
        name, best = self.strongest()
        out = [Figure(f"forget AUC ({name})", best.auc, "auc", ci=best.auc_ci95, chance=0.5)] if best else []
        return out + [Figure("NLL forget", self.nll_forget), Figure("NLL retain", self.nll_retain),
                      Figure("NLL held-out", self.nll_holdout)]

    def assess(self, attack: str, control: AttackResult | None, policy: Policy) -> Finding:
        name, best = self.strongest()
        figure = (f"{attack}: forget-set AUC {best.auc:.3f} ({name}) on {len(self.forget_records)} forgotten persons "
                  f"vs as many held-out non-members" if best else "")
        return Finding(attack, None, figure)

    @classmethod
    def present(cls, runs: Runs, ctx: PresentContext) -> list[Block]:
        rows: list[list[Cell | str]] = []
        first: ForgetMembershipResult | None = None
        for attack, rs in runs.items():
            for model, r in rs:
                if not isinstance(r, ForgetMembershipResult):
                    continue
                first = first or r
                for name, a in r.attacks.items():
                    rows.append([model, ctx.short(name), n(a.auc), t(interval(a.auc_ci95)), n(a.tpr_at_1pct_fpr)])
        if first is None:
            return []
        return [Heading(ctx.title("forget_membership")),
                Table(["model", "attack", "forget-set AUC", "95% CI", "TPR@1%FPR"], rows,
                      caption=f"The forget set's persons ({len(first.forget_records)} evaluated, one record each) "
                              "against as many held-out non-members: AUC 0.5 = the model cannot tell them apart. "
                              "Compare each unlearning arm with retrain in the Unlearning section."),
                Note("Mean token NLL (nats) on the forget set / retain set / held-out non-members: "
                     + "; ".join(f"{m}: {_f(r.nll_forget)} / {_f(r.nll_retain)} / {_f(r.nll_holdout)}"
                                 for rs in runs.values() for m, r in rs if isinstance(r, ForgetMembershipResult)))]

    @classmethod
    def console(cls, runs: Runs, ctx: PresentContext) -> list[Table]:
        rs = [(m, r) for rows in runs.values() for m, r in rows if isinstance(r, ForgetMembershipResult)]
        if not rs:
            return []
        names = list(dict.fromkeys(a for _, r in rs for a in r.attacks))
        rows: list[list[Cell | str]] = [[m, *[f"{r.attacks[a].auc:.3f}" if a in r.attacks else "—" for a in names],
                                         _f(r.nll_forget), _f(r.nll_retain), _f(r.nll_holdout)] for m, r in rs]
        return [Table(["model", *[ctx.short(a) for a in names], "NLL forget", "NLL retain", "NLL held-out"], rows,
                      console_title=f"Forget set — membership AUC of the {rs[0][1].n_forget_persons} forgotten "
                                    f"persons ({len(rs[0][1].forget_records)} evaluated, one record each; the "
                                    "forgotten canaries are read off exposure) vs as many held-out non-members (0.5: "
                                    "not told apart), and mean NLL")]


def _f(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


#: What the forget-set MIA reads besides its needs: what the membership attacks it runs read.
MEMBERSHIP_READS = (REFERENCE, SCORES.of("reference"), POPULATION, ATTACK_SPECS)


def _membership_specs(ctx: AttackContext) -> list:
    """The audit's membership attacks (``ctx.attacks``, registry order) that score records from the target's
    passes alone (no shadows, no clients) and read nothing the forget-set MIA does not."""
    if not ctx.attacks:
        raise ValueError("the forget-set MIA runs the audit's membership attacks: pass them as the ATTACK_SPECS input")
    mine = {as_need(n) for n in (SCORES, *MEMBERSHIP_READS)}
    return [s for s in ctx.attacks.values() if s.family == "membership" and s.result is MembershipResult
            and {as_need(n) for n in (*s.needs, *s.reads)} <= mine and s.applicable(ctx)]


def _token_mean(scores, rows: list[int]) -> float | None:
    """Mean token NLL over the texts ``rows`` of a scoring pass (token-weighted, as utility is)."""
    if not rows:
        return None
    total = sum(float(scores.logprob[scores.tokens(i)].astype(np.float64).sum()) for i in rows)
    count = sum(int(scores.offsets[i + 1] - scores.offsets[i]) for i in rows)
    return -total / count if count else None


def forget_membership(target: ModelHandle, ctx: AttackContext) -> ForgetMembershipResult:
    """See the module docstring."""
    assert ctx.forget is not None
    members = [r for r in ctx.members if r.kind != "canary"]  # the order of the "members" scoring pass
    in_forget = [ctx.forget.holds(r) for r in members]
    pos = np.flatnonzero(in_forget)
    sel = mia_selection([members[i] for i in pos], ctx.non_members, max(1, len(pos)),
                        derive_seed(ctx.seed, "forget-mia") % 2**32)
    fx, hx = pos[sel.members], sel.non_members
    out: dict[str, ForgetAttack] = {}
    if len(fx) and len(hx):
        sub = ctx.replace(mia_members=fx, mia_non_members=hx, shadows=None)
        for spec in _membership_specs(sub):
            r = spec.run(target, sub)
            f_scores, h_scores = r.scores
            out[spec.name] = ForgetAttack(auc=r.auc, auc_ci95=r.auc_ci95, tpr_at_1pct_fpr=r.tpr_at_1pct_fpr,
                                          forget_scores=[float(x) for x in f_scores],
                                          holdout_scores=[float(x) for x in h_scores])
    m_pass, h_pass = ctx.scoring.target("members"), ctx.scoring.target("non_members")
    return ForgetMembershipResult(
        forget_records=[int(i) for i in fx], holdout_records=[int(i) for i in hx], n_forget_persons=ctx.forget.n_persons,
        attacks=out, nll_forget=_token_mean(m_pass, [int(i) for i in pos]),
        nll_retain=_token_mean(m_pass, [i for i, f in enumerate(in_forget) if not f]),
        nll_holdout=_token_mean(h_pass, list(range(len(ctx.non_members)))))


class ForgetPiiResult(AttackResult):
    """Lukas et al.'s PII extraction counted on the forgotten persons' own identifying values (none a retained
    person also carries), beside the non-members' values (the floor); base-model emissions subtracted."""

    kind: Literal["forget_pii_extraction"] = "forget_pii_extraction"
    title: ClassVar[str] = "forget-set PII extraction"

    n_values: int  # the forgotten persons' distinct identifying values
    extracted: int
    n_floor_values: int  # held-out non-members' values (not carried by any member)
    floor_extracted: int
    n_samples: int
    by_label: dict[str, tuple[int, int]] = {}  # label → (extracted, values)
    #: Forgotten persons carrying at least one such value (in the forget set's order), and which of them (their
    #: positions in that list) had any value extracted; ``persons_digest`` names the list, so two models' results
    #: pair only on the same persons.
    n_persons_with_values: int | None = None
    persons_extracted: list[int] | None = None
    persons_digest: str | None = None

    def headline(self) -> list[Figure]:
        floor = self.floor_extracted / self.n_floor_values if self.n_floor_values else None
        return [Figure("forgotten values extracted", self.extracted / self.n_values if self.n_values else None, "rate",
                       k=self.extracted, n=self.n_values, floor=floor, chance=0.0)]

    def assess(self, attack: str, control: AttackResult | None, policy: Policy) -> Finding:
        return Finding(attack, None, f"{attack}: {self.extracted}/{self.n_values} forgotten PII values extracted "
                                     f"(floor {self.floor_extracted}/{self.n_floor_values})")


def _without(inv: PiiInventory, drop: set) -> PiiInventory:
    return PiiInventory(inv.side, {k: e for k, e in inv.entries.items() if k not in drop})


def forget_pii(target: ModelHandle, ctx: AttackContext) -> ForgetPiiResult:
    """See the module docstring."""
    assert ctx.forget is not None
    labels = usable_labels(pii_analyzer(ctx), IDENTIFYING)
    members = [r for r in ctx.members if r.kind != "canary"]
    forgotten, retained = ctx.forget.split(members)
    retained_keys = set(build_inventory(retained, "member", labels).entries)
    forget_inv = _without(build_inventory(forgotten, "member", labels), retained_keys)
    floor_inv = _without(build_inventory(ctx.non_members, "non_member", labels),
                         retained_keys | set(forget_inv.entries))
    tagged = target_emissions(target, ctx)
    c = count_extraction(forget_inv, floor_inv, tagged, base_emissions(ctx), labels)
    owned: dict[str, set[tuple[str, str]]] = {}
    for r in forgotten:
        owned.setdefault(person_of(r), set()).update(build_inventory([r], "member", labels).entries)
    persons = [p for p in ctx.forget.persons if owned.get(p, set()) & set(forget_inv.entries)]
    hit = [i for i, p in enumerate(persons) if owned[p] & c.extracted_keys]
    return ForgetPiiResult(n_values=c.total.n_member_values, extracted=c.total.member_extracted,
                           n_floor_values=c.total.n_non_member_values,
                           floor_extracted=c.total.non_member_extracted, n_samples=tagged.n_samples,
                           by_label={x.label: (x.member_extracted, x.n_member_values) for x in c.categories
                                     if x.n_member_values},
                           n_persons_with_values=len(persons), persons_extracted=hit,
                           persons_digest=hashlib.sha256("\n".join(persons).encode()).hexdigest()[:16])
