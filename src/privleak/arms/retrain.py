"""``retrain``: the baseline's recipe from the base model on the retain set only — the gold standard of unlearning.

What exact unlearning means (Bourtoule et al. 2021; MUSE, Shi et al. 2024):
the model that would have been trained had the forget set never been there.
It stands in for ``baseline`` — the arm the unlearning arms unlearn from —
with the same recipe (``train``: epochs, batch, learning rate, seed) on the
members minus every record of a forgotten person (canary copies included;
the one-run audit canaries stay). Every unlearning arm is judged against it;
it is judged against the control, which never saw anyone: its forget set
should look like held-out text.
"""

from __future__ import annotations

import time
from typing import Any, Literal

from ..data.records import Record
from ..attacks.inputs import FORGET_SET
from .base import ArmInputs, BuildContext, FitContext
from .common import PlainSettings, fit_plain, plain_settings
from .registry import ArmSpec, register
from .unlearning import UnlearningDetails, UnlearningJudging, UnlearningKind, UnlearningPresentation, forget_settings


class RetrainDetails(UnlearningDetails):
    kind: Literal["retrain"] = "retrain"
    n_forgotten_records: int  # member records left out


class RetrainSettings(PlainSettings):
    """The baseline's recipe, and who is left out (the forget set's settings)."""

    kind: str = "retrain"
    forget: dict[str, Any]


class Retrain(UnlearningKind):
    name = "retrain"
    summary = "the baseline's recipe from the base model on the members minus the forget set: the gold standard"
    after = ()
    versus = "control"
    Details = RetrainDetails

    def settings(self, cfg, spec: ArmSpec, n_members: int) -> RetrainSettings:
        return RetrainSettings(**plain_settings(cfg, ArmSpec("baseline"), "retrain", forget=forget_settings(cfg)))

    def prepare(self, records: list[Record], settings: RetrainSettings, ctx: BuildContext) -> list[Record]:
        return ctx[FORGET_SET].retain(records)

    def fit(self, model: Any, settings: RetrainSettings, ctx: FitContext) -> tuple[Any, dict[str, Any]]:
        start = time.perf_counter()
        model, record = fit_plain(model, settings, ctx)
        forget = ctx[FORGET_SET]
        return model, {**record, "kind": "retrain", "forget": forget.to_json(),
                       "phases_s": {"fit": round(time.perf_counter() - start, 2)}}

    def details(self, inputs: ArmInputs) -> None:
        return None  # built with the assessment in result()

    def own_details(self, inputs: ArmInputs) -> dict[str, Any]:
        return {"n_forgotten_records": int((inputs.record or {}).get("forget", {}).get("n_forget_records", 0))}

    def made_from(self) -> str:
        return "the base model, on the retain set"


RETRAIN_KIND = register(Retrain(), judging=UnlearningJudging(), presentation=UnlearningPresentation())
