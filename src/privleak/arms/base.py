"""What an arm kind is: how its arms are named and built (:class:`ArmKind`), judged and shown.

An *arm* is one model the audit builds and attacks (``dp-8+scrub``); its
*kind* (``dp``) is the recipe. A kind is a subclass of :class:`ArmKind`
registered with :func:`privleak.arms.registry.register` — one module and one
line. Everything else learns about it through the registry: the pipeline
asks it for its settings (the cache key), how to fit or derive its model and
whether attacks run on it directly or through a wrapper; ``results.json``
carries its :attr:`ArmKind.Details` block (validated by the generated
schema); the verdicts read its :class:`ArmJudging` and the report its
:class:`ArmPresentation` (registered beside it: :func:`judging`,
:func:`presentation`). None of them names a kind.

How a kind gets its model (:attr:`ArmKind.model`):

* ``trained`` — fitted on the members from the base model (:meth:`ArmKind.fit`);
* ``derived`` — made from another arm's trained model (:attr:`ArmKind.source`,
  :meth:`ArmKind.derive`); its shadows are fitted from scratch with :meth:`fit`;
* ``served`` — no model of its own: the source arm's model behind a wrapper
  (:meth:`ArmKind.serve`), attacked by the attacks that read text only;
* ``provided`` — a model the user trained (``privleak attack``): nothing to build.
"""

from __future__ import annotations

import math

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, model_serializer

from ..core.inputs import Needed, View
from ..core.present import Block, Cell, Section, Table
from ..core.typed import ArmDetails

if TYPE_CHECKING:
    from ..attacks.base import AttackContext
    from ..config import AuditConfig
    from ..data.records import Record
    from ..models.batching import Encoded
    from ..models.handle import ModelHandle
    from ..results import ArmResult, AuditResults, Verdict

ModelSource = Literal["trained", "derived", "served", "provided"]


