"""Federated fine-tuning on Flower's simulation engine: FedAvg and DP-FedAvg.

The members are split over K clients (:mod:`privleak.data.clients`); each
client is a Flower SuperNode simulated on this machine (Ray backend, local
and loopback only). Every round the server sends the global weights to the
sampled clients; each trains ``local_steps`` AdamW steps on mini-batches of
its own records from those weights and returns its new weights.

* **FedAvg** (McMahan et al. 2017) — Flower's own ``FedAvg`` strategy: a
  fixed fraction of the clients per round (sampled without replacement), the
  new global model the average of theirs weighted by their number of
  records. Its semantics are exactly the arm's; it is not private (the
  updates and the final model carry the data). Only its draw of the clients
  is ours (:class:`SeededFedAvg`, below).
* **DP-FedAvg** (McMahan et al. 2018, fixed clipping, central DP) — our own
  strategy, :class:`PoissonDPFedAvg`, a subclass of Flower's ``FedAvg``.
  Every client joins a round independently with probability q (Poisson); its
  update Δ_k = w_k − w is clipped to ‖Δ_k‖₂ ≤ C; the server adds
  N(0, σ²C²I) to the *sum* and divides by the *expected* number of clients
  qK (the fixed-denominator estimator of McMahan et al. 2018), so one
  client's influence on the released update is at most C/(qK) whoever else
  took part, and the client-level accountant
  (:mod:`privleak.accountants.analysis.federated`) is the Poisson-subsampled Gaussian
  of DP-SGD with "record" read as "client". A round in which no client is
  sampled still releases noise, as an empty Poisson batch does in DP-SGD.

Why not Flower's ``DifferentialPrivacyServerSideFixedClipping`` (or the
client-side variant) for DP-FedAvg: (1) it wraps a strategy that samples a
*fixed number* of clients, whose amplification is not the Poisson bound,
and Flower 1.41's own accountant for it accepts only "no-amplification";
(2) its noise has std σC/m for a configured m while the wrapped FedAvg
divides by the number of replies, weighted by their example counts, so a
large client (or a round with drop-outs) has more than C/m influence — the
noise no longer matches the sensitivity unless all weights are equal and
nobody drops; (3) its noise comes from NumPy's global generator, so a run
could not be reproduced from its seed. Clipping, a seeded generator and the
fixed denominator are a few lines of our own.

A client that fails mid-round (an exception in its training, a crashed
worker) comes back as an error reply: FedAvg averages the replies it has,
and DP-FedAvg counts the client as not having taken part — dropping out is
independent of the data, so it only lowers the effective sampling rate and
the accountant's q stays an upper bound. A client that hangs is cut off by
the round timeout. ``FedSettings.drop`` makes chosen clients fail halfway
through their local steps in chosen rounds, to test exactly that.

A run is a function of its seed (two runs give bit-identical models and
losses). Three things would otherwise vary from run to run:

* **which client a node is.** Flower names each simulated SuperNode by a
  random 64-bit id (``os.urandom``), new every run; a strategy that draws from
  the node ids — Flower's ``random.sample`` over the set of ids, or a seeded
  draw over the sorted ids — picks other clinics with the same seed. Before
  round 1 the server asks every node its partition (one small query message
  each) and both strategies draw over the clients in partition order, with
  their own seeded generators (not the process-wide ``random`` module).
* **the client's random state.** Local training on a node runs in a Ray
  actor that serves several clients in turn and keeps the job's model
  (``_JOBS``); dropout draws from torch's global generator, whose state
  would depend on which clients that actor served before. Each local
  training call draws from a generator seeded by (seed, round, client),
  restored after, and runs at one thread whatever the process was set to.
* **the order replies arrive in.** They are sorted by client before any sum.
"""

from __future__ import annotations

import json
import logging
import math
import os
import pickle
import random
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import AutoModelForCausalLM, PreTrainedModel

from ..accountants import calibrate_sigma, client_epsilons, record_epsilon
from ..core.progress import progress_bar
from .batching import Encoded, pad_batch, per_sequence_nll, position_ids_for
from .train import make_optimizer


