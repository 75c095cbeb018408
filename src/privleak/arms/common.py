"""What several arm kinds share: the data-defence part of their settings, plain fine-tuning, the utility note."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ..data.splits import is_canary_unit, unit_of
from .base import KindSettings

if TYPE_CHECKING:
    from ..config import AuditConfig
    from .base import FitContext
    from .registry import ArmSpec


def data_settings(cfg: AuditConfig, spec: ArmSpec) -> dict[str, Any]:
    """The part of an arm's cache key that its training data depends on: its data defences' settings and the
    one-run audit canaries added to every trained model."""
    return {
        "scrub": cfg.defences.scrub.model_dump(mode="json") if "scrub" in spec.data else None,
        "dedup": cfg.defences.dedup.model_dump(mode="json") if "dedup" in spec.data else None,
        "audit_canaries": cfg.one_run.model_dump(mode="json", exclude={"fdp"}) if cfg.one_run.canaries else None,
    }


def batches_per_epoch(n: int, batch_size: int) -> int:
    return max(1, -(-n // batch_size))


class PlainSettings(KindSettings):
    """Plain fine-tuning (``baseline`` and the kinds that share its recipe): ``train``'s settings."""

    omitted = frozenset({"layers"})

    kind: str = "baseline"
    epochs: float
    batch_size: int
    lr: float
    weight_decay: float
    seed: int
    data_defences: dict[str, Any]
    layers: int | None = None  # train.layers: the top N decoder layers only (None: every weight)


def plain_settings(cfg: AuditConfig, spec: ArmSpec, kind: str, **more: Any) -> dict[str, Any]:
    """The fields of :class:`PlainSettings` from the config's ``train`` section (and ``more``)."""
    return {"kind": kind, **cfg.train.model_dump(mode="json"), "seed": cfg.seed, "data_defences": data_settings(cfg, spec),
            **more}


def fit_plain(model: Any, s: Any, ctx: FitContext,
              validate: Callable[[Any], float] | None = None) -> tuple[Any, dict[str, Any]]:
    """Plain fine-tuning (AdamW, :func:`privleak.models.train.train`) with ``s``'s epochs, batch size, learning
    rate and weight decay (typed settings, or a plug-in's dict); early-stopped on ``validate`` when the settings
    ask for it (``validate_every_epochs``, ``patience``); only the top ``layers`` decoder layers when the
    settings name them (``train.layers``: :func:`privleak.models.frozen_prefix.top_layers_only`)."""
    from ..models.frozen_prefix import top_layers_only
    from ..models.train import EarlyStopping, TrainSettings, train

    s = _typed(s)
    stopping = None
    per_epoch = batches_per_epoch(len(ctx.data), s.batch_size)
    every = getattr(s, "validate_every_epochs", None)
    if every is not None:
        if validate is None:
            raise ValueError("early stopping needs a validation function")
        stopping = EarlyStopping(validate=validate, every=max(1, round(every * per_epoch)), patience=s.patience)
    with top_layers_only(model, getattr(s, "layers", None)):
        tlog = train(model, ctx.data, TrainSettings(epochs=s.epochs, batch_size=s.batch_size, lr=s.lr,
                                                    weight_decay=s.weight_decay, seed=ctx.seed), ctx.pad,
                     desc=f"train {ctx.label}", early_stopping=stopping)
    record = {"kind": s.kind, "steps": tlog.steps, "epoch_losses": tlog.losses, "privacy": None,
              "epochs_run": tlog.steps / per_epoch}
    if stopping is not None:
        record["stopped_epoch"] = round(tlog.best_step / per_epoch, 3)
        record["val_losses"] = tlog.val_losses
    return model, record


def _typed(s: Any) -> Any:
    """A plug-in's dict settings read as attributes."""
    if isinstance(s, dict):
        from types import SimpleNamespace

        return SimpleNamespace(**s)
    return s


def _bucket(k: int) -> str:
    lo = 1 if k <= 1 else 2 ** (k - 1).bit_length() // 2 + 1
    hi = 1 if k <= 1 else 2 ** (k - 1).bit_length()
    return str(k) if k <= 2 else f"{lo}-{hi}"


def unit_counts(records: list) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], int]]:
    """Records per unit, (real people, planted canaries): the unit stamped from the raw data
    (:func:`privleak.data.splits.unit_of`), so a defence never merges or splits one."""
    people: dict[tuple[str, str], int] = {}
    canaries: dict[tuple[str, str], int] = {}
    for r in records:
        u = unit_of(r)
        side = canaries if is_canary_unit(u) else people
        side[u] = side.get(u, 0) + 1
    return people, canaries


def unit_histogram(counts: dict[tuple[str, str], int]) -> dict[str, int]:
    """Units by their number of records: {"1": n, "2": n, "3-4": n, "5-8": n, …}."""
    hist: dict[str, int] = {}
    for k in sorted(counts.values()):
        hist[_bucket(k)] = hist.get(_bucket(k), 0) + 1
    return hist


def person_sizes(records: list, *, canaries: bool = False) -> dict[str, int]:
    """How many records each real person (unit: ``meta.person_id``, a ``--group-field`` group, else a distinct
    raw text) has in ``records`` — or, with ``canaries``, each planted canary (one made-up individual, planted k
    times): a histogram {"1": n, "2": n, "3-4": n, "5-8": n, …}."""
    people, planted = unit_counts(records)
    return unit_histogram(planted if canaries else people)


def person_privacy(records: list, *, sample_rate: float, noise_multiplier: float, steps: int,
                   delta: float) -> dict[str, Any]:
    """What a record-level DP-SGD run guarantees the real person with the most records in its training data,
    and apart from them the planted canary with the most copies: ε at the run's δ for a group of that size
    (:func:`privleak.accountants.group_epsilon`: the direct mixture-of-Gaussians accounting or the
    group-privacy conversion, whichever is smaller — both sound upper bounds), and the records-per-unit
    histograms behind them."""
    from ..accountants import group_epsilon

    people, planted = unit_counts(records)

    def eps(k: int) -> tuple[float, str]:
        g = group_epsilon(sample_rate=sample_rate, noise_multiplier=noise_multiplier, steps=steps, delta=delta,
                          group_size=k)
        return g.epsilon, g.method

    k = max(people.values(), default=1)
    e_person, method = eps(k)
    out: dict[str, Any] = {"epsilon_person": e_person, "person_records": k, "person_accounting": method,
                           "records_per_person": unit_histogram(people)}
    if planted:
        kc = max(planted.values())
        out |= {"epsilon_canary": e_person if kc == k else eps(kc)[0], "canary_records": kc,
                "records_per_canary": unit_histogram(planted)}
    return out
