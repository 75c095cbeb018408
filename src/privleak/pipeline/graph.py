"""One audit as a graph of tasks: what each reads, what it writes and its cache key.

The graph is derived from declarations: every persisted input (:mod:`privleak.core.inputs`) that the
results read (:func:`.assemble.roots`) is one task, whose inputs are the tasks of the inputs its provider
needs — those an arm kind, an attack or another provider declares. No kind, defence or family is named here.

Each :class:`Task` names the tasks whose artefacts it reads (``inputs``),
the run-directory paths it writes (``outputs``) and its key; it is skipped
when already done with the same key (``rundir``): a key hashes the config
that determines the stage and the keys of the stages it reads, so rerunning
after a crash or Ctrl-C resumes where it stopped, a changed setting redoes
exactly the stages it affects, and the same config + seed reproduce the same
``results.json``.

An executor runs the graph: :class:`Sequential` (the default) runs the
tasks one after another in this process in the order they were added (a
topological order); ``privleak.executors.ray`` runs them as Ray tasks, each
as soon as its inputs are done. Tasks talk only through the run directory,
so a task body is a module-level function (or a ``functools.partial`` of
one) taking the :class:`Audit`: it pickles, and a worker rebuilds the
``Audit`` from the config and the run directory, and its resolver from the
plan's :class:`~.audit.Scope` (the models and keys) the task carries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Callable, Literal, Protocol

from ..arms import resolve, specs
from ..attacks.inputs import SPLITS
from ..config import AuditConfig, resolve_delta
from ..core.plan import plan
from ..core.io import write_json
from ..results import AuditResults
from . import data, data_release, defences, evaluate, forget, training  # noqa: F401  (their providers register)
from .assemble import assemble, roots
from .audit import Audit, ModelInfo, Scope, produce
from .checks import preflight, seed_arms
from .rundir import RunDir
from .data import data_key
from .training import seed_info, seed_name, shadow_arms, shadow_name

#: What a task mostly does, for an executor's resource requests: ``light`` (data, defences, small
#: statistics), ``train`` (fits a model: the base, an arm, a shadow) or ``eval`` (scores and attacks a model).
TaskKind = Literal["light", "train", "eval"]


@dataclass(frozen=True)
class Task:
    """One stage of the audit.

    ``run(audit)`` does the work; ``inputs`` are the names of the tasks whose
    artefacts it reads (each added to the graph before it), ``outputs`` the
    run-directory paths it writes, ``key`` its cache key (``stages/<name>.json``).
    """

    name: str
    key: str
    run: Callable[[Audit], None]
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    kind: TaskKind = "light"
    #: Roughly what the task costs (training: record-epochs; see :func:`.training.train_cost`), for the parallel executors'
    #: order: the longest chain of work starts first (:func:`priorities`). Never part of a key or a result.
    cost: float = 1.0
    #: The task may use every core the executor has: it runs while (almost) nothing else can (the base model,
    #: which every arm waits for).
    wide: bool = False


@dataclass
class Graph:
    """Tasks in the order they were added, which is a topological order (:meth:`add` checks it)."""

    tasks: list[Task] = field(default_factory=list)
    #: Inputs done before this graph runs (the data stage: the graph's shape depends on the members).
    external: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        added, self.tasks = self.tasks, []
        self._names: dict[str, Task] = {}
        for task in added:
            self.add(task)

    def add(self, task: Task) -> Task:
        if task.name in self._names:
            raise ValueError(f"task {task.name!r} is in the graph twice")
        missing = [i for i in task.inputs if i not in self._names and i not in self.external]
        if missing:
            raise ValueError(f"task {task.name!r} reads {missing}, which are not (yet) in the graph")
        self.tasks.append(task)
        self._names[task.name] = task
        return task

    def __getitem__(self, name: str) -> Task:
        return self._names[name]

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def priorities(self) -> dict[str, float]:
        """Each task's cost plus the costliest chain of tasks that read its outputs (its critical path).

        A parallel executor starting the ready task with the longest chain first keeps every worker busy
        to the end (critical-path list scheduling): the DP arms, which train longest, start before the
        quick ones, and a model's evaluation before the next training that nothing waits for."""
        readers: dict[str, list[str]] = {t.name: [] for t in self.tasks}
        for t in self.tasks:
            for i in t.inputs:
                if i in readers:
                    readers[i].append(t.name)
        out: dict[str, float] = {}
        for t in reversed(self.tasks):  # a topological order, reversed: readers first
            out[t.name] = t.cost + max((out[r] for r in readers[t.name]), default=0.0)
        return out

    def __len__(self) -> int:
        return len(self.tasks)


class Executor(Protocol):
    """Runs a graph: every task not done with its key, each after its inputs, marked done after."""

    name: str

    def run(self, graph: Graph, audit: Audit) -> None: ...

    def close(self) -> None: ...


class Sequential:
    """One task after another, in this process, in the graph's order: the default executor."""

    name = "sequential"

    def run(self, graph: Graph, audit: Audit) -> None:
        for task in graph.tasks:
            audit.stage(task.name, task.key, partial(task.run, audit))

    def close(self) -> None:
        pass


# ---------------------------------------------------------------- the graph

DATA = "data"


def data_task(cfg: AuditConfig) -> Task:
    """The root: splits and canaries. It runs before the rest of the graph is built, whose shape
    (δ, the DP recipe's batch and epochs, the shadow pool) depends on the members."""
    return Task(DATA, data_key(cfg), partial(produce, input=SPLITS, model=None, scope=Scope()), outputs=("splits/",))


