"""``fedavg`` and ``fed-dp-ε``: federated training over the records' clients on Flower's simulation engine.

``fedavg`` (McMahan et al. 2017) is not private by itself: it shows what
federation alone leaves exposed. ``fed-dp-ε`` is DP-FedAvg (McMahan et al.
2018): each client's update clipped, Gaussian noise on the sum, ε at the
client level for the Poisson client sampling actually used; one record
inside a client is held to the record-level ε it implies
(:mod:`privleak.accountants.analysis.federated`: replace-one of the client's update, accounted directly),
and so is a person whose records all lie in one client (:func:`person_privacy_federated`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal

from ..config import resolve_delta
from ..core.limits import MAX_EPSILON, MIN_EPSILON
from ..core.present import Block, Cell, Note, num, t
from ..data.clients import client_labels, partition, roster
from ..data.splits import unit_of
from ..core.typed import ArmDetails
from .base import ArmInputs, ArmJudging, ArmKind, ArmPresentation, FitContext, KindSettings
from .common import unit_histogram, data_settings, unit_counts
from .registry import ArmSpec, register

if TYPE_CHECKING:
    from ..results import ArmResult


def person_privacy_federated(records: list, client_index: list[int], epsilon_record: float | None) -> dict[str, Any]:
    """What DP-FedAvg guarantees the real person with the most records, and apart from them the planted canary
    with the most copies. A unit whose records all lie in one client changes only that client's update, whatever
    it changes inside it — the replace-one event the record-level ε already bounds (the budget ledger's rule,
    ``LedgerEntry.person_event``) — so it is held to ``epsilon_record``. A unit across several clients changes
    several updates of a round at once, which no accountant here states: None, and the accounting says why.
    The clinic partition keeps a unit in one clinic; a user's ``--client-field`` may not."""
    spans: dict[tuple[str, str], set[int]] = {}
    for r, k in zip(records, client_index):
        spans.setdefault(unit_of(r), set()).add(k)
    people, planted = unit_counts(records)

    def eps(units: dict[tuple[str, str], int]) -> tuple[float | None, str]:
        m = max((len(spans[u]) for u in units), default=1)
        if m <= 1:
            return epsilon_record, "one client per unit: the replace-one ε of a client's update"
        return None, f"a unit's records lie in up to {m} clients: not stated"

    e_person, how = eps(people)
    out: dict[str, Any] = {"epsilon_person": e_person, "person_records": max(people.values(), default=1),
                           "person_accounting": how, "records_per_person": unit_histogram(people)}
    if planted:
        out |= {"epsilon_canary": eps(planted)[0], "canary_records": max(planted.values()),
                "records_per_canary": unit_histogram(planted)}
    return out


class Federation(ArmDetails):
    """How a federated arm was trained: the strategy, the clients and their sizes (records), the rounds, the
    per-round sampling, and who was asked and who answered."""

    kind: Literal["fedavg", "fed-dp"]
    strategy: str
    clients: int
    client_sizes: dict[str, int]
    rounds: int
    sample_rate: float
    sampling: str
    local_steps: int
    sampled: list[int]
    replied: list[int]
    failures: int
    client_steps: int
    trained_parameters: int | None = None  # d: the noise's dimension (DP-FedAvg)


_PROTECTS = (
    "What is protected: FedAvg alone protects nothing formally — the raw records stay at the clinics, but the "
    "final model is attacked here exactly like a centrally trained one, and every round's client updates (seen by "
    "the server) carry at least as much. DP-FedAvg bounds what the released model and the noised aggregates reveal "
    "about a whole clinic (client-level ε), hence about any patient in it. What is not: the server here is trusted "
    "— it sees each clinic's clipped but un-noised update before adding the noise (central DP), so an "
    "honest-but-curious server can still invert updates (Geiping et al. 2020); training-loss metrics the clients "
    "report are outside the ε. Secure aggregation (Bonawitz et al. 2017), out of scope here, would let the server "
    "see only the sum of the updates, removing per-clinic updates from its view; it adds no noise, so the released "
    "model's guarantee is unchanged, and distributed noise (each client adding its share) would be needed to keep "
    "the ε without trusting the server.")


