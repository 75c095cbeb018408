"""What every registered arm kind, attack and input provider must satisfy (scikit-learn's ``test_common`` way):
one parametrised check per plug-in, so a new one is held to the contract the day it is registered."""

from __future__ import annotations

import json
from typing import get_args

import pytest
from conftest import SMALL

from privleak.arms import KINDS, ArmJudging, ArmKind, ArmPresentation, KindSettings, get, judging, parse_arm, presentation
from privleak.arms.base import settings_key
from privleak.attacks.base import FAMILIES, AttackResult
from privleak.attacks.registry import ATTACKS
from privleak.attacks.settings import AttackSettings
from privleak.config import build_config
from privleak.core.inputs import INPUTS, PROVIDERS, Input, Persist, as_need
from privleak.core.io import stable_hash
from privleak.core.typed import ArmDetails
from privleak.pipeline import graph  # noqa: F401  (every provider of the pipeline registers)

BUILDABLE = sorted(k for k, kind in KINDS.items() if kind.model != "provided")


def _example(kind: ArmKind) -> str:
    return kind.example or (kind.name if kind.param is None else f"{kind.name}-8")


# --------------------------------------------------------------------------- kinds


@pytest.mark.parametrize("name", sorted(KINDS))
def test_kind_is_named_judged_and_shown(name):
    kind = get(name)
    assert kind.name == name and kind.summary, "a kind says what it is in one line"
    assert isinstance(judging(name), ArmJudging) and isinstance(presentation(name), ArmPresentation)
    assert kind.model in ("trained", "derived", "served", "provided")
    if kind.model in ("derived", "served"):
        assert kind.source in KINDS, "a derived or served kind names the arm its model comes from"
    if kind.Details is not None:  # its block in results.json names its kind (one block may serve two kinds)
        field = kind.Details.model_fields["kind"]
        assert issubclass(kind.Details, ArmDetails) and (field.default == name or name in get_args(field.annotation))


@pytest.mark.parametrize("name", sorted(KINDS))
def test_kind_needs_are_inputs_with_providers(name):
    for need in get(name).needs:
        n = as_need(need)
        assert isinstance(n.input, Input) and n.input in PROVIDERS, f"{name} needs {n!r}, which nobody provides"
        assert n.role in ("self", "base", "reference", "source", "serves"), n


@pytest.mark.parametrize("name", BUILDABLE)
def test_kind_settings_are_typed_and_their_dump_is_a_stable_key(name):
    kind = get(name)
    spec = parse_arm(_example(kind))
    arms = list(dict.fromkeys([kind.source, spec.name] if kind.source else [spec.name]))
    if kind.name in ("unlearn-ga", "unlearn-sisa"):
        arms = ["baseline", "retrain", spec.name]
    cfg = build_config({**SMALL, "arms": arms, "attacks": {**SMALL["attacks"], "select": ["membership"]}})
    settings = kind.settings(cfg, spec, 120)
    assert isinstance(settings, KindSettings), f"{name}: settings are a typed model (KindSettings), not a dict"
    key = settings_key(settings)
    assert key["kind"] == name and json.loads(json.dumps(key)) == key
    assert stable_hash(key) == stable_hash(settings_key(kind.settings(cfg, spec, 120)))  # the same config, the same key
    assert type(settings).model_validate(key) == settings  # the dump reads back: nothing is lost in the key


# --------------------------------------------------------------------------- attacks


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attack_declares_what_it_reads(name):
    spec = ATTACKS[name]
    assert spec.family in FAMILIES and spec.title
    assert issubclass(spec.result, AttackResult) and spec.result.model_fields["kind"].default
    for need in (*spec.needs, *spec.reads):
        n = as_need(need)
        assert n.input in PROVIDERS, f"{name} reads {n!r}, which nobody provides"
    fields = set(AttackSettings.model_fields)
    assert set(spec.uses) <= fields, f"{name}: uses names no attack setting: {set(spec.uses) - fields}"
    if spec.text_only:  # a served arm (the guard) has no scoring pass of its own: text-only attacks read none
        assert all(as_need(n).input.name != "scores" for n in (*spec.needs, *spec.reads)), name
    if spec.draws is not None:
        want = spec.draws(AttackSettings())
        assert want and all(n > 0 for n in want.values())


def test_attack_result_kinds_are_distinct():
    kinds = [s.result.model_fields["kind"].default for s in ATTACKS.values()]
    by_type = {s.result: s.result.model_fields["kind"].default for s in ATTACKS.values()}
    assert len(set(by_type.values())) == len(by_type), "two result types share a kind: results.json could not tell"
    assert set(kinds) == set(by_type.values())


# --------------------------------------------------------------------------- providers


@pytest.mark.parametrize("name", sorted(k.name for k in PROVIDERS))
def test_provider_is_registered_under_its_input_and_persists_somewhere_of_its_own(name):
    key = INPUTS[name]
    p = PROVIDERS[key]
    assert p.input is key and callable(p.build) and key.doc, f"{name}: a provider, and a line saying what it is"
    if isinstance(p.persist, Persist):  # a fixed persistence: one task name, outputs in the run directory
        assert p.persist.task and p.persist.load is not None, name
        assert all(not o.startswith("/") and ".." not in o for o in p.persist.outputs), name


def test_persisted_inputs_do_not_share_a_task_name():
    names: dict[str, str] = {}
    for key, p in PROVIDERS.items():
        if isinstance(p.persist, Persist) and "{model}" not in p.persist.task:
            assert p.persist.task not in names, f"{key.name} and {names[p.persist.task]} are both task {p.persist.task}"
            names[p.persist.task] = key.name
