"""Audit your own DP fine-tune against the ε its accountant claims: PrivLeak's audit canaries in your training data.

The one-run audit (Steinke, Nasr & Jagielski 2023; :mod:`privleak.audit.one_run`) needs m canaries, each put into
the training data independently with probability ½, decided before training: a model that trained on the data
shows which canaries it saw, and if the training really is (ε, δ)-DP no test of one model can tell them apart
better than ε allows. :class:`AuditHook` makes PrivLeak's canaries (random rare words of *your* tokenizer,
:mod:`privleak.data.audit_canaries` and :func:`~privleak.attacks.one_run_canaries.rare_word_pool` — the design
reads the tokenizer and optional public text, never your private records), inserts the included ones into your
training data (:meth:`AuditHook.insert`), and after training (:meth:`AuditHook.finish`) attacks the model
exactly as ``privleak attack`` does (:func:`privleak.api.attack`: the same battery, your records as members,
your held-out records as non-members) with the one-run audit of the claimed (ε, δ) — read from the Opacus
``PrivacyEngine`` when you give one, else stated (:class:`~privleak.api.DPClaim`). A refuted claim is the verdict
DP GUARANTEE VIOLATED (the audit-wide alarm, false-alarm rate ≤ 5 %: :mod:`privleak.audit.alarms`), raised as
:class:`DPGuaranteeViolated` unless ``on_violation="warn"``.

White-box too (:meth:`AuditHook.watch`): given your Opacus DP optimizer before training, the hook adds gradient
canaries to its own steps (:mod:`privleak.models.gradient_canaries`: coordinates no record touches, clipped and
noised by your optimizer, read back after every step), so the audit also tests the step itself — the route
that catches a DP step without its noise or its clipping at any claimed ε, where 1,000 audit canaries cannot
refute ε much above 5. The Trainer callback watches the Trainer's optimizer by itself.

:class:`~privleak.integrations.trainer.PrivLeakCallback` is the same hook for the ``transformers`` Trainer.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..api import DPClaim, Progress, attack
from ..core.errors import UserError

if TYPE_CHECKING:
    from ..data.audit_canaries import AuditCanary
    from ..results import AuditResults

__all__ = ["AuditHook", "DPGuaranteeViolated", "headline"]

log = logging.getLogger("privleak")

#: The arm the model under audit is in the results (``privleak attack``'s).
TARGET = "target"


class DPGuaranteeViolated(UserError):
    """The one-run audit refutes the training's claimed (ε, δ): its DP step does not deliver its guarantee.
    ``results``: the whole audit (written to the run directory first)."""

    def __init__(self, message: str, results: "AuditResults") -> None:
        super().__init__(message)
        self.results = results


class AuditHook:
    """PrivLeak's audit canaries in your training data, and the audit of the trained model against its DP claim.

    ``tokenizer``: the model's (the canaries are words of its vocabulary, scored as it tokenises them).
    ``non_members``: records from the same source that the model never trains on (a file or a list, as
    :func:`privleak.api.attack` takes them); ``members``: the records it trains on (default: what
    :meth:`insert` is given, without the canaries); ``reference``: the checkpoint you fine-tune from (an object
    or a directory: the control, and the reference attack and RMIA); ``population``: more records never trained
    on. ``delta`` (and ``privacy_engine``): the claim's δ, and the Opacus engine whose accountant states ε (both
    may also be given to :meth:`finish`). ``canaries`` (m), ``prefix_words``, ``secret_words``: the canaries'
    design (default: the config's ``one_run`` section: 1,000 canaries; about m/2 are inserted); ``public``: public
    texts of your domain to choose the rarest words by (optional; never your private records). ``config``,
    ``seed``, ``text_field``, ``progress``: as :func:`privleak.api.attack`; ``out``: the run directory (results.json,
    report.html; None: a temporary one). ``on_violation``: "raise" (:class:`DPGuaranteeViolated`) or "warn"."""

    def __init__(self, tokenizer: Any, non_members: Any, *, members: Any = None, reference: Any = None,
                 population: Any = None, delta: float | None = None, privacy_engine: Any = None,
                 canaries: int | None = None, prefix_words: int | None = None, secret_words: int | None = None,
                 public: Sequence[str] | None = None, config: Any = None, seed: int | None = None,
                 text_field: str | None = None, out: str | Path | None = None, progress: Progress = None,
                 on_violation: Literal["raise", "warn"] = "raise", gradient_canaries: int = 1000) -> None:
        if on_violation not in ("raise", "warn"):
            raise UserError(f"on_violation={on_violation!r}: use 'raise' or 'warn'")
        if isinstance(gradient_canaries, bool) or not isinstance(gradient_canaries, int) or not (
                gradient_canaries == 0 or gradient_canaries >= 3):
            raise UserError(f"gradient_canaries={gradient_canaries!r}: give 0 (no white-box check) or at least 3 "
                            "(default 1000)")
        if tokenizer is None or not hasattr(tokenizer, "get_vocab"):
            raise UserError("tokenizer: give the model's transformers tokenizer (the audit canaries are words of its "
                            "vocabulary)")
        self.tokenizer, self.non_members, self.members = tokenizer, non_members, members
        self.reference, self.population, self.delta, self.privacy_engine = reference, population, delta, privacy_engine
        self.public = list(public) if public is not None else []
        self.config, self.seed, self.text_field, self.out = config, seed, text_field, out
        self.progress, self.on_violation = progress, on_violation
        self._design = {k: v for k, v in (("canaries", canaries), ("prefix_words", prefix_words),
                                          ("secret_words", secret_words)) if v is not None}
        self._canaries: list[AuditCanary] | None = None
        self.gradient_canaries = gradient_canaries
        self._watched: Any = None
        self._gradient: Any = None
        self.results: AuditResults | None = None

    # ------------------------------------------------------------------ before training

    def _cfg(self) -> Any:
        """The config the canaries are designed from (its ``one_run`` section and seed)."""
        from ..api import _config_data
        from ..config import build_config

        data = _config_data(self.config)
        over: dict[str, Any] = {"profile": data.get("profile") or "quick"}
        if self._design:
            over["one_run"] = dict(self._design)
        if self.seed is not None:
            over["seed"] = self.seed
        return build_config(data, over)

    @property
    def canaries(self) -> "list[AuditCanary]":
        """The m audit canaries (each with its inclusion bit), drawn once from the tokenizer and the seed."""
        if self._canaries is None:
            from ..attacks.one_run_canaries import rare_word_pool
            from ..data.audit_canaries import make_audit_canaries

            cfg = self._cfg()
            if cfg.one_run.canaries < 1:
                raise UserError("canaries=0: the one-run audit needs audit canaries; give canaries ≥ 50 (default "
                                "1000)")
            pool = rare_word_pool(self.tokenizer, self.public)
            self._canaries = make_audit_canaries(pool, cfg.one_run.canaries, cfg.one_run.prefix_words,
                                                 cfg.one_run.secret_words, cfg.seed)
        return self._canaries

    def insert(self, train: Any) -> Any:
        """``train`` with the included canaries inserted at seeded positions, in its own form: a list of texts
        (canaries as texts), of dicts (``{text_field: canary}``), of privleak ``Record`` s, or a
        ``datasets.Dataset`` (the other columns empty on a canary's row). Insert before tokenising: the canaries
        must reach the model as your records do. The records given are the audit's members (unless ``members``
        was given)."""
        from ..data.audit_canaries import audit_canary_records, insert_audit_canaries
        from ..data.records import Record

        rows, rebuild = _rows(train)
        if self.members is None:
            self.members = list(train) if rebuild is None else rows
        cfg = self._cfg()
        field = self.text_field or cfg.data.text_field
        marked = insert_audit_canaries([Record(text="", meta={"row": i}) for i in range(len(rows))], self.canaries,
                                       cfg.seed)
        planted = iter(audit_canary_records(self.canaries))
        out = []
        for r in marked:
            if "row" in r.meta:
                out.append(rows[r.meta["row"]])
            else:
                text = next(planted).text
                first = rows[0] if rows else ""
                out.append(Record(text=text, pii=[], meta={"kind": "audit_canary"}) if isinstance(first, Record)
                           else {field: text} if isinstance(first, dict) else text)
        return out if rebuild is None else rebuild(out)

    def watch(self, optimizer: Any) -> None:
        """White-box gradient canaries in ``optimizer``'s own DP steps: the Opacus DP optimizer ``make_private``
        returned (or a wrapper of it, as the Trainer's), before the first step. ``gradient_canaries`` canaries
        (default 1,000) each own a coordinate of a vector that joins the optimizer's parameters and that your
        model never reads, so your weights train as before (the noise generator draws those coordinates too);
        each joins a step with probability ½ and is clipped and noised by your optimizer. :meth:`finish` then
        tests the step's clipping and noise against the claim (:func:`privleak.audit.whitebox.whitebox_alarm_test`).
        Flat clipping only (one ``max_grad_norm``)."""
        if not self.gradient_canaries:
            return
        dp = _dp_optimizer(optimizer)
        if dp is None:
            raise UserError("watch: give the DP optimizer Opacus's make_private returned (or the Trainer's, which "
                            "wraps it); this one has no DP step to watch")
        if dp is self._watched:
            return
        clip = getattr(dp, "max_grad_norm", None)
        if isinstance(clip, bool) or not isinstance(clip, (int, float)) or not clip > 0:
            raise UserError("watch: the white-box check needs one flat clipping bound (max_grad_norm); per-layer "
                            "clipping is not supported — pass gradient_canaries=0")
        from ..models.gradient_canaries import GradientCanaries

        device = next((p.device for p in dp.params), "cpu")
        self._gradient = GradientCanaries(self.gradient_canaries, 0.5, float(clip), self._cfg().seed + 5, device=device)
        self._gradient.attach(dp)
        self._watched = dp

    # ------------------------------------------------------------------ after training

    def claim(self, *, privacy_engine: Any = None, optimizer: Any = None, delta: float | None = None,
              epsilon: float | None = None, max_grad_norm: float | None = None) -> DPClaim | None:
        """The claim to test: from the ``PrivacyEngine`` when one is attached (its accountant's ε at ``delta``,
        unless ``epsilon`` states it), else None (the model is attacked, the one-run bound reported, nothing
        claimed to refute)."""
        engine = privacy_engine if privacy_engine is not None else self.privacy_engine
        delta = delta if delta is not None else self.delta
        if engine is None:
            if epsilon is not None:
                raise UserError("epsilon: without a PrivacyEngine give the whole claim, claim=DPClaim(epsilon=..., "
                                "delta=..., noise_multiplier=..., sample_rate=..., steps=..., max_grad_norm=...)")
            return None
        if delta is None:
            raise UserError("delta: the claim is (ε, δ); give the δ your accountant's ε is for (delta=1e-5, say)")
        return self._with_gradient(DPClaim.from_engine(engine, delta, optimizer=optimizer, max_grad_norm=max_grad_norm,
                                                       epsilon=epsilon))

    def _with_gradient(self, claim: DPClaim | None) -> DPClaim | None:
        """``claim`` with the watched steps' gradient canaries (:meth:`watch`), when it has none of its own."""
        if claim is None or claim.gradient_canaries is not None or self._gradient is None or not self._gradient.steps:
            return claim
        return dataclasses.replace(claim, gradient_canaries=self._gradient.stats().as_dict())

    def finish(self, model: Any, *, privacy_engine: Any = None, optimizer: Any = None, claim: DPClaim | None = None,
               delta: float | None = None, epsilon: float | None = None, max_grad_norm: float | None = None,
               out: str | Path | None = None) -> "AuditResults":
        """Attack the trained ``model`` as ``privleak attack`` would, with the one-run audit of its claim
        (``claim``, or :meth:`claim` from the engine); returns the results (also :attr:`results`) and raises
        :class:`DPGuaranteeViolated` when the claim is refuted and ``on_violation`` is "raise"."""
        if self._canaries is None or self.members is None:
            raise UserError("finish: no audit canaries were inserted; call insert(train) on the training data "
                            "before training")
        if claim is None:
            claim = self.claim(privacy_engine=privacy_engine, optimizer=optimizer, delta=delta, epsilon=epsilon,
                               max_grad_norm=max_grad_norm)
        claim = self._with_gradient(claim)
        results = attack(model, self.members, self.non_members, self.reference, self.tokenizer,
                         population=self.population, config=self.config, out=out if out is not None else self.out,
                         seed=self._cfg().seed, text_field=self.text_field, progress=self.progress,
                         audit_canaries=self.canaries, claim=claim)
        self.results = results
        figures = headline(results)
        log.info("PrivLeak audit: %s", ", ".join(f"{k} = {v}" for k, v in figures.items()))
        violated = results.alarms is not None and TARGET in results.alarms.violated
        if violated:
            message = violation_line(results, out if out is not None else self.out)
            if self.on_violation == "raise":
                raise DPGuaranteeViolated(message, results)
            log.warning(message)
        return results


def headline(results: "AuditResults") -> dict[str, Any]:
    """The audit's figures for a training log: the verdict, the claim and the one-run bound, the strongest
    membership attack (prefixed ``privleak/``)."""
    arm = results.arms[TARGET]
    out: dict[str, Any] = {"privleak/verdict": arm.verdict.label if arm.verdict else None}
    if arm.privacy is not None:
        out["privleak/claimed_epsilon"] = arm.privacy.epsilon
        out["privleak/dp_violated"] = bool(results.alarms is not None and TARGET in results.alarms.violated)
    one = arm.one_run_epsilon
    if one is not None and one.available:
        out["privleak/one_run_epsilon_lb"] = one.epsilon_steinke
    name, best = arm.best_membership()
    if best is not None:
        out["privleak/mia_auc"] = best.auc
        out["privleak/mia_tpr_at_1pct_fpr"] = best.tpr_at_1pct_fpr
        out["privleak/mia_attack"] = name
    return out


def violation_line(results: "AuditResults", out: Any) -> str:
    """One line: which test refutes which claim, at what level (the audit's own alarm outcome)."""
    alarms = results.alarms
    o = next(x for x in alarms.outcomes if x.arm == TARGET and x.alarm and x.rejected)
    where = f"; results: {Path(out).expanduser() / 'results.json'}" if out is not None else ""
    return (f"DP GUARANTEE VIOLATED: the {o.route.replace('_', '-')} test refutes {o.claim} (p = {o.p_value:.2g} at "
            f"level {o.level:.3g}; false-alarm rate ≤ {100 * alarms.alpha:g} %): the DP step of this training does not "
            f"deliver its guarantee (missing noise or clipping?){where}")


def _dp_optimizer(optimizer: Any) -> Any:
    """The Opacus DP optimizer inside ``optimizer`` (itself, or through the wrappers a trainer puts around it,
    ``.optimizer``); None when there is none."""
    seen = 0
    while optimizer is not None and seen < 8:
        if hasattr(optimizer, "original_optimizer") and hasattr(optimizer, "add_noise"):
            return optimizer
        optimizer, seen = getattr(optimizer, "optimizer", None), seen + 1
    return None


def _rows(train: Any) -> tuple[list[Any], Any]:
    """(the rows of ``train``, how to build its own kind back from rows: None for a plain list)."""
    if isinstance(train, (str, bytes, dict)) or not hasattr(train, "__iter__"):
        raise UserError(f"insert: give the training records as a list (texts, dicts or Records) or a datasets.Dataset, "
                        f"not a {type(train).__name__}")
    if hasattr(train, "to_list") and hasattr(train, "column_names"):  # a datasets.Dataset
        import datasets

        rows = train.to_list()
        names = list(train.column_names)

        def rebuild(out: list[Any]) -> Any:
            return datasets.Dataset.from_list([{k: r.get(k) for k in names} for r in out])
        return rows, rebuild
    rows = list(train)
    kinds = {type(r).__name__ for r in rows}
    if len(kinds) > 1:
        raise UserError(f"insert: the records mix {' and '.join(sorted(kinds))}; give one kind")
    return rows, None