@dataclass(frozen=True)
class FedSettings:
    rounds: int
    sample_rate: float  # FedAvg: the fraction of clients per round; DP-FedAvg: the Poisson rate q
    local_steps: int
    batch_size: int
    lr: float
    weight_decay: float = 0.0
    seed: int = 0
    dp: bool = False
    target_epsilon: float | None = None
    delta: float | None = None
    clip: float = 0.05  # C, the clipping bound of one client's update (DP-FedAvg)
    train_embeddings: bool = True
    accountant: str = "prv"  # calibrates σ (as the central arms); PLD and RDP cross-check
    parallel_clients: int = 1  # simulated clients training at once (Ray actors)
    round_timeout_s: float = 600.0
    drop: tuple[tuple[int, int], ...] = ()  # (round, client index): fails halfway through its local steps


@dataclass
class FedTrainLog:
    rounds: int = 0
    n_clients: int = 0
    client_sizes: list[int] = field(default_factory=list)
    sampled: list[int] = field(default_factory=list)  # clients asked per round
    replied: list[int] = field(default_factory=list)  # clients that returned an update per round
    losses: list[float] = field(default_factory=list)  # mean local loss of the replying clients per round
    client_steps: int = 0  # local steps taken over all clients and rounds
    client_records: int = 0  # records visited over all local steps
    failures: int = 0
    sigma: float | None = None
    epsilon: float | None = None
    epsilon_rdp: float | None = None
    epsilon_pld: float | None = None
    epsilon_prv: float | None = None
    epsilon_record: float | None = None
    empty_rounds: int = 0


# --------------------------------------------------------------------------- the client

#: Per worker process: the job's starting model and partitions, loaded once (not shipped with every message).
_JOBS: dict[str, tuple[PreTrainedModel, list[list[list[int]]], int]] = {}


def _job(path: str) -> tuple[PreTrainedModel, list[list[list[int]]], int]:
    if path not in _JOBS:
        model = AutoModelForCausalLM.from_pretrained(Path(path) / "model", use_safetensors=True,
                                                     trust_remote_code=False)
        spec = json.loads((Path(path) / "data.json").read_text(encoding="utf-8"))
        _JOBS.clear()  # one job per worker at a time
        _JOBS[path] = (model, spec["clients"], int(spec["pad_id"]))
    return _JOBS[path]


class ClientDropped(RuntimeError):
    """Raised by a client chosen to drop out (``FedSettings.drop``)."""


def local_train(model: PreTrainedModel, arrays: dict[str, np.ndarray], seqs: list[list[int]], pad_id: int,
                steps: int, batch_size: int, lr: float, weight_decay: float, seed: int,
                fail_after: int | None = None) -> tuple[dict[str, np.ndarray], float, int]:
    """``steps`` AdamW steps from the weights ``arrays`` on random mini-batches of ``seqs`` (reshuffled
    each pass); returns (new weights of the same names, mean loss, records visited).

    A function of its arguments only, though ``model`` is a worker's cached copy that served other clients
    before: every weight it trains comes from ``arrays``, the others are the job's and never change, and
    the randomness (the batches, and dropout where the model has it) comes from ``seed``."""
    # Dropout draws from torch's global generator: seed it here (its state is put back after), or the masks
    # would depend on how many clients this worker process trained before this one.
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed((seed + 1) % 2**63)  # not the batch order's own stream
        return _local_train(model, arrays, seqs, pad_id, steps, batch_size, lr, weight_decay, seed, fail_after)


