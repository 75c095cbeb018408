"""The privacy-budget ledger: every DP training of the same people, recorded, and read back checked.

Source document 000: "the privacy budget is a finite resource that is
consumed with every access to the training data". An audit trains several DP
arms on one set of members (dp-1, dp-8, dp-user-8, fed-dp-8 …) and a user may
have trained more while tuning; releasing more than one of their models costs
the composition of all their trainings, not the largest single ε — whatever
unit each training's own accountant states (:mod:`.budget` composes them).

Every DP training an audit finishes is appended to two ledgers:

* the run directory's ``budget/ledger.jsonl`` — this run's trainings;
* the model cache's ``ledger/<members hash>.jsonl`` (``PRIVLEAK_CACHE``) —
  every training on this machine, whichever run directory it was written to
  (deleted ones included).

Each line names its training's **people**: a file ``people/<digest>.json``
beside the ledger maps every real person of its training data (a hash of the
unit stamped from the raw data: ``meta.person_id``, a ``--group-field``
group, a distinct text — never the id itself) to how many records they had
in it (and, for DP-FedAvg, in how many clients). Planted canaries are test
secrets, not people, and are left out.

A training is identified by its settings (the same settings on the same
members give the same model: counted once, however often a stage is redone).
A line's ε is re-derived from its σ, q and steps when it is read: a line
whose ε does not follow from them was edited, and is refused naming the file.
Reading is linear in the lines: each distinct (q, σ, T, δ) is accounted
once, each people file read once.
Appends are one ``write`` of one line, so worker processes may record at once.
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ConfigDict, Field, field_validator

from ..core.cache import cache_root
from ..core.errors import UserError
from ..core.io import atomic_open, stable_hash
from ..core.jsonlimits import loads
from ..core.typed import Typed
from ..data.records import Record
from ..data.splits import is_canary_unit, unit_of

# The accountants (dp_accounting and scipy with them, ≈ 1.5 s to import) load only where a line's ε is checked or
# events are composed: a ledger refused before its first line's ε is checked (not a regular file, not UTF-8, a
# first line that is no entry) is refused without them. Lines are checked as they are read, so a bad line after
# a good one is refused after they load.
if TYPE_CHECKING:
    from ..accountants import UnitEvent

RUN_LEDGER = ("budget", "ledger.jsonl")
PEOPLE_DIR = "people"
Unit = Literal["record", "person", "client"]

#: The accountants a ledger line may name (:data:`privleak.accountants.EPSILON_FUNCTIONS`): the arms account by
#: PRV or RDP (a person-level ELS arm's record-level ε: PRV); PLD for the lines an older version wrote with it.
Accountant = Literal["prv", "pld", "rdp"]


#: The accountant a line's ε is re-derived by: its own, except PRV (Opacus's, which needs torch — and `privleak
#: budget` reads and refuses without it), whose figure is checked against PLD's within both stated accuracies.
DERIVED_BY = {"prv": "pld", "pld": "pld", "rdp": "rdp"}


def accountant_tolerance(accountant: str, epsilon: float) -> float:
    """How far a recorded ε may lie from the figure :data:`DERIVED_BY` re-derives for the line's own σ, q, steps
    and δ: the accountants' stated accuracy. PLD: its grid's excess over the exact ε (≈ 1e-4 relative, ≤ ~2.3e-4:
    3e-4). PRV: its point estimate is within ``eps_error`` (``min(0.01, max(1e-3, 2e-3·ε))``, additive) of the exact
    ε and it reports the estimate plus ``eps_error``, so it lies within 2·eps_error of it — plus PLD's own
    excess. RDP: exact on its fixed orders (rounding only). An edited σ (+7 % moves ε by ~13 %) lies far outside
    every one of them (0.3 % of ε or less, or 0.02 absolute)."""
    from ..accountants.analysis.prv import eps_error_for

    pld = 3e-4 * epsilon
    if accountant == "prv":
        return 2 * eps_error_for(epsilon) + pld + 1e-12
    return (pld if accountant == "pld" else 1e-9 * epsilon) + 1e-12


#: A people file's digest (:attr:`People.digest`) and a members hash (:func:`members_hash`): lower-case hex, so a
#: line never names a path outside the ledger's own folders.
PEOPLE_DIGEST = r"^[0-9a-f]{16}$"
MEMBERS_HASH = r"^[0-9a-f]{24}$"


class LedgerEntry(Typed):
    """One finished DP training: on which members and people, which arm of which run, its DP-SGD parameters.

    Strictly typed (a number written as a string, a boolean for a count, an unknown accountant are refused, not
    coerced) and complete: every field privleak writes is required, ``person_cap`` only where an ELS arm has
    one. Its ε is checked against its own σ, q, steps, δ and accountant when a ledger is read
    (:meth:`LedgerReader.check`)."""

    model_config = ConfigDict(strict=True)

    members: str = Field(pattern=MEMBERS_HASH)  # members_hash
    key: str = Field(min_length=1)  # the training's identity: its settings on those members
    arm: str = Field(min_length=1)
    run: str  # the run directory it was written to ("" for an audit's own results.json budget)
    unit: Unit  # the unit of the arm's own accountant ε
    sample_rate: float
    sigma: float
    steps: int
    delta: float
    epsilon: float  # the arm's accountant ε alone, for its own unit
    accountant: Accountant  # the accountant that gave ``epsilon``
    people: str = Field(pattern=PEOPLE_DIGEST)  # digest of the people file beside the ledger
    person_cap: int | None = None  # user-level ELS: at most this many records of a person were trained on

    @field_validator("sample_rate")
    @classmethod
    def _q(cls, v: float) -> float:
        if not 0.0 < v <= 1.0:
            raise ValueError(f"sample_rate {v!r} is not in (0, 1]")
        return v

    @field_validator("sigma")
    @classmethod
    def _sigma(cls, v: float) -> float:
        if not (0.0 < v <= 1e100 and math.isfinite(v)):
            raise ValueError(f"sigma {v!r} is not a noise multiplier in (0, 1e100]")
        return v

    @field_validator("steps")
    @classmethod
    def _steps(cls, v: int) -> int:
        if not 1 <= v <= 2**53:
            raise ValueError(f"steps {v!r} is not in [1, 2**53]")
        return v

    @field_validator("delta")
    @classmethod
    def _delta(cls, v: float) -> float:
        if not 0.0 < v < 1.0:
            raise ValueError(f"delta {v!r} is not in (0, 1)")
        return v

    @field_validator("epsilon")
    @classmethod
    def _epsilon(cls, v: float) -> float:
        if not (v >= 0.0 and math.isfinite(v)):
            raise ValueError(f"epsilon {v!r} is not a finite ε ≥ 0 (a DP training privleak records has one)")
        return v

    @field_validator("person_cap")
    @classmethod
    def _cap(cls, v: int | None) -> int | None:
        if v is not None and v < 1:
            raise ValueError(f"person_cap {v!r} is not a positive count")
        return v

    @property
    def record_event(self) -> UnitEvent:
        """This training as it acts on one record of a person it trained on (the ledger's common unit)."""
        from ..accountants import UnitEvent  # see the module's imports

        relation = "add_remove" if self.unit == "record" else "replace_one"
        return UnitEvent(self.sample_rate, self.sigma, self.steps, relation)  # type: ignore[arg-type]

    def person_event(self, records: int, clients: int = 1) -> UnitEvent | None:
        """This training as it acts on a person with ``records`` records in it (spread over ``clients``
        clients, DP-FedAvg); None where no PLD event states it (a person across several clients)."""
        from ..accountants import UnitEvent  # see the module's imports

        if self.unit == "person":
            return UnitEvent(self.sample_rate, self.sigma, self.steps)
        if self.unit == "client":
            return UnitEvent(self.sample_rate, self.sigma, self.steps, "replace_one") if clients <= 1 else None
        k = min(records, self.person_cap) if self.person_cap else records
        return UnitEvent(self.sample_rate, self.sigma, self.steps, group_size=max(1, k))


@dataclass(frozen=True)
class People:
    """The real people of one training: person key → records trained on; DP-FedAvg also person key → clients."""

    records: dict[str, int]
    clients: dict[str, int] | None = None

    @property
    def digest(self) -> str:
        return stable_hash("people", sorted(self.records.items()), sorted((self.clients or {}).items()))[:24]

    def to_json(self) -> dict[str, Any]:
        return {"records": self.records, **({"clients": self.clients} if self.clients is not None else {})}


def person_key(unit: tuple[str, str]) -> str:
    """A person's key in the ledger: a hash of the unit, so a ledger names nobody (group ids can be e-mails)."""
    return hashlib.sha256(f"{unit[0]}:{unit[1]}".encode()).hexdigest()[:16]


def training_people(records: Sequence[Record], clients: Sequence[str] | None = None) -> People:
    """The real people of a training's records (planted canaries left out), with their record counts and —
    given each record's client — the number of clients each person's records lie in."""
    counts: dict[str, int] = {}
    where: dict[str, set[str]] = {}
    for i, r in enumerate(records):
        u = unit_of(r)
        if is_canary_unit(u):
            continue
        k = person_key(u)
        counts[k] = counts.get(k, 0) + 1
        if clients is not None:
            where.setdefault(k, set()).add(clients[i])
    return People(records=dict(sorted(counts.items())),
                  clients={k: len(v) for k, v in sorted(where.items())} if clients is not None else None)


def members_hash(records: Iterable[Record]) -> str:
    """SHA-256 of the members' texts, sorted (the same records in any order hash alike)."""
    h = hashlib.sha256()
    for text in sorted(r.text for r in records):
        h.update(text.encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def cache_ledger(members: str) -> Path:
    return cache_root() / "ledger" / f"{members}.jsonl"


def entry_for(members: str, arm: str, run: Path, settings: dict[str, Any], privacy: dict[str, Any],
              people: People, person_cap: int | None = None) -> LedgerEntry | None:
    """The ledger line of an arm's training on ``people`` (None: not a DP training — no σ, or σ = 0)."""
    if not privacy or not privacy.get("sigma") or not privacy.get("steps"):
        return None
    return LedgerEntry(members=members, key=stable_hash("ledger", members, settings), arm=arm,
                       run=str(Path(run).resolve()), unit=str(privacy.get("unit") or "record"),  # type: ignore[arg-type]
                       sample_rate=float(privacy["sample_rate"]), sigma=float(privacy["sigma"]),
                       steps=int(privacy["steps"]), delta=float(privacy["delta"]), epsilon=float(privacy["epsilon"]),
                       accountant=privacy["accountant"], people=people.digest, person_cap=person_cap)


def _append(path: Path, entry: LedgerEntry) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(entry.model_dump(mode="json", exclude_none=True), sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def _write_people(ledger: Path, people: People) -> None:
    path = ledger.parent / PEOPLE_DIR / f"{people.digest}.json"
    if path.is_file():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path) as fh:
        json.dump(people.to_json(), fh, sort_keys=True)


def record_training(run_root: Path, entry: LedgerEntry, people: People) -> None:
    """Append ``entry`` (and write its people file) to the run's ledger and the cache's (a cache that cannot be
    written is skipped: the run's ledger still holds it)."""
    run_ledger = Path(run_root).joinpath(*RUN_LEDGER)
    _write_people(run_ledger, people)
    _append(run_ledger, entry)
    try:
        _write_people(cache_ledger(entry.members), people)
        _append(cache_ledger(entry.members), entry)
    except OSError:
        pass


# ---------------------------------------------------------------- reading

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _regular(path: Path, what: str) -> bool:
    """Whether ``path`` is a regular file to read (False: it does not exist); anything else that is there — a
    folder, a pipe (reading one would wait forever), a device, a symbolic-link loop — is refused in one line."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.lexists(path):
            raise UserError(f"{path}: {what} is a symbolic link to nothing; remove the link") from None
        return False
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UserError(f"{path}: {what} is a symbolic link loop; remove the link") from None
        raise UserError(f"{path}: {what} cannot be read ({exc.strerror or exc}); check its permissions") from None
    if stat.S_ISREG(st.st_mode):
        return True
    kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
    raise UserError(f"{path}: {what} is {kind}, not a file privleak wrote; remove it (a run writes a regular file)")


def _text(path: Path, what: str) -> str:
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: {what} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                        "privleak writes UTF-8 JSON lines — restore the file from a backup or remove it") from None


def _derived_epsilon(accountant: str, q: float, sigma: float, steps: int, delta: float) -> float:
    """The ε :data:`DERIVED_BY` ``accountant`` gives for σ, q, steps and δ (the arm's own figure for its unit, or
    PLD's for a PRV line). Without torch: PLD and RDP are dp_accounting's."""
    from ..accountants import EPSILON_FUNCTIONS

    return EPSILON_FUNCTIONS[DERIVED_BY[accountant]](sample_rate=q, noise_multiplier=sigma, steps=steps, delta=delta)


class LedgerReader:
    """Reads ledgers and people files, each once, and re-derives every line's ε once per distinct (accountant, q,
    σ, T, δ)."""

    def __init__(self) -> None:
        self.derivations: dict[tuple[str, float, float, int, float], float] = {}
        self.people: dict[str, People] = {}
        self.people_dirs: dict[str, Path] = {}

    def derived(self, e: LedgerEntry, where: str) -> float:
        params = (e.accountant, e.sample_rate, e.sigma, e.steps, e.delta)
        if params not in self.derivations:
            try:
                self.derivations[params] = _derived_epsilon(*params)
            except UserError as exc:
                raise UserError(f"{where}: σ = {e.sigma:g}, q = {e.sample_rate:g}, steps = {e.steps}, δ = {e.delta:g} "
                                f"is no training the accountants can state an ε for ({str(exc).split(';')[0]}); "
                                "privleak never records one — remove the line") from None
        return self.derivations[params]

    def check(self, e: LedgerEntry, where: str) -> None:
        """Refuse a line whose ε is not its own accountant's figure for its σ, q, steps and δ (within the
        accountants' stated accuracy, :func:`accountant_tolerance`)."""
        eps = self.derived(e, where)
        tol = accountant_tolerance(e.accountant, eps)
        if not abs(e.epsilon - eps) <= tol:
            by = "" if DERIVED_BY[e.accountant] == e.accountant else f", checked by {DERIVED_BY[e.accountant].upper()}"
            raise UserError(f"{where}: {e.arm}'s ε = {e.epsilon:.6g} does not follow from its σ = {e.sigma:.6g}, "
                            f"q = {e.sample_rate:.6g}, steps = {e.steps}, δ = {e.delta:.3g} (its accountant, "
                            f"{e.accountant.upper()}, gives {eps:.6g} ± {tol:.2g}{by}); the line was edited — restore "
                            "the file or remove the line")

    def read(self, path: Path) -> list[LedgerEntry]:
        """The entries of one ledger file, each training once (by key: a redone stage is the same training);
        [] when there is no file. Every problem is one line naming the file (and line) and the fix."""
        if not _regular(path, "the ledger"):
            return []
        out: dict[str, LedgerEntry] = {}
        for i, line in enumerate(_text(path, "the ledger").splitlines()):
            if not line.strip():
                continue
            where = f"{path}: line {i + 1}"
            try:
                e = LedgerEntry.model_validate(loads(line))
            except (ValueError, TypeError) as exc:
                raise UserError(f"{where} is not a ledger entry ({_reason(exc)}); remove the line or restore the "
                                "file") from None
            self.check(e, where)
            if e.people not in self.people_dirs:
                self.people_dirs[e.people] = path.parent / PEOPLE_DIR
            out.setdefault(e.key, e)
        return list(out.values())

    def people_of(self, digest: str) -> People:
        if digest in self.people:
            return self.people[digest]
        path = self.people_dirs[digest] / f"{digest}.json"
        if not _regular(path, "a ledger's people file"):
            raise UserError(f"{path}: the people file a ledger line names is missing; the run directory is "
                            "incomplete — restore it, or remove the ledger lines that name it")
        try:
            obj = loads(_text(path, "a ledger's people file"))
            people = People(records={str(k): int(v) for k, v in obj["records"].items()},
                            clients=({str(k): int(v) for k, v in obj["clients"].items()} if "clients" in obj else None))
            if any(v < 1 for v in people.records.values()) or people.digest != digest:
                raise ValueError("its content does not match its name")
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise UserError(f"{path}: not a people file privleak wrote ({_reason(exc)}); restore it, or remove the "
                            "ledger lines that name it") from None
        self.people[digest] = people
        return people


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    if len(text) >= 3 and "validation error" in text[0]:  # pydantic: "field\n  message [type=…, input_value=…]"
        return f"{text[1].strip()}: {text[2].strip().split(' [type=', 1)[0]}"
    return text[0] if text else type(exc).__name__


def read_ledger(path: Path) -> list[LedgerEntry]:
    """The entries of one ledger file, each training once, each line's ε checked against its σ, q and steps."""
    return LedgerReader().read(Path(path))


def ledger_entries(run_dirs: Sequence[str | Path], cache: bool = True,
                   reader: LedgerReader | None = None) -> list[LedgerEntry]:
    """The trainings recorded in the run directories' ledgers, and — with ``cache`` — every other training on the
    same members in the model cache's ledger (each training once)."""
    reader = reader or LedgerReader()
    found: dict[str, LedgerEntry] = {}
    for rd in run_dirs:
        p = Path(rd).expanduser()
        if not p.is_dir():
            raise UserError(f"{p}: not a run directory; pass the --out directory of a privleak run")
        for e in reader.read(p.joinpath(*RUN_LEDGER)):
            found.setdefault(e.key, e)
    if cache:
        for members in sorted({e.members for e in found.values()}):
            try:
                cached = reader.read(cache_ledger(members))
            except UserError as exc:  # this machine's ledger, not one the user named: say how to leave it out
                raise UserError(f"{exc} (this machine's model-cache ledger: --no-cache leaves it out)") from None
            for e in cached:
                found.setdefault(e.key, e)
    return list(found.values())
