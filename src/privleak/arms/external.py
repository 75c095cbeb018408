"""``external``: a model the user trained, audited by ``privleak attack``: nothing to build, nothing to choose.

Its block says what was audited: the model or adapter named, the directory
loaded, for a PEFT adapter the base it was merged into, for a GGUF file its
quantization, and the text format the model was scored in. A model trained
with a DP claim its audit canaries test (:mod:`privleak.integrations`) carries
that claim as its privacy block: the alarm then holds it to the claimed ε.
"""

from __future__ import annotations

from typing import Any, Literal

from ..core.typed import ArmDetails, GgufSource
from .base import ArmInputs, ArmJudging, ArmKind, KindSettings
from .registry import ArmSpec, register


class ExternalModel(ArmDetails):
    """The model an ``external`` arm audits: as named, and the directory loaded."""

    kind: Literal["external"] = "external"
    ref: str
    path: str
    adapter: bool = False  # a PEFT adapter, merged into ``base`` for the audit
    base: str | None = None
    base_path: str | None = None
    n_params: int | None = None
    gguf: GgufSource | None = None  # the model was a GGUF file, converted (models.gguf)
    # How each text was framed when scored and prompted (models.batching.TEXT_FORMATS), and what that put
    # around the text with this tokenizer.
    text_format: str | None = None
    text_frame: str | None = None


class External(ArmKind):
    name = "external"
    summary = "a model you trained, audited as it is (privleak attack)"
    model = "provided"
    fixed_name = "target"
    shadows = False
    Details = ExternalModel

    def settings(self, cfg, spec: ArmSpec, n_members: int) -> KindSettings:
        return KindSettings(kind="external")

    def details(self, inputs: ArmInputs) -> ExternalModel | None:
        target = inputs.extra.get("target")
        return ExternalModel.model_validate({"kind": "external", **target}) if target else None

    def result(self, name: str, inputs: ArmInputs, common: dict[str, Any]):
        from ..results import Privacy

        arm = super().result(name, inputs, common)
        claim = inputs.extra.get("privacy")  # the (ε, δ) the user's accountant states (pipeline.attack)
        if claim is not None:
            arm.privacy = Privacy.model_validate(claim)
        return arm


class ExternalJudging(ArmJudging):
    recommendable = False  # the model under audit is not a choice


EXTERNAL = register(External(), judging=ExternalJudging())
