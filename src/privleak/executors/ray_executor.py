"""The Ray executor: every task of the graph as a Ray task, each submitted as soon as its inputs are done.

Tasks talk only through the run directory, so on a cluster the run directory
(and ``PRIVLEAK_CACHE``, where the embedded base model is cached) must be on
a filesystem every node mounts at the same path. A worker rebuilds the
:class:`~privleak.pipeline.audit.Audit` from the config and that directory and
runs the task through ``Audit.stage`` — the same key check, the same marker
after — so a task Ray re-runs after its worker died, or a rerun after the
driver was stopped, finds whatever finished already.

Each task asks Ray for ``cpus_per_task`` CPUs (and as many torch threads,
so workers never oversubscribe cores), ``gpus_per_task`` GPUs for model
work, and memory estimated from the model's size (:func:`memory_bytes`).
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import ray
from ray.exceptions import RayError, RayTaskError

from .. import __file__ as _package_init
from ..config import AuditConfig, ExecutorConfig
from ..core.errors import UserError
from ..pipeline.audit import Audit
from ..pipeline.graph import Graph, Task
from .dynamic import run_dynamic
from .worker import execute

GIB = 1024**3
#: A worker process with torch, transformers and Presidio's spaCy model loaded, before any model.
WORKER_OVERHEAD = 1.5 * GIB
#: Bytes per model parameter a task holds. Training: fp32 weights, gradients, Adam's two moments (16 B) and as
#: much again for activations and DP-SGD's per-sample gradients of a micro-batch; evaluation: the target and
#: the reference model (8 B) and their activations.
BYTES_PER_PARAM = {"light": 0, "train": 32, "eval": 12}
#: Environment the workers need to see as the driver does (set ones only).
PASSED_ENV = ("PRIVLEAK_CACHE", "PRIVLEAK_PROGRESS", "HF_HOME", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE",
              "TRANSFORMERS_VERBOSITY", "HF_HUB_DISABLE_TELEMETRY", "HF_HUB_DISABLE_PROGRESS_BARS",
              "TOKENIZERS_PARALLELISM")


def embedded_params(cfg: AuditConfig) -> int:
    """Parameters of the embedded GPT-2: embeddings + 12d² + 13d per layer + the final layer norm."""
    e = cfg.model.embedded
    d = e.n_embd
    return e.vocab_size * d + cfg.model.max_length * d + e.n_layer * (12 * d * d + 13 * d) + 2 * d


def model_params(cfg: AuditConfig, root: Path) -> int:
    """The base model's parameter count: from the config (embedded), ``base_model.json`` (a user's model,
    once the base-model stage ran) or the size of its weights on disk; 0 when not known yet."""
    if cfg.model.base is None:
        return embedded_params(cfg)
    try:
        return int(json.loads((root / "base_model.json").read_text())["n_params"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    ref = Path(cfg.model.base).expanduser()
    if ref.is_dir():
        return sum(f.stat().st_size for f in ref.glob("*.safetensors")) // 4
    return 0


def memory_bytes(kind: str, n_params: int, ex: ExecutorConfig) -> int:
    """Memory a task asks Ray for: ``executor.memory_gib`` for model tasks when set, else overhead + bytes/param."""
    if kind != "light" and ex.memory_gib is not None:
        return int(ex.memory_gib * GIB)
    return int(WORKER_OVERHEAD + BYTES_PER_PARAM[kind] * n_params)


@dataclass(frozen=True)
class Resources:
    num_cpus: int
    num_gpus: float
    memory: int

    def options(self) -> dict[str, Any]:
        return {"num_cpus": self.num_cpus, "num_gpus": self.num_gpus, "memory": self.memory}


def resources(task: Task, cfg: AuditConfig, root: Path) -> Resources:
    ex = cfg.executor
    return Resources(num_cpus=ex.cpus_per_task, num_gpus=0.0 if task.kind == "light" else ex.gpus_per_task,
                     memory=memory_bytes(task.kind, model_params(cfg, root), ex))


# ---------------------------------------------------------------- the driver side

class RayExecutor:
    """Runs graphs on Ray: a local Ray started here (``workers`` tasks at once) or a cluster's (``ray_address``)."""

    name = "ray"

    def __init__(self, cfg: ExecutorConfig, notify: Callable[[str], None] = lambda s: None) -> None:
        self.cfg = cfg
        self.notify = notify
        self._started = False  # whether this executor started (so shuts down) Ray
        self._remote = ray.remote(execute)

    def _env(self) -> dict[str, str]:
        env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(self.cfg.cpus_per_task)
        env.setdefault("OMP_WAIT_POLICY", os.environ.get("OMP_WAIT_POLICY", "PASSIVE"))  # core.threads
        return env

    def connect(self) -> None:
        """Join the cluster, or start a local Ray; workers import this very privleak."""
        if ray.is_initialized():  # the caller's own Ray session (a notebook, a test): use it as it is
            return
        package_dir = Path(_package_init).resolve().parent
        env = self._env()
        if self.cfg.ray_address is None:
            # A local cluster: the workers are started from this machine's files, so the source directory on
            # PYTHONPATH is enough (and works for an editable install and a plain checkout alike).
            env["PYTHONPATH"] = os.pathsep.join([str(package_dir.parent), *filter(None, [os.environ.get("PYTHONPATH")])])
            workers = self.cfg.workers or max(1, (os.cpu_count() or 1) // self.cfg.cpus_per_task)
            with warnings.catch_warnings():  # Ray's notice of a future default (CPU tasks keep GPUs hidden here)
                warnings.simplefilter("ignore", FutureWarning)
                ray.init(num_cpus=workers * self.cfg.cpus_per_task, include_dashboard=False, log_to_driver=False,
                         configure_logging=False, runtime_env={"env_vars": env},
                         object_store_memory=256 * 1024**2, _node_ip_address="127.0.0.1")
            where = f"local Ray, {workers} worker{'s' * (workers != 1)}"
        else:
            # Another machine's workers get this package shipped with the job (the same code as the driver).
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", FutureWarning)
                    ray.init(address=self.cfg.ray_address, log_to_driver=False, configure_logging=False,
                             runtime_env={"env_vars": env, "py_modules": [str(package_dir)]})
            except (ConnectionError, RuntimeError) as exc:
                raise UserError(f"--ray-address {self.cfg.ray_address}: cannot connect ({str(exc).splitlines()[0]}); "
                                "start the cluster (ray start --head) or check the address") from None
            where = f"Ray cluster {self.cfg.ray_address}"
        self._started = True
        self.notify(f"executor: {where}")

    def _check_fits(self, name: str, r: Resources) -> None:
        """Refuse a task no node of the cluster could ever run (Ray would wait for it forever)."""
        nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
        if not any(n.get("CPU", 0) >= r.num_cpus and n.get("GPU", 0) >= r.num_gpus and n.get("memory", 0) >= r.memory
                   for n in nodes):
            most = max(nodes, key=lambda n: n.get("memory", 0), default={})
            raise UserError(
                f"task {name} asks for {r.num_cpus} CPU, {r.num_gpus:g} GPU and {r.memory / GIB:.1f} GiB but no Ray "
                f"node has that (largest: {most.get('CPU', 0):g} CPU, {most.get('GPU', 0):g} GPU, "
                f"{most.get('memory', 0) / GIB:.1f} GiB); lower executor.cpus_per_task / gpus_per_task / memory_gib")

    def run(self, graph: Graph, audit: Audit) -> None:
        self.connect()
        run_dynamic(graph, audit, _RayBackend(self, audit), title="ray")

    def close(self) -> None:
        if self._started:
            ray.shutdown()
            self._started = False


class _RayBackend:
    """Ray tasks as :func:`run_dynamic`'s backend; each resource request is checked against the cluster once."""

    def __init__(self, ex: RayExecutor, audit: Audit) -> None:
        self.ex, self.audit = ex, audit
        self.root = audit.run.root.absolute()
        self.checked: set[Resources] = set()

    slots = None  # Ray queues what its cluster cannot start yet

    def submit(self, task: Task, wide: bool = False) -> ray.ObjectRef:
        # Resources are worked out at submission: a user model's size is known once the base is.
        req = resources(task, self.audit.cfg, self.root)
        if req not in self.checked:
            self.ex._check_fits(task.name, req)
            self.checked.add(req)
        return self.ex._remote.options(**req.options(), max_retries=self.ex.cfg.max_retries,
                                       retry_exceptions=False, name=task.name).remote(
            self.audit.cfg, str(self.root), task, self.ex.cfg.cpus_per_task, self.audit.run.lock_token)

    def wait(self, handles: list[ray.ObjectRef]) -> list[ray.ObjectRef]:
        return ray.wait(handles, num_returns=1, timeout=0.5)[0] if handles else []

    def collect(self, task: Task, handle: ray.ObjectRef) -> list[str]:
        try:
            return ray.get(handle)[1]
        except RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            raise (cause if isinstance(cause, BaseException) else exc) from None
        except RayError as exc:  # its worker died more often than Ray retries, or the node is gone
            raise RuntimeError(f"task {task.name} failed on Ray after {self.ex.cfg.max_retries} retries "
                               f"({type(exc).__name__}); rerun the same command to resume") from None

    def cancel(self, handles: list[ray.ObjectRef]) -> None:
        for ref in handles:
            ray.cancel(ref, force=True)