class FedSettings(KindSettings):
    """A federated arm's settings: the ``federated`` section, the client field, and for DP-FedAvg the target
    client-level (ε, δ) and the accountant."""

    omitted = frozenset({"target_epsilon", "delta", "accountant"})

    kind: str = "fedavg"
    clients: int
    rounds: int
    sample_rate: float
    local_steps: int
    batch_size: int
    lr: float
    clip: float
    parallel_clients: int
    round_timeout_s: float
    drop: tuple[tuple[int, int], ...]
    client_field: str | None
    seed: int
    data_defences: dict[str, Any]
    train_embeddings: bool
    target_epsilon: float | None = None
    delta: float | None = None
    accountant: str | None = None


class FedAvg(ArmKind):
    name = "fedavg"
    summary = "federated averaging over the clients (clinics) on Flower: no DP"
    uses_clients = True
    Details = Federation

    def settings(self, cfg, spec: ArmSpec, n_members: int) -> FedSettings:
        """``federated`` config, the client field, and for DP-FedAvg the target client-level ε, δ (the central
        arms' δ, already below 1/K) and the central arms' accountant."""
        settings = {"kind": self.name, **cfg.federated.model_dump(mode="json"), "client_field": cfg.data.client_field,
                    "seed": cfg.seed, "data_defences": data_settings(cfg, spec), "train_embeddings": True}
        if spec.param is not None:
            delta, _ = resolve_delta(cfg, n_members)
            settings.update(target_epsilon=spec.param, delta=delta, accountant=cfg.dp.accountant,
                            train_embeddings=cfg.dp.train_embeddings)
        return FedSettings(**settings)

    def fit(self, model: Any, s: FedSettings, ctx: FitContext) -> tuple[Any, dict[str, Any]]:
        """FedAvg / DP-FedAvg on Flower over the records' clients."""
        from ..models.federated import FedSettings as FedTrainSettings
        from ..models.federated import train_federated, trainable_names

        cfg = ctx.cfg
        labels = client_labels(ctx.records, cfg.federated.clients, cfg.seed, cfg.data.client_field)
        # DP-FedAvg's K is the configured roster (data.clients.roster): the noise scale σC/(qK) must not depend on
        # who is in the data. FedAvg makes no DP claim and averages over the clients that exist.
        names, index = partition(labels, roster(labels, cfg.federated.clients, cfg.data.client_field)
                                 if s.kind == "fed-dp" else None)
        fs = FedTrainSettings(rounds=s.rounds, sample_rate=s.sample_rate, local_steps=s.local_steps,
                              batch_size=s.batch_size, lr=s.lr, seed=ctx.seed, dp=s.kind == "fed-dp",
                              target_epsilon=s.target_epsilon, delta=s.delta, clip=s.clip,
                              train_embeddings=s.train_embeddings, accountant=s.accountant or "prv",
                              parallel_clients=s.parallel_clients, round_timeout_s=s.round_timeout_s, drop=s.drop)
        params = dict(model.named_parameters())
        d = int(sum(params[n].numel() for n in trainable_names(model, fs.train_embeddings) if n in params))
        model, log = train_federated(model, ctx.data, index, len(names), fs, ctx.pad, ctx.max_length,
                                     desc=f"train {ctx.label}")
        privacy = None
        if fs.dp:
            privacy = {"target_epsilon": fs.target_epsilon, "epsilon": log.epsilon, "accountant": fs.accountant,
                       "delta": fs.delta, "sigma": log.sigma, "sample_rate": fs.sample_rate, "steps": log.rounds,
                       "max_grad_norm": fs.clip, "epsilon_rdp": log.epsilon_rdp, "epsilon_pld": log.epsilon_pld,
                       "epsilon_prv": log.epsilon_prv, "empty_batches": log.empty_rounds, "unit": "client",
                       "epsilon_record": log.epsilon_record,
                       **person_privacy_federated(ctx.records, index, log.epsilon_record)}
        federation = {"strategy": "DP-FedAvg (Poisson client sampling; ours)" if fs.dp else "FedAvg (Flower)",
                      "clients": len(names), "client_sizes": dict(zip(names, log.client_sizes)), "rounds": log.rounds,
                      "sample_rate": fs.sample_rate, "sampling": "poisson" if fs.dp else "fixed-size without replacement",
                      "local_steps": fs.local_steps, "sampled": log.sampled, "replied": log.replied,
                      "failures": log.failures, "client_steps": log.client_steps, "trained_parameters": d}
        return model, {"kind": s.kind, "steps": log.rounds, "privacy": privacy, "federation": federation,
                       "epoch_losses": [x for x in log.losses if x == x],  # rounds nobody answered have no loss
                       "epochs_run": log.client_records / max(1, len(ctx.data))}

    def details(self, inputs: ArmInputs) -> Federation | None:
        fed = (inputs.record or {}).get("federation")
        return Federation.model_validate({"kind": self.name, **fed}) if fed else None



