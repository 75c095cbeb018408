"""Arms and attacks are plug-ins: a toy arm kind and a toy attack, defined here and registered from this file,
run through a tiny audit, the verdicts, ``results.json`` (validated by the schema generated with them
registered), the console tables and the HTML report — with no edit to ``src/``."""

from __future__ import annotations

import json
from typing import Any, Literal

import pytest
from conftest import SMALL
from pydantic import BaseModel

from privleak import arms as arm_registry
from privleak.arms import ArmInputs, ArmKind, ArmPresentation, FitContext, register
from privleak.arms.common import fit_plain
from privleak.attacks import registry as attack_registry
from privleak.attacks.base import AttackContext, AttackResult, AttackSpec, Finding, Policy
from privleak.attacks.inputs import SCORES
from privleak.core.present import Figure, Note
from privleak.results import ArmDetails, ArmResult, json_schema

# --------------------------------------------------------------------------- a toy arm kind


class ToyDetails(ArmDetails):
    kind: Literal["toy"] = "toy"
    shrink: float
    steps_run: int


class ToyOptions(BaseModel):
    shrink: float = 0.5


class Toy(ArmKind):
    """Plain fine-tuning for one epoch, then every weight scaled towards the base model's by ``shrink``."""

    name = "toy"
    summary = "a toy kind: one epoch, then shrunk towards the base"
    Details = ToyDetails
    Options = ToyOptions

    def settings(self, cfg, spec, n_members: int) -> dict[str, Any]:
        opts = ToyOptions.model_validate(cfg.arm_options.get("toy", {}))
        return {"kind": "toy", "epochs": 1, "batch_size": 16, "lr": 3e-3, "weight_decay": 0.0, "seed": cfg.seed,
                "shrink": opts.shrink}

    def fit(self, model: Any, settings: dict[str, Any], ctx: FitContext) -> tuple[Any, dict[str, Any]]:
        import torch

        start = {k: v.detach().clone() for k, v in model.state_dict().items()}
        model, record = fit_plain(model, settings, ctx)
        with torch.no_grad():
            for k, v in model.state_dict().items():
                if v.is_floating_point():
                    v.copy_(start[k] + settings["shrink"] * (v - start[k]))
        return model, {**record, "toy": {"shrink": settings["shrink"], "steps_run": record["steps"]}}

    def details(self, inputs: ArmInputs) -> ToyDetails:
        return ToyDetails(**inputs.record["toy"])


class ToyPresentation(ArmPresentation):
    """How the toy kind's arms are shown: a figure line in their verdict, a note under the trade-off plot."""

    def figures(self, arm: ArmResult) -> list[str]:
        return [f"toy shrink {arm.details.shrink:g}"]

    def notes(self, arms: dict[str, ArmResult]) -> list:
        return [Note(f"TOY-NOTE: {', '.join(arms)} shrunk towards the base model.")]


# --------------------------------------------------------------------------- a toy attack


class ToyResult(AttackResult):
    kind: Literal["toy_attack"] = "toy_attack"
    members_seen: int
    mean_loss_gap: float

    def headline(self) -> list[Figure]:
        return [Figure("TOY-FIGURE loss gap", self.mean_loss_gap, "number")]

    def assess(self, attack: str, control: AttackResult | None, policy: Policy) -> Finding:
        return Finding(attack, False, f"{attack}: loss gap {self.mean_loss_gap:.3f}")


def toy_attack(target: Any, ctx: AttackContext) -> ToyResult:
    """Mean NLL of non-members minus members, from the shared scoring pass."""
    members = ctx.scoring.target("members").nll()
    non = ctx.scoring.target("non_members").nll()
    return ToyResult(members_seen=len(members), mean_loss_gap=float(non.mean() - members.mean()))


TOY_SPEC = AttackSpec("toy_attack", "extraction", toy_attack, ToyResult, "toy attack", "this test", needs=(SCORES,))

# --------------------------------------------------------------------------- one tiny audit with both


@pytest.fixture(scope="module")
def toy_run(audits):
    register(Toy(), presentation=ToyPresentation())
    attack_registry.register(TOY_SPEC)
    try:
        cfg = {**SMALL, "arms": ["baseline", "toy"], "arm_options": {"toy": {"shrink": 0.25}},
               "one_run": {"canaries": 0}, "attacks": {**SMALL["attacks"], "select": ["loss", "exposure", "toy_attack"]}}
        run = audits.get(cfg, via="cli")
        results = run.results
        schema = json_schema()
        html = (run.out / "report.html").read_text()
        yield run.out, results, schema, html, run.console
    finally:
        arm_registry.unregister("toy")
        attack_registry.unregister("toy_attack")


def test_toy_arm_kind_runs_through_the_audit(toy_run):
    run, results, schema, html, console = toy_run
    toy = results.arms["toy"]
    assert toy.kind == "toy" and isinstance(toy.details, ToyDetails)
    assert toy.details.shrink == 0.25 and toy.details.steps_run == toy.training.steps > 0
    assert toy.utility.ppl_non_members > 1 and toy.attacks["loss"].auc is not None
    assert toy.verdict is not None and "toy shrink 0.25" in toy.verdict.figures
    # Half-way (or less) to the baseline's fit: shrinking towards the base costs held-out loss.
    assert toy.utility.nll_non_members > results.arms["baseline"].utility.nll_non_members
    assert "TOY-NOTE: toy shrunk" in html and "toy" in console
    raw = json.loads((run / "results.json").read_text())
    assert raw["arms"]["toy"]["details"] == {"kind": "toy", "shrink": 0.25, "steps_run": toy.details.steps_run}


def test_toy_attack_runs_through_the_audit(toy_run):
    run, results, schema, html, console = toy_run
    for name, arm in results.models():
        r = arm.attacks["toy_attack"]
        assert isinstance(r, ToyResult) and r.members_seen > 0, name
    assert results.arms["baseline"].attacks["toy_attack"].mean_loss_gap > 0  # the baseline memorised its members
    assert "TOY-FIGURE loss gap" in html and "toy attack" in html
    assert "TOY-FIGURE" in console
    assert any("toy_attack: loss gap" in f for f in results.arms["baseline"].verdict.figures)


def test_results_validate_against_the_schema_generated_with_the_plugins(toy_run):
    jsonschema = pytest.importorskip("jsonschema")
    run, results, schema, html, console = toy_run
    raw = json.loads((run / "results.json").read_text())
    jsonschema.validate(raw, schema)
    names = {r["$ref"].rsplit("/", 1)[-1] for r in schema["$defs"]["ArmResult"]["properties"]["details"]["anyOf"][0]["oneOf"]}
    assert "ToyDetails" in names
    # A toy details block of the wrong shape is refused by the schema.
    bad = json.loads(json.dumps(raw))
    bad["arms"]["toy"]["details"]["shrink"] = "a lot"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_the_arm_kinds_load_without_torch():
    """The command line parses and checks arm names (every kind's module) before any work: loading the kinds
    must not pull in torch or transformers, or every refusal would wait seconds for them (issue 30)."""
    import subprocess
    import sys
    from pathlib import Path

    code = ("import sys; import privleak.arms, privleak.cli.run, privleak.cli.attack; "
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    src = Path(__file__).resolve().parents[1] / "src"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
