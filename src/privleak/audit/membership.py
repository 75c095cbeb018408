"""Membership evaluation: which records are compared, and the empirical ε over the attacks.

The attacks (``attacks/mia.py``) compute their metrics on the evaluation
subsets chosen here; this module turns their scores into the arm's
empirical ε lower bound and, for DP arms, checks the strongest attack's ROC
against the DP bound.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

from ..attacks.audit_canaries import OneRunCanaryResult
from ..attacks.mia import MembershipResult
from ..core.metrics import roc_curve
from ..data.records import Record
from ..data.splits import unit_of
from ..defenses.dedup import dedup_near
from ..results import ExposedPerson, MembershipDesign, DpBound, EmpiricalEpsilon, EmpiricalEpsilonBound, OneRunCandidate, OneRunEpsilon
from .epsilon import dp_bound_check, empirical_epsilon
from .one_run import one_run_audit

#: Fewer audit canaries than this and the one-run bound cannot reach even ε ≈ 1.
MIN_ONE_RUN_CANARIES = 50

PROCEDURE = "attack and threshold chosen on a random half, Clopper-Pearson bounds on the other half"


#: Fewer evaluated units per side than this and no empirical ε is printed (the bound would be noise).
MIN_UNITS = 20


@dataclass
class MiaSelection:
    """The member / non-member records the membership attacks compare, and how they were chosen."""

    members: np.ndarray
    non_members: np.ndarray
    design: MembershipDesign


def _bucket(n: int) -> int:
    """Stratum of a unit by its number of records: 1, 2, 3–4, 5–8, … (⌈log2 n⌉)."""
    return int(math.ceil(math.log2(max(1, n))))


def mia_selection(members: Sequence[Record], non_members: Sequence[Record], max_records: int, seed: int,
                  near_threshold: float = 0.8) -> MiaSelection:
    """Exchangeable member / non-member evaluation sets, one record per unit.

    The split assigns whole units (a person, a ``--group-field`` group, a
    distinct text) to members or non-members at random, so before training
    the two sides are exchangeable *as units*. This keeps them so:

    1. eligible records: non-canary, and PII-carrying when PII is known (the
       records whose privacy is at stake), on both sides alike;
    2. one record per unit (seeded choice): a person with 8 notes or a
       boilerplate copied 50 times counts once, so the evaluated records are
       independent, as the Clopper–Pearson bounds assume;
    3. near duplicates (MinHash, Jaccard ≥ ``near_threshold`` on character
       5-grams) of the chosen records are one unit too: a cluster wholly on one
       side keeps one record, a cluster with records on both sides is dropped
       whole (a symmetric rule, so exchangeability survives);
    4. matched composition: units are stratified by their record count
       (1, 2, 3–4, 5–8, …) and each stratum contributes equally many units to
       both sides, capped at ``max_records`` per side.

    When fewer than :data:`MIN_UNITS` units per side remain, ``design.available``
    is false and the audit prints no empirical ε (with the reason) rather than
    a number the data cannot support.
    """
    rng = np.random.default_rng(seed)

    def units(recs: Sequence[Record]) -> tuple[dict[tuple[str, str], list[int]], dict[tuple[str, str], int]]:
        known = any(r.pii is not None for r in recs)
        eligible: dict[tuple[str, str], list[int]] = {}
        size: dict[tuple[str, str], int] = {}
        for i, r in enumerate(recs):
            if r.kind == "canary":
                continue
            u = unit_of(r)
            size[u] = size.get(u, 0) + 1
            if r.has_pii or not known:
                eligible.setdefault(u, []).append(i)
        return eligible, size

    (um, sm), (un, sn) = units(members), units(non_members)
    kinds = {k for k, _ in list(um) + list(un)}
    unit_name = "person" if "person" in kinds else "group" if "group" in kinds else "distinct text"
    n_records = (sum(len(v) for v in um.values()), sum(len(v) for v in un.values()))
    reps_m = {u: int(rng.choice(ix)) for u, ix in um.items()}
    reps_n = {u: int(rng.choice(ix)) for u, ix in un.items()}

    # near duplicates among the chosen records, both sides together
    items = [("m", u, members[i].text) for u, i in reps_m.items()] + [("n", u, non_members[i].text) for u, i in reps_n.items()]
    _, report = dedup_near([t for _, _, t in items], threshold=near_threshold, num_perm=64, seed=seed)
    drop: set[int] = set()
    crossing = 0
    for cluster in report.clusters:
        sides = {items[j][0] for j in cluster}
        if len(sides) > 1:
            drop.update(cluster)
            crossing += 1
        else:
            drop.update(cluster[1:])
    kept = [it for j, it in enumerate(items) if j not in drop]

    strata: dict[int, tuple[list, list]] = {}
    for side, u, _ in kept:
        size = sm[u] if side == "m" else sn[u]
        strata.setdefault(_bucket(size), ([], []))[0 if side == "m" else 1].append(u)
    take = {b: min(len(a), len(c)) for b, (a, c) in strata.items()}
    total = sum(take.values())
    if total > max_records:  # scale every stratum down alike
        take = {b: int(k * max_records / total) for b, k in take.items()}
    chosen_m, chosen_n = [], []
    for b in sorted(strata):
        a, c = strata[b]
        for side, pool, out, reps in (("m", a, chosen_m, reps_m), ("n", c, chosen_n, reps_n)):
            pick = rng.choice(len(pool), take[b], replace=False) if take[b] else []
            out.extend(reps[pool[int(k)]] for k in pick)
    mi, ni = np.sort(np.asarray(chosen_m, dtype=np.int64)), np.sort(np.asarray(chosen_n, dtype=np.int64))
    available = min(len(mi), len(ni)) >= MIN_UNITS
    reason = "" if available else (
        f"only {min(len(mi), len(ni))} independent {unit_name} units per side after one record per unit, "
        f"near-duplicate clusters and matching (need ≥ {MIN_UNITS}): the data cannot support an ε bound")
    design = MembershipDesign(
        unit=unit_name, eligible_records=list(n_records), units=[len(um), len(un)], evaluated=[len(mi), len(ni)],
        near_duplicate_clusters_dropped=crossing, near_duplicate_records_merged=len(drop),
        strata={f"{2 ** (b - 1) + 1 if b else 1}-{2 ** b}": take[b] for b in sorted(strata)},
        available=available, reason=reason)
    return MiaSelection(members=mi, non_members=ni, design=design)


def mia_subsets(members: Sequence[Record], non_members: Sequence[Record], max_records: int,
                seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the members / non-members the membership attacks compare (:func:`mia_selection`)."""
    sel = mia_selection(members, non_members, max_records, seed)
    return sel.members, sel.non_members


