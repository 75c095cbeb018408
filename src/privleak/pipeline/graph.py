"""One audit as a graph of tasks: what each reads, what it writes and its cache key.

data → base model → data defences → train arms (and shadows) → per model:
utility and one attack stage per family (membership, canaries, extraction,
PII attacks) → the guard arm → results.

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
``Audit`` from the config and the run directory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable, Literal, Protocol

from ..arms import ArmSpec, resolve, specs
from ..arms import get as get_kind
from ..attacks.base import FAMILIES
from ..config import AuditConfig, resolve_delta
from ..core.io import stable_hash, write_json
from ..models.device import use_policy
from ..results import AuditResults
from .data_release import release_key, release_stage
from .rundir import RunDir
from .assemble import assemble
from .audit import Audit
from .checks import preflight, seed_arms
from .data import audit_canaries_key, base_key, data_key, make_audit_canaries_stage, make_data, resolve_base
from .forget import FORGET_TASK, forget_key, forget_stage, forgets
from .evaluate import (
    Target,
    blind_stage,
    attack_key,
    attack_stage,
    extra_stage,
    family_specs,
    SCORED_SPLITS,
    sample_requests,
    samples_stage,
    scores_stage,
    utility_stage,
)
from .training import (
    arm_settings,
    dedup_stage,
    derive_arm,
    defence_keys,
    scrub_pool_stage,
    scrub_stage,
    seed_name,
    shadow_arms,
    shadow_plan,
    train_arm,
    train_seed,
    train_shadow,
)

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
    #: Roughly what the task costs (training: record-epochs; see :func:`train_cost`), for the parallel executors'
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


# ---------------------------------------------------------------- task bodies (module level: they pickle)

def _train_shadow(audit: Audit, spec: ArmSpec, settings: dict[str, Any], k: int) -> None:
    # The plan is a pure function of the config and the splits: each process derives the same one.
    plan = audit.memo("shadow_plan", lambda: shadow_plan(audit.cfg, audit.splits()))
    train_shadow(audit, spec, settings, k, plan)


def _base_model(audit: Audit) -> None:
    resolve_base(audit, audit.splits()["public"])


# ---------------------------------------------------------------- the graph

DATA = "data"

#: One evaluation stage of one model (its scores, utility, an attack family), in the unit of :func:`train_cost`
#: (about a CPU second of the default audit): a few seconds each.
EVAL_COST = 5.0
#: DP-SGD's step costs about this many plain steps (per-sample clipping; bench/bench_dp_insitu.py).
DP_COST = 1.2


def train_cost(record_epochs: float) -> float:
    """A training's cost for the executors' order: record-epochs ÷ 200 (≈ CPU seconds of the embedded model)."""
    return max(1.0, record_epochs / 200.0)


def arm_cost(settings: dict[str, Any], n_members: int) -> float:
    """An arm's (or shadow's) training cost from its settings: epochs × records, DP-SGD's clipping on top.
    Only the order of the parallel executors reads it; an unknown kind counts as one plain epoch."""
    epochs = settings.get("epochs") or settings.get("rounds") or 1.0
    try:
        epochs = float(epochs)
    except (TypeError, ValueError):
        epochs = 1.0
    records = n_members * (1.0 + float(settings.get("replay") or 0.0))
    dp = DP_COST if settings.get("kind") in ("dp", "dp-user") or settings.get("target_epsilon") else 1.0
    return train_cost(epochs * records * dp)


def data_task(cfg: AuditConfig) -> Task:
    """The root: splits and canaries. It runs before the rest of the graph is built, whose shape
    (δ, the DP recipe's batch and epochs, the shadow pool) depends on the members."""
    return Task(DATA, data_key(cfg), make_data, outputs=("splits/",))


def audit_graph(audit: Audit, contenders: tuple[str, ...] = ()) -> Graph:
    """Every task after the data stage (which must be done), with its inputs, outputs and key. ``contenders``:
    arms the recommendation could not tell apart on utility, retrained on ``recommendation.seeds`` extra
    training seeds (besides ``recommendation.arms``, always retrained)."""
    cfg = audit.cfg
    members = audit.splits()["members"]
    g = Graph(external=frozenset({DATA}))
    dkey = data_key(cfg)
    if cfg.release.summary_epsilon is not None or cfg.release.ldp_terms_epsilon is not None:
        g.add(Task("release", release_key(cfg, dkey), release_stage, (DATA,), ("release.json",)))
    bkey = base_key(cfg, dkey)
    base_cost = train_cost(cfg.model.embedded.epochs * len(audit.splits()["public"])) if cfg.model.base is None else 1.0
    g.add(Task("base-model", bkey, _base_model, (DATA,), ("base_model.json",), kind="train", cost=base_cost,
               wide=True))
    # What every model trained on members reads: the splits, the base model and, if on, the audit canaries.
    trained_from = (DATA, "base-model")
    if cfg.one_run.canaries:
        g.add(Task("audit-canaries", audit_canaries_key(cfg, bkey), make_audit_canaries_stage, trained_from,
                   ("audit_canaries.json",)))
        trained_from += ("audit-canaries",)
    if forgets(cfg):
        # Who the unlearning arms forget; the forget-set attacks read it on every model, so it comes first.
        g.add(Task(FORGET_TASK, forget_key(cfg, dkey), forget_stage, (DATA,), ("splits/forget.json",)))
        trained_from += (FORGET_TASK,)
    g.add(Task("blind-baseline", stable_hash("blind", dkey, cfg.attacks.max_mia_records, cfg.attacks.bootstrap, cfg.seed),
               blind_stage, (DATA,), ("blind_baseline.json",)))

    # data defences, arms, shadows
    found = specs(cfg)
    dkeys = defence_keys(cfg, dkey)
    defence_task = {"scrub": "defend/scrub", "dedup": "defend/dedup"}
    if any("scrub" in s.data for s in found):
        g.add(Task("defend/scrub", dkeys["scrub"], scrub_stage, (DATA,),
                   ("defences/scrub/members.jsonl", "defences/scrub/report.json")))
    if any("dedup" in s.data for s in found):
        g.add(Task("defend/dedup", dkeys["dedup"], dedup_stage, (DATA,),
                   ("defences/dedup/kept.json", "defences/dedup/report.json")))
    arm_keys: dict[str, str] = {}
    producer: dict[str, str] = {"base": "base-model"}  # model → the task that made it
    targets = [Target("base", bkey, None, reference=False)]
    # Trained arms first, then those made from another arm's model, then the served ones (a wrapper, no model).
    order = {"trained": 0, "derived": 1, "served": 2}
    for spec in sorted((s for s in found if s.kind_obj.model in order), key=lambda s: order[s.kind_obj.model]):
        kind, name = spec.kind_obj, spec.name
        settings = arm_settings(cfg, spec, len(members))
        if kind.model == "trained":
            arm_keys[name] = stable_hash("arm", bkey, settings, tuple(dkeys[d] for d in spec.data))
            producer[name] = f"train/{name}"
            g.add(Task(producer[name], arm_keys[name], partial(train_arm, spec=spec, settings=settings),
                       trained_from + tuple(defence_task[d] for d in spec.data),
                       (f"arms/{name}/model/", f"arms/{name}/train.json"), kind="train",
                       cost=arm_cost(settings, len(members))))
        elif kind.model == "derived":
            arm_keys[name] = stable_hash(f"arm-{kind.name}", arm_keys[kind.source], settings)
            producer[name] = f"derive/{name}"
            g.add(Task(producer[name], arm_keys[name], partial(derive_arm, spec=spec, settings=settings),
                       ("base-model", producer[kind.source]) + ((FORGET_TASK,) if kind.forgets else ()),
                       (f"arms/{name}/model/", f"arms/{name}/train.json"), kind="train",
                       cost=arm_cost(settings, len(members))))
        else:
            arm_keys[name] = stable_hash(kind.name, arm_keys[kind.source], dkey)
            producer[name] = producer[kind.source]
        targets.append(Target(name, arm_keys[name], None, reference=True, kind=kind.name,
                              serves=kind.source if kind.model == "served" else None))
    shadow_keys: dict[str, str] = {}
    shadow_tasks: dict[str, tuple[str, ...]] = {}
    if shadow_arms(cfg):
        by_name = {s.name: s for s in found}
        if any("scrub" in by_name[a].data for a in shadow_arms(cfg)):
            g.add(Task("defend/scrub-pool", stable_hash("scrub-pool", dkeys["scrub"]), scrub_pool_stage, (DATA,),
                       ("defences/scrub/non_members.jsonl",)))
        for arm in shadow_arms(cfg):
            spec, settings = by_name[arm], arm_settings(cfg, by_name[arm], len(members))
            reads = trained_from + (("defend/scrub", "defend/scrub-pool") if "scrub" in spec.data else ())
            keys, names = [], []
            for k in range(cfg.shadows.n_shadows):
                # Which other arms get shadows does not change this arm's shadows.
                key = stable_hash("shadow", arm_keys[arm], cfg.shadows.model_dump(mode="json", exclude={"arms"}), k,
                                  cfg.attacks.max_mia_records)
                keys.append(key)
                names.append(f"shadow/{arm}/{k + 1}")
                g.add(Task(names[-1], key, partial(_train_shadow, spec=spec, settings=settings, k=k), reads,
                           (f"arms/{arm}/shadows/{k}.npz",), kind="train", cost=arm_cost(settings, len(members))))
            shadow_keys[arm] = stable_hash(*keys)
            shadow_tasks[arm] = tuple(names)

    # evaluation: the base control, every arm (a served arm through its wrapper)
    add_evaluation(g, audit, targets, producer, trained_from, bkey, shadow_keys, shadow_tasks)
    # training noise for the recommendation: the contenders (and the arms named) again on extra training seeds
    static = seed_arms(cfg)
    trained = {s.name: s for s in found if s.kind_obj.model == "trained"}
    for spec in static + [trained[n] for n in contenders if n in trained and n not in {s.name for s in static}]:
        settings = arm_settings(cfg, spec, len(members))
        reads = trained_from + tuple(defence_task[d] for d in spec.data)
        for k in range(1, cfg.recommendation.seeds + 1):
            name = seed_name(spec.name, k)
            key = stable_hash("arm-seed", arm_keys[spec.name], k)
            g.add(Task(f"train/{name}", key, partial(train_seed, spec=spec, settings=settings, k=k), reads,
                       (f"arms/{name}/model/", f"arms/{name}/train.json"), kind="train",
                       cost=arm_cost(settings, len(members))))
            t = Target(name, key, None, reference=True, kind=spec.kind_obj.name)
            if not cfg.recommendation.require.formal:
                # An empirical requirement must hold on every measured seed: the seed is attacked like the arm.
                add_evaluation(g, audit, [t], {name: f"train/{name}"}, trained_from, bkey)
                continue
            g.add(Task(f"utility/{name}", stable_hash("utility", key, "texts"),
                       partial(utility_stage, target=t, base_key=bkey), reads + (f"train/{name}",),
                       (f"arms/{name}/utility.json", f"arms/{name}/utility_texts.npz"), kind="eval", cost=EVAL_COST))
    return g


def add_evaluation(g: Graph, audit: Audit, targets: list[Target], producer: dict[str, str], reads_all: tuple[str, ...],
                   bkey: str, shadow_keys: dict[str, str] | None = None,
                   shadow_tasks: dict[str, tuple[str, ...]] | None = None) -> None:
    """Per target: its utility, one attack stage per family, and the stages its kind adds. ``reads_all``: what
    every evaluation reads (the splits, the base or reference model, the audit canaries); ``producer``: the
    task that made each target's model."""
    cfg = audit.cfg
    shadow_keys, shadow_tasks = shadow_keys or {}, shadow_tasks or {}
    # The base model is scored first: every arm's reference attacks read its pass.
    for t in sorted(targets, key=lambda t: t.name != "base"):
        reads = tuple(dict.fromkeys(reads_all + (producer[t.name],)))
        scored: tuple[str, ...] = ()
        if not t.serves:
            g.add(Task(f"scores/{t.name}", stable_hash("scores", t.key), partial(scores_stage, target=t, base_key=bkey),
                       reads, tuple(f"arms/{t.name}/scores_{split}.npz" for split in (*SCORED_SPLITS, "public_heldout")),
                       kind="eval", cost=EVAL_COST))
            scored = (f"scores/{t.name}",) + (("scores/base",) if t.reference else ())
            want = sample_requests(audit, t)
            if want:
                g.add(Task(f"samples/{t.name}", stable_hash("samples", t.key, sorted(s.key() for s in want),
                                                            sorted(want.values()), cfg.seed),
                           partial(samples_stage, target=t, base_key=bkey), reads, (f"arms/{t.name}/samples.json",),
                           kind="eval", cost=EVAL_COST))
            g.add(Task(f"utility/{t.name}", stable_hash("utility", t.key, "texts"),
                       partial(utility_stage, target=t, base_key=bkey), reads + scored,
                       (f"arms/{t.name}/utility.json", f"arms/{t.name}/utility_texts.npz"), kind="eval", cost=1.0))
        # A served arm reads its source model's pool; every arm's PII floor reads the base model's.
        sampled = tuple(f"samples/{m}" for m in dict.fromkeys((t.serves or t.name, *(("base",) if t.reference else ())))
                        if f"samples/{m}" in g)
        for family in FAMILIES:
            if not family_specs(audit, family, t):
                continue
            shadows = family == "membership" and t.name in shadow_keys
            g.add(Task(f"{family}/{t.name}", attack_key(audit, family, t, bkey, shadow_keys.get(t.name)),
                       partial(attack_stage, family=family, target=t, base_key=bkey, shadows=shadows),
                       reads + (scored if family == "membership" else ())
                       + (sampled if family in ("extraction", "pii") else ())
                       + (shadow_tasks[t.name] if shadows else ()), (f"arms/{t.name}/attacks/{family}.json",),
                       kind="eval", cost=EVAL_COST))
        for extra in (get_kind(t.kind).extra_stages() if t.kind else ()):
            g.add(Task(f"{extra.name}/{t.name}", stable_hash(extra.name, t.key, bkey, cfg.seed),
                       partial(extra_stage, target=t, base_key=bkey, stage=extra.name), reads,
                       (f"arms/{t.name}/{extra.file}",), kind="eval", cost=EVAL_COST))


def run_audit(cfg: AuditConfig, out_dir: str | Path, notify: Callable[[str], None] = lambda s: None,
              executor: Executor | None = None) -> AuditResults:
    """Run (or resume) the whole audit; returns the typed results also written to ``results.json``.

    ``executor``: how the graph runs (default :class:`Sequential`); it is closed before returning.
    Every model is placed and computes as ``cfg.device`` / ``cfg.compute`` say
    (:mod:`privleak.models.device`; a Ray worker applies the same policy around each task).
    """
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
        _, delta_warning = resolve_delta(cfg, len(audit.splits()["members"]))
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
