"""The plan of an audit: the tasks its roots need, derived from what every provider declares.

Every persisted instance (:class:`~privleak.core.inputs.Persist`) reached from the roots through the needs
that exist here is one task; its inputs are the tasks of the persisted instances its needs reach, through any
that are not persisted (made in the process that reads them). No input is named here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .inputs import Input, Inputs


@dataclass(frozen=True)
class Planned:
    """One task of a plan: a persisted instance, its task's name, key, inputs (the tasks of its needs),
    outputs and the executors' hints."""

    input: Input[Any]
    model: str | None
    name: str
    key: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    kind: str
    cost: float
    wide: bool


def plan(resolver: Inputs, roots: Iterable[tuple[Input[Any], str | None]],
         done: Iterable[str] = ()) -> list[Planned]:
    """The tasks the ``roots`` need: every persisted instance reached through needs (those that exist here),
    each after the tasks it reads (a depth-first order from the roots, in their order). A task's inputs are
    the tasks of the persisted instances its needs reach, through any that are not persisted. ``done``: task
    names that ran before this plan (they are inputs, not tasks, of it)."""
    tasks: dict[tuple[Input[Any], str | None], Planned] = {}
    reach: dict[tuple[Input[Any], str | None], tuple[str, ...]] = {}  # instance → the tasks its value reads
    visiting: set[tuple[Input[Any], str | None]] = set()
    before = set(done)

    def visit(inst: tuple[Input[Any], str | None]) -> tuple[str, ...]:
        if inst in reach:
            return reach[inst]
        if inst in visiting:
            raise ValueError(f"inputs in a circle at {inst[0].name!r}")
        visiting.add(inst)
        reads: list[str] = []
        for n in resolver.needs_of(*inst):
            reads += [t for t in visit(n) if t not in reads]
        visiting.discard(inst)
        p = resolver.provider(inst[0])
        where = resolver.where(*inst)
        persist = p.persisted(where)
        if persist is None:
            reach[inst] = tuple(reads)
            return reach[inst]
        name = persist.task_name(where)
        if name not in before:
            tasks[inst] = Planned(inst[0], inst[1], name, resolver.key(*inst), tuple(reads),
                                  persist.output_paths(where), persist.kind, persist.task_cost(where), persist.wide)
        reach[inst] = (name,)
        return reach[inst]

    for root in roots:
        inst = resolver.instance(*root)
        if resolver.available(*inst):
            visit(inst)
    return list(tasks.values())
