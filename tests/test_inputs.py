"""The typed inputs and their resolver (``privleak.core.inputs``), on toy inputs in a registry of the test's own."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pydantic import BaseModel

from privleak.core.inputs import FakeInputs, Input, Inputs, Persist, Unavailable, provides
from privleak.core.plan import plan

TABLE: dict = {}
NUMBERS = Input("t-numbers", "a persisted list of numbers", present=bool)
TOTAL = Input("t-total", "their sum, not persisted")
SCALED = Input("t-scaled", "a model's numbers times its factor, persisted", per_model=True)
REPORT = Input("t-report", "reads its own and its reference's scaled numbers", per_model=True)
OPTIONAL = Input("t-optional", "exists only where the config says so")
BUILT: list[str] = []


class Count(BaseModel):
    n: int


@provides(NUMBERS, settings=lambda w: Count(n=w.cfg["n"]), registry=TABLE,
          persist=Persist("numbers", ("numbers.json",), load=lambda v: json.loads(v.path("numbers.json").read_text())))
def _numbers(view):
    BUILT.append("numbers")
    view.path("numbers.json").write_text(json.dumps(list(range(view.resolver.settings(NUMBERS).n))))


@provides(TOTAL, needs=(NUMBERS,), registry=TABLE, pure=True)
def _total(view):
    BUILT.append("total")
    return sum(view[NUMBERS])


def _scaled_persist(where):
    return Persist("scaled/{model}", ("scaled/{model}.json",), kind="eval",
                   load=lambda v: json.loads(v.path("scaled", f"{v.model}.json").read_text()))


@provides(SCALED, needs=(TOTAL,), settings=lambda w: {"factor": w.info.factor}, persist=_scaled_persist,
          registry=TABLE)
def _scaled(view):
    BUILT.append(f"scaled/{view.model}")
    view.path("scaled").mkdir(exist_ok=True)
    view.path("scaled", f"{view.model}.json").write_text(json.dumps(view[TOTAL] * view.info.factor))


@provides(REPORT, needs=(SCALED, SCALED.of("reference"), OPTIONAL), registry=TABLE,
          persist=Persist("report/{model}", save=lambda value, v: v.path(f"report_{v.model}.txt").write_text(value),
                          load=lambda v: v.path(f"report_{v.model}.txt").read_text()))
def _report(view):
    ref = view[SCALED.of("reference")] if view.has(SCALED.of("reference")) else None
    return f"{view[SCALED]} vs {ref}"


@provides(OPTIONAL, when=lambda w: w.cfg.get("optional", False), empty=lambda: "none", registry=TABLE)
def _optional(view):
    return "here"


@dataclass
class Info:
    factor: int
    roles: dict = field(default_factory=dict)


class Store:
    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, *parts: str) -> Path:
        return self.root.joinpath(*parts)


MODELS = {"base": Info(1), "arm": Info(3, {"reference": "base"})}


def resolver(tmp_path, **cfg) -> Inputs:
    return Inputs({"n": 4, **cfg}, Store(tmp_path), models=MODELS, providers=TABLE)


def run(r: Inputs, tasks) -> None:
    for t in tasks:
        r.produce(t.input, t.model)


def test_the_plan_holds_every_persisted_instance_the_roots_need_after_what_it_reads(tmp_path):
    r = resolver(tmp_path)
    tasks = plan(r, [(REPORT, "arm"), (REPORT, "base")])
    assert [t.name for t in tasks] == ["numbers", "scaled/arm", "scaled/base", "report/arm", "report/base"]
    by = {t.name: t for t in tasks}
    # The sum is made in the process that reads it: the scaled tasks read the numbers' task through it.
    assert by["scaled/arm"].inputs == ("numbers",) and by["scaled/arm"].outputs == ("scaled/arm.json",)
    assert by["report/arm"].inputs == ("scaled/arm", "scaled/base") and by["report/base"].inputs == ("scaled/base",)
    assert by["scaled/arm"].kind == "eval"


def test_values_are_made_once_per_process_and_loaded_from_their_artefacts(tmp_path):
    BUILT.clear()
    r = resolver(tmp_path)
    run(r, plan(r, [(REPORT, "arm")]))
    assert r.get(REPORT, "arm") == "18 vs 6"
    fresh = resolver(tmp_path)  # another process: reads the artefacts, builds only what is not persisted
    BUILT.clear()
    assert fresh.get(REPORT, "arm") == "18 vs 6" and fresh.get(TOTAL) == 6 and fresh.get(TOTAL) == 6
    assert BUILT == ["total"]


def test_a_key_is_the_settings_with_the_keys_of_the_needs(tmp_path):
    a, b, c = resolver(tmp_path), resolver(tmp_path), resolver(tmp_path, n=5)
    assert a.key(REPORT, "arm") == b.key(REPORT, "arm")
    assert a.key(SCALED, "arm") != a.key(SCALED, "base")  # another factor
    assert c.key(NUMBERS) != a.key(NUMBERS) and c.key(REPORT, "arm") != a.key(REPORT, "arm")  # downstream too


def test_making_an_artefact_again_forgets_what_was_made_from_it(tmp_path):
    r = resolver(tmp_path)
    run(r, plan(r, [(SCALED, "arm")]))
    assert r.get(TOTAL) == 6
    r.cfg["n"] = 5
    r._settings.clear()
    r.produce(NUMBERS)
    assert r.get(TOTAL) == 10  # no hand-written invalidation


def test_a_reader_gets_only_what_it_declared(tmp_path):
    @provides(Input("t-sneaky"), needs=(NUMBERS,), registry=TABLE)
    def _sneaky(view):
        return view[TOTAL]

    r = resolver(tmp_path)
    run(r, plan(r, [(NUMBERS, None)]))
    with pytest.raises(KeyError, match="t-sneaky reads t-total but does not declare it"):
        r.get(next(k for k in TABLE if k.name == "t-sneaky"))


def test_where_an_input_does_not_exist_its_readers_see_its_empty_value_or_nothing(tmp_path):
    r = resolver(tmp_path)
    assert not r.available(OPTIONAL) and r.get(OPTIONAL) == "none"
    assert resolver(tmp_path, optional=True).get(OPTIONAL) == "here"
    assert not r.available(SCALED, "nobody")
    with pytest.raises(Unavailable):
        r.get(SCALED, "nobody")
    # The base model has no reference: the role resolves to nothing, and the reader checks.
    run(r, plan(r, [(REPORT, "base")]))
    assert r.get(REPORT, "base") == "6 vs None"


def test_fake_inputs_serve_given_values_and_make_the_rest_from_them():
    fake = FakeInputs({NUMBERS: [1, 2], SCALED: {"m": 7}}, providers=TABLE, model="m")
    view = fake.view([TOTAL, SCALED, NUMBERS])
    assert view[TOTAL] == 3 and view[SCALED] == 7 and view.has(NUMBERS)
    assert not FakeInputs({NUMBERS: []}, providers=TABLE).view().has(NUMBERS)  # present: a non-empty list
    assert not FakeInputs({}, providers=TABLE, model="m").view().has(SCALED)  # persisted and not given: absent
