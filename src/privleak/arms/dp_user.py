"""``dp-user-ε``: user-level DP-SGD — the person, not the record, is held to ε (issue 27).

Record-level DP-SGD (``dp-ε``) holds one record to ε; a patient whose
identifiers appear in many notes, or a canary planted 16 times, is held to
the far larger group ε of all their records (``privacy.epsilon_person`` of a
``dp`` arm). A ``dp-user-ε`` arm makes the person the unit of sampling,
clipping and accounting (:mod:`privleak.models.user_dp`), so adding or
removing *everything* one person wrote moves the model by at most ε:

* ``method: uls`` (the default) — user-level sampling: Poisson-sample people
  (rate q per person), take at most ``records_per_person`` of a sampled
  person's records, clip the person's gradient as one vector, add N(0, σ²C²)
  to the sum; σ from the ordinary DP-SGD accountant at the person-level q.
  One record of a person with several is a *replacement* of that person's
  clipped contribution, so ``privacy.epsilon_record`` is the replace-one ε
  (:func:`privleak.accountants.record_epsilon`) — larger than the
  add/remove-person ε, and the figure the record-level audits check.
* ``method: els`` — example-level sampling: keep at most
  ``records_per_person`` records of each person once, then record-level
  DP-SGD at the σ that holds a person of that many records to ε
  (:func:`privleak.accountants.calibrate_group_sigma`, the mixture-of-Gaussians
  accounting of Charles et al. 2024). Its mechanism is record-level, so its
  privacy block keeps the unit "record" (what the budget ledger composes) and
  reports the person-level ε beside it.

Why ULS is the default: its person-level accounting is the plain DP-SGD
accountant (exact at the PLD's resolution, nothing group-shaped to bound),
it uses every record of every person over the run instead of discarding all
but k, and Chua et al. 2024 ("Mind the Privacy Unit!", arXiv 2406.14322)
find it ahead of ELS at a fixed user-level ε when people have many records.
That is the argument; we have not measured ULS against ELS on our population
data yet (``bench/bench_user_dp.py`` is the bench that would).

One definition of a person for every arm: :func:`privleak.data.splits.unit_of`
(``meta.person_id``, a ``--group-field`` group, else a distinct text, so each
canary is one person). The recipe (people per step, epochs) is
:func:`privleak.models.user_dp.user_dp_recipe`. Settings live in
``arm_options.dp-user`` (:class:`DPUserOptions`); the rest — C, lr, the
accountant, LoRA, the public gradient — are the ``dp`` section's.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Literal

from pydantic import ConfigDict, Field

from ..attacks.inputs import PUBLIC
from ..config import resolve_delta
from ..config.sections import Choices
from ..core.limits import MAX_EPSILON, MIN_EPSILON
from ..core.typed import ArmDetails
from ..data.audit_canaries import KIND as AUDIT_CANARY
from .base import ArmInputs, ArmKind, ArmPresentation, FitContext, KindSettings
from .common import data_settings, person_sizes, unit_counts
from .inputs import ENCODE
from .registry import ArmSpec, register

_LORA_FIELDS = ("lora_rank", "lora_alpha", "lora_targets")


class DPUserOptions(Choices):
    """``arm_options.dp-user``: how the person-level arms sample people."""

    model_config = ConfigDict(extra="forbid")

    method: Literal["uls", "els"] = "uls"
    # k: a person's records used per step (ULS) or kept at all (ELS). 4 bounds a step's work per person
    # while a ULS person's mean gradient still averages several notes.
    records_per_person: int = Field(4, ge=1, le=10_000)
    # People per step (ULS) or records per step (ELS); None: user_dp_recipe / dp_recipe.
    batch_size: int | None = Field(None, ge=1, le=100_000)
    epochs: int | None = Field(None, ge=1, le=1000)  # None: the recipe's
    reduction: Literal["mean", "sum"] = "mean"  # ULS: a person's loss over their records


class UserSampling(ArmDetails):
    """How a person-level arm used its people: the method, the people, the cap k, and per step the people and
    records it read on average."""

    kind: Literal["dp-user"] = "dp-user"
    method: Literal["uls", "els"]
    people: int
    records_per_person_cap: int
    people_per_step: float
    records_per_step: float
    records_used: int  # ELS: records kept after the cap; ULS: every record is a candidate
    public_weight: float = 0.0


class DPUserSettings(KindSettings):
    """A user-level DP arm's settings: its target (ε, δ) per person, ``arm_options.dp-user``, the ``dp``
    section's C, step, accountant and LoRA, and the audit canaries a training is expected to hold."""

    omitted = frozenset({"lora_rank", "lora_alpha", "lora_targets", "public_weight", "public_batch_size",
                         "lora_layers", "recipe"})

    kind: str = "dp-user"
    target_epsilon: float
    delta: float
    lora: bool
    method: Literal["uls", "els"]
    records_per_person: int
    batch_size: int | None
    epochs: int | None
    reduction: Literal["mean", "sum"]
    max_grad_norm: float
    lr: float
    accountant: str
    train_output: bool
    micro_batch_tokens: int
    seed: int
    data_defences: dict[str, Any]
    expected_audit_canaries: int
    gradient_canaries: int = 0  # white-box canaries (dp.gradient_canaries)
    lora_rank: int | None = None
    lora_alpha: float | None = None
    lora_targets: str | tuple[str, ...] | None = None
    public_weight: float | None = None
    public_batch_size: int | None = None
    lora_layers: int | None = None  # adapters in the top N decoder layers only (dp.lora_layers)
    recipe: str | None = None  # dp.recipe where it is not the default: what an unset batch_size / epochs resolve to


