"""What the stages of one run share: the config, the run directory, the models and the process's resolver.

:class:`ModelInfo` is what the audit knows about each model it builds or evaluates — the base model, every
arm, each arm's extra training seeds and shadow models, ``privleak attack``'s target — and the roles that
name the other models an input of it reads (``reference``, ``source``, ``serves``). :class:`Audit` holds
the process's one :class:`~privleak.core.inputs.Inputs` resolver over them: every value a stage reads is
an input, made or loaded once per process (a worker process that rebuilds the Audit makes the same).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Literal

from ..core.inputs import Inputs
from .rundir import RunDir, Timer

if TYPE_CHECKING:
    from ..arms import ArmSpec
    from ..config import AuditConfig

SPLITS = ("public", "public_heldout", "members", "non_members", "population")

#: How a model of the audit comes about: the base model; an arm's kind's ``trained`` / ``derived`` /
#: ``served`` / ``provided`` model; an arm's recipe on an extra training ``seed``; a ``shadow`` trained like it.
Origin = Literal["base", "trained", "derived", "served", "provided", "seed", "shadow"]


def train_precision(cfg: AuditConfig) -> str:
    """The precision this run trains in: fp32 when the config says so (read without torch: a plan is made
    before any model loads), else the policy in effect (``run_audit`` and every worker set ``cfg``'s)."""
    return _resolved(cfg, "train_precision")


def eval_precision(cfg: AuditConfig) -> str:
    """The precision this run scores, samples and attacks in, read as :func:`train_precision` reads training's."""
    return _resolved(cfg, "precision")


def _resolved(cfg: AuditConfig, field: str) -> str:
    if cfg.compute.precision == "fp32":
        return "fp32"
    from ..models.device import current as current_policy

    return getattr(current_policy(), field)


def evaluated_key(key: str, cfg: AuditConfig) -> str:
    """A model's key as its evaluation stages read it: ``key`` itself in fp32 (every key before ``native``
    existed), marked when the run evaluates in bf16, so a run directory never mixes fp32 and bf16 scores,
    samples or attacks of one model (a resume with another precision or device redoes them). On a CPU the mark
    names the bf16 weights evaluation runs on there (:func:`~privleak.models.device.evaluation_model`), so a run
    directory scored under autocast before them redoes its evaluation."""
    from ..core.io import stable_hash

    if eval_precision(cfg) == "fp32":
        return key
    from ..models.device import current as current_policy
    from ..models.device import evaluates_on_bf16_copy

    return stable_hash(key, "eval-bf16-weights" if evaluates_on_bf16_copy(current_policy().device) else "eval-bf16")


@dataclass(frozen=True)
class ModelInfo:
    """A model of the audit. ``roles``: the models its inputs may read by role — ``reference`` (the base
    model, for every model but the base itself), ``source`` (the arm a derived or served kind starts from),
    ``serves`` (a served arm's source: the model behind its wrapper), ``arm`` (a seed's or shadow's arm)."""

    name: str
    origin: Origin
    spec: ArmSpec | None = None  # the arm (of a seed or a shadow: its arm's)
    roles: dict[str, str] = field(default_factory=dict)
    #: Attacked and measured (False: an extra seed, measured for utility only; a shadow).
    evaluated: bool = True
    k: int | None = None  # an extra seed's number (1, 2, …) or a shadow's index (0, 1, …)
    model_dir: str | None = None  # a provided model: where it is (None: where this run put it)
    adapter_base: str | None = None  # a provided PEFT adapter: its base model

    @property
    def kind(self) -> str | None:
        return self.spec.kind if self.spec is not None else None

    @property
    def reference(self) -> bool:
        return "reference" in self.roles

    @property
    def serves(self) -> str | None:
        return self.roles.get("serves")


@dataclass
class Audit:
    """One run in progress: the config, the run directory, the progress callback, the warnings and the
    process's resolver (``inputs``; :meth:`adopt` gives it the plan's models and keys)."""

    cfg: AuditConfig
    run: RunDir
    notify: Callable[[str], None]
    warnings: list[str] = field(default_factory=list)
    inputs: Inputs = field(init=False)

    def __post_init__(self) -> None:
        self.inputs = Inputs(self.cfg, self.run)

    def adopt(self, scope: Scope) -> Inputs:
        """The resolver, with ``scope``'s models, fixed keys and absent inputs (a worker gets the driver's)."""
        self.inputs.adopt(scope.models, scope.keys, scope.absent)
        return self.inputs

    def text_format(self) -> str:
        """How every model of this run is scored and prompted (models.batching): the run's own arms in PrivLeak's
        format; ``privleak attack`` resolves ``auto`` before the run starts."""
        fmt = self.cfg.model.text_format
        return "privleak" if fmt == "auto" else fmt

    def stage(self, name: str, key: str, body: Callable[[], None]) -> None:
        """Run ``body`` unless the stage is done with the same key; mark it done after."""
        if self.run.done(name, key):
            self.notify(f"[dim]✓ {name} (cached)[/dim]")
            return
        self.notify(f"▶ {name}")
        with Timer() as t:
            body()
        self.run.mark(name, key, t.elapsed)
        self.notify(f"[green]✓ {name}[/green] ({t.elapsed:.1f} s)")

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)
        self.notify(f"[yellow]warning:[/yellow] {message}")


@dataclass(frozen=True)
class Scope:
    """What a task hands the process that runs it besides the config: the models, the keys of the driver's
    plan and the inputs it said do not exist (so a worker resolves exactly as the driver planned)."""

    models: dict[str, ModelInfo] = field(default_factory=dict)
    keys: dict[tuple[str, str | None], str] = field(default_factory=dict)
    absent: frozenset[tuple[str, str | None]] = frozenset()

    @classmethod
    def of(cls, inputs: Inputs) -> Scope:
        return cls(dict(inputs.models), inputs.fixed_keys(), frozenset(inputs.absent()))


def produce(audit: Audit, input: Any, model: str | None, scope: Scope) -> None:
    """A planned task's body (module level: it pickles): make the input in this process's resolver."""
    audit.adopt(scope).produce(input, model)
