"""The scheduling loop the parallel executors share: submit each task once its inputs are done.

A backend (Ray, a local process pool) only says how a task is submitted,
waited on, collected and cancelled; which task may start, the task board,
Ctrl-C and the order durations are listed in are the same for all of them.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..pipeline.audit import Audit
from ..pipeline.graph import Graph, Task
from . import board


class Backend(Protocol):
    #: Tasks it runs at once (None: as many as are submitted; the backend queues the rest itself).
    slots: int | None

    def submit(self, task: Task, wide: bool = False) -> Any:
        """Start ``task`` somewhere; returns a handle. ``wide``: it may use every core of the backend's slots."""

    def wait(self, handles: list[Any]) -> list[Any]:
        """Those of ``handles`` that finished, waiting at most about half a second."""

    def collect(self, task: Task, handle: Any) -> list[str]:
        """A finished task's warnings; raises the task's own exception (or a one-line error) when it failed."""

    def cancel(self, handles: list[Any]) -> None:
        """Stop what is still running (after Ctrl-C or a failed task)."""


def run_dynamic(graph: Graph, audit: Audit, backend: Backend, title: str) -> None:
    """Run every task of ``graph`` not done with its key, each as soon as its inputs are done."""
    root = audit.run.root.absolute()
    todo = [t for t in graph.tasks if not audit.run.done(t.name, t.key)]
    view = board.TaskBoard(root, [t.name for t in graph.tasks], title=title, notify=audit.notify)
    for t in graph.tasks:
        if t in todo:
            board.release(root, t.name)  # a claim left by a stopped run is not this run's attempt
        else:
            view.cached(t.name)
    if not todo:
        return
    done = set(graph.external) | {t.name for t in graph.tasks if t not in todo}
    in_flight: dict[Any, Task] = {}
    # Ready tasks start longest chain first (Graph.priorities); ties in graph order (the sort is stable).
    rank = graph.priorities()
    waiting = sorted(todo, key=lambda t: -rank[t.name])
    slots = getattr(backend, "slots", None)
    with view:
        try:
            while waiting or in_flight:
                for task in [t for t in waiting if all(i in done for i in t.inputs)]:
                    if slots is not None and len(in_flight) >= slots:
                        break
                    waiting.remove(task)
                    in_flight[backend.submit(task, wide=task.wide)] = task
                    view.submitted(task.name)
                ready = backend.wait(list(in_flight))
                view.poll()
                for handle in ready:
                    task = in_flight.pop(handle)
                    try:
                        warnings = backend.collect(task, handle)
                    except BaseException:
                        view.failed(task.name)
                        raise
                    # The marker the worker wrote holds the duration: read it here, so results.json lists it.
                    audit.run.done(task.name, task.key)
                    view.finished(task.name, audit.run.durations.get(task.name, 0.0))
                    for w in warnings:
                        audit.warn(w)
                    done.add(task.name)
        except BaseException:
            # Ctrl-C or a failed task: stop what is running (its stage is not marked, so a rerun redoes it;
            # every finished stage is marked and is not redone).
            backend.cancel(list(in_flight))
            raise
    # results.json lists durations in the order a sequential run finishes the tasks: the graph's.
    durations = dict(audit.run.durations)
    ours = {t.name for t in graph.tasks}
    audit.run.durations.clear()
    audit.run.durations.update({k: v for k, v in durations.items() if k not in ours})
    audit.run.durations.update({t.name: durations[t.name] for t in graph.tasks if t.name in durations})
    try:
        (root / "stages" / board.RUNNING_DIR).rmdir()  # empty once every task finished
    except OSError:
        pass