class DPUser(ArmKind):
    name = "dp-user"
    param = "ε"
    example = "dp-user-8"
    param_range = (MIN_EPSILON, MAX_EPSILON)
    summary = "user-level DP-SGD at target ε per person (ULS: people sampled and clipped as one; +lora)"
    alone = False
    private = True
    modifiers = ("lora",)
    Options = DPUserOptions
    Details = UserSampling
    needs = (PUBLIC, ENCODE)  # the public gradient (dp.public_weight)

    def options(self, cfg) -> DPUserOptions:
        return DPUserOptions.model_validate(cfg.arm_options.get(self.name, {}))

    def settings(self, cfg, spec: ArmSpec, n_members: int) -> DPUserSettings:
        lora = "lora" in spec.modifiers
        delta, _ = resolve_delta(cfg, n_members)
        dp = cfg.dp
        settings: dict[str, Any] = {
            "kind": self.name, "target_epsilon": spec.param, "delta": delta, "lora": lora,
            **self.options(cfg).model_dump(mode="json"),
            "max_grad_norm": dp.max_grad_norm, "lr": dp.lora_lr if lora else dp.lr, "accountant": dp.accountant,
            "train_output": dp.train_output, "micro_batch_tokens": dp.micro_batch_tokens,
            "seed": cfg.seed, "data_defences": data_settings(cfg, spec),
            # q's unit count: the members' own plus the audit canaries a training is expected to hold (½ m)
            "expected_audit_canaries": int(round(cfg.one_run.canaries / 2)),
            "gradient_canaries": dp.gradient_canaries}
        if lora:
            settings.update({f: getattr(dp, f) for f in _LORA_FIELDS})
            if dp.lora_layers is not None:  # only then in the key, as the dp arms do
                settings["lora_layers"] = dp.lora_layers
        if dp.public_weight > 0:
            settings.update(public_weight=dp.public_weight, public_batch_size=dp.public_batch_size)
        if dp.recipe != "sgd":  # only then in the key: the default's arms keep the keys they had
            settings["recipe"] = dp.recipe
        return DPUserSettings(**settings)

    def check(self, cfg, spec: ArmSpec, names: list[str]) -> None:
        if "lora" in spec.modifiers and cfg.dp.qlora:
            raise ValueError(f"{spec.name} trains LoRA adapters on a full-precision base; QLoRA (dp.qlora) is for "
                             "the dp-ε+lora arms: set dp.qlora false or drop +lora")

    def fit(self, model: Any, s: DPUserSettings, ctx: FitContext) -> tuple[Any, dict[str, Any]]:
        """User-level DP fine-tuning over the people of ``ctx.records`` (no early stopping, as ``dp``)."""
        from ..accountants import epsilons as accountant_epsilons
        from ..models.user_dp import UserDPSettings, person_labels, train_user_dp, user_dp_recipe
        from ..policy import dp_recipe, pretrained_dp_batch_epochs

        persons = person_labels(ctx.records)
        people, planted = unit_counts(ctx.records)
        k = s.records_per_person
        # The public unit count (q = B / N, the recipe's batch): the members' own units, which the split fixes,
        # and the audit canaries a training is expected to include — each one record, one unit — not the
        # realised count, which moves with the canaries' coin flips (issue 37 item 6).
        own = Counter(person_labels([r for r in ctx.records if r.kind != AUDIT_CANARY]))
        expected = s.expected_audit_canaries
        uls = s.method == "uls"
        public_units = (len(own) if uls else sum(min(k, n) for n in own.values())) + expected
        if s.recipe == "pretrained":  # over people (ULS) or kept records (ELS), the arm's own units
            batch, epochs = pretrained_dp_batch_epochs(public_units)
        elif uls:
            batch, epochs = user_dp_recipe(public_units, s.target_epsilon)
        else:
            batch, epochs = dp_recipe(public_units, s.target_epsilon)
        uds = UserDPSettings(
            target_epsilon=s.target_epsilon, delta=s.delta, max_grad_norm=s.max_grad_norm,
            epochs=s.epochs or epochs, expected_batch_size=min(s.batch_size or batch, len(people) + len(planted))
            if uls else (s.batch_size or batch), public_units=public_units, lr=s.lr, records_per_person=k,
            method=s.method, reduction=s.reduction, seed=ctx.seed, accountant=s.accountant,
            micro_batch_tokens=s.micro_batch_tokens, train_output=s.train_output,
            lora_rank=s.lora_rank if s.lora else None,
            **({"lora_alpha": s.lora_alpha, "lora_targets": s.lora_targets, "lora_layers": s.lora_layers}
               if s.lora else {}),
            public_weight=s.public_weight or 0.0, public_batch_size=s.public_batch_size or 64,
            gradient_canaries=s.gradient_canaries)
        public = ctx[ENCODE]([r.text for r in ctx[PUBLIC]]) if uds.public_weight > 0 else None
        model, log = train_user_dp(model, ctx.data, uds, ctx.pad, ctx.max_length, persons, desc=f"train {ctx.label}",
                                   public=public)
        if uls:
            cross = accountant_epsilons(sample_rate=log.sample_rate, noise_multiplier=log.sigma, steps=log.steps,
                                        delta=uds.delta)
            eps_rdp, eps_pld, eps_prv = cross.epsilon_rdp, cross.epsilon_pld, cross.epsilon_prv
        else:
            eps_rdp, eps_pld, eps_prv = None, None, log.epsilon_record
        privacy = {
            # ELS's ε (per record) is train_dp's, which train_els runs with PRV whatever dp.accountant says: the
            # ledger re-derives a line's ε by the accountant it names.
            "target_epsilon": uds.target_epsilon, "accountant": log.accountant if uls else "prv",
            "delta": uds.delta, "sigma": log.sigma, "sample_rate": log.sample_rate, "steps": log.steps,
            "max_grad_norm": uds.max_grad_norm, "epsilon_rdp": eps_rdp, "epsilon_pld": eps_pld,
            "epsilon_prv": eps_prv, "empty_batches": log.empty_batches, "gradient_canaries": log.gradient_canaries,
            # ULS: the mechanism's unit is the person. ELS: record-level DP-SGD whose person-level ε is a
            # group figure, like a dp arm's (the ledger composes the record-level mechanism).
            "unit": "person" if uls else "record",
            "epsilon": log.epsilon if uls else log.epsilon_record,
            "epsilon_record": log.epsilon_record if uls else None,
            "epsilon_person": log.epsilon, "person_records": max(people.values(), default=1),
            "person_accounting": (f"uls: people Poisson-sampled, ≤ {k} records each per step, clipped as one"
                                  if uls else f"els: ≤ {k} records per person kept, mixture-of-Gaussians PLD"),
            "records_per_person": person_sizes(ctx.records),
            # A planted canary is a unit like a person, reported apart: the same person-level ε holds for it.
            **({"epsilon_canary": log.epsilon, "canary_records": max(planted.values()),
                "records_per_canary": person_sizes(ctx.records, canaries=True)} if planted else {}),
        }
        user = {"method": log.method, "people": log.people, "records_per_person_cap": log.records_per_person,
                "people_per_step": log.people_per_step, "records_per_step": log.records_per_step,
                "records_used": log.records_used, "public_weight": log.public_weight}
        # A step reads records_per_step records on average: the token count's data passes.
        return model, {"kind": self.name, "steps": log.steps, "epoch_losses": log.losses, "privacy": privacy,
                       "user_dp": user, "epochs_run": log.records_per_step * log.steps / max(1, len(ctx.data))}

    def details(self, inputs: ArmInputs) -> UserSampling | None:
        rec = (inputs.record or {}).get("user_dp")
        return UserSampling(**rec) if rec else None



class DPUserPresentation(ArmPresentation):
    def figures(self, arm) -> list[str]:
        p = arm.privacy
        if p is None or p.epsilon_person is None:
            return []
        rec = f", ε per record {p.epsilon_per_record:.2f}" if p.epsilon_record is not None else ""
        return [f"ε per person {p.epsilon_person:.2f} (the person with the most records has {p.person_records}){rec}"]


DP_USER_KIND = register(DPUser(), presentation=DPUserPresentation())
