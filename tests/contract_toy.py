"""A new input, a kind that needs it and an attack that needs it and the scores — declared here, with no edit to
``src/`` — planned from their declarations and run on fake models through assembly, the verdicts and the schema.

The input (``TOKEN_FREQUENCIES``) is one provider, persisted as one task of the plan; the kind and the attack
name it in their ``needs`` and read it as ``ctx[TOKEN_FREQUENCIES]``. Everything else is the pipeline's own
code — the plan, the keys, the resolver, the attack stage and its runner, assembly, the verdicts, the
recommendation, the schema — except the builds that would need torch: the base model, training, a model's
handle, its scoring pass and its utility are the real providers with their build (and load) swapped for
fakes (:func:`fake_providers`). :func:`run` does it all without importing torch (the contract test checks that
in a fresh interpreter).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path
from typing import Any, Literal

import numpy as np

from privleak import arms as arm_registry
from privleak.arms import ArmInputs, ArmKind, ArmPresentation, FitContext, KindSettings, register
from privleak.arms.base import settings_key
from privleak.arms.inputs import TRAINING, TRAINING_RECORDS
from privleak.attacks import registry as attack_registry
from privleak.attacks.base import AttackContext, AttackResult, AttackSpec, Finding, Policy
from privleak.attacks.inputs import BASE, MODEL, SCORES, SPLITS, ModelScores
from privleak.core.inputs import PROVIDERS, Input, Inputs, Persist, View, provides
from privleak.core.io import read_json, write_json
from privleak.core.present import Figure
from privleak.core.typed import ArmDetails
from privleak.data.records import PiiSpan, Record

# --------------------------------------------------------------------------- the new input

TOKEN_FREQUENCIES: Input[dict[str, int]] = Input(
    "toy-token-frequencies", "how often each word occurs in the public split (a toy DC-PDD table)")


def _save(value: dict[str, int], view: View) -> None:
    write_json(view.path("toy", "frequencies.json"), value)


@provides(TOKEN_FREQUENCIES, needs=(SPLITS,), pure=True,
          persist=Persist("toy-token-frequencies", ("toy/frequencies.json",), save=_save,
                          load=lambda view: read_json(view.path("toy", "frequencies.json"))))
def _token_frequencies(view: View) -> dict[str, int]:
    return dict(Counter(w for r in view[SPLITS]["public"] for w in r.text.lower().split()))


# --------------------------------------------------------------------------- a kind that needs it


class CountingSettings(KindSettings):
    kind: str = "toy-counting"
    top: int


class CountingDetails(ArmDetails):
    kind: Literal["toy-counting"] = "toy-counting"
    top_words: list[str]


class Counting(ArmKind):
    """Trains nothing: records the public split's most frequent words (what its fit read from the new input)."""

    name = "toy-counting"
    summary = "a toy kind that reads the token-frequency table"
    needs = (TOKEN_FREQUENCIES,)
    shadows = False
    Details = CountingDetails

    def settings(self, cfg: Any, spec: Any, n_members: int) -> CountingSettings:
        return CountingSettings(top=3)

    def fit(self, model: Any, settings: CountingSettings, ctx: FitContext) -> tuple[Any, dict[str, Any]]:
        freq = ctx[TOKEN_FREQUENCIES]
        top = sorted(freq, key=lambda w: (-freq[w], w))[: settings.top]
        return model, {"kind": self.name, "steps": 1, "epoch_losses": [1.0], "privacy": None, "epochs_run": 1.0,
                       "top_words": top}

    def details(self, inputs: ArmInputs) -> CountingDetails:
        return CountingDetails(top_words=inputs.record["top_words"])


class CountingPresentation(ArmPresentation):
    def figures(self, arm: Any) -> list[str]:
        return [f"toy top words: {', '.join(arm.details.top_words)}"]


# --------------------------------------------------------------------------- an attack that needs it and the scores


class FrequencyResult(AttackResult):
    kind: Literal["toy_frequency"] = "toy_frequency"
    table_words: int
    loss_gap: float

    def headline(self) -> list[Figure]:
        return [Figure("loss gap", self.loss_gap, "number")]

    def assess(self, attack: str, control: AttackResult | None, policy: Policy) -> Finding:
        return Finding(attack, False, f"{attack}: loss gap {self.loss_gap:.3f} over {self.table_words} words")


def frequency_attack(target: Any, ctx: AttackContext) -> FrequencyResult:
    table = ctx[TOKEN_FREQUENCIES]
    gap = float(ctx.scoring.target("non_members").nll().mean() - ctx.scoring.target("members").nll().mean())
    return FrequencyResult(table_words=len(table), loss_gap=gap)


FREQUENCY_SPEC = AttackSpec("toy_frequency", "extraction", frequency_attack, FrequencyResult, "toy frequency",
                            "this test", needs=(TOKEN_FREQUENCIES, SCORES))

# --------------------------------------------------------------------------- fakes for what would need torch


@dataclasses.dataclass
class FakeHandle:
    """What the attacks are handed as the model: a name (the toy attack reads only the scores)."""

    name: str
    text_format: str = "privleak"


class FakeScores:
    """A scoring pass: per-text NLLs, lower on the members for a model that saw them."""

    def __init__(self, nll: np.ndarray) -> None:
        self._nll = nll

    def nll(self) -> np.ndarray:
        return self._nll

    def __len__(self) -> int:
        return len(self._nll)


def _fake_nll(model: str, split: str, n: int) -> np.ndarray:
    rng = np.random.default_rng(abs(hash((model, split))) % 2**32)
    seen = model != "base" and split == "members"
    return rng.normal(2.0 if seen else 2.5, 0.3, n)


