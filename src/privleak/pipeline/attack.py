"""``privleak attack``: audit a model the user already trained, with the battery ``run`` uses.

Every attack that needs no training runs — the score-based membership
attacks, the reference attack and RMIA with the reference, exposure with the
canaries, prefix and sampling extraction, the PII attacks where the members
carry PII spans — as a task graph of the same task kinds as ``run``
(:mod:`.graph`), on the same executors, with the same run directory, stage
markers (an interrupted audit resumes where it stopped), assembly and
report. The model is an arm of kind ``external`` named ``target``.

The reference model, when given, is also the control: it is evaluated with
the same battery, as ``run`` evaluates its base model, and every finding on
the target is judged against it. Without one there is no control, and
findings are judged against chance and their non-member floors only.

Member and non-member files drawn by the user need not be exchangeable (a
"shifted split": other dates, sources or formats). The blind baseline
(:mod:`privleak.audit.blind`) tells them apart without the model; when it
beats chance the results say that membership AUCs are not evidence of
leakage, and no empirical ε is computed from them
(:func:`.evaluate.selection`).
"""

from __future__ import annotations

import dataclasses
from functools import partial
from pathlib import Path
from typing import Callable

from ..arms import ArmSpec
from ..attacks.inputs import AUDIT_CANARIES, BASE, MODEL, SPLITS
from ..config import AuditConfig
from ..core.io import stable_hash, staging_dir, write_json
from ..data.audit_canaries import save_audit_canaries
from ..data.canaries import save_canaries
from ..data.records import write_jsonl
from ..models.external import ModelRef
from ..results import AuditResults
from .assemble import assemble
from .attack_inputs import AttackInputs, model_fingerprint, records_digest
from .audit import SPLITS as SPLIT_NAMES
from .audit import Audit, ModelInfo, evaluated_key
from .data_release import RELEASE
from .graph import DATA, Executor, Graph, Sequential, Task, planned_graph
from .rundir import RunDir

#: The external arm: the model the user trained.
TARGET_SPEC = ArmSpec("external")
TARGET = TARGET_SPEC.name


def _write_data(audit: Audit, inputs: AttackInputs) -> None:
    """The data stage: the user's files as the run's splits, and that the user drew them (``origin.json``)."""
    splits = {"members": inputs.members, "non_members": inputs.non_members, "population": inputs.population}
    with staging_dir(audit.run.path("splits")) as tmp:
        for name in SPLIT_NAMES:
            write_jsonl(tmp / f"{name}.jsonl", splits.get(name, []))
        save_canaries(tmp / "canaries.json", inputs.canaries)
        write_json(tmp / "origin.json", {"drawn_by": "user", "files": inputs.files})


def _write_audit_canaries(audit: Audit, inputs: AttackInputs) -> None:
    """The audit canaries the user's training inserted, where ``run``'s own audit-canaries stage writes them (its
    loader reads them back: :data:`~privleak.attacks.inputs.AUDIT_CANARIES`)."""
    save_audit_canaries(audit.run.path("audit_canaries.json"), inputs.audit_canaries,
                        {"n_included": sum(c.included for c in inputs.audit_canaries), "inserted_by": "user"})


def _reference_stage(audit: Audit, ref: ModelRef) -> None:
    """The control: the user's reference model, evaluated like ``run``'s base model."""
    write_json(audit.run.path("base_model.json"), {"kind": "user", "ref": ref.ref, "path": ref.path})


def _data_key(cfg: AuditConfig, inputs: AttackInputs) -> str:
    return stable_hash("external-data", cfg.seed, [records_digest(x) for x in
                                                    (inputs.members, inputs.non_members, inputs.population)],
                       [dataclasses.asdict(c) for c in inputs.canaries])


def _claimed(inputs: AttackInputs) -> list:
    """What a claimed DP guarantee adds to the keys: the audit canaries and the claim (nothing without one, so
    ``privleak attack``'s keys are unchanged)."""
    if not inputs.audit_canaries and inputs.claim is None:
        return []
    return [[dataclasses.asdict(c) for c in inputs.audit_canaries], inputs.claim]


def attack_graph(audit: Audit, inputs: AttackInputs, dkey: str) -> Graph:
    """The same tasks as ``run``'s, planned from the same declarations: the user's files are the splits (the
    data stage, done first, keyed by their content), the reference model is the control (its stage here
    writes ``base_model.json``), the target is a provided model keyed by its files; the blind baseline runs
    before every stage that reads the evaluation sets (whether the user's sets support an ε bound decides
    what the attacks report). Nothing is trained and nothing released; audit canaries only when the user's
    training inserted them (their stage here writes ``audit_canaries.json``, keyed by them and the claim)."""
    cfg, r = audit.cfg, audit.inputs
    r.fix(SPLITS, value=dkey)
    r.fix(RELEASE, absent=True)
    first: list[Task] = []
    if inputs.audit_canaries:
        akey = stable_hash("user-audit-canaries", *_claimed(inputs))
        r.fix(AUDIT_CANARIES, value=akey)
        first.append(Task("audit-canaries", akey, partial(_write_audit_canaries, inputs=inputs), (DATA,),
                          ("audit_canaries.json",)))
    else:
        r.fix(AUDIT_CANARIES, absent=True)
    if inputs.reference is not None:
        ref = inputs.reference
        rkey = stable_hash("external-model", model_fingerprint(ref.path), cfg.model.max_length, audit.text_format())
        r.fix(BASE, value=rkey)
        r.models["base"] = ModelInfo("base", "base", model_dir=ref.path)
        first.append(Task("base-model", rkey, partial(_reference_stage, ref=ref), (DATA,), ("base_model.json",)))
    else:
        r.fix(BASE, absent=True)
    t = inputs.target
    r.fix(MODEL, TARGET, value=evaluated_key(stable_hash("external-model", model_fingerprint(t.path),
                                                         t.base and model_fingerprint(t.base.path),
                                                         cfg.model.max_length, audit.text_format(),
                                                         *_claimed(inputs)), cfg))
    r.models[TARGET] = ModelInfo(TARGET, "provided", TARGET_SPEC, {"reference": "base"} if inputs.reference else {},
                                 model_dir=t.path, adapter_base=t.base.path if t.base else None)
    return planned_graph(audit, first=tuple(first))


