"""The stage plan of an audit as data: every task's name, key, inputs, outputs, kind and wide flag.

What the golden test (``test_stage_keys.py``) pins, so a run directory written by an earlier version resumes:
the plan of a handful of configurations covering every arm kind, the data defences, shadows, extra training
seeds, the data release, the forget set, the one-run audit canaries and ``privleak attack``. Only the data stage
runs (the graph's shape depends on the members); no model is trained.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import SMALL

#: The configurations whose plans are pinned (config-file dicts).
PLANS: dict[str, dict[str, Any]] = {
    "small": SMALL,
    "all-arms": {**SMALL, "arms": ["baseline", "best", "dp-8", "scrub", "dedup", "dp-8+scrub", "guard"],
                 "one_run": {"canaries": 100, "prefix_words": 2, "secret_words": 3}},
    "kinds": {**SMALL, "arms": ["baseline", "best", "dp-4", "dpw-0.02", "dp-user-4", "retrain", "unlearn-ga",
                                "unlearn-sisa", "fedavg", "fed-dp-8", "guard", "dedup+scrub", "dp-4+lora"],
              "one_run": {"canaries": 40, "prefix_words": 2, "secret_words": 3},
              "shadows": {"enabled": True, "n_shadows": 2, "arms": ["dpw-0.02", "dedup+scrub"]},
              "dp": {**SMALL["dp"], "lora_base": "fp32"},  # auto would read the machine's bf16 support
              "recommendation": {"seeds": 1}, "release": {"summary_epsilon": 2.0, "ldp_terms_epsilon": 4.0},
              "unlearning": {"forget_fraction": 0.3, "sisa": {"shards": 2}}},
    "options": {**SMALL, "arms": ["baseline", "dp-4", "dp-4+lora", "dp-user-4", "dp-user-4+lora", "fed-dp-8", "best"],
                "dp": {**SMALL["dp"], "public_weight": 0.5, "public_batch_size": 8, "lora_base": "bf16",
                       "debug_break": {"dp-4": "no_noise"}},
                "arm_options": {"dp-user": {"method": "els", "records_per_person": 2, "epochs": 2}},
                "best": {"replay": 0.0}, "data": {**SMALL["data"], "client_field": None}},
    "selected": {**SMALL, "arms": ["baseline", "guard", "scrub"], "one_run": {"canaries": 0},
                 "attacks": {**SMALL["attacks"], "select": ["membership", "exposure", "sampling_extraction"]},
                 "shadows": {"enabled": True, "n_shadows": 2, "arms": ["scrub"]}},
}


def stage_plan(cfg_dict: dict[str, Any], out: Path) -> list[dict[str, Any]]:
    """Run the data stage of ``cfg_dict`` into ``out`` and return the plan of the rest (no training)."""
    from privleak.arms import resolve
    from privleak.config import build_config
    from privleak.models.device import use_policy
    from privleak.pipeline import graph
    from privleak.pipeline.audit import Audit
    from privleak.pipeline.rundir import RunDir

    cfg = resolve(build_config(cfg_dict))
    with use_policy(cfg.compute_policy()):
        audit = Audit(cfg=cfg, run=RunDir.open(out), notify=lambda s: None)
        data = graph.data_task(cfg)
        graph.Sequential().run(graph.Graph([data]), audit)
        g = graph.audit_graph(audit)
        return [_row(data)] + [_row(t) for t in g.tasks]


def attack_plan(out: Path, tiny_model_dir: Path, reference: bool) -> list[dict[str, Any]]:
    """The plan of ``privleak attack`` on hand-made files (model fingerprints fixed: they read modification times)."""
    import dataclasses
    from functools import partial

    from privleak.config import build_config
    from privleak.data.records import Record
    from privleak.models.external import ModelRef
    from privleak.pipeline import attack, attack_inputs, graph
    from privleak.pipeline.audit import Audit
    from privleak.pipeline.rundir import RunDir

    members = [Record(text=f"member note {i} about a visit", meta={"person_id": f"m{i}"}) for i in range(12)]
    non = [Record(text=f"other note {i} about a call", meta={"person_id": f"n{i}"}) for i in range(12)]
    ref = ModelRef(ref="tiny", path=str(tiny_model_dir)) if reference else None
    inputs = attack_inputs.AttackInputs(target=ModelRef(ref="tiny", path=str(tiny_model_dir)), reference=ref,
                                        members=members, non_members=non, population=[], canaries=[],
                                        files={"--members": "m.jsonl", "--non-members": "n.jsonl"})
    cfg = attack.resolve_format(build_config({**SMALL, "arms": None}))
    saved = attack.model_fingerprint
    attack.model_fingerprint = lambda path: "fixed"
    try:
        audit = Audit(cfg=cfg, run=RunDir.open(out), notify=lambda s: None)
        dkey = attack._data_key(cfg, inputs)
        data = graph.Task(graph.DATA, dkey, partial(attack._write_data, inputs=inputs), outputs=("splits/",))
        graph.Sequential().run(graph.Graph([data]), audit)
        g = attack.attack_graph(audit, inputs, dkey)
    finally:
        attack.model_fingerprint = saved
    return [_row(data)] + [_row(t) for t in g.tasks]


def _row(task: Any) -> dict[str, Any]:
    return {"name": task.name, "key": task.key, "inputs": sorted(task.inputs), "outputs": list(task.outputs),
            "kind": task.kind, "wide": task.wide, "cost": round(task.cost, 6)}