class FederatedJudging(ArmJudging):
    """Judged by the attacks like every arm; warned about where client-level DP cannot learn."""

    def warnings(self, name: str, arm: ArmResult) -> list[str]:
        """Client-level DP that cannot learn, said before anyone reads its G: over T rounds the noise on the
        averaged update has norm ≈ σ·C·√(d·T)/(qK) while the summed signal is at most C·T, so the ratio
        R = σ·√d / (qK·√T) (McMahan et al. 2018's regime needs thousands of clients) above 1 means the noise
        outweighs the largest possible signal; it falls with the number of clients K as 1/K."""
        f, p = arm.details, arm.privacy
        if not isinstance(f, Federation) or p is None or not f.trained_parameters or p.sigma <= 0:
            return []
        qk = p.sample_rate * f.clients
        ratio = p.sigma * math.sqrt(f.trained_parameters) / (qk * math.sqrt(max(1, f.rounds)))
        if ratio <= 1.0:
            return []
        needed = math.ceil(f.clients * ratio)
        return [f"{name}: client-level DP cannot learn at ε = {p.epsilon:.3g} with {f.clients} clients — over "
                f"{f.rounds} rounds the noise on the averaged update is ≈ {ratio:.0f}× the largest possible signal "
                f"(σ·√d/(qK·√T), σ = {p.sigma:.3g}, d = {f.trained_parameters:,}, qK = {qk:.3g}); it needs about "
                f"{needed:,} clients at these settings (or more rounds, or a smaller model)"]



class FederatedPresentation(ArmPresentation):
    """Squares in the trade-off plot, apart from the central DP sweep (a fed-dp arm's ε is per client)."""

    marker = "s"
    marker_note = "Squares: federated arms (Flower); a fed-dp arm sits at its client-level ε."
    epsilon_unit = "client"

    def epsilon_cell(self, arm: ArmResult) -> Cell | None:
        p = arm.privacy
        if p is None or p.unit != "client":
            return None
        return t(f"{p.epsilon:.3f} ({p.accountant}) per client; per record ≤ {num(p.epsilon_record, '.2f')}",
                 title=f"client-level ε (add/remove one client): {p.accountant.upper()}; RDP {num(p.epsilon_rdp)}, "
                       f"PLD {num(p.epsilon_pld)}, PRV {num(p.epsilon_prv)}. One record inside a client changes "
                       "that client's update: the replace-one accounting of the same mechanism gives the record-level "
                       "ε the audits are checked against")

    def notes(self, arms: dict[str, ArmResult]) -> list[Block]:
        """What a federated arm protects and what it does not, in words, with its clients and rounds."""
        parts = []
        for n, m in arms.items():
            f = m.details
            if not isinstance(f, Federation):
                continue
            sizes = sorted(f.client_sizes.values())
            line = (f"{n}: {f.strategy}, {f.clients} clients ({sizes[0]}–{sizes[-1]} records each), {f.rounds} rounds, "
                    f"{f.sampling} sampling at {f.sample_rate:g}, {f.local_steps} local steps, {f.failures} failed replies")
            if m.privacy is not None:
                p = m.privacy
                person = (f", ≤ {num(p.epsilon_person, '.2f')} per person (each in one client)"
                          if p.epsilon_person is not None else f", per person not stated ({p.person_accounting})"
                          if p.person_accounting else "")
                line += (f"; ε = {p.epsilon:.2f} per client, ≤ {num(p.epsilon_record, '.2f')} per record{person}, "
                         f"σ = {p.sigma:.3f}, clip C = {p.max_grad_norm:g}")
            parts.append(line + ".")
        return [Note(" ".join(parts) + " " + _PROTECTS)] if parts else []


class FedDP(FedAvg):
    name = "fed-dp"
    param = "ε"
    private = True
    param_range = (MIN_EPSILON, MAX_EPSILON)
    example = "fed-dp-8"
    summary = "DP-FedAvg at target client-level ε: client updates clipped, Gaussian noise on the sum"


FEDERATED_PRESENTATION = FederatedPresentation()  # one for both kinds: one note over all federated arms
FEDAVG = register(FedAvg(), judging=FederatedJudging(), presentation=FEDERATED_PRESENTATION)
FED_DP = register(FedDP(), judging=FederatedJudging(), presentation=FEDERATED_PRESENTATION)