def _local_train(model: PreTrainedModel, arrays: dict[str, np.ndarray], seqs: list[list[int]], pad_id: int,
                 steps: int, batch_size: int, lr: float, weight_decay: float, seed: int,
                 fail_after: int | None) -> tuple[dict[str, np.ndarray], float, int]:
    if not seqs:  # an empty client slot (data.clients.roster): its update is zero
        return {name: np.asarray(a).copy() for name, a in arrays.items()}, 0.0, 0
    params = dict(model.named_parameters())
    for name, p in params.items():
        p.requires_grad_(name in arrays)
    with torch.no_grad():
        for name, a in arrays.items():
            params[name].copy_(torch.from_numpy(np.asarray(a)))
    gen = torch.Generator().manual_seed(seed)
    opt = make_optimizer(model, lr, weight_decay)
    model.train()
    order: list[int] = []
    losses, visited = [], 0
    for step in range(steps):
        if fail_after is not None and step == fail_after:
            raise ClientDropped("simulated drop-out mid-round")
        if len(order) < min(batch_size, len(seqs)):
            order += torch.randperm(len(seqs), generator=gen).tolist()
        idx, order = order[:batch_size], order[batch_size:]
        ids, mask = pad_batch([seqs[i] for i in idx], pad_id)
        logits = model(input_ids=ids, attention_mask=mask, position_ids=position_ids_for(mask)).logits
        loss = per_sequence_nll(logits, ids, mask).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        visited += len(idx)
    model.eval()
    with torch.no_grad():
        out = {name: params[name].detach().cpu().numpy().copy() for name in arrays}
    return out, float(np.mean(losses)) if losses else 0.0, visited


def _client_train(msg: Any, context: Any) -> Any:
    """The ClientApp's train handler: local steps on this node's partition from the received weights."""
    from flwr.app import ArrayRecord, Message, MetricRecord, RecordDict

    cfg = msg.content["config"]
    torch.set_num_threads(1)  # every call, not only the job's first: a matmul's sums depend on the thread count
    model, clients, pad_id = _job(str(cfg["job"]))
    k = int(context.node_config["partition-id"])
    rnd = int(cfg["server-round"])
    drop = json.loads(str(cfg["drop"]))
    fail_after = int(cfg["local-steps"]) // 2 if [rnd, k] in drop else None
    arrays = {name: a.numpy() for name, a in msg.content["arrays"].items()}
    seed = (int(cfg["seed"]) * 1_000_003 + rnd * 7919 + k) % 2**63
    new, loss, visited = local_train(model, arrays, clients[k], pad_id, int(cfg["local-steps"]),
                                     int(cfg["batch-size"]), float(cfg["lr"]), float(cfg["weight-decay"]), seed,
                                     fail_after)
    metrics = MetricRecord({"num-examples": len(clients[k]), "loss": loss, "visited": visited, "client": k})
    return Message(RecordDict({"arrays": ArrayRecord({n: _array(v) for n, v in new.items()}), "metrics": metrics}),
                   reply_to=msg)


def _client_query(msg: Any, context: Any) -> Any:
    """The ClientApp's query handler: which client (partition) this node is (:func:`_client_nodes`)."""
    from flwr.app import Message, MetricRecord, RecordDict

    return Message(RecordDict({"metrics": MetricRecord({"client": int(context.node_config["partition-id"])})}),
                   reply_to=msg)


def _client_nodes(grid: Any, n_clients: int, timeout: float) -> list[int]:
    """The node id of each client, in client order: Flower names nodes by random ids, new every run, so a
    draw over the ids would pick other clients with the same seed; each node is asked its partition instead."""
    from flwr.app import Message, MessageType, RecordDict

    while len(ids := sorted(grid.get_node_ids())) < n_clients:
        time.sleep(0.1)
    replies = grid.send_and_receive([Message(RecordDict(), dst_node_id=n, message_type=MessageType.QUERY)
                                     for n in ids], timeout=timeout)
    node_of: dict[int, int] = {}
    for m in replies:
        if m.has_error():
            raise RuntimeError(f"a federated client did not say which it is: {m.error.reason}")
        node_of[int(m.content["metrics"]["client"])] = int(m.metadata.src_node_id)
    if sorted(node_of) != list(range(n_clients)):
        raise RuntimeError(f"expected clients 0..{n_clients - 1}, the nodes answered {sorted(node_of)}")
    return [node_of[k] for k in range(n_clients)]


def _array(v: np.ndarray) -> Any:
    from flwr.app import Array

    return Array(np.ascontiguousarray(v))


