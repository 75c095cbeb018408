"""The stage keys are pinned: a run directory written before a change of the pipeline's code resumes after it.

``golden/stage_plans.json`` holds, for the configurations of ``stage_plan.PLANS`` and for ``privleak attack``
with and without a reference model, every task's name, key, outputs, kind and cost as the pipeline planned them
at 248c0ec, before the plan was derived from the declared inputs, and each task's inputs as the declarations
give them since: a stage no longer waits for
tasks it does not read (the audit canaries, the forget set, the base model, the base model's samples and
scoring pass where they are not read; in ``privleak attack``, the blind baseline before the stages that do not
read the evaluation sets), and the unlearn-ga arm waits for the training records it reads. A key that moves
makes every existing run directory redo that stage and all after it: change one only on purpose, and say so.
Moved on purpose since: the audit canaries and the canary family (issue 45's reconstruction game: queries
unique across the canaries, ``one_run.query_words`` in their key), so a run directory written before redoes them;
the DP arms (their white-box gradient canaries, ``dp.gradient_canaries`` in their key: each DP step's noise also
draws the canaries' coordinates), so a DP arm and its stages retrain once.

Regenerate (only when a key is meant to change): run
``stage_plan.stage_plan`` (and ``attack_plan``) for each entry and write the rows, sorted keys, one space indent.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import stage_plan

GOLDEN = json.loads((Path(__file__).parent / "golden" / "stage_plans.json").read_text())


def _by_name(rows: list[dict]) -> dict[str, dict]:
    return {r["name"]: r for r in rows}


def _same(name: str, got: list[dict]) -> None:
    want, have = _by_name(GOLDEN[name]), _by_name(got)
    assert sorted(have) == sorted(want), f"{name}: tasks differ: +{sorted(set(have) - set(want))} " \
                                         f"-{sorted(set(want) - set(have))}"
    for task, w in want.items():
        assert have[task] == w, f"{name}: {task}: {have[task]} != {w}"


@pytest.mark.parametrize("name", sorted(stage_plan.PLANS))
def test_the_plan_and_its_keys_are_those_pinned(name, tmp_path):
    _same(name, stage_plan.stage_plan(stage_plan.PLANS[name], tmp_path / "run"))


@pytest.mark.parametrize("reference", [False, True])
def test_the_attack_commands_plan_and_keys_are_those_pinned(reference, tmp_path, tiny_model_dir):
    _same(f"attack-ref-{reference}", stage_plan.attack_plan(tmp_path / "run", tiny_model_dir, reference))