def models_of(cfg: AuditConfig, contenders: tuple[str, ...] = ()) -> dict[str, ModelInfo]:
    """The models of ``privleak run``'s audit, in the order they are trained and evaluated: the base model,
    the arms (trained kinds, then those derived from another arm's model, then the served ones: a wrapper, no
    model of their own), each shadow-trained arm's shadows, and the extra training seeds of the arms named in
    ``recommendation.arms`` and of the ``contenders`` (arms the recommendation could not tell apart on
    utility)."""
    out = {"base": ModelInfo("base", "base")}
    order = {"trained": 0, "derived": 1, "served": 2}
    shadowed = set(shadow_arms(cfg))
    extra: dict[str, ModelInfo] = {}
    for spec in sorted((s for s in specs(cfg) if s.kind_obj.model in order), key=lambda s: order[s.kind_obj.model]):
        kind, name = spec.kind_obj, spec.name
        roles = {"reference": "base"}
        if kind.source is not None:
            roles["source"] = kind.source
            if kind.model == "served":
                roles["serves"] = kind.source
        if name in shadowed:
            for k in range(cfg.shadows.n_shadows):
                roles[f"shadow-{k}"] = shadow_name(name, k)
                extra[shadow_name(name, k)] = ModelInfo(shadow_name(name, k), "shadow", spec, evaluated=False, k=k,
                                                        roles={"reference": "base", "arm": name})
        out[name] = ModelInfo(name, kind.model, spec, roles)
    out.update(extra)
    static = seed_arms(cfg)
    trained = {s.name: s for s in specs(cfg) if s.kind_obj.model == "trained"}
    for spec in static + [trained[n] for n in contenders if n in trained and n not in {s.name for s in static}]:
        for k in range(1, cfg.recommendation.seeds + 1):
            out[seed_name(spec.name, k)] = seed_info(cfg, spec, k)
    return out


def planned_graph(audit: Audit, done: frozenset[str] = frozenset({DATA}), first: tuple[Task, ...] = ()) -> Graph:
    """The tasks the results need, from what every kind, attack and provider declares (:func:`.assemble.roots`,
    :func:`privleak.core.plan.plan`): each persisted input once, after the tasks of its needs. ``done``: tasks
    run before this graph; ``first``: tasks a caller makes its own way (their inputs' keys fixed by it)."""
    tasks = plan(audit.inputs, roots(audit.inputs), done=done | {t.name for t in first})
    scope = Scope.of(audit.inputs)
    return Graph([*first, *(Task(p.name, p.key, partial(produce, input=p.input, model=p.model, scope=scope), p.inputs,
                                 p.outputs, p.kind, p.cost, p.wide) for p in tasks)], external=done)  # type: ignore[arg-type]


def audit_graph(audit: Audit, contenders: tuple[str, ...] = ()) -> Graph:
    """Every task after the data stage (which must be done), with its inputs, outputs and key. ``contenders``:
    arms the recommendation could not tell apart on utility, retrained on ``recommendation.seeds`` extra
    training seeds (besides ``recommendation.arms``, always retrained)."""
    audit.inputs.models.update(models_of(audit.cfg, contenders))
    return planned_graph(audit)


def run_audit(cfg: AuditConfig, out_dir: str | Path, notify: Callable[[str], None] = lambda s: None,
              executor: Executor | None = None) -> AuditResults:
    """Run (or resume) the whole audit; returns the typed results also written to ``results.json``.

    ``executor``: how the graph runs (default :class:`Sequential`); it is closed before returning.
    Every model is placed and computes as ``cfg.device`` / ``cfg.compute`` say
    (:mod:`privleak.models.device`; a Ray worker applies the same policy around each task).
    """
    from ..models.device import use_policy

    cfg = resolve(cfg)  # the arms checked and named canonically, before any work
    with use_policy(cfg.compute_policy()), RunDir.locked(out_dir, now=False):  # taken where the directory opens
        return _run_audit(cfg, out_dir, notify, executor)


def _run_audit(cfg: AuditConfig, out_dir: str | Path, notify: Callable[[str], None],
               executor: Executor | None) -> AuditResults:
    preflight(cfg)
    run = RunDir.open(out_dir)
    notify(f"PrivLeak audit → {run.root}  (arms: {', '.join(s.name for s in specs(cfg))})")
    audit = Audit(cfg=cfg, run=run, notify=notify)
    write_json(run.path("config.json"), cfg.model_dump(mode="json"))
    executor = executor or Sequential()
    try:
        executor.run(Graph([data_task(cfg)]), audit)
        _, delta_warning = resolve_delta(cfg, len(audit.inputs.get(SPLITS)["members"]))
        if delta_warning and cfg.dp.epsilons:
            audit.warn(delta_warning)
        executor.run(audit_graph(audit), audit)
        results = assemble(audit, specs(cfg))
        rec = results.recommendation
        if rec is not None and rec.needs_seeds and cfg.recommendation.seeds:
            # The eligible arms the audit cannot tell apart on utility: their training noise decides (t intervals
            # over the extra seeds), then the tie rule. Already-trained seeds resume from their stages.
            notify(f"retraining {', '.join(rec.needs_seeds)} on {cfg.recommendation.seeds} extra training seed(s): "
                   "their utility cannot be told apart")
            executor.run(audit_graph(audit, tuple(rec.needs_seeds)), audit)
            results = assemble(audit, specs(cfg))
    finally:
        executor.close()
    write_json(run.path("results.json"), results.to_json())
    return results
