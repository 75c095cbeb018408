"""``unlearn-ga``: the baseline's trained model with the forget set unlearned — NPO with a retain term.

Made from ``baseline`` (not ``best``): the baseline memorises its members
(its forget-set LOSS AUC is near 1), so there is the most to remove and the
audit has the most power to see what is left; from ``best``, whose forget
set is barely told apart from held-out text to begin with, "forgotten" would
be an easy verdict. ``retrain`` is the same recipe on the retain set, so the
two are compared like for like.

Objective (:mod:`privleak.models.unlearn`): NPO (Zhang et al. 2024) on the
forget set — every record of a forgotten person, canary copies included — plus
λ × the NLL of an equally large batch of the records the baseline trained on
that are kept (NPO-RT); ``unlearning.ga.method: gd`` for gradient difference
instead. Stopping rule: every half pass over the forget set, stop once the
forget set's mean token NLL reaches the population's (``best.validate_records``
population records: text the model never saw) — the point where, on average,
the forgotten persons read like strangers — or after ``max_epochs`` passes.

Settings (:func:`privleak.policy.unlearn_recipe`) were chosen on population
data only: the population split as pseudo-members, its own held-out and
validation quarters, a model retrained without a 10 % forget set as the
target (``bench/bench_unlearn_settings.py``); never on the members.
"""

from __future__ import annotations

import math
import time
from typing import Any, Literal

import numpy as np

from ..attacks.inputs import BASE, FORGET_SET, MODEL
from ..data.canaries import derive_seed
from ..policy import unlearn_recipe
from .base import ArmInputs, BuildContext, KindSettings
from .inputs import TRAINING_RECORDS, VALIDATION
from .registry import ArmSpec, register
from .unlearning import UnlearningDetails, UnlearningJudging, UnlearningKind, UnlearningPresentation, forget_settings


class UnlearnGADetails(UnlearningDetails):
    kind: Literal["unlearn-ga"] = "unlearn-ga"
    method: str
    steps: int
    stopped_by_rule: bool  # False: ran out of max_epochs first
    n_forget_records: int
    n_retain_records: int
    nll_forget_start: float  # mean token NLL of the forget set before / after, and the population's after
    nll_forget_end: float
    nll_population_end: float


def _mean_nll(model: Any, tokenizer: Any, max_length: int, texts: list[str]) -> float:
    from ..attacks.scoring import score_texts  # torch: only when an arm is derived, not when kinds register
    from ..models.handle import ModelHandle

    scores = score_texts(ModelHandle(model=model, tokenizer=tokenizer, max_length=max_length), texts,
                         desc="unlearning: forget-set NLL", moments=False)
    return float(-np.mean(scores.logprob.astype(np.float64))) if scores.logprob.size else math.inf


class UnlearnGASettings(KindSettings):
    """NPO (or gradient difference) on the forget set with a retain term: its step, its passes at most, β, λ,
    the batch, the population records of its stopping rule, its seed, and who is forgotten."""

    kind: str = "unlearn-ga"
    method: str
    lr: float
    max_epochs: float
    beta: float
    retain_weight: float
    batch_size: int
    validate_records: int
    seed: int
    forget: dict[str, Any]


class UnlearnGA(UnlearningKind):
    name = "unlearn-ga"
    summary = "the baseline's model with the forget set unlearned by NPO and a retain term (Zhang et al. 2024)"
    model = "derived"
    source = "baseline"
    Details = UnlearnGADetails
    needs = (FORGET_SET, VALIDATION, MODEL.of("source"), TRAINING_RECORDS.of("source"), BASE)

    def settings(self, cfg, spec: ArmSpec, n_members: int) -> UnlearnGASettings:
        g = cfg.unlearning.ga
        lr, epochs = unlearn_recipe(g.method, g.lr, g.max_epochs)
        return UnlearnGASettings(method=g.method, lr=lr, max_epochs=epochs, beta=g.beta, retain_weight=g.retain_weight,
                                 batch_size=g.batch_size, validate_records=cfg.best.validate_records,
                                 seed=derive_seed(cfg.seed, "unlearn-ga") % 2**32, forget=forget_settings(cfg))

    def derive(self, s: UnlearnGASettings, ctx: BuildContext) -> tuple[Any, dict[str, Any]]:
        from ..models.batching import encode
        from ..models.unlearn import UnlearnSettings, unlearn

        start = time.perf_counter()
        handle = ctx[MODEL.of("source")]
        forget = ctx[FORGET_SET]
        f_recs, r_recs = forget.split(ctx[TRAINING_RECORDS.of("source")])
        base = ctx[BASE]
        tok, length = base.tokenizer, ctx.cfg.model.max_length
        f_texts = [r.text for r in f_recs]
        population = ctx[VALIDATION](s.validate_records)
        last: dict[str, float] = {}

        def forgotten(model: Any) -> bool:
            last["forget"], last["population"] = _mean_nll(model, tok, length, f_texts), population(model)
            return last["forget"] >= last["population"]

        nll_start = _mean_nll(handle.model, tok, length, f_texts)
        u = UnlearnSettings(method=s.method, epochs=s.max_epochs, lr=s.lr, beta=s.beta, retain_weight=s.retain_weight,
                            batch_size=s.batch_size, check_every=max(1, math.ceil(len(f_recs) / s.batch_size / 2)),
                            seed=s.seed)
        log = unlearn(handle.model, encode(tok, f_texts, length), encode(tok, [r.text for r in r_recs], length), u,
                      base.pad_id, stop=forgotten, desc="unlearn-ga")
        info = {"method": s.method, "steps": log.steps, "stopped_by_rule": log.stopped,
                "n_forget_records": len(f_recs), "n_retain_records": len(r_recs), "nll_forget_start": nll_start,
                "nll_forget_end": last.get("forget", nll_start), "nll_population_end": last.get("population", math.nan)}
        if log.checks and not log.checks[-1][0] == log.steps:  # the rule last looked before the final step
            forgotten(handle.model)
            info["nll_forget_end"], info["nll_population_end"] = last["forget"], last["population"]
        return handle.model, {"kind": "unlearn-ga", "steps": log.steps, "epoch_losses": log.losses, "privacy": None,
                              "settings": s.key(), "n_train_records": len(r_recs), "forget": forget.to_json(),
                              "unlearning": info, "phases_s": {"unlearn": round(time.perf_counter() - start, 2)}}

    def own_details(self, inputs: ArmInputs) -> dict[str, Any]:
        return dict((inputs.record or {})["unlearning"])



class UnlearnGAPresentation(UnlearningPresentation):
    def notes_for(self, name: str, arm) -> list[str]:
        d = arm.details
        if not isinstance(d, UnlearnGADetails):
            return []
        how = "the stopping rule held (forget-set NLL ≥ population NLL)" if d.stopped_by_rule else \
            "it ran out of passes before the stopping rule held"
        return [f"{name}: {d.method.upper()} for {d.steps} steps on {d.n_forget_records} forgotten records beside "
                f"{d.n_retain_records} retained; {how}. Forget-set NLL {d.nll_forget_start:.3f} → {d.nll_forget_end:.3f} "
                f"nats (population {d.nll_population_end:.3f})."]


UNLEARN_GA = register(UnlearnGA(), judging=UnlearningJudging(), presentation=UnlearnGAPresentation())
