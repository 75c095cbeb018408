"""Which federated client (clinic, institution) each record belongs to.

A federated arm trains on the members split over K clients; the client-level
membership attack asks "was clinic X's data in training?" and compares the
member clients with held-out clients built the same way from the
non-members. Both read :func:`client_labels`.

* **User data** (``--client-field NAME``): the record's own value of that
  field (``meta["client"]``, kept by the loader), as given.
* **The synthetic corpus**: the private institution has no clinics of its
  own, so each *unit* (a patient's notes, a canary's copies, one audit
  canary, one generic text) is assigned to one of K clinics by a seeded hash,
  with uneven clinic sizes: clinic j receives a share ∝ (j + 1)^(−0.8) (Zipf-
  like; with K = 20 the largest clinic holds ~13 % of the records and the
  smallest ~1.2 %). A patient's notes all go to one clinic, as a patient is
  seen where they live, so a client is a set of whole people: client-level DP
  then protects every patient of a clinic at once.

The assignment depends only on the unit, K and the seed, so the shadows,
the central arms (for the client-level attack) and the federated arms see
the same clinics.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from .records import Record

#: Exponent of the clinic-size law: share_j ∝ (j + 1)^(−ZIPF).
ZIPF = 0.8


def clinic_shares(n_clients: int) -> list[float]:
    """Expected fraction of the units in each clinic: (j + 1)^(−0.8), normalised."""
    if n_clients < 1:
        raise ValueError(f"n_clients must be ≥ 1, got {n_clients}")
    w = [(j + 1) ** -ZIPF for j in range(n_clients)]
    s = sum(w)
    return [x / s for x in w]


def _unit_key(r: Record) -> str:
    meta = r.meta
    for field in ("person_id", "group", "canary_id", "audit_canary_id"):
        if meta.get(field) is not None:
            return f"{field}:{meta[field]}"
    return "text:" + r.text


def _uniform(seed: int, key: str) -> float:
    """A seeded, platform-independent uniform number in [0, 1) for ``key`` (not Python's salted hash)."""
    digest = hashlib.sha256(f"{seed}\x00clients\x00{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def client_labels(records: Sequence[Record], n_clients: int, seed: int, field: str | None = None) -> list[str]:
    """The client of every record: its ``meta["client"]`` when ``field`` is set (user data), else
    ``clinic-NN``, one of ``n_clients`` clinics of uneven size, by a seeded hash of the record's unit."""
    if field is not None:
        out = []
        for i, r in enumerate(records):
            if r.meta.get("client") is None:
                if r.kind in ("canary", "audit_canary"):
                    # Planted secrets carry no client of the user's: they join one by their own hash.
                    out.append(_hashed(r, n_clients, seed))
                    continue
                raise ValueError(f"record {i} has no client value (field '{field}')")
            out.append(str(r.meta["client"]))
        return out
    return [_hashed(r, n_clients, seed) for r in records]


def _hashed(r: Record, n_clients: int, seed: int) -> str:
    u = _uniform(seed, _unit_key(r))
    acc = 0.0
    for j, share in enumerate(clinic_shares(n_clients)):
        acc += share
        if u < acc:
            return f"clinic-{j + 1:02d}"
    return f"clinic-{n_clients:02d}"


def partition(labels: Sequence[str], roster: Sequence[str] | None = None) -> tuple[list[str], list[int]]:
    """(the clients, the index of each record's client in that list): the sorted distinct labels, or the
    ``roster`` (:func:`roster`) — every client slot, those without a record included."""
    names = sorted(set(labels)) if roster is None else list(roster)
    pos = {n: i for i, n in enumerate(names)}
    missing = sorted(set(labels) - set(pos))
    if missing:
        raise ValueError(f"clients {', '.join(missing[:3])} are not in the roster of {len(names)}")
    return names, [pos[x] for x in labels]


def roster(labels: Sequence[str], n_clients: int, field: str | None = None) -> list[str]:
    """The K client slots DP-FedAvg samples and divides by, fixed by the configuration (``federated.clients``),
    never counted from the training records: with K from the data, removing a whole client (or a person alone
    in one) would change the noise scale σC/(qK) itself, and no finite client-level ε would hold (McMahan et al.
    2018 fix K as the population of clients). The synthetic corpus: its K clinics. User data
    (``--client-field``): its clients, then empty slots up to K — a slot with no record sends a zero update
    when sampled; more clients than K is refused (raise ``federated.clients``)."""
    if field is None:
        return [f"clinic-{j + 1:02d}" for j in range(n_clients)]
    names = sorted(set(labels))
    if len(names) > n_clients:
        raise ValueError(f"the data has {len(names)} clients but federated.clients = {n_clients}: DP-FedAvg fixes "
                         f"the number of client slots in the config; set federated.clients to at least {len(names)}")
    return names + [f"(empty slot {j + 1})" for j in range(n_clients - len(names))]
