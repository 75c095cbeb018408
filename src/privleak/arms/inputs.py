"""The inputs an arm kind reads to build its model, besides those of :mod:`privleak.attacks.inputs`.

A kind names them in :attr:`~privleak.arms.ArmKind.needs` (and reads them as ``ctx[KEY]`` in ``prepare``,
``fit`` and ``derive``); the pipeline's providers make them, and the audit's plan runs what they need first.
A derived kind reads its source arm's with ``.of("source")``: ``TRAINING.of("source")`` is its train.json.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..core.inputs import Input

if TYPE_CHECKING:
    from ..data.records import Record
    from ..defenses.guard.guard import Guard
    from ..models.batching import Encoded

#: The records a model trains on: the members after the arm's data defences, with the one-run audit canaries.
TRAINING_RECORDS: Input[list[Record]] = Input("training-records", "the records the arm trains on: the members after "
                                                                  "its data defences, with the audit canaries",
                                              per_model=True)
#: A trained (or derived) model's training record: its ``train.json`` (the ``train/<arm>`` stage's).
TRAINING: Input[dict[str, Any]] = Input("training", "the arm's trained model and its training record (train.json)",
                                        per_model=True)
#: Mean token NLL of a model on the first n population records (early stopping; never members).
VALIDATION: Input[Callable[[int], Callable[[Any], float]]] = Input(
    "validation", "n → a function of a model: its mean token NLL on the first n population records")
#: Texts → token ids as the training data are encoded (the base model's tokenizer, ``max_length``).
ENCODE: Input[Callable[[list[str]], Encoded]] = Input("encode", "texts → token ids as the training data are encoded")

#: The guard arm's output guard (its provider: :mod:`.guard`).
GUARD: Input[Guard] = Input("guard", "the audit's output guard: verbatim member windows, canaries and the members' PII "
                                     "inventory, public text allowed")

__all__ = ["ENCODE", "GUARD", "TRAINING", "TRAINING_RECORDS", "VALIDATION"]
