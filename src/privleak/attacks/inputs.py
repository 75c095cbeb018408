"""The inputs attacks and arm kinds read, as typed keys (:class:`privleak.core.inputs.Input`).

An attack (``AttackSpec.needs`` / ``reads``) or a kind (``ArmKind.needs``) names the inputs it reads; the
pipeline's providers (``privleak.pipeline.providers``) make them, and the plan of an audit is derived from
what its arms and attacks name. The providers here make an input from other inputs alone (no run directory,
no config), so a test's :class:`~privleak.core.inputs.FakeInputs` derives them from the splits it is given.

Per audit: the splits and what is read off them; the base model; the one-run audit canaries; the forget set.
Per model (``per_model``): the model, its scoring pass, its pool of unprompted samples, its shadow models.
A reader names another model's with ``.of(role)``: ``SCORES.of("reference")`` is the reference model's pass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core.inputs import Input, provides

if TYPE_CHECKING:
    from ..core.masking import PiiMasker
    from ..data.audit_canaries import AuditCanary
    from ..data.canaries import Canary
    from ..data.records import Record
    from ..data.unlearning import ForgetSet
    from ..models.handle import ModelHandle
    import numpy as np

    from .membership.selection import MiaSelection
    from .samples import SamplePool
    from .scoring import TokenScores
    from .settings import AttackSettings


@dataclass
class ShadowData:
    """Shadow models' NLLs for LiRA / RMIA (trained by the pipeline; only numbers here).

    ``nll_x`` (S, n): every shadow on the evaluated candidates (members then
    non-members of the membership subsets); ``nll_z`` (S, m): on the
    population; ``in_x`` (S, n): True where shadow s trained on candidate x.
    """

    nll_x: np.ndarray
    nll_z: np.ndarray
    in_x: np.ndarray


@dataclass
class ModelScores:
    """One model's scoring pass, by text set: ``scores(split)`` computes it on first use (or reads the run
    directory's copy: the pipeline's ``scores/<model>`` stage writes it) and keeps it."""

    compute: Callable[[str], TokenScores]
    _memo: dict[str, Any] = field(default_factory=dict)

    def __call__(self, split: str) -> TokenScores:
        if split not in self._memo:
            self._memo[split] = self.compute(split)
        return self._memo[split]

# --------------------------------------------------------------------------- the data

SPLITS: Input[dict[str, list[Record]]] = Input(
    "splits", "the records by split: public, public_heldout, members (canary copies included), non_members, "
              "population (the data stage, splits/)")
CANARIES: Input[list[Canary]] = Input("canaries", "the exposure canaries planted in the members", present=bool)
USER_SPLIT: Input[bool] = Input("user-split", "the user drew the members and non-members (privleak attack)")
PUBLIC: Input[list[Record]] = Input("public", "the public split (what the embedded base model learned from)",
                                    present=bool)
POPULATION: Input[list[Record]] = Input("population", "records from the members' population that no model "
                                                      "trained on", present=bool)
PII: Input[bool] = Input("pii", "the members carry ground-truth PII spans", present=bool)
CLIENTS: Input[bool] = Input("clients", "the data has clients (clinics, a --client-field, federated arms)",
                             present=bool)
SCORED_TEXTS: Input[dict[str, list[str]]] = Input(
    "scored-texts", "the texts every model's scoring pass scores: members (canary copies left out), non_members, "
                    "population, public_heldout")
MASKER: Input[PiiMasker] = Input("masker", "masks every ground-truth PII value of the run in what an attack returns")
DRAWN: Input[MiaSelection] = Input("drawn", "the membership evaluation sets as drawn (one record per unit)")
SELECTION: Input[MiaSelection] = Input(
    "selection", "the exchangeable membership evaluation sets; on sets the user drew that a model-free classifier "
                 "tells apart, marked as supporting no ε bound")
AUDIT_CANARIES: Input[list[AuditCanary]] = Input("audit-canaries", "the one-run audit's canaries, all m, with their "
                                                                   "inclusion bits", present=bool)
FORGET_SET: Input[ForgetSet] = Input("forget-set", "who the unlearning arms forget (splits/forget.json)",
                                     drops_readers=True)
SETTINGS: Input[AttackSettings] = Input("attack-settings", "what the attacks read (sizes), from the config")
SEED: Input[int] = Input("seed", "the audit's seed")
ATTACK_SPECS: Input[dict[str, Any]] = Input("attack-specs", "the registered attacks by name, for an attack "
                                                                   "that runs others")

# --------------------------------------------------------------------------- models

BASE: Input[ModelHandle] = Input("base", "the base model every arm is fine-tuned from (loaded once per process)")
MODEL: Input[ModelHandle] = Input("model", "a model of the audit as its attacks query it (a fresh handle)",
                                  per_model=True)
REFERENCE: Input[ModelHandle] = Input("reference", "the model that never saw the members (the base model), for "
                                                   "the models that have one", per_model=True)
SCORES: Input[ModelScores] = Input("scores", "the model's one scoring pass over every scored text set",
                                   per_model=True)
SAMPLES: Input[SamplePool] = Input("samples", "the model's pool of unprompted samples (a served arm: its source "
                                              "model's)", per_model=True, follows="serves")
SHADOWS: Input[ShadowData] = Input("shadows", "the NLLs of the shadow models trained like the arm", per_model=True)

# --------------------------------------------------------------------------- read off the splits

_SCORED = ("members", "non_members", "population", "public_heldout")


@provides(PUBLIC, needs=(SPLITS,), pure=True)
def _public(view: Any) -> list[Record]:
    return view[SPLITS]["public"]


@provides(POPULATION, needs=(SPLITS,), pure=True)
def _population(view: Any) -> list[Record]:
    return view[SPLITS]["population"]


@provides(PII, needs=(SPLITS,), pure=True)
def _pii(view: Any) -> bool:
    return any(r.has_pii for r in view[SPLITS]["members"])


@provides(SCORED_TEXTS, needs=(SPLITS,), pure=True)
def _scored_texts(view: Any) -> dict[str, list[str]]:
    s = view[SPLITS]
    return {
        "members": [r.text for r in s["members"] if r.kind != "canary"],
        "non_members": [r.text for r in s["non_members"]],
        "population": [r.text for r in s["population"]],
        # Utility only: held-out public text, for forgetting (no attack reads it).
        "public_heldout": [r.text for r in s["public_heldout"]],
    }


@provides(MASKER, needs=(SPLITS, CANARIES), pure=True)
def _masker(view: Any) -> PiiMasker:
    from ..core.masking import PiiMasker
    from ..data.canaries import known_pii

    s = view[SPLITS]
    return PiiMasker(known_pii([s[n] for n in ("members", "non_members", "population", "public")], view[CANARIES]))


@provides(DRAWN, needs=(SPLITS, SETTINGS, SEED), pure=True)
def _drawn(view: Any) -> MiaSelection:
    from .membership.selection import mia_selection

    s = view[SPLITS]
    members = [r for r in s["members"] if r.kind != "canary"]
    return mia_selection(members, s["non_members"], view[SETTINGS].max_mia_records, view[SEED])


__all__ = ["ModelScores", "ShadowData", "ATTACK_SPECS", "AUDIT_CANARIES", "BASE", "CANARIES", "CLIENTS", "DRAWN", "FORGET_SET", "MASKER", "MODEL",
           "PII", "POPULATION", "PUBLIC", "REFERENCE", "SAMPLES", "SCORED_TEXTS", "SCORES", "SEED", "SELECTION",
           "SETTINGS", "SHADOWS", "SPLITS", "USER_SPLIT"]