def resolve_format(cfg: AuditConfig) -> AuditConfig:
    """``auto`` is ``plain`` here: a model trained outside PrivLeak is scored as ``tokenizer(text)`` frames it
    (models.batching), unless the user says it was trained otherwise (``--format``)."""
    if cfg.model.text_format != "auto":
        return cfg
    return cfg.model_copy(update={"model": cfg.model.model_copy(update={"text_format": "plain"})})


def with_claim(cfg: AuditConfig, inputs: AttackInputs) -> AuditConfig:
    """The run's config for a target trained with audit canaries and a DP claim: its ``one_run`` section names
    the m canaries given (which the audit-canaries input loads and the canaries family scores), and every
    bound — one-run and empirical — is computed at the claim's δ (``dp.delta``, which the target's stages read
    as any arm's). Unchanged without either (``privleak attack``)."""
    update: dict = {}
    if inputs.audit_canaries:
        update["one_run"] = cfg.one_run.model_copy(update={"canaries": len(inputs.audit_canaries)})
    if inputs.claim is not None:
        update["dp"] = cfg.dp.model_copy(update={"delta": float(inputs.claim["delta"])})
    return cfg.model_copy(update=update) if update else cfg


def text_frame(paths: list[str], fmt: str) -> str | None:
    """What format ``fmt`` puts around each text with the model's tokenizer (one line, for the results): the first
    of ``paths`` that has one (an adapter without its own tokenizer uses its base's, as load_model does)."""
    from transformers import AutoTokenizer

    from ..models.batching import frame

    for path in paths:
        try:
            tok = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
        except (OSError, ValueError):
            continue
        return frame(tok, fmt).describe(tok)
    return None


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


def run_attack(cfg: AuditConfig, inputs: AttackInputs, out_dir: str | Path,
               notify: Callable[[str], None] = lambda s: None, executor: Executor | None = None) -> AuditResults:
    """Run (or resume) the attacks on an external model; returns the results also written to ``results.json``.
    ``executor``: how the graph runs (default sequential); it is closed before returning. One process at a
    time: the run directory's lock is held throughout (:mod:`.runlock`)."""
    with RunDir.locked(out_dir):
        return _run_attack(cfg, inputs, out_dir, notify, executor)


def _run_attack(cfg: AuditConfig, inputs: AttackInputs, out_dir: str | Path, notify: Callable[[str], None],
                executor: Executor | None) -> AuditResults:
    cfg = with_claim(resolve_format(cfg), inputs)
    run = RunDir.open(out_dir)
    notify(f"PrivLeak attack → {run.root}  (target: {inputs.target.ref}; texts framed as {cfg.model.text_format})")
    audit = Audit(cfg=cfg, run=run, notify=notify)
    record = {"command": "attack", "seed": cfg.seed, "profile": cfg.profile,
              "target": inputs.target.describe(), "reference": inputs.reference.describe() if inputs.reference else None,
              "files": inputs.files, "data": cfg.data.model_dump(mode="json", include={"text_field", "group_field"}),
              "model": {"max_length": cfg.model.max_length, "text_format": cfg.model.text_format},
              "canaries": cfg.canaries.model_dump(mode="json"), "attacks": cfg.attacks.model_dump(mode="json")}
    if inputs.audit_canaries or inputs.claim is not None:
        record.update({"one_run": cfg.one_run.model_dump(mode="json"), "claim": inputs.claim})
    write_json(run.path("config.json"), record)
    dkey = _data_key(cfg, inputs)
    executor = executor or Sequential()
    try:
        executor.run(Graph([Task(DATA, dkey, partial(_write_data, inputs=inputs), outputs=("splits/",))]), audit)
        executor.run(attack_graph(audit, inputs, dkey), audit)
    finally:
        executor.close()
    _not_run(audit, inputs)
    t = inputs.target
    target = {**t.describe(), "text_format": cfg.model.text_format,
              "text_frame": text_frame([t.path] + ([t.base.path] if t.base else []), cfg.model.text_format)}
    extra = {"target": target, **({"privacy": inputs.claim} if inputs.claim is not None else {})}
    results = assemble(audit, [TARGET_SPEC], control=inputs.reference is not None,
                       source=f"{inputs.files['--members']} (members) / {inputs.files['--non-members']} (non-members)",
                       extra={TARGET: extra})
    write_json(run.path("results.json"), results.to_json())
    return results
