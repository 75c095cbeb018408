"""Which records the membership attacks compare: exchangeable member / non-member sets, one record per unit."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ...core.typed import Typed
from ...data.records import Record
from ...data.splits import unit_of
from ...defenses.dedup import dedup_near


class MembershipDesign(Typed):
    """How the membership evaluation sets were drawn (audit/membership.py: ``mia_selection``).

    ``unit``: "person", "group" (``--group-field``) or "distinct text"; pairs are [members, non-members].
    ``available`` false: the sets cannot support an ε bound, and ``reason`` says why.
    """

    unit: str
    eligible_records: list[int]
    units: list[int]
    evaluated: list[int]
    near_duplicate_clusters_dropped: int
    near_duplicate_records_merged: int
    strata: dict[str, int]
    available: bool
    reason: str = ""


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
