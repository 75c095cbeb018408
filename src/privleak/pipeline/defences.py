"""The data defences as providers of the defended members: scrubbing and deduplication.

An arm name's data defences (``dp-8+scrub``) say which of these an arm's training records pass through
(:data:`DEFENCES`, in the order they apply: scrubbing rewrites the members, deduplication keeps some of
them); each is one persisted input, made once per audit for every arm that names it — ``defend/scrub``
(``defences/scrub/members.jsonl``) and ``defend/dedup`` (``defences/dedup/kept.json``), each with its report
— and a shadow model trained like such an arm gets its pool the same way (``defend/scrub-pool``: the
non-members scrubbed too; deduplication runs on the shadow's own records). The plan and the training stage
read this table; neither names a defence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..attacks.inputs import SPLITS
from ..core.inputs import Input, Needed, Persist, View, provides
from ..core.io import read_json, stable_hash, write_json
from ..data.records import Record, read_jsonl, write_jsonl

SCRUBBED: Input[list[Record]] = Input("scrubbed-members", "the members with their PII scrubbed (defend/scrub)")
DEDUP_KEPT: Input[list[int]] = Input("dedup-kept", "the members deduplication keeps, by index (defend/dedup)")
SCRUBBED_POOL: Input[list[Record]] = Input("scrubbed-pool", "the non-members scrubbed as the members are, for the "
                                                            "shadows of a scrubbing arm (defend/scrub-pool)")


@dataclass(frozen=True)
class DataDefence:
    """One data defence: what it reads (``needs``), how it turns the (defended) members into what an arm
    trains on (``apply``), and a shadow's pool and records (``shadow_needs``, ``shadow_pool``,
    ``shadow_records``) — the shadows of an arm are trained like it."""

    name: str
    needs: tuple[Needed, ...]
    apply: Callable[[list[Record], View], list[Record]]
    shadow_needs: tuple[Needed, ...] = ()
    shadow_pool: Callable[[list[Record], View], list[Record]] | None = None
    shadow_records: Callable[[list[Record], View], list[Record]] | None = None

    def report(self, run: Any) -> dict[str, Any]:
        """Its report (``defences/<name>/report.json``), for the arm's results."""
        return read_json(run.path("defences", self.name, "report.json"))


def _scrub_key(cfg: Any, data_key: str) -> str:
    return stable_hash("scrub", data_key, cfg.defences.scrub.model_dump(mode="json"), cfg.seed)


def _dedup_key(cfg: Any, data_key: str) -> str:
    return stable_hash("dedup", data_key, cfg.defences.dedup.model_dump(mode="json"), cfg.seed)


@provides(SCRUBBED, needs=(SPLITS,), key_formula=lambda k: _scrub_key(k.cfg, k.key(SPLITS)),
          persist=Persist("defend/scrub", ("defences/scrub/members.jsonl", "defences/scrub/report.json"),
                          load=lambda view: read_jsonl(view.path("defences", "scrub", "members.jsonl"))))
def _scrubbed(view: View) -> None:
    from ..defenses.arm_data import scrub_members

    s, splits = view.cfg.defences.scrub, view[SPLITS]
    others = [r for name, recs in splits.items() if name != "members" for r in recs]
    scrubbed, report = scrub_members(splits["members"], mode=s.mode, entities=s.entities, seed=view.cfg.seed,
                                     reserve=others)
    write_jsonl(view.path("defences", "scrub", "members.jsonl"), scrubbed)
    write_json(view.path("defences", "scrub", "report.json"), report.model_dump(mode="json"))


@provides(DEDUP_KEPT, needs=(SPLITS,), key_formula=lambda k: _dedup_key(k.cfg, k.key(SPLITS)),
          persist=Persist("defend/dedup", ("defences/dedup/kept.json", "defences/dedup/report.json"),
                          load=lambda view: read_json(view.path("defences", "dedup", "kept.json"))))
def _dedup_kept(view: View) -> None:
    from ..defenses.arm_data import dedup_members

    d, members = view.cfg.defences.dedup, view[SPLITS]["members"]
    kept, report = dedup_members(members, method=d.method, threshold=d.threshold, num_perm=d.num_perm,
                                 seed=view.cfg.seed)
    kept_ids = {id(r) for r in kept}  # dedup returns the very objects it keeps
    write_json(view.path("defences", "dedup", "kept.json"), [i for i, r in enumerate(members) if id(r) in kept_ids])
    write_json(view.path("defences", "dedup", "report.json"), report.model_dump(mode="json"))


@provides(SCRUBBED_POOL, needs=(SPLITS,), key_formula=lambda k: stable_hash("scrub-pool", k.key(SCRUBBED)),
          persist=Persist("defend/scrub-pool", ("defences/scrub/non_members.jsonl",),
                          load=lambda view: read_jsonl(view.path("defences", "scrub", "non_members.jsonl"))))
def _scrubbed_pool(view: View) -> None:
    from ..defenses.arm_data import scrub_members

    s, splits = view.cfg.defences.scrub, view[SPLITS]
    others = [r for name, recs in splits.items() if name != "non_members" for r in recs]
    scrubbed, _ = scrub_members(splits["non_members"], mode=s.mode, entities=s.entities, seed=view.cfg.seed,
                                desc="scrub non-members (shadow pool)", reserve=others)
    write_jsonl(view.path("defences", "scrub", "non_members.jsonl"), scrubbed)


def _dedup_records(records: list[Record], view: View) -> list[Record]:
    from ..defenses.arm_data import dedup_members

    d = view.cfg.defences.dedup
    kept, _ = dedup_members(records, method=d.method, threshold=d.threshold, num_perm=d.num_perm, seed=view.cfg.seed)
    return kept


#: The data defences by name, in the order they apply to an arm's members.
DEFENCES: dict[str, DataDefence] = {d.name: d for d in (
    DataDefence("scrub", (SCRUBBED,), lambda records, view: view[SCRUBBED], shadow_needs=(SCRUBBED, SCRUBBED_POOL),
                shadow_pool=lambda pool, view: [r for r in view[SCRUBBED] if r.kind != "canary"] + view[SCRUBBED_POOL]),
    DataDefence("dedup", (DEDUP_KEPT,), lambda records, view: [records[i] for i in view[DEDUP_KEPT]],
                shadow_records=_dedup_records),
)}


def defences_of(spec: Any) -> list[DataDefence]:
    """An arm's data defences, in the order they apply."""
    return [d for d in DEFENCES.values() if d.name in spec.data]