def empirical_epsilon_summary(results: dict[str, MembershipResult], *, delta: float, alpha: float, seed: int,
                              dp_epsilon: float | None = None) -> EmpiricalEpsilon:
    """The arm's empirical ε from freshly computed membership results.

    Every attack gets the same seeded select/evaluate split (same sizes, same
    seed). The arm's figure is the attack whose bound is largest on the
    *selection* half, evaluated on the held-out half — choosing the attack,
    like the threshold, before looking at the evaluation data keeps the
    1 − α guarantee that a maximum over attacks would lose. For a DP arm the
    strongest attack's ROC is also checked against TPR ≤ e^ε·FPR + δ.
    """
    # Group-level attacks test a whole person (k records: group privacy, ≈ kε): never a record-level bound.
    results = {k: r for k, r in results.items() if not r.parameters.get("group")}
    bounds = {name: empirical_epsilon(*r.scores, delta=delta, alpha=alpha, seed=seed) for name, r in results.items()}
    best = max(bounds, key=lambda a: (bounds[a].epsilon_select, a))
    strongest = max(results, key=lambda a: (results[a].auc, a))
    summary = EmpiricalEpsilon(
        epsilon_lb=bounds[best].epsilon_lb, attack=best, alpha=alpha, delta=delta, procedure=PROCEDURE,
        strongest_attack_by_auc=strongest,
        by_attack={k: EmpiricalEpsilonBound.model_validate(v.to_dict()) for k, v in bounds.items()})
    if dp_epsilon is not None:
        pos, neg = results[strongest].scores
        fpr, tpr, _ = roc_curve(pos, neg)
        check = dp_bound_check(fpr, tpr, dp_epsilon, delta, n_pos=len(pos), n_neg=len(neg), alpha=alpha)
        summary.dp_bound = DpBound.model_validate({"attack": strongest, **asdict(check), "ok": check.ok})
        summary.exceeds_accountant = bool(bounds[best].epsilon_lb > dp_epsilon)
    return summary