def _client_app() -> Any:
    from flwr.clientapp import ClientApp

    app = ClientApp()
    app.train()(_client_train)
    app.query()(_client_query)
    return app


# --------------------------------------------------------------------------- the DP strategy

def _strategy_classes() -> tuple[type, type]:
    """(SeededFedAvg, PoissonDPFedAvg), built on first use so importing this module needs no flwr."""
    from flwr.app import ArrayRecord, ConfigRecord, MessageType, MetricRecord, RecordDict
    from flwr.serverapp.strategy import FedAvg

    class SeededFedAvg(FedAvg):
        """Flower's FedAvg, its clients drawn from a generator of its own seed over the clients in order.

        The draw is Flower's — int(fraction·K) clients (at least ``min_train_nodes``) without replacement —
        but Flower makes it with the process-wide ``random`` module over the set of node ids, which are
        random every run (module docstring). Aggregation and everything else are Flower's.
        """

        def __init__(self, fraction: float, n_clients: int, seed: int) -> None:
            super().__init__(fraction_train=fraction, fraction_evaluate=0.0, min_train_nodes=1, min_evaluate_nodes=0,
                             min_available_nodes=n_clients)
            self.rng = random.Random(seed)
            self.nodes: list[int] = []  # the node of client k, set by the server before round 1 (_client_nodes)

        def configure_train(self, server_round: int, arrays: Any, config: Any, grid: Any) -> list:
            if self.fraction_train == 0.0:
                return []
            chosen = self.rng.sample(self.nodes, max(int(len(self.nodes) * self.fraction_train), self.min_train_nodes))
            config["server-round"] = server_round
            record = RecordDict({self.arrayrecord_key: arrays, self.configrecord_key: config})
            return self._construct_messages(record, chosen, MessageType.TRAIN)

    class PoissonDPFedAvg(FedAvg):
        """DP-FedAvg with Poisson client sampling, fixed clipping at C, Gaussian noise σC on the sum and the
        fixed denominator qK (McMahan et al. 2018); see the module docstring for why not Flower's wrapper.

        Released per round: w ← w + (Σ_{k∈S} clip_C(Δ_k) + N(0, σ²C²I)) / (qK), S ~ Poisson(q) over the K
        clients. Sensitivity to one client (add/remove): C/(qK) against noise std σC/(qK), i.e. the Gaussian
        mechanism at noise multiplier σ, subsampled with rate q.
        """

        def __init__(self, q: float, sigma: float, clip: float, n_clients: int, seed: int, log: FedTrainLog) -> None:
            super().__init__(fraction_train=1.0, fraction_evaluate=0.0, min_train_nodes=0, min_evaluate_nodes=0,
                             min_available_nodes=n_clients)
            self.q, self.sigma, self.clip, self.n_clients = q, sigma, clip, n_clients
            self.sample_rng = np.random.default_rng([seed, 1])
            self.noise_rng = np.random.default_rng([seed, 2])
            self.current: dict[str, np.ndarray] = {}
            self.log = log
            self.sampled_now = 0
            self.nodes: list[int] = []  # the node of client k, set by the server before round 1 (_client_nodes)

        def configure_train(self, server_round: int, arrays: Any, config: Any, grid: Any) -> list:
            self.current = {n: a.numpy() for n, a in arrays.items()}
            # One draw per client in client order: the same clients for the same seed (not per node id: random).
            chosen = [n for n in self.nodes if self.sample_rng.random() < self.q]
            self.sampled_now = len(chosen)
            config["server-round"] = server_round
            record = RecordDict({self.arrayrecord_key: arrays, self.configrecord_key: config})
            return self._construct_messages(record, chosen, MessageType.TRAIN)

        def aggregate_train(self, server_round: int, replies: Any) -> tuple[Any, Any]:
            ok = [m for m in replies if not m.has_error()]  # dropped out: did not take part (module docstring)
            if not ok:
                self.log.empty_rounds += 1
            updates = [{n: m.content["arrays"][n].numpy() for n in self.current} for m in ok]
            out = dp_aggregate(self.current, updates, self.q, self.sigma, self.clip, self.n_clients, self.noise_rng)
            losses = [float(m.content["metrics"]["loss"]) for m in ok]
            metrics = MetricRecord({"loss": float(np.mean(losses)) if losses else float("nan"), "replies": len(ok)})
            return ArrayRecord({n: _array(v) for n, v in out.items()}), metrics

    _ = ConfigRecord  # imported for the type of ``config``
    return SeededFedAvg, PoissonDPFedAvg


