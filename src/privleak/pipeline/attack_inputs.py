"""``privleak attack``'s inputs: the user's files, read and checked before any work.

The user gives the model (a directory, a hub id in the local cache, or a PEFT
adapter on its base), the records it was trained on (members), records it
never saw (non-members) and optionally a reference model, population records
and planted canaries (:func:`check_inputs`). Member and non-member files must
not share a record, a person or a group; PrivLeak JSONL carries ground-truth
PII spans and person ids, any other corpus is read by the generic loaders.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..attacks.membership.selection import mia_selection
from ..config import AuditConfig
from ..core.errors import UserError
from ..core.io import stable_hash
from ..core.jsonlimits import loads
from ..data.audit_canaries import AuditCanary
from ..data.canaries import Canary, load_canaries
from ..data.loaders import load_corpus, read_text_file
from ..data.records import PiiSpan, Record
from ..data.splits import normalize_text, unit_of
from ..models.external import ModelRef
from .checks import check_memory

#: Fewer evaluated units per side than this and the blind baseline's 5-fold CV cannot run.
MIN_UNITS_PER_SIDE = 5


@dataclass(frozen=True)
class AttackInputs:
    """What ``privleak attack`` was given, checked (:func:`check_inputs`)."""

    target: ModelRef
    reference: ModelRef | None
    members: list[Record]
    non_members: list[Record]
    population: list[Record]
    canaries: list[Canary]
    files: dict[str, str]  # option → path, for the record and the cache keys
    #: One-run audit canaries the target's training inserted, each with probability ½ (all m, with their inclusion
    #: bits: ``privleak.integrations`` inserts them into a user's training data), and the (ε, δ)-DP claim they test
    #: (the target's ``Privacy`` block, as the user's accountant states it). Empty / None: ``privleak attack``.
    audit_canaries: list[AuditCanary] = field(default_factory=list)
    claim: dict[str, Any] | None = None


# --------------------------------------------------------------------------- reading the user's files

def _privleak_jsonl(path: Path) -> bool:
    """Whether ``path`` is PrivLeak's own record format (``{"text", "pii", "meta"}`` per line, e.g. splits/*.jsonl
    or ``privleak data generate``), which carries ground-truth PII spans and person ids."""
    if path.is_dir() or path.suffix.lower() not in (".jsonl", ".ndjson", ".json"):
        return False
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    obj = loads(line)
                    return isinstance(obj, dict) and "text" in obj and "pii" in obj
    except (OSError, ValueError):  # undecodable, malformed or past the JSON limits
        return False  # the generic loader says what is wrong, in its own words
    return False


def _read_privleak_jsonl(path: Path, option: str, group_field: str | None) -> list[Record]:
    out = []
    try:  # the one reader of text (encoding, NUL bytes, byte-order marks), as every other user file
        content = read_text_file(path).text
    except UserError as exc:
        raise UserError(f"{option} {exc}") from None
    # The lines as the generic JSONL loader splits them: on "\n" only (U+2028 is legal inside JSON).
    for n, line in enumerate(content.split("\n"), 1):
        if not line.strip():
            continue
        where = f"{option} {path}: line {n}"
        try:
            obj = loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{where} is not valid JSON ({exc.msg}); fix or remove that line") from None
        except ValueError as exc:  # the JSON limits (core.jsonlimits)
            raise UserError(f"{where}: {exc}; no record needs that — fix or remove that line") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
            raise UserError(f"{where} has no string 'text'; every line needs {{\"text\": …, \"pii\": …}}")
        text, pii, meta = obj["text"], obj.get("pii"), obj.get("meta") or {}
        if not isinstance(meta, dict):
            raise UserError(f"{where}: 'meta' must be an object")
        spans = None
        if pii is not None:
            if not isinstance(pii, list):
                raise UserError(f"{where}: 'pii' must be a list of [start, end, label] or null")
            spans = []
            for s in pii:
                ok = (isinstance(s, list) and len(s) == 3 and all(isinstance(x, int) for x in s[:2])
                      and isinstance(s[2], str) and 0 <= s[0] < s[1] <= len(text))
                if not ok:
                    raise UserError(f"{where}: PII span {s!r} is not [start, end, label] inside the text; "
                                    "fix the span or set 'pii' to null")
                spans.append(PiiSpan(s[0], s[1], s[2]))
        if not text.strip():
            continue
        meta = dict(meta)
        if group_field is not None:
            value = obj.get(group_field, meta.get(group_field))
            if value is None or (isinstance(value, str) and not value.strip()):
                raise UserError(f"{where} has no value in group field '{group_field}'; give every record its "
                                "person or group, or drop --group-field")
            meta["group"] = str(value)
        meta.setdefault("source_line", n)
        out.append(Record(text=text, pii=spans, meta=meta))
    if not out:
        raise UserError(f"{option} {path}: no non-empty records; the file needs at least one text")
    return out


def read_records(path: str, option: str, text_field: str, group_field: str | None) -> list[Record]:
    """The records of one user file: PrivLeak JSONL (with PII spans) or any corpus ``load_corpus`` reads."""
    p = Path(path).expanduser()
    if not p.exists():
        raise UserError(f"{option} {path}: no such file; pass a JSONL, CSV or text file (one record per line)")
    if _privleak_jsonl(p):
        if text_field != "text":  # a flag that cannot take effect is refused, not ignored
            raise UserError(f"--text-field {text_field}: {option} {path} is PrivLeak JSONL, whose text is always in "
                            "'text'; drop --text-field (or the config's data.text_field)")
        return _read_privleak_jsonl(p, option, group_field)
    try:
        return load_corpus(p, text_field=text_field, group_field=group_field)
    except UserError as exc:
        raise UserError(f"{option} {exc}") from None


def _mark_canaries(records: list[Record], canaries: list[Canary]) -> list[Record]:
    """Records holding a canary sentence are canary copies (left out of the membership sets, as in ``run``)."""
    if not canaries:
        return records
    texts = [c.text() for c in canaries]
    return [dataclasses.replace(r, meta={**r.meta, "kind": "canary"})
            if r.kind != "canary" and any(t in r.text for t in texts) else r for r in records]


def _overlap(a: list[Record], b: list[Record], a_opt: str, b_opt: str, what: str) -> None:
    """Refuse a record (or a person / group) on both sides: a non-member must never have been trained on."""
    seen = {normalize_text(r.text): r for r in a if r.kind != "canary"}
    for r in b:
        hit = seen.get(normalize_text(r.text))
        if hit is not None:
            line = r.meta.get("source_line")
            raise UserError(f"{b_opt}: a record{f' (line {line})' if line else ''} is also in {a_opt}; {what} must "
                            "never have been trained on — remove the records the two files share")
    units_a = {unit_of(r) for r in a if r.kind != "canary" and unit_of(r)[0] != "text"}
    for r in b:
        u = unit_of(r)
        if u[0] != "text" and u in units_a:
            raise UserError(f"{b_opt}: {u[0]} '{u[1]}' has records in {a_opt} too; a {u[0]} belongs to one side only "
                            "(membership is per person) — move all its records to one file")


def check_inputs(cfg: AuditConfig, target: ModelRef, reference: ModelRef | None, members: str, non_members: str,
                 population: str | None, canaries: str | None) -> AttackInputs:
    """Load and check every input file before any work: one line naming the problem and the fix."""
    check_memory(cfg)
    tf, gf = cfg.data.text_field, cfg.data.group_field
    canary_list: list[Canary] = []
    if canaries is not None:
        cp = Path(canaries).expanduser()
        if not cp.is_file():
            raise UserError(f"--canaries {canaries}: no such file; pass a canaries.json written by privleak "
                            "(privleak data generate, or a run's splits/canaries.json)")
        try:
            canary_list = load_canaries(cp)
        except UserError as exc:
            raise UserError(f"--canaries {exc}") from None
        if not canary_list:
            raise UserError(f"--canaries {canaries}: the file lists no canaries; drop --canaries or give planted ones")
    mem = _mark_canaries(read_records(members, "--members", tf, gf), canary_list)
    non = read_records(non_members, "--non-members", tf, gf)
    pop = read_records(population, "--population", tf, gf) if population is not None else []
    _overlap(mem, non, "--members", "--non-members", "non-members")
    if pop:
        _overlap(mem, pop, "--members", "--population", "population records")
    if not any(r.kind != "canary" for r in mem):
        raise UserError(f"--members {members}: every record is a canary copy; give the records the model was trained on")
    sel = mia_selection([r for r in mem if r.kind != "canary"], non, cfg.attacks.max_mia_records, cfg.seed)
    k = min(len(sel.members), len(sel.non_members))
    if k < MIN_UNITS_PER_SIDE:
        raise UserError(f"--members / --non-members: only {k} independent {sel.design.unit} units per side can be "
                        f"compared after one record per unit and matching (need ≥ {MIN_UNITS_PER_SIDE}); give more "
                        "records on each side")
    files = {"--members": members, "--non-members": non_members}
    files.update({k: v for k, v in (("--population", population), ("--canaries", canaries)) if v is not None})
    return AttackInputs(target=target, reference=reference, members=mem, non_members=non, population=pop,
                        canaries=canary_list, files=files)


# --------------------------------------------------------------------------- keys

def model_fingerprint(path: str) -> str:
    """What identifies a model directory's content cheaply: every file's name, size and modification time
    (hashing a multi-GB checkpoint on every resume would cost more than some attacks)."""
    p = Path(path)
    items = []
    for f in sorted(x for x in p.rglob("*") if x.is_file()):
        st = f.stat()  # follows the HF cache's symlinks to the blobs
        items.append((str(f.relative_to(p)), st.st_size, st.st_mtime_ns))
    return stable_hash("model-files", items)


def records_digest(records: list[Record]) -> str:
    """A short content hash of records (their text, PII spans and metadata): the data stage's cache key."""
    h = hashlib.sha256()
    for r in records:
        h.update(json.dumps(r.to_json(), sort_keys=True, ensure_ascii=False).encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


