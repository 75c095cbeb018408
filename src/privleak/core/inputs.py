"""Typed inputs, who provides each, and the one resolver per process.

Everything a stage of an audit reads besides the config is an *input*: a typed key (:class:`Input`) such as
the splits, the base model, one model's scoring pass or its shadow models. Whoever reads one names it in its
``needs`` (an attack, an arm kind, another provider) and gets its value from a :class:`View`; nobody fills a
context by hand. An input is made by its *provider*, registered once with :func:`provides` — the way Opacus
keeps its accountants in a dict registry by name — which says

* what the provider reads (``needs``: inputs, or :class:`Need` for another model's — ``SCORES.of("reference")``);
* what else determines its value (``settings``: a pydantic model, or anything JSON-able): its cache key is
  its settings' ``model_dump()`` with the keys of its needs (``key`` overrides the formula, so the stages of
  earlier versions keep theirs);
* whether it is *persisted* (:class:`Persist`): then it is one task of the audit's plan, whose artefacts lie in
  the run directory and whose inputs are the tasks of its needs; every process reads it back with ``load``.
  An input that is not persisted is made in the process that reads it, from its needs, once;
* where it exists (``when``; ``empty`` is its value where it does not).

:class:`Inputs` is the resolver: one per process, memoising by (input, model). It resolves needs recursively,
loads persisted artefacts, and forgets what it had made from an artefact when that artefact is made again, so
nothing is invalidated by hand. :func:`privleak.core.plan.plan` walks the needs of the roots an audit asks for
and returns its tasks; :class:`FakeInputs` is a resolver over given values, for tests.

A *model* names what a per-model input is of (``"base"``, an arm, an arm's extra training seed). Roles say
which model a need reads relative to the one asking: ``"self"``, ``"base"``, and whatever the model's
information names (``roles``: e.g. ``"reference"`` → ``"base"``, ``"source"`` → the arm a kind is made from).
This module knows no input, model or stage by name.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from .io import stable_hash

T = TypeVar("T")


class Input(Generic[T]):
    """A typed key. ``per_model``: its value is one per model (a model's scores), else one per audit (the
    splits). ``present``: whether a value counts as there for a reader that only runs when it is (an attack's
    ``needs``: the population is there when it has records); default: not None. ``follows``: a per-model input
    that a model with that role has in common with it (a served arm's samples are its source model's).
    ``drops_readers``: where it does not exist, an attack that needs it is left out of the audit altogether
    (not run, in no key) rather than skipped. Identity is the object: two inputs never share a name
    (:func:`register_input` checks)."""

    __slots__ = ("name", "doc", "per_model", "present", "follows", "drops_readers")

    def __init__(self, name: str, doc: str = "", *, per_model: bool = False,
                 present: Callable[[Any], bool] | None = None, follows: str | None = None,
                 drops_readers: bool = False) -> None:
        self.name = name
        self.doc = doc
        self.per_model = per_model
        self.present = present
        self.follows = follows
        self.drops_readers = drops_readers
        register_input(self)

    def of(self, role: str) -> Need:
        """This input of another model than the one asking: ``SCORES.of("reference")``."""
        return Need(self, role)

    def __repr__(self) -> str:
        return f"Input({self.name!r})"

    def __reduce__(self) -> tuple[Any, ...]:  # pickles by name: a worker process has the same registry
        return (input_named, (self.name,))


@dataclass(frozen=True)
class Need:
    """An input as a reader names it: of its own model (``role`` "self"), of the base model ("base"), or of
    the model its information names for ``role`` ("reference", "source")."""

    input: Input[Any]
    role: str = "self"

    def __repr__(self) -> str:
        return self.input.name if self.role == "self" else f"{self.input.name}.of({self.role!r})"


Needed = Input[Any] | Need


def as_need(x: Needed) -> Need:
    return x if isinstance(x, Need) else Need(x)


INPUTS: dict[str, Input[Any]] = {}
#: Name prefix → what makes the inputs of that prefix on first use (inputs there are as many of as the kinds
#: registered: a kind's own evaluation stages).
FACTORIES: dict[str, Callable[[str], Input[Any]]] = {}


def register_input(key: Input[Any]) -> None:
    other = INPUTS.get(key.name)
    if other is not None and other is not key:
        raise ValueError(f"input {key.name!r} is declared twice")
    INPUTS[key.name] = key


def input_factory(prefix: str) -> Callable[[Callable[[str], Input[Any]]], Callable[[str], Input[Any]]]:
    """Register ``make(name)`` for the inputs whose names start with ``prefix``; it is called once per name."""
    def register(make: Callable[[str], Input[Any]]) -> Callable[[str], Input[Any]]:
        def once(name: str) -> Input[Any]:
            return INPUTS[name] if name in INPUTS else make(name)
        FACTORIES[prefix] = once
        return once
    return register


def input_named(name: str) -> Input[Any]:
    if name not in INPUTS:
        for prefix, make in FACTORIES.items():
            if name.startswith(prefix):
                return make(name)
        raise KeyError(f"unknown input {name!r}; declared: {', '.join(sorted(INPUTS))}")
    return INPUTS[name]


# --------------------------------------------------------------------------- providers


@dataclass(frozen=True)
class Persist:
    """A persisted input: one task of the plan. ``task`` and ``outputs`` may hold ``{model}`` (or be functions
    of the :class:`Where`); ``load`` reads the artefact back in any process (None: the value is None — a reader
    that wants the files reads them); ``save`` writes what ``build`` returned (None: ``build`` writes its
    outputs itself). ``kind``, ``cost`` and ``wide`` are for the executors (``pipeline.graph.Task``)."""

    task: str | Callable[[Where], str]
    outputs: tuple[str, ...] | Callable[[Where], tuple[str, ...]] = ()
    load: Callable[[View], Any] | None = None
    save: Callable[[Any, View], None] | None = None
    kind: str = "light"
    cost: float | Callable[[Where], float] = 1.0
    wide: bool = False

    def task_name(self, where: Where) -> str:
        return self.task(where) if callable(self.task) else self.task.format(model=where.model)

    def output_paths(self, where: Where) -> tuple[str, ...]:
        out = self.outputs(where) if callable(self.outputs) else self.outputs
        return tuple(o.format(model=where.model) for o in out)

    def task_cost(self, where: Where) -> float:
        return float(self.cost(where) if callable(self.cost) else self.cost)


@dataclass(frozen=True)
class Provider:
    """How one input is made (see the module docstring). Register with :func:`provides`."""

    input: Input[Any]
    build: Callable[[View], Any]
    needs: Callable[[Where], Iterable[Needed]]
    settings: Callable[[Where], Any] | None = None
    persist: Persist | Callable[[Where], Persist | None] | None = None
    when: Callable[[Where], bool] | None = None
    key: Callable[[KeyParts], str] | None = None
    empty: Callable[[], Any] | None = None
    #: Keep the value for the process (False: a fresh one per reader — e.g. a model a reader may change).
    memo: bool = True
    #: Made from its needs alone (no config, no run directory): :class:`FakeInputs` derives it from what it is
    #: given.
    pure: bool = False

    def persisted(self, where: Where) -> Persist | None:
        return self.persist(where) if callable(self.persist) else self.persist


PROVIDERS: dict[Input[Any], Provider] = {}


def provides(key: Input[T], *, needs: Iterable[Needed] | Callable[[Where], Iterable[Needed]] = (),
             settings: Callable[[Where], Any] | None = None,
             persist: Persist | Callable[[Where], Persist | None] | None = None,
             when: Callable[[Where], bool] | None = None, key_formula: Callable[[KeyParts], str] | None = None,
             empty: Callable[[], Any] | None = None, memo: bool = True, pure: bool = False,
             registry: dict[Input[Any], Provider] | None = None) -> Callable[[Callable[[View], T]], Callable[[View], T]]:
    """Register the decorated function as ``key``'s provider (one per input; a plug-in's own input is one
    decorator in its module). ``registry``: another table than :data:`PROVIDERS` (a test's)."""
    fixed = tuple(needs) if not callable(needs) else None

    def register(build: Callable[[View], T]) -> Callable[[View], T]:
        table = PROVIDERS if registry is None else registry
        old = table.get(key)
        if old is not None and getattr(old.build, "__qualname__", None) != getattr(build, "__qualname__", None):
            raise ValueError(f"input {key.name!r} has a provider already ({old.build.__qualname__})")
        table[key] = Provider(key, build, (lambda where: fixed) if fixed is not None else needs,  # type: ignore[arg-type]
                              settings, persist, when, key_formula, empty, memo, pure)
        return build

    return register


def unprovide(key: Input[Any], registry: dict[Input[Any], Provider] | None = None) -> None:
    """Remove ``key``'s provider (a test's toy input cleans up with this)."""
    (PROVIDERS if registry is None else registry).pop(key, None)


# --------------------------------------------------------------------------- what a provider sees


class _OfModel:
    """What a reader of one model's inputs knows of it: the config and the model's information."""

    resolver: Inputs
    model: str | None

    @property
    def cfg(self) -> Any:
        return self.resolver.cfg

    @property
    def info(self) -> Any:
        return self.resolver.models.get(self.model) if self.model is not None else None


@dataclass
class Where(_OfModel):
    """Where an input is asked for: the config, the model (None for a per-audit input) and what the resolver
    knows about that model (``info``: the pipeline's model information). ``get`` reads another per-audit
    input now — for a plan whose shape depends on data (the members decide the DP recipe)."""

    resolver: Inputs
    input: Input[Any]
    model: str | None

    @property
    def models(self) -> Mapping[str, Any]:
        return self.resolver.models

    def get(self, need: Needed) -> Any:
        return self.resolver.get_need(as_need(need), self.model)

    def has(self, need: Needed) -> bool:
        return self.resolver.has_need(as_need(need), self.model)

    def available(self, need: Needed) -> bool:
        return self.resolver.resolve(as_need(need), self.model) is not None

    @property
    def settings(self) -> Any:
        return self.resolver.settings(self.input, self.model)


@dataclass
class KeyParts(Where):
    """What a key formula reads: the :class:`Where`, the settings, and the key of any need."""

    def key(self, need: Needed) -> str | None:
        inst = self.resolver.resolve(as_need(need), self.model)
        return None if inst is None else self.resolver.key(*inst)


class Unavailable(LookupError):
    """An input asked for where it does not exist (and has no ``empty`` value)."""


class View(_OfModel):
    """One reader's access to its inputs: ``view[NEED]`` is the value of a need it declared (a ``KeyError``
    names the undeclared one), ``view.has(NEED)`` whether it is there (available and present). ``needs`` None:
    any input (the pipeline's own readers)."""

    def __init__(self, resolver: Inputs, model: str | None, needs: Iterable[Needed] | None = None,
                 reader: str = "", on_read: Callable[[tuple[Input[Any], str | None]], None] | None = None) -> None:
        self.resolver = resolver
        self.model = model
        self._needs = None if needs is None else {as_need(n) for n in needs}
        self._reader = reader
        self._on_read = on_read

    def _check(self, need: Need) -> None:
        if self._needs is not None and need not in self._needs and Need(need.input) not in self._needs:
            raise KeyError(f"{self._reader or 'this reader'} reads {need!r} but does not declare it in its needs "
                           f"({', '.join(sorted(map(repr, self._needs))) or 'none'})")

    def __getitem__(self, need: Needed) -> Any:
        n = as_need(need)
        self._check(n)
        inst = self.resolver.resolve(n, self.model)
        if inst is not None and self._on_read is not None:
            self._on_read(inst)
        return self.resolver.get_need(n, self.model)

    def get(self, need: Needed, default: Any = None) -> Any:
        """The value, or ``default`` where the need is not there."""
        return self[need] if self.has(need) else default

    def has(self, need: Needed) -> bool:
        n = as_need(need)
        self._check(n)
        return self.resolver.has_need(n, self.model)

    def key(self, need: Needed) -> str | None:
        inst = self.resolver.resolve(as_need(need), self.model)
        return None if inst is None else self.resolver.key(*inst)

    def path(self, *parts: str) -> Path:
        """A path in the run directory."""
        return self.resolver.store.path(*parts)



# --------------------------------------------------------------------------- the resolver


class Inputs:
    """The resolver: one per process (see the module docstring). ``store`` has ``path(*parts)`` (the run
    directory); ``models``: model name → its information (what roles and providers read); ``keys``: keys the
    caller fixes — a worker gets the driver's, and a caller that makes an input its own way (``privleak
    attack``'s data stage) fixes that input's key; ``absent``: inputs the caller says do not exist here."""

    def __init__(self, cfg: Any, store: Any, *, models: Mapping[str, Any] | None = None,
                 providers: Mapping[Input[Any], Provider] | None = None,
                 keys: Mapping[tuple[str, str | None], str] | None = None,
                 absent: Iterable[tuple[str, str | None]] = ()) -> None:
        self.cfg = cfg
        self.store = store
        self.models: dict[str, Any] = dict(models or {})
        self.providers = PROVIDERS if providers is None else providers
        self._fixed: dict[tuple[str, str | None], str] = dict(keys or {})
        self._absent = set(absent)
        self._values: dict[tuple[Input[Any], str | None], Any] = {}
        self._keys: dict[tuple[Input[Any], str | None], str] = {}
        self._settings: dict[tuple[Input[Any], str | None], Any] = {}
        self._reads: dict[tuple[Input[Any], str | None], set[tuple[Input[Any], str | None]]] = {}

    # ------------------------------------------------------------------ instances

    def instance(self, key: Input[Any], model: str | None) -> tuple[Input[Any], str | None]:
        """The (input, model) a value is kept under: no model for a per-audit input; a model with the role
        the input ``follows`` has it in common with that model."""
        if not key.per_model:
            return key, None
        while key.follows is not None and model is not None:
            info = self.models.get(model)
            nxt = _role(info, key.follows)
            if nxt is None:
                break
            model = nxt
        return key, model

    def resolve(self, need: Need, model: str | None) -> tuple[Input[Any], str | None] | None:
        """The instance ``need`` names when ``model`` reads it, or None where it does not exist."""
        if need.input.per_model:
            if need.role == "self":
                target = model
            elif need.role == "base":
                target = "base" if "base" in self.models else None
            else:
                target = _role(self.models.get(model) if model is not None else None, need.role)
            if target is None:
                return None
            inst = self.instance(need.input, target)
        else:
            inst = (need.input, None)
        return inst if self.available(*inst) else None

    def provider(self, key: Input[Any]) -> Provider:
        try:
            return self.providers[key]
        except KeyError:
            raise Unavailable(f"no provider for input {key.name!r}") from None

    def where(self, key: Input[Any], model: str | None) -> Where:
        return Where(self, key, model)

    def available(self, key: Input[Any], model: str | None = None) -> bool:
        """Whether the instance exists in this audit (registered, not absent, its ``when`` holds, and a
        per-model input's model is known)."""
        key, model = self.instance(key, model)
        if (key.name, model) in self._absent or key not in self.providers:
            return False
        if key.per_model and model not in self.models:
            return False
        p = self.providers[key]
        return p.when is None or bool(p.when(self.where(key, model)))

    # ------------------------------------------------------------------ values

    def get(self, key: Input[T], model: str | None = None) -> T:
        inst = self.instance(key, model)
        if inst in self._values:
            return self._values[inst]
        p = self.providers.get(inst[0])
        if not self.available(*inst):
            if p is not None and p.empty is not None:
                return p.empty()
            raise Unavailable(f"input {inst[0].name!r}" + (f" of {inst[1]!r}" if inst[1] else "") + " does not "
                              "exist in this audit")
        assert p is not None
        where = self.where(*inst)
        reads: set[tuple[Input[Any], str | None]] = set()
        view = View(self, inst[1], None, on_read=reads.add)
        persist = p.persisted(where)
        if persist is not None:
            value = persist.load(view) if persist.load is not None else None
        else:
            value = p.build(View(self, inst[1], p.needs(where), inst[0].name, reads.add))
        self._reads[inst] = reads
        if p.memo:
            self._values[inst] = value
        return value

    def get_need(self, need: Need, model: str | None) -> Any:
        inst = self.resolve(need, model)
        if inst is None:
            p = self.providers.get(need.input)
            if p is not None and p.empty is not None:
                return p.empty()
            raise Unavailable(f"{need!r} does not exist for {model!r}")
        return self.get(*inst)

    def has_need(self, need: Need, model: str | None) -> bool:
        """Available and present (the input's ``present`` test on its value; default: not None)."""
        inst = self.resolve(need, model)
        if inst is None:
            return False
        present = inst[0].present
        value = self.get(*inst)
        return bool(present(value)) if present is not None else value is not None

    def produce(self, key: Input[Any], model: str | None = None) -> None:
        """A persisted instance's task body: build it (and save what it returned), then forget every value
        this process had made from its artefact."""
        inst = self.instance(key, model)
        p = self.provider(inst[0])
        where = self.where(*inst)
        persist = p.persisted(where)
        if persist is None:
            raise ValueError(f"input {inst[0].name!r} is not persisted: it has no task")
        view = View(self, inst[1], p.needs(where), inst[0].name)
        value = p.build(view)
        if persist.save is not None:
            persist.save(value, view)
        self.forget(inst)

    def forget(self, inst: tuple[Input[Any], str | None]) -> None:
        """Drop ``inst``'s value and every value made from it (transitively)."""
        stale = {inst}
        changed = True
        while changed:
            changed = False
            for other, reads in self._reads.items():
                if other not in stale and reads & stale:
                    stale.add(other)
                    changed = True
        for s in stale:
            self._values.pop(s, None)
            self._reads.pop(s, None)

    def put(self, key: Input[T], value: T, model: str | None = None) -> None:
        """Set a value (a caller that has it already)."""
        self._values[self.instance(key, model)] = value

    # ------------------------------------------------------------------ settings and keys

    def settings(self, key: Input[Any], model: str | None = None) -> Any:
        inst = self.instance(key, model)
        if inst not in self._settings:
            p = self.provider(inst[0])
            self._settings[inst] = p.settings(self.where(*inst)) if p.settings is not None else None
        return self._settings[inst]

    def needs_of(self, key: Input[Any], model: str | None = None) -> list[tuple[Input[Any], str | None]]:
        """The instances an instance's provider reads (those that exist here), in declared order, once each."""
        inst = self.instance(key, model)
        p = self.provider(inst[0])
        out: list[tuple[Input[Any], str | None]] = []
        for n in p.needs(self.where(*inst)):
            r = self.resolve(as_need(n), inst[1])
            if r is not None and r not in out:
                out.append(r)
        return out

    def key(self, key: Input[Any], model: str | None = None) -> str:
        """The instance's cache key: its provider's formula, else its settings' dump with its needs' keys."""
        inst = self.instance(key, model)
        fixed = self._fixed.get((inst[0].name, inst[1]))
        if fixed is not None:
            return fixed
        if inst not in self._keys:
            p = self.provider(inst[0])
            if p.key is not None:
                self._keys[inst] = p.key(KeyParts(self, *inst))
            else:
                needs = [[i.name, m, self.key(i, m)] for i, m in self.needs_of(*inst)]
                self._keys[inst] = stable_hash(inst[0].name, inst[1], dump(self.settings(*inst)), needs)
        return self._keys[inst]

    def fix(self, key: Input[Any], model: str | None = None, *, value: str | None = None, absent: bool = False) -> None:
        """Fix an instance's key (``value``) or say it does not exist here (``absent``)."""
        inst = self.instance(key, model)
        if absent:
            self._absent.add((inst[0].name, inst[1]))
        if value is not None:
            self._fixed[(inst[0].name, inst[1])] = value

    def adopt(self, models: Mapping[str, Any], keys: Mapping[tuple[str, str | None], str],
              absent: Iterable[tuple[str, str | None]] = ()) -> None:
        """Take another resolver's models, keys and absent inputs (a worker takes its driver's plan)."""
        self.models.update(models)
        for k, v in keys.items():
            self._fixed.setdefault(k, v)
        self._absent.update(absent)

    def fixed_keys(self) -> dict[tuple[str, str | None], str]:
        """Every key computed or fixed so far, by (input name, model): what a worker is handed."""
        out = {(i.name, m): k for (i, m), k in self._keys.items()}
        out.update(self._fixed)
        return out

    def absent(self) -> set[tuple[str, str | None]]:
        return set(self._absent)


def _role(info: Any, role: str) -> str | None:
    roles = getattr(info, "roles", None) or {}
    return roles.get(role)


def dump(settings: Any) -> Any:
    """Settings as JSON-able data: a pydantic model's ``model_dump(mode="json")``, a dataclass's fields."""
    if settings is None:
        return None
    dumper = getattr(settings, "model_dump", None)
    if dumper is not None:
        return dumper(mode="json")
    return json.loads(json.dumps(settings, default=str))


# --------------------------------------------------------------------------- tests


class FakeInputs(Inputs):
    """A resolver over given values (tests): ``FakeInputs({SPLITS: …, SCORES: {"target": …}}, model=…)``. A
    per-model input takes a dict model → value. What is not given is made by its registered provider from
    what is where that provider is ``pure`` (the masker from the splits); any other is not there (its
    ``empty`` value where it has one). ``view()`` is the model's :class:`View`."""

    def __init__(self, values: Mapping[Input[Any], Any], *, cfg: Any = None, store: Any = None,
                 models: Mapping[str, Any] | None = None, providers: Mapping[Input[Any], Provider] | None = None,
                 model: str | None = None) -> None:
        given: dict[Input[Any], Provider] = {}
        table = dict(PROVIDERS if providers is None else providers)
        for key, value in values.items():
            table[key] = given[key] = _given(key, value)
        names = set(models or {})
        for key, value in values.items():
            if key.per_model and isinstance(value, Mapping):
                names.update(value)
        if model is not None:
            names.add(model)
        infos = {m: (models or {}).get(m, _Info()) for m in names}
        super().__init__(cfg, store if store is not None else _NoStore(), models=infos, providers=table)
        self._given = given
        self.model = model
        for key, p in table.items():  # neither given nor made from what is: not there
            if key not in given and not p.pure:
                self._absent.update((key.name, m) for m in [None, *names])

    def view(self, needs: Iterable[Needed] | None = None) -> View:
        return View(self, self.model, needs)


@dataclass
class _Info:
    roles: dict[str, str] = field(default_factory=dict)


class _NoStore:
    def path(self, *parts: str) -> Path:
        raise FileNotFoundError("FakeInputs has no run directory")


def _given(key: Input[Any], value: Any) -> Provider:
    if key.per_model and isinstance(value, Mapping):
        table = dict(value)
        return Provider(key, lambda view: table[view.model], lambda where: (),
                        when=lambda where: where.model in table)
    return Provider(key, lambda view: value, lambda where: ())