# --------------------------------------------------------------------------- inside someone else's Ray

#: What makes a process part of a Ray session: a child given these would join its parent's cluster.
_RAY_SESSION_ENV = ("RAY_ADDRESS", "RAY_RAYLET_PID", "RAY_JOB_ID", "RAY_CLIENT_MODE")
#: Where a simulation's job directory (the model and the clients' token ids) goes; the child of
#: :func:`_train_in_child` sets it to the parent's work directory, which the parent removes whatever happens.
_JOB_ROOT: str | None = None


def _ray_in_this_process() -> bool:
    """Whether this process is connected to a Ray cluster already: a Ray executor's worker, or a caller's session."""
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized()


def _train_in_child(model: PreTrainedModel, args: tuple) -> tuple[PreTrainedModel, FedTrainLog]:
    """Run :func:`train_federated` in a fresh interpreter and copy its trained weights into ``model``.

    Flower's Ray backend joins the Ray this process is connected to instead of starting its own, sizes its
    actor pool from that cluster's CPUs and shuts Ray down when the simulation ends. In a Ray executor's
    worker the cluster is the audit's: the task holds its CPU while its client actors wait for free ones, so
    two federated tasks on two CPUs wait for each other forever (and one blocks every other task); in a
    caller's session the shutdown would end the caller's Ray. A child process has no Ray, so Flower starts its
    own there with ``parallel_clients`` CPUs, exactly as in the process executor's worker: the same result.
    """
    work = Path(tempfile.mkdtemp(prefix="privleak-fedchild-"))
    try:
        with open(work / "in.pkl", "wb") as fh:
            pickle.dump((model, args), fh, protocol=pickle.HIGHEST_PROTOCOL)
        env = {k: v for k, v in os.environ.items() if k not in _RAY_SESSION_ENV}
        # Not the node's `ray start` cluster either (ray.init() finds it through /tmp/ray/ray_current_cluster).
        env["RAY_ADDRESS"] = "local"
        # Ray ships a cluster job's packages on sys.path, not on PYTHONPATH: the child imports what this process did.
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        code = f"from {__name__} import _child_main; _child_main()"
        proc = subprocess.run([sys.executable, "-c", code, str(work), str(os.getpid())], env=env, check=False)
        if not (work / "out.pkl").exists():
            raise RuntimeError(f"the federated simulation's process ended (exit code {proc.returncode}) without a "
                               "model; see its log above")
        with open(work / "out.pkl", "rb") as fh:
            result = pickle.load(fh)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if isinstance(result, BaseException):
        raise result
    arrays, log = result
    params = dict(model.named_parameters())
    with torch.no_grad():
        for n, a in arrays.items():
            params[n].copy_(torch.from_numpy(a))
    model.eval()
    return model, log


def _child_main() -> None:
    """The child of :func:`_train_in_child`: argv = (work directory, parent pid)."""
    work, parent = Path(sys.argv[1]), int(sys.argv[2])
    if sys.platform.startswith("linux"):  # killed with its parent (a Ray task cancelled, a worker SIGKILLed)
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)
    global _JOB_ROOT
    _JOB_ROOT = str(work)
    with open(work / "in.pkl", "rb") as fh:
        model, args = pickle.load(fh)
    (work / "in.pkl").unlink()  # it holds the training data: gone as soon as it is read
    try:
        trained, log = train_federated(model, *args)
        params = dict(trained.named_parameters())
        result: Any = ({n: params[n].detach().cpu().numpy() for n in trainable_names(trained, args[3].train_embeddings)},
                       log)
    except Exception as exc:  # handed to the parent, which raises it as if raised there
        traceback.print_exc()
        result = exc
    try:
        blob = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
        pickle.loads(blob)  # an exception class may pickle and not unpickle (a custom __init__)
    except Exception:  # then its words
        blob = pickle.dumps(RuntimeError(f"{type(result).__name__}: {result}"))
    (work / "out.tmp").write_bytes(blob)
    (work / "out.tmp").replace(work / "out.pkl")