class KindSettings(BaseModel):
    """Everything that determines an arm's model, typed — what its kind's ``fit`` / ``derive`` read and, dumped,
    its stage's cache key and the ``settings`` of its train.json. A kind subclasses it with its fields; the
    fields of :attr:`omitted` are left out of the dump while None (they came after runs were keyed without
    them, and those runs keep their keys)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    omitted: ClassVar[frozenset[str]] = frozenset()

    kind: str
    #: bf16 autocast changes the trained weights, so it is part of the key (the pipeline sets it); fp32 adds
    #: nothing, and those keys are what they always were.
    precision: Literal["bf16"] | None = None

    @model_serializer(mode="wrap")
    def _without_unset(self, handler: Any) -> Any:
        out = handler(self)
        if not isinstance(out, dict):
            return out
        for name in self.omitted:
            if out.get(name, 0) is None:
                del out[name]
        precision = out.pop("precision", None)  # last, where the pipeline has always added it
        if precision is not None:
            out["precision"] = precision
        return out

    def key(self) -> dict[str, Any]:
        """The settings as JSON (the cache key's and train.json's)."""
        return self.model_dump(mode="json")


#: A kind's settings: its :class:`KindSettings` (a plug-in kind may still return a JSON-able dict).
Settings = KindSettings | dict[str, Any]


def settings_key(settings: Settings) -> dict[str, Any]:
    """The settings as JSON: a typed kind's dump, a plug-in's dict as it is."""
    return settings.key() if isinstance(settings, KindSettings) else dict(settings)


def with_settings(settings: Settings, **update: Any) -> Settings:
    """The settings with some fields set (the pipeline's training precision, an extra training seed)."""
    return settings.model_copy(update=update) if isinstance(settings, KindSettings) else {**settings, **update}


@dataclass(frozen=True)
class BuildContext:
    """What building one model reads besides its settings: the run's config (and seed), a label for progress,
    and the inputs the kind declares in :attr:`ArmKind.needs` (``ctx[PUBLIC]``, ``ctx[FORGET_SET]``,
    ``ctx[MODEL.of("source")]`` …; keys in :mod:`privleak.attacks.inputs` and :mod:`privleak.arms.inputs`).
    :meth:`ArmKind.prepare` and :meth:`ArmKind.derive` get one; :meth:`ArmKind.fit` gets a :class:`FitContext`."""

    cfg: AuditConfig
    label: str
    inputs: View

    def __getitem__(self, need: Needed) -> Any:
        return self.inputs[need]

    def has(self, need: Needed) -> bool:
        return self.inputs.has(need)

    @property
    def seed(self) -> int:
        return self.cfg.seed

    @property
    def max_length(self) -> int:
        return self.cfg.model.max_length


@dataclass(frozen=True)
class FitContext(BuildContext):
    """What fitting one model reads: a :class:`BuildContext` and the records it trains on (after
    :meth:`ArmKind.prepare`), encoded (``data``, in the order of ``records``) with the tokenizer's ``pad``."""

    data: Encoded
    records: list[Record]
    pad: int


#: A derived kind's context is a build context: its source arm's model is ``ctx[MODEL.of("source")]`` (a fresh
#: copy), its train.json ``ctx[TRAINING.of("source")]``, its records ``ctx[TRAINING_RECORDS.of("source")]``.
DeriveContext = BuildContext


@dataclass
class Served:
    """A served arm's view of its source model: ``target`` is what the attacks query; ``finish()`` returns what
    the wrapper did (written with the attack stage) once the attacks are done."""

    target: Any
    finish: Callable[[], dict[str, Any]] = lambda: {}
    on_start: Callable[[str], None] | None = None


@dataclass(frozen=True)
class ExtraStage:
    """An evaluation stage a kind adds for its arms (e.g. the guard's cost on benign output): ``run(handle, ctx)``
    returns a JSON-able dict written to ``arms/<arm>/<file>`` and handed back to :meth:`ArmKind.result`.
    ``needs``: the inputs ``ctx`` holds besides every attack's (``attacks.base.COMMON``)."""

    name: str
    file: str
    run: Callable[[Any, AttackContext], dict[str, Any]]
    needs: tuple[Needed, ...] = ()


@dataclass
class ArmInputs:
    """What assembling one arm's results reads: its train.json (trained and derived kinds), its extra stages'
    outputs, the data-defence reports, the results of the arms assembled before it (its :attr:`ArmKind.source` and
    :attr:`ArmKind.after` arms among them) and the control's."""

    record: dict[str, Any] | None
    extra: dict[str, dict[str, Any]] = field(default_factory=dict)
    assembled: dict[str, ArmResult] = field(default_factory=dict)
    control: ArmResult | None = None  # the base model's results (None: no control)


class ArmKind:
    """One kind of arm. Subclass it, set the class attributes, override the hooks you need, and register it."""

    #: The registry key, the ``kind`` of its arms in ``results.json`` and the first part of its arm names.
    name: ClassVar[str]
    #: The name part's parameter ("ε", "σ") — e.g. ``dp-8`` — or None (``baseline``).
    param: ClassVar[str | None] = None
    #: The parameter's range [low, high] (and always > 0 and finite), checked when the name is parsed, before
    #: any work: the same bounds as the config fields that set it (``dp.epsilons``, ``dp_weights.sigmas``).
    param_range: ClassVar[tuple[float, float]] = (0.0, math.inf)
    #: An arm name to show in error messages (``dp-8``).
    example: ClassVar[str] = ""
    #: One line for the help and the docs.
    summary: ClassVar[str] = ""
    #: Its name stands alone: no data defences (``+scrub``) or modifiers.
    alone: ClassVar[bool] = True
    #: Name parts that modify this kind (``lora`` for ``dp``).
    modifiers: ClassVar[tuple[str, ...]] = ()
    model: ClassVar[ModelSource] = "trained"
    #: It makes an (ε, δ)-DP claim (its δ is the audit's --delta).
    private: ClassVar[bool] = False
    #: derived / served kinds: the arm whose model they start from (it must be in the audit).
    source: ClassVar[str | None] = None
    #: It trains over the records' clients (federated): the data then has clients for client-level figures.
    uses_clients: ClassVar[bool] = False
    #: Whether LiRA/RMIA shadows can be trained like it.
    shadows: ClassVar[bool] = True
    #: Arms of this kind are always named this (the one external model of ``privleak attack``: "target").
    fixed_name: ClassVar[str | None] = None
    #: Its block in ``results.json`` (``ArmResult.details``), or None.
    Details: ClassVar[type[ArmDetails] | None] = None
    #: Settings a plug-in kind reads from the config's ``arm_options.<name>`` (built-in kinds read their own section).
    Options: ClassVar[type[BaseModel] | None] = None
    #: The inputs its ``prepare``, ``fit``, ``derive`` and ``serve`` read (keys of :mod:`privleak.attacks.inputs`,
    #: :mod:`privleak.arms.inputs` or a plug-in's own): the audit's plan makes them first. ``FORGET_SET`` among
    #: them: the audit draws a forget set, and the forget-set attacks run on every model.
    needs: ClassVar[tuple[Needed, ...]] = ()
    #: Arms (by name) whose results its :meth:`result` reads besides its source: they are assembled first.
    after: ClassVar[tuple[str, ...]] = ()

    # ------------------------------------------------------------------ building the model

    def settings(self, cfg: AuditConfig, spec: ArmSpec, n_members: int) -> Settings:
        """Everything that determines this arm's model (a :class:`KindSettings` of the kind's own): its stage's
        cache key and what its fit reads."""
        raise NotImplementedError(f"arm kind {self.name!r} does not say its settings")

    def check(self, cfg: AuditConfig, spec: ArmSpec, names: list[str]) -> None:
        """Refuse (``ValueError`` with the fix) what this arm cannot run with, before any work."""

    def check_audit(self, cfg: AuditConfig, specs: list[ArmSpec]) -> None:
        """Refuse config settings of this kind that name arms the audit does not have (called for every
        registered kind, whether or not the audit has one of its arms)."""

    def prepare(self, records: list[Record], settings: Any, ctx: BuildContext) -> list[Record]:
        """The records to train on, from the (defended) members: e.g. public text rehearsed beside them."""
        return records

    def fit(self, model: Any, settings: Any, ctx: FitContext) -> tuple[Any, dict[str, Any]]:
        """Fit ``model`` (a fresh copy of the base) on ``ctx.data``: (model, training record). The record holds
        ``kind``, ``steps``, ``epoch_losses``, ``privacy`` (None or the Privacy fields), ``epochs_run`` (data passes,
        for the token count) and anything :meth:`details` reads."""
        raise NotImplementedError(f"arm kind {self.name!r} does not fit models")

    def derive(self, settings: Any, ctx: BuildContext) -> tuple[Any, dict[str, Any]]:
        """A derived kind's model from its source arm's: (model, training record)."""
        raise NotImplementedError(f"arm kind {self.name!r} does not derive models")

    # ------------------------------------------------------------------ evaluation

    def serve(self, handle: ModelHandle, ctx: AttackContext) -> Served:
        """A served kind: the source model as the attacks see it."""
        raise NotImplementedError(f"arm kind {self.name!r} serves no model")

    def extra_stages(self) -> list[ExtraStage]:
        """Evaluation stages of its own, beside the attack families."""
        return []

    # ------------------------------------------------------------------ results

    def details(self, inputs: ArmInputs) -> ArmDetails | None:
        """Its block in ``results.json``, from its training record and extra stages (None: no block)."""
        return None

    def result(self, name: str, inputs: ArmInputs, common: dict[str, Any]) -> ArmResult:
        """The arm's results: ``common`` holds what every arm has (utility, attacks, bounds, defences)."""
        from ..results import ArmResult, Privacy, Training

        tr = inputs.record or {}
        training = None
        if tr:
            training = Training(steps=tr["steps"], epoch_losses=tr["epoch_losses"], settings=tr["settings"],
                                tokens=tr.get("tokens"), stopped_epoch=tr.get("stopped_epoch"),
                                rehearsal_records=tr.get("rehearsal_records") or None)
        privacy = Privacy.model_validate(tr["privacy"]) if tr.get("privacy") else None
        return ArmResult(kind=self.name, training=training, n_train_records=tr.get("n_train_records"), privacy=privacy,
                         details=self.details(inputs), **common)


class ArmJudging:
    """How a kind's arms are judged: what the verdicts and the recommendation (:mod:`privleak.audit`) read
    about a kind. A kind registers one (``register(kind, judging=...)``); this default judges its arms by the
    attacks like every arm's."""

    #: Can be recommended for release (a guard is judged by what it stops; an external model is not a choice).
    recommendable: bool = True
    #: Compared with the stress test in the between-arm tests and drawn in the trade-off plot.
    compared: bool = True
    #: The memorisation stress test every other arm is compared with (one kind: ``baseline``).
    stress_test: bool = False
    #: Its held-out loss is the L_best of every arm's utility gain recovered G (one kind: ``best``).
    utility_reference: bool = False

    def verdict(self, name: str, arm: ArmResult, results: AuditResults) -> Verdict | None:
        """Its own verdict (None: judged by the attacks like every arm)."""
        return None

    def warnings(self, name: str, arm: ArmResult) -> list[str]:
        """Warnings about this arm the audit prints (e.g. a setting under which it cannot learn)."""
        return []


class ArmPresentation:
    """How a kind's arms are shown: what the wording of a verdict, the console and the report (:mod:`privleak.report`)
    read about a kind. A kind registers one (``register(kind, presentation=...)``); this default shows nothing
    of its own."""

    #: Marker in the trade-off plot, and what a marker other than "o" means (the plot's caption).
    marker: str = "o"
    marker_note: str = ""
    #: The unit its ε is stated per when it is not the record (federated arms: "client"): such an arm is drawn
    #: apart from the central DP arms' sweep.
    epsilon_unit: str | None = None

    def guarantee(self, arm: ArmResult) -> str | None:
        """What it guarantees when it has no accountant ε, in words (None: nothing to say)."""
        return None

    def figures(self, arm: ArmResult) -> list[str]:
        """Extra figure lines for its verdict."""
        return []

    def remark(self, arm: ArmResult) -> str:
        """A sentence appended to its verdict (e.g. what the arm is for)."""
        return ""

    def sigma_value(self, arm: ArmResult) -> float | None:
        """The σ the console's privacy table shows when the arm has no privacy block (None: none)."""
        return None

    def epsilon_cell(self, arm: ArmResult) -> Cell | None:
        """The arms table's "ε accountant" cell (None: the privacy block's ε, or "∞ (no DP)")."""
        return None

    def sigma_cell(self, arm: ArmResult) -> Cell | None:
        """The arms table's "σ" cell (None: the privacy block's σ)."""
        return None

    def notes(self, arms: dict[str, ArmResult]) -> list[Block]:
        """Paragraphs about this kind's arms under the trade-off plot."""
        return []

    def sections(self, results: AuditResults) -> list[Section]:
        """Report sections of its own."""
        return []

    def console_tables(self, results: AuditResults) -> list[Table]:
        """Console tables of its own."""
        return []


# --------------------------------------------------------------------------- the registry's table and an arm's spec
# Here rather than in registry.py, which fills the table: an ArmKind's hooks take ArmSpecs and an ArmSpec's name
# reads its kind, so the two types live in one module and the registry imports this one only.

#: Data defences an arm name may combine with a kind that is not ``alone``, in canonical order.
DATA_DEFENCES: tuple[str, ...] = ("dedup", "scrub")
#: The kind of an arm named by its data defences alone (``scrub``, ``dedup+scrub``): the deployable recipe
#: (``best``: rehearsal, early stopping) on the defended members, so a data defence is compared with what
#: one would deploy without it, not with the memorisation stress test (issue 26).
DATA_ONLY_KIND = "best"

KINDS: dict[str, ArmKind] = {}
#: Each registered kind's judging and presentation, by kind name (:func:`judging`, :func:`presentation`).
JUDGING: dict[str, ArmJudging] = {}
PRESENTATION: dict[str, ArmPresentation] = {}
_NEUTRAL_JUDGING, _NEUTRAL_PRESENTATION = ArmJudging(), ArmPresentation()


def judging(kind: str | None) -> ArmJudging:
    """How arms of ``kind`` are judged (the default for a kind with no judging of its own, or none)."""
    return JUDGING.get(kind or "", _NEUTRAL_JUDGING)


def presentation(kind: str | None) -> ArmPresentation:
    """How arms of ``kind`` are shown (the default for a kind with no presentation of its own, or none)."""
    return PRESENTATION.get(kind or "", _NEUTRAL_PRESENTATION)


def get(name: str) -> ArmKind:
    try:
        return KINDS[name]
    except KeyError:
        raise ValueError(f"unknown arm kind {name!r}; known: {', '.join(KINDS)}") from None


@dataclass(frozen=True)
class ArmSpec:
    """One arm: its kind, the kind's parameter (ε, σ), modifiers and data defences."""

    kind: str
    param: float | None = None
    modifiers: frozenset[str] = frozenset()
    data: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        k = get(self.kind)
        if k.fixed_name is not None:
            return k.fixed_name
        parts = []
        if not (self.kind == DATA_ONLY_KIND and self.data):
            parts.append(k.name if self.param is None else f"{k.name}-{self.param:g}")
        parts += [m for m in k.modifiers if m in self.modifiers]
        parts += [d for d in DATA_DEFENCES if d in self.data]
        return "+".join(parts)

    @property
    def kind_obj(self) -> ArmKind:
        return get(self.kind)

    def has(self, part: str) -> bool:
        """Whether the arm has this data defence or modifier."""
        return part in self.data or part in self.modifiers
