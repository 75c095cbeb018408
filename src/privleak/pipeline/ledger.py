"""The privacy-budget ledger: every DP training on the same members, recorded, and what releasing them costs.

Source document 000: "the privacy budget is a finite resource that is
consumed with every access to the training data". An audit trains several DP
arms on one set of members (dp-1, dp-8, …) and a user may have trained more
while tuning; releasing more than one of their models costs the composition
of all their trainings, not the largest single ε.

Every DP training an audit finishes is appended to two ledgers, keyed by the
members' content hash (:func:`members_hash`: the same people's records,
whichever run or seed drew them in that order):

* the run directory's ``budget/ledger.jsonl`` — this run's trainings;
* the model cache's ``ledger/<members hash>.jsonl`` (``PRIVLEAK_CACHE``) —
  every training on those members on this machine, whichever run directory
  it was written to (deleted ones included).

A training is identified by its settings (the same settings on the same
members give the same model: counted once, however often a stage is redone).
:func:`budget` composes a ledger's trainings with
:func:`privleak.accountants.compose_epsilon` (PRV), per privacy unit
(record-level DP-SGD and client-level DP-FedAvg are not one mechanism).
Appends are one ``write`` of one line, so worker processes may record at once.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..core.errors import UserError
from ..core.present import Cell, Table
from ..core.io import stable_hash
from ..core.typed import Typed
from ..data.records import Record
from ..accountants import Training, compose_epsilon
from ..core.cache import cache_root
from ..results import ArmResult, BudgetRelease, PrivacyBudget

RUN_LEDGER = ("budget", "ledger.jsonl")


class LedgerEntry(Typed):
    """One finished DP training: on which members, which arm of which run, and its DP-SGD parameters."""

    members: str  # members_hash
    key: str  # the training's identity: its settings on those members
    arm: str
    run: str  # the run directory it was written to
    unit: str  # "record", "person", "client"
    sample_rate: float
    sigma: float
    steps: int
    delta: float
    epsilon: float  # the arm's accountant ε alone


def members_hash(records: Iterable[Record]) -> str:
    """SHA-256 of the members' texts, sorted (the same records in any order hash alike)."""
    h = hashlib.sha256()
    for text in sorted(r.text for r in records):
        h.update(text.encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def cache_ledger(members: str) -> Path:
    return cache_root() / "ledger" / f"{members}.jsonl"


def entry_for(members: str, arm: str, run: Path, settings: dict[str, Any], privacy: dict[str, Any]
              ) -> LedgerEntry | None:
    """The ledger line of an arm's training (None: not a DP training — no σ, or σ = 0)."""
    if not privacy or not privacy.get("sigma") or not privacy.get("steps"):
        return None
    return LedgerEntry(members=members, key=stable_hash("ledger", members, settings), arm=arm,
                       run=str(Path(run).resolve()), unit=str(privacy.get("unit") or "record"),
                       sample_rate=float(privacy["sample_rate"]), sigma=float(privacy["sigma"]),
                       steps=int(privacy["steps"]), delta=float(privacy["delta"]), epsilon=float(privacy["epsilon"]))


def _append(path: Path, entry: LedgerEntry) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(entry.model_dump(mode="json"), sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def record_training(run_root: Path, entry: LedgerEntry) -> None:
    """Append ``entry`` to the run's ledger and the cache's (a cache that cannot be written is skipped: the
    run's ledger still holds it)."""
    _append(Path(run_root).joinpath(*RUN_LEDGER), entry)
    try:
        _append(cache_ledger(entry.members), entry)
    except OSError:
        pass


def read_ledger(path: Path) -> list[LedgerEntry]:
    """The entries of one ledger file, each training once (by key: a redone stage is the same training)."""
    if not path.is_file():
        return []
    out: dict[str, LedgerEntry] = {}
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        if not line.strip():
            continue
        try:
            e = LedgerEntry.model_validate(json.loads(line))
        except ValueError as exc:
            raise UserError(f"{path}: line {i + 1} is not a ledger entry ({str(exc).splitlines()[0]}); "
                            "remove it") from None
        out.setdefault(e.key, e)
    return list(out.values())


class BudgetLine(Typed):
    """One set of trainings released together and the ε it costs."""

    what: str
    arms: list[str]
    epsilon: float
    delta: float


class BudgetGroup(Typed):
    """The trainings on one set of members with one privacy unit, and what releasing them costs."""

    members: str
    unit: str
    trainings: list[LedgerEntry]
    lines: list[BudgetLine]


def budget(entries: Sequence[LedgerEntry], release: Sequence[str] | None = None) -> list[BudgetGroup]:
    """Per (members, unit): each training alone (its accountant ε), ``release`` (arm names) composed, and every
    training composed — at the largest δ among them (the δ every arm was held to)."""
    groups: dict[tuple[str, str], list[LedgerEntry]] = {}
    for e in entries:
        groups.setdefault((e.members, e.unit), []).append(e)
    out = []
    for (members, unit), es in groups.items():
        delta = max(e.delta for e in es)
        lines = [BudgetLine(what=f"{e.arm} alone" + (f" ({Path(e.run).name})" if e.run else ""), arms=[e.arm],
                            epsilon=e.epsilon,
                            delta=e.delta) for e in es]
        if release:
            chosen = [e for e in es if e.arm in set(release)]
            missing = sorted(set(release) - {e.arm for e in es})
            if missing:
                raise UserError(f"--release {','.join(missing)}: no DP training of that name in these ledgers; "
                                f"name one of {', '.join(sorted({e.arm for e in es}))}")
            lines.append(BudgetLine(what="released together", arms=[e.arm for e in chosen], delta=delta,
                                    epsilon=_composed(chosen, delta)))
        if len(es) > 1:
            lines.append(BudgetLine(what="everything trained", arms=[e.arm for e in es], delta=delta,
                                    epsilon=_composed(es, delta)))
        out.append(BudgetGroup(members=members, unit=unit, trainings=es, lines=lines))
    return out


def _composed(entries: Sequence[LedgerEntry], delta: float) -> float:
    return compose_epsilon(trainings=[Training(e.sample_rate, e.sigma, e.steps) for e in entries], delta=delta,
                           accountant="prv")


def ledger_entries(run_dirs: Sequence[str | Path], cache: bool = True) -> list[LedgerEntry]:
    """The trainings recorded in the run directories' ledgers, and — with ``cache`` — every other training on
    the same members in the model cache's ledger (each training once)."""
    found: dict[str, LedgerEntry] = {}
    for rd in run_dirs:
        p = Path(rd).expanduser()
        if not p.is_dir():
            raise UserError(f"{p}: not a run directory; pass the --out directory of a privleak run")
        for e in read_ledger(p.joinpath(*RUN_LEDGER)):
            found.setdefault(e.key, e)
    if cache:
        for members in sorted({e.members for e in found.values()}):
            for e in read_ledger(cache_ledger(members)):
                found.setdefault(e.key, e)
    return list(found.values())


#: How the budget's composed ε is computed (the results say it).
ACCOUNTANT = "PRV (Opacus, heterogeneous composition of the trainings; Gopi et al. 2021)"


def privacy_budget(members: str, arms: dict[str, ArmResult]) -> list[PrivacyBudget]:
    """This audit's DP arms as the ledger composes them (each alone; all together when there are several), per
    privacy unit. Only the run's own trainings (a served arm is its source's model, not a training of its own):
    ``results.json`` stays a function of the config and seed."""
    entries = [LedgerEntry(members=members, key=name, arm=name, run="", unit=a.privacy.unit,
                           sample_rate=a.privacy.sample_rate, sigma=a.privacy.sigma, steps=a.privacy.steps,
                           delta=a.privacy.delta, epsilon=a.privacy.epsilon)
               for name, a in arms.items()
               if a.privacy is not None and a.serves is None and a.privacy.sigma > 0 and a.privacy.steps > 0]
    out = []
    for g in budget(entries):
        releases = [BudgetRelease(what="alone" if len(x.arms) == 1 else "all together", arms=x.arms,
                                  epsilon=x.epsilon, delta=x.delta) for x in g.lines]
        out.append(PrivacyBudget(members=members, unit=g.unit, accountant=ACCOUNTANT, releases=releases))
    return out


def budget_tables(groups: Sequence[BudgetGroup]) -> list[Table]:
    """``privleak budget``'s tables: per (members, unit), the trainings and what each release costs."""
    out = []
    for g in groups:
        rows: list[list[Cell | str]] = [[e.arm, Path(e.run).name or "—", f"{e.sample_rate:.4g}", f"{e.sigma:.4g}",
                                         str(e.steps), f"{e.delta:.1e}", f"{e.epsilon:.3f}"] for e in g.trainings]
        out.append(Table(["arm", "run", "q", "σ", "steps", "δ", "ε alone"], rows,
                         console_title=f"DP trainings on members {g.members[:12]}… (unit: {g.unit})"))
        out.append(Table(["release", "arms", "ε", "δ"],
                         [[x.what, ", ".join(x.arms), f"{x.epsilon:.3f}", f"{x.delta:.1e}"] for x in g.lines],
                         console_title=f"The ε a release carries — {ACCOUNTANT}"))
    return out