def dp_aggregate(current: dict[str, np.ndarray], updates: list[dict[str, np.ndarray]], q: float, sigma: float,
                 clip: float, n_clients: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """One DP-FedAvg server step: w + (Σ_k clip_C(w_k − w) + N(0, σ²C²I)) / (qK).

    clip_C(Δ) = Δ · min(1, C/‖Δ‖₂), the norm taken over all arrays together (one client, one vector). The
    denominator is the expected number of clients, never the number that replied, so one client moves the
    result by at most C/(qK) against noise of std σC/(qK) per coordinate (McMahan et al. 2018).
    """
    total = {n: np.zeros(a.shape, dtype=np.float64) for n, a in current.items()}
    for new in updates:
        delta = {n: np.asarray(new[n], dtype=np.float64) - a for n, a in current.items()}
        norm = math.sqrt(sum(float(np.sum(d * d)) for d in delta.values()))
        scale = min(1.0, clip / norm) if norm > 0 else 1.0
        for n in total:
            total[n] += scale * delta[n]
    denom = q * n_clients
    return {n: (a.astype(np.float64) + (total[n] + rng.normal(0.0, sigma * clip, size=a.shape)) / denom).astype(a.dtype)
            for n, a in current.items()}


# --------------------------------------------------------------------------- running it

def trainable_names(model: PreTrainedModel, train_embeddings: bool) -> list[str]:
    """The parameters the clients train and send (tied weights once). DP-FedAvg freezes the embedding tables
    as the central DP arms do: the noise's norm grows with √d, and the public pre-training covers the vocabulary."""
    emb = set()
    if not train_embeddings:
        for module in model.modules():
            if isinstance(module, torch.nn.Embedding):
                emb.add(id(module.weight))
    return [n for n, p in model.named_parameters() if id(p) not in emb]


def train_federated(model: PreTrainedModel, data: Encoded, client_of: list[int], n_clients: int,
                    settings: FedSettings, pad_id: int, max_length: int,
                    desc: str = "federated") -> tuple[PreTrainedModel, FedTrainLog]:
    """Fine-tune ``model`` by FedAvg or DP-FedAvg over ``n_clients`` simulated clients on Flower
    (``client_of[i]``: the client of record i); returns the global model and the log."""
    if _ray_in_this_process():
        return _train_in_child(model, (data, client_of, n_clients, settings, pad_id, max_length, desc))
    from flwr.app import ArrayRecord, ConfigRecord, Context
    from flwr.serverapp import Grid, ServerApp
    from flwr.simulation import run_simulation

    if len(client_of) != len(data):
        raise ValueError("one client per record")
    parts: list[list[list[int]]] = [[] for _ in range(n_clients)]
    for seq, k in zip(data.ids, client_of):
        parts[k].append(list(seq[:max_length]))
    if any(not p for p in parts):
        raise ValueError("every client needs at least one record")
    log = FedTrainLog(n_clients=n_clients, client_sizes=[len(p) for p in parts])
    names = trainable_names(model, settings.train_embeddings)
    params = dict(model.named_parameters())
    initial = {n: params[n].detach().cpu().numpy().copy() for n in names}

    fedavg_cls, dp_cls = _strategy_classes()
    if settings.dp:
        if settings.target_epsilon is None or settings.delta is None:
            raise ValueError("DP-FedAvg needs a target ε and δ")
        log.sigma = float(calibrate_sigma(target_epsilon=settings.target_epsilon, delta=settings.delta,
                                          sample_rate=settings.sample_rate, steps=settings.rounds,
                                          accountant=settings.accountant))
        strategy = dp_cls(settings.sample_rate, log.sigma, settings.clip, n_clients, settings.seed, log)
    else:
        strategy = fedavg_cls(settings.sample_rate, n_clients, settings.seed)

    job = Path(tempfile.mkdtemp(prefix="privleak-fed-", dir=_JOB_ROOT))
    try:
        model.save_pretrained(job / "model", safe_serialization=True)
        (job / "data.json").write_text(json.dumps({"clients": parts, "pad_id": pad_id}), encoding="utf-8")
        config = ConfigRecord({"job": str(job), "local-steps": settings.local_steps, "batch-size": settings.batch_size,
                               "lr": settings.lr, "weight-decay": settings.weight_decay, "seed": settings.seed,
                               "drop": json.dumps([list(d) for d in settings.drop])})
        box: dict[str, Any] = {}
        server = ServerApp()

        @server.main()
        def _main(grid: Grid, context: Context) -> None:
            strategy.nodes = _client_nodes(grid, n_clients, settings.round_timeout_s)
            with progress_bar(desc, total=settings.rounds) as advance:
                arrays = ArrayRecord({n: _array(a) for n, a in initial.items()})
                for rnd in range(1, settings.rounds + 1):
                    # One round per start(): the log sees every round's replies (Flower's Result keeps only metrics).
                    messages = list(strategy.configure_train(rnd, arrays, ConfigRecord(dict(config)), grid))
                    log.sampled.append(len(messages))
                    replies = list(grid.send_and_receive(messages, timeout=settings.round_timeout_s)) if messages else []
                    # Replies arrive in completion order: sort by client so the float sums do not depend on timing.
                    replies.sort(key=lambda m: (m.has_error(), -1 if m.has_error() else int(m.content["metrics"]["client"])))
                    ok = [m for m in replies if not m.has_error()]
                    log.failures += len(messages) - len(ok)
                    log.replied.append(len(ok))
                    for m in ok:
                        log.client_steps += settings.local_steps
                        log.client_records += int(m.content["metrics"]["visited"])
                    new, _ = strategy.aggregate_train(rnd, replies)
                    if new is not None:
                        arrays = new
                    log.losses.append(float(np.mean([float(m.content["metrics"]["loss"]) for m in ok])) if ok else math.nan)
                    advance(1, loss=log.losses[-1] if ok else 0.0)
            box["arrays"] = {n: a.numpy() for n, a in arrays.items()}

        backend = {"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                   # "local": a Ray of its own, not a `ray start` cluster this machine is a node of
                   "init_args": {"address": "local", "num_cpus": max(1, settings.parallel_clients), "num_gpus": 0,
                                 "include_dashboard": False, "logging_level": logging.ERROR, "log_to_driver": False}}
        quiet = [logging.getLogger(n) for n in ("flwr", "ray")]
        levels = [lg.level for lg in quiet]
        for lg in quiet:
            lg.setLevel(logging.ERROR)
        try:
            run_simulation(server_app=server, client_app=_client_app(), num_supernodes=n_clients,
                           backend_config=backend)
        finally:
            for lg, lv in zip(quiet, levels):
                lg.setLevel(lv)
        if "arrays" not in box:
            raise RuntimeError("the federated simulation ended without a model (see Flower's log above)")
    finally:
        shutil.rmtree(job, ignore_errors=True)
    with torch.no_grad():
        for n, a in box["arrays"].items():
            params[n].copy_(torch.from_numpy(np.asarray(a)))
    model.eval()
    log.rounds = settings.rounds
    if settings.dp:
        rep = client_epsilons(sample_rate=settings.sample_rate, noise_multiplier=log.sigma, rounds=settings.rounds,
                              delta=settings.delta)
        log.epsilon_rdp, log.epsilon_pld, log.epsilon_prv = rep.epsilon_rdp, rep.epsilon_pld, rep.epsilon_prv
        log.epsilon = {"prv": rep.epsilon_prv, "rdp": rep.epsilon_rdp}.get(settings.accountant, rep.epsilon_pld)
        log.epsilon_record = record_epsilon(sample_rate=settings.sample_rate, noise_multiplier=log.sigma,
                                            rounds=settings.rounds, delta=settings.delta)
    return model, log