def _scores(view: View) -> ModelScores:
    texts = view[SPLITS]
    n = {"members": len([r for r in texts["members"] if r.kind != "canary"]), "non_members": len(texts["non_members"]),
         "population": len(texts["population"]), "public_heldout": len(texts["public_heldout"])}
    return ModelScores(lambda split: FakeScores(_fake_nll(view.model, split, n[split])))


def _utility(view: View) -> None:
    nll = 2.2 if view.model == "base" else 2.0
    write_json(view.path("arms", view.model, "utility.json"),
               {"ppl_members": float(np.exp(nll - 0.3)), "ppl_non_members": float(np.exp(nll)), "nll_non_members": nll})


def _train(view: View) -> None:
    """The pipeline's fit without its torch: the kind's own ``fit`` on a fake model, with the inputs it declares."""
    from privleak.pipeline.training import arm_settings

    spec, records = view.info.spec, view[TRAINING_RECORDS]
    kind = spec.kind_obj
    settings = arm_settings(view.cfg, spec, len(view[SPLITS]["members"]))
    ctx = FitContext(cfg=view.cfg, label=spec.name, inputs=View(view.resolver, view.model, kind.needs, kind.name),
                     data=[], records=records, pad=0)
    _, record = kind.fit({"fake": "model"}, settings, ctx)
    record.pop("epochs_run")
    write_json(view.path("arms", view.model, "train.json"),
               {**record, "settings": settings_key(settings), "n_train_records": len(records), "tokens": 0,
                "seconds": 0.0})


def _base(view: View) -> None:
    write_json(view.path("base_model.json"), {"kind": "user", "ref": "fake", "path": "fake"})


def _blind(view: View) -> None:
    write_json(view.path("blind_baseline.json"), {"auc": 0.5, "auc_ci95": [0.4, 0.6], "tpr_at_1pct_fpr": 0.01,
                                                  "n_members": 10, "n_non_members": 10, "folds": 5,
                                                  "features": "fake"})


def fake_providers() -> dict:
    """The registered providers, with the builds that need torch (and the loads of what they write) swapped."""
    from privleak.pipeline.evaluate import BLIND, UTILITY

    table = dict(PROVIDERS)

    def swap(key: Input[Any], build: Any, load: Any = None) -> None:
        real = table[key]
        persist = real.persist

        def fake_persist(where: Any) -> Persist | None:
            p = persist(where) if callable(persist) else persist
            return None if p is None else dataclasses.replace(p, load=load or p.load)
        table[key] = dataclasses.replace(real, build=build, persist=fake_persist if persist is not None else None)

    swap(BASE, _base, load=lambda view: FakeHandle("base"))
    swap(MODEL, lambda view: FakeHandle(view.model))
    swap(SCORES, lambda view: None, load=_scores)
    swap(UTILITY, _utility)
    swap(TRAINING, _train)
    swap(BLIND, _blind)
    return table


# --------------------------------------------------------------------------- the scenario


WORDS = ("asthma review cough fever rash gout knee ankle sleep diet water walk rest fluids tablets follow visit "
         "clinic nurse doctor morning evening weekly daily pain mild severe improved stable referred advised").split()


def records(n: int, side: str) -> list[Record]:
    """Distinct notes (no two near duplicates: the evaluation sets keep one record per unit and drop those)."""
    rng = np.random.default_rng(sum(map(ord, side)))
    out = []
    for i in range(n):
        words = " ".join(rng.choice(WORDS, size=12, replace=False))
        text = f"Patient {side}{i}: {words}; phone 555-{i:04d}."
        start = text.index("555")
        out.append(Record(text=text, pii=[PiiSpan(start, start + 8, "PHONE")], meta={"person_id": f"{side}{i}"}))
    return out


CONFIG = {"profile": "smoke", "device": "cpu", "seed": 5, "arms": ["toy-counting"], "one_run": {"canaries": 0},
          "attacks": {"bootstrap": 0, "select": ["loss", "toy_frequency"]}, "compute": {"precision": "fp32"}}


def run(out: Path) -> dict[str, Any]:
    """Plan and run the toy audit into ``out``; the plan's tasks, results.json and the schema it validates against."""
    from privleak.arms import resolve, specs
    from privleak.config import build_config
    from privleak.data.canaries import save_canaries
    from privleak.data.records import write_jsonl
    from privleak.pipeline import graph
    from privleak.pipeline.assemble import assemble
    from privleak.pipeline.audit import Audit
    from privleak.pipeline.rundir import RunDir
    from privleak.results import json_schema

    register(Counting(), presentation=CountingPresentation())
    attack_registry.register(FREQUENCY_SPEC)
    try:
        cfg = resolve(build_config(CONFIG))
        run_dir = RunDir.open(out)
        splits = {"members": records(24, "m"), "non_members": records(24, "n"), "population": records(6, "p"),
                  "public": records(30, "q"), "public_heldout": records(4, "h")}
        for name, recs in splits.items():
            write_jsonl(run_dir.path("splits", f"{name}.jsonl"), recs)
        save_canaries(run_dir.path("splits", "canaries.json"), [])
        write_json(run_dir.path("config.json"), cfg.model_dump(mode="json"))
        audit = Audit(cfg=cfg, run=run_dir, notify=lambda line: None)
        audit.inputs = Inputs(cfg, run_dir, providers=fake_providers())
        g = graph.audit_graph(audit)
        graph.Sequential().run(g, audit)
        results = assemble(audit, specs(cfg))
        return {"tasks": {t.name: t.inputs for t in g.tasks}, "results": json.loads(json.dumps(results.to_json())),
                "schema": json_schema()}
    finally:
        arm_registry.unregister(Counting.name)
        attack_registry.unregister(FREQUENCY_SPEC.name)
