"""``privleak attack``: audit a model the user already trained, with the battery ``run`` uses.

The user gives the model (a directory, a hub id in the local cache, or a PEFT
adapter on its base), the records it was trained on (members), records it
never saw (non-members) and optionally a reference model, population records
and planted canaries. Every attack that needs no training runs — the
score-based membership attacks, the reference attack and RMIA with the
reference, exposure with the canaries, prefix and sampling extraction, the
PII attacks where the members carry PII spans — through the same stages as
``run`` (:mod:`.evaluate`): the same run directory layout, stage markers
(an interrupted audit resumes without redoing finished attack families),
``results.json`` (the model is an arm of kind ``external``) and report.

The reference model, when given, is also the control: it is evaluated with
the same battery, as ``run`` evaluates its base model, and every finding on
the target is judged against it. Without one there is no control, and
findings are judged against chance and their non-member floors only.

Member and non-member files drawn by the user need not be exchangeable (a
"shifted split": other dates, sources or formats). The blind baseline
(:mod:`privleak.audit.blind`) tells them apart without the model; when it
beats chance the results say that membership AUCs are not evidence of
leakage, and no empirical ε is computed from them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .. import __version__
from ..attacks.base import FAMILIES
from ..attacks.exposure import chance_exposure
from ..audit.blind import RULE, beats_chance, rivals
from ..audit.membership import mia_selection
from ..audit.verdicts import judge
from ..config import AuditConfig
from ..core.errors import UserError
from ..core.io import read_json, stable_hash, staging_dir, write_json
from ..core.jsonlimits import loads
from ..data.canaries import Canary, load_canaries, save_canaries
from ..data.loaders import load_corpus
from ..data.records import PiiSpan, Record, write_jsonl
from ..data.splits import normalize_text, unit_of
from ..models.external import ModelRef
from ..results import ArmResult, AuditResults, BaseModelSource, BlindBaseline, DataSummary, ExternalModel, ToolInfo, package_versions
from .assemble import _attacks, _utility
from .audit import SPLITS, Audit
from .checks import check_memory
from .evaluate import Target, attack_key, attack_stage, blind_stage, family_specs, selection, utility_stage
from .rundir import RunDir

#: The arm name of the audited model in results.json and under arms/.
TARGET = "target"
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
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
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


def _records_digest(records: list[Record]) -> str:
    h = hashlib.sha256()
    for r in records:
        h.update(json.dumps(r.to_json(), sort_keys=True, ensure_ascii=False).encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


# --------------------------------------------------------------------------- the audit

def _write_data(audit: Audit, inputs: AttackInputs) -> None:
    splits = {"members": inputs.members, "non_members": inputs.non_members, "population": inputs.population}
    with staging_dir(audit.run.path("splits")) as tmp:
        for name in SPLITS:
            write_jsonl(tmp / f"{name}.jsonl", splits.get(name, []))
        save_canaries(tmp / "canaries.json", inputs.canaries)
    audit.shared.pop("splits", None)
    audit.shared.pop("canaries", None)


def _shift_check(audit: Audit) -> None:
    """No empirical ε from membership sets a model-free classifier tells apart (read before the attacks run)."""
    b = read_json(audit.run.path("blind_baseline.json"))
    ci = tuple(b["auc_ci95"]) if b.get("auc_ci95") else None
    if beats_chance(ci):
        sel = selection(audit)
        design = sel.design.model_copy(update={"available": False, "reason": (
            f"the member and non-member files differ in composition: a classifier that never sees the model tells "
            f"them apart (blind AUC {b['auc']:.3f}), so the sets are not exchangeable and an ε bound from them "
            "would not be valid")})
        audit.shared["mia_selection"] = dataclasses.replace(sel, design=design)


def run_attack(cfg: AuditConfig, inputs: AttackInputs, out_dir: str | Path,
               notify: Callable[[str], None] = lambda s: None) -> AuditResults:
    """Run (or resume) the attacks on an external model; returns the results also written to ``results.json``."""
    with RunDir.locked(out_dir):
        return _run_attack(cfg, inputs, out_dir, notify)


def _run_attack(cfg: AuditConfig, inputs: AttackInputs, out_dir: str | Path,
                notify: Callable[[str], None]) -> AuditResults:
    run = RunDir.open(out_dir)
    notify(f"PrivLeak attack → {run.root}  (target: {inputs.target.ref})")
    audit = Audit(cfg=cfg, run=run, notify=notify)
    record = {"command": "attack", "seed": cfg.seed, "profile": cfg.profile,
              "target": inputs.target.describe(), "reference": inputs.reference.describe() if inputs.reference else None,
              "files": inputs.files, "data": cfg.data.model_dump(mode="json", include={"text_field", "group_field"}),
              "model": {"max_length": cfg.model.max_length},
              "canaries": cfg.canaries.model_dump(mode="json"), "attacks": cfg.attacks.model_dump(mode="json")}
    write_json(run.path("config.json"), record)

    dkey = stable_hash("external-data", cfg.seed, [_records_digest(x) for x in
                                                    (inputs.members, inputs.non_members, inputs.population)],
                       [dataclasses.asdict(c) for c in inputs.canaries])
    audit.stage("data", dkey, lambda: _write_data(audit, inputs))
    audit.stage("blind-baseline", stable_hash("blind", dkey, cfg.attacks.max_mia_records, cfg.attacks.bootstrap, cfg.seed),
                lambda: blind_stage(audit))
    _shift_check(audit)

    targets: list[Target] = []
    rkey = "none"
    if inputs.reference is not None:
        ref = inputs.reference
        rkey = stable_hash("external-model", model_fingerprint(ref.path), cfg.model.max_length)
        write_json(run.path("base_model.json"), {"kind": "user", "ref": ref.ref, "path": ref.path})
        targets.append(Target("base", rkey, ref.path, reference=False))
    t = inputs.target
    tkey = stable_hash("external-model", model_fingerprint(t.path), t.base and model_fingerprint(t.base.path),
                       cfg.model.max_length)
    targets.append(Target(TARGET, tkey, t.path, reference=inputs.reference is not None,
                          adapter_base=t.base.path if t.base else None))

    for tg in targets:
        audit.stage(f"utility/{tg.name}", stable_hash("utility", tg.key), lambda tg=tg: utility_stage(audit, tg, rkey))
        for family in FAMILIES:
            if not family_specs(audit, family, tg):
                continue
            audit.stage(f"{family}/{tg.name}", attack_key(audit, family, tg, rkey, None),
                        lambda tg=tg, f=family: attack_stage(audit, f, tg, rkey))

    results = assemble_external(audit, inputs)
    write_json(run.path("results.json"), results.to_json())
    return results


def _not_run(audit: Audit, inputs: AttackInputs) -> None:
    """Say which attacks had no input to run on, and what to pass."""
    if inputs.reference is None:
        audit.warn("not run: the reference attack and RMIA (they need a model that never saw the members: pass "
                   "--reference, e.g. the model you fine-tuned from); there is no control model either, so every "
                   "finding is judged against chance and its non-member floor")
    elif not inputs.population:
        audit.warn("not run: RMIA (it needs population records the model never saw: pass --population FILE)")
    if not inputs.canaries:
        audit.warn("not run: canary exposure and extraction (pass --canaries with the canaries planted in the members)")
    elif not any(r.kind == "canary" for r in inputs.members):
        audit.warn("no --members record holds a canary sentence: exposure then measures canaries the model may never "
                   "have seen (give the members file the model was trained on, canary copies included)")
    if not any(r.has_pii for r in inputs.members):
        audit.warn("not run: the PII attacks (the members carry no PII spans: give PrivLeak JSONL with 'pii' spans, "
                   "e.g. from privleak data generate)")


def assemble_external(audit: Audit, inputs: AttackInputs) -> AuditResults:
    """``results.json`` of an attack run: the external arm, the reference as the control, the blind baseline."""
    _not_run(audit, inputs)
    durations: dict[str, float] = {}
    base = None
    if inputs.reference is not None:
        attacks, summary, _, _ = _attacks(audit, "base", durations)
        ref = inputs.reference
        base = ArmResult(kind="control", utility=_utility(audit, "base"), attacks=attacks, empirical_epsilon=summary,
                         exposed_people=audit.shared["exposed_people"]["base"],
                         source=BaseModelSource(kind="user", ref=ref.ref, path=ref.path))
    attacks, summary, _, _ = _attacks(audit, TARGET, durations)
    t = inputs.target
    arm = ArmResult(kind="external", target=ExternalModel(ref=t.ref, path=t.path, adapter=t.adapter,
                                                          base=t.base.ref if t.base else None,
                                                          base_path=t.base.path if t.base else None),
                    utility=_utility(audit, TARGET), attacks=attacks, empirical_epsilon=summary,
                    exposed_people=audit.shared["exposed_people"][TARGET])
    sel = selection(audit)
    if not sel.design.available:
        audit.warn(f"empirical ε unavailable: {sel.design.reason}")
    splits = audit.splits()
    members = splits["members"]
    data = DataSummary(
        source=f"{inputs.files['--members']} (members) / {inputs.files['--non-members']} (non-members)", n_public=0,
        n_members=len(members), n_canary_records=sum(r.kind == "canary" for r in members),
        n_non_members=len(splits["non_members"]), n_population=len(splits["population"]),
        mia_records_per_side=int(len(sel.members)), membership_design=sel.design, n_canaries=len(inputs.canaries),
        canary_chance_exposure=chance_exposure(audit.cfg.canaries.candidates) if inputs.canaries else None)
    blind = BlindBaseline.model_validate({**read_json(audit.run.path("blind_baseline.json")), "rule": RULE})
    _, best = arm.best_membership()
    if best is not None and rivals(blind.auc, None, best.auc):
        blind.rivalled.append(TARGET)
    blind.shifted = bool(blind.rivalled) or beats_chance(blind.auc_ci95) or rivals(blind.auc, blind.auc_ci95, None)
    if blind.shifted:
        ci = f" [95% CI {blind.auc_ci95[0]:.3f}, {blind.auc_ci95[1]:.3f}]" if blind.auc_ci95 else ""
        audit.warn(f"!!! shifted split: a classifier that never sees the model tells the given members from the "
                   f"non-members with AUC {blind.auc:.3f}{ci}"
                   + (f", rivalling the best attack's {best.auc:.3f}" if blind.rivalled and best else "")
                   + " — the two files differ in composition, so the membership-inference AUCs are NOT evidence of "
                   "leakage or memorisation, and no claim that a DP guarantee is violated can rest on them; give "
                   "non-members drawn from the same source and period as the members (canary exposure and "
                   "extraction do not depend on the split)")
    results = AuditResults(
        tool=ToolInfo(name="privleak", version=__version__), config=read_json(audit.run.path("config.json")), data=data,
        base_model=base, arms={TARGET: arm}, blind_baseline=blind, warnings=audit.warnings,
        durations_s={**{k: round(v, 2) for k, v in audit.run.durations.items()}, **durations},
        versions=package_versions())
    return judge(results)