def one_run_summary(result: OneRunCanaryResult, *, delta: float, alpha: float, fdp: bool = True,
                    dp_epsilon: float | None = None) -> OneRunEpsilon:
    """The one-run lower bounds (ε: Steinke et al. 2023; μ of μ-GDP: Mahloujifar et al. 2024) from
    the audit canaries' scores, at the arm's δ; for a DP arm, whether the Steinke bound (valid for any
    (ε, δ)-DP training) exceeds the accountant's ε."""
    scores, included = result.scores
    if len(scores) < MIN_ONE_RUN_CANARIES:
        return OneRunEpsilon(available=False, m=len(scores),
                             reason=f"only {len(scores)} audit canaries (need ≥ {MIN_ONE_RUN_CANARIES}); "
                                    "raise one_run.canaries")
    audit = one_run_audit(scores, included, alpha=alpha, delta=delta, gdp=fdp)
    cands = [OneRunCandidate.model_validate(asdict(c)) for c in audit.candidates]
    out = OneRunEpsilon(available=True, epsilon_steinke=audit.epsilon_steinke, mu_gdp_lb=audit.mu_gdp_lb,
                        m=audit.m, n_included=audit.n_in, score=result.score, alpha=alpha,
                        alpha_each=audit.alpha_each, delta=delta,
                        best=OneRunCandidate.model_validate(asdict(audit.best_steinke)), candidates=cands)
    if dp_epsilon is not None:
        out.exceeds_accountant = bool(audit.epsilon_steinke > dp_epsilon)
    return out


def exposed_people(results: dict[str, MembershipResult], members: Sequence[Record], evaluated: np.ndarray,
                   mask, top: int = 10, seed: int = 0) -> list[ExposedPerson]:
    """The individuals an aggregate AUC hides: for each evaluated member record (one per person / unit),
    the attacks that flag it at ≤ 1 % FPR (its score above the ⌊0.01 n⌋+1-th highest non-member score),
    ranked by how many attacks flag it, then by its highest percentile among non-member scores.

    ``members`` are the non-canary members the scores index (``evaluated`` = the evaluated indices);
    ``mask`` masks a name. Ids are salted hashes of the unit, never the unit itself.
    """
    record_level = {k: r for k, r in results.items() if not r.parameters.get("group")}
    if not record_level or len(evaluated) == 0:
        return []
    sizes: dict[tuple[str, str], int] = {}
    for r in members:
        u = unit_of(r)
        sizes[u] = sizes.get(u, 0) + 1
    flags: list[list[str]] = [[] for _ in evaluated]
    pct = np.zeros(len(evaluated))
    for name, res in record_level.items():
        pos, neg = res.scores
        if len(pos) != len(evaluated) or not len(neg):
            continue
        srt = np.sort(neg)[::-1]
        t = srt[min(len(srt) - 1, int(0.01 * len(srt)))]
        pct = np.maximum(pct, np.searchsorted(np.sort(neg), pos, side="left") / len(neg))
        for i in np.flatnonzero(pos > t):
            flags[i].append(name)
    order = sorted(range(len(evaluated)), key=lambda i: (-len(flags[i]), -pct[i], i))[:top]
    out = []
    for i in order:
        rec = members[int(evaluated[i])]
        u = unit_of(rec)
        digest = hashlib.sha256(f"{seed}:{u[0]}:{u[1]}".encode()).hexdigest()[:8]
        name = next((sp.value(rec.text) for sp in rec.pii or () if sp.label == "NAME"), None)
        out.append(ExposedPerson(id=f"{u[0]} {digest}", name=mask(name) if name else None, records=sizes[u],
                                 flagged_by=flags[i], percentile=float(pct[i])))
    return out
