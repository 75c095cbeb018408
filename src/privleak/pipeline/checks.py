"""Checks that need no work: they run before any stage, so bad input costs nothing."""

from __future__ import annotations

from ..arms import ArmSpec, judging, specs
from ..config import AuditConfig
from ..core.errors import UserError
from ..core.limits import BYTES_PER_RECORD, MAX_SCRUB_RECORD_CHARS, SCRUB_CHARS_PER_S, available_memory, check_fits
from ..data.loaders import load_corpus
from ..data.splits import split_corpus

# Rough resident bytes per unit of work, measured on the embedded model with
# generous headroom: a generated sample (text, ids, per-token scores, index
# hits) and an exposure candidate (string, ids, log-likelihood).
_BYTES_PER_SAMPLE = 64 * 1024
_BYTES_PER_CANDIDATE = 2 * 1024


def _available_memory() -> int | None:
    return available_memory()


def check_memory(cfg: AuditConfig, available: int | None = None) -> None:
    """Refuse sample counts that cannot fit in memory, before any work starts."""
    available = _available_memory() if available is None else available
    if available is None:
        return
    gib = 1024**3
    need = cfg.attacks.extraction_samples * _BYTES_PER_SAMPLE
    if cfg.attacks.extraction and need > 0.5 * available:
        raise UserError(
            f"attacks.extraction_samples = {cfg.attacks.extraction_samples} needs about {need / gib:.1f} GiB but only "
            f"{available / gib:.1f} GiB is free; use at most {int(0.5 * available / _BYTES_PER_SAMPLE)} samples"
        )
    need = cfg.canaries.candidates * _BYTES_PER_CANDIDATE
    if need > 0.5 * available:
        raise UserError(
            f"canaries.candidates = {cfg.canaries.candidates} needs about {need / gib:.1f} GiB but only "
            f"{available / gib:.1f} GiB is free; use at most {int(0.5 * available / _BYTES_PER_CANDIDATE)} candidates"
        )
    if cfg.data.path is None:  # the synthetic corpus is generated in memory, every split at once
        syn = cfg.data.synthetic
        total = syn.n_public + syn.n_members + syn.n_non_members + syn.n_population + syn.n_public_heldout
        check_fits("data.synthetic (all splits together)", total, BYTES_PER_RECORD, available)
    if cfg.model.base is None:  # training holds weights, gradients and Adam's two moments (16 B/param), ×2 headroom
        e, d = cfg.model.embedded, cfg.model.embedded.n_embd
        params = e.vocab_size * d + cfg.model.max_length * d + e.n_layer * (12 * d * d + 13 * d)
        check_fits("the embedded model's parameters (model.embedded)", params, 32, available)
    if cfg.release.ldp_terms_epsilon is not None:  # the server's k × m sketch and one m-vector per report batch
        check_fits("release.ldp_k × release.ldp_m", cfg.release.ldp_k * cfg.release.ldp_m, 16, available)


def seed_arms(cfg: AuditConfig) -> list[ArmSpec]:
    """The arms always retrained on extra training seeds (``recommendation.arms``; the contenders the
    recommendation cannot tell apart are added when it asks); a named arm that is not a recommendable trained
    arm is refused (before any work: :func:`preflight` asks)."""
    if not cfg.recommendation.seeds or cfg.recommendation.arms is None:
        return []
    found = [s for s in specs(cfg) if s.kind_obj.model == "trained" and judging(s.kind).recommendable]
    named = cfg.recommendation.arms
    if named is not None:
        unknown = sorted(set(named) - {s.name for s in found})
        if unknown:
            raise UserError(f"recommendation.arms: {', '.join(unknown)} is not a recommendable trained arm of this "
                            f"audit; name some of {', '.join(s.name for s in found) or '(none)'}")
    return [s for s in found if named is None or s.name in named]


def check_scrub_record_sizes(records: list, where: str) -> None:
    """A scrub arm analyses every member record whole, in time linear in its length but at about 14 KB a second
    on one core (a 10.8 MB record: about 13 minutes, with no progress inside it): a record over ``privleak
    scrub``'s default bound is refused before any work, as that command refuses it."""
    for r in records:
        if len(r.text) > MAX_SCRUB_RECORD_CHARS:
            line = r.meta.get("source_line")
            raise UserError(f"{where}{f' line {line}' if line else ''}: a record of {len(r.text):,} characters, over "
                            f"the {MAX_SCRUB_RECORD_CHARS:,} a scrub arm takes (it analyses a record whole, about "
                            f"{max(1, round(len(r.text) / SCRUB_CHARS_PER_S / 60))} min for this one; training reads "
                            "only its first max_length tokens); split such records into shorter ones, or run "
                            "without the scrub arms")


def preflight(cfg: AuditConfig) -> None:
    """Fail on bad input before any output or work: the user's corpus must load
    and split, a ``--model`` reference must be a model directory or hub id, and
    the attack sizes must fit in memory."""
    # The model and stage modules import torch and transformers (seconds): only when a check needs them, so the
    # console script can run these checks before it loads anything heavy.
    check_memory(cfg)
    seed_arms(cfg)
    if cfg.model.text_format not in ("auto", "privleak"):
        raise UserError(f"model.text_format = {cfg.model.text_format}: `run` trains its arms in PrivLeak's own format "
                        "(<eos> text <eos>) and scores them in it; set it to auto, or use it with privleak attack")
    if cfg.data.path is not None:
        records = load_corpus(cfg.data.path, text_field=cfg.data.text_field, fmt=cfg.data.format,
                              group_field=cfg.data.group_field, client_field=cfg.data.client_field)
        if any("scrub" in s.data for s in specs(cfg)):
            check_scrub_record_sizes(records, f"--data {cfg.data.path}")
        from .data import MIN_PER_SPLIT

        split_corpus(records, fractions=tuple(cfg.data.split), seed=cfg.seed, min_per_split=MIN_PER_SPLIT)
    if cfg.model.base is not None:
        from ..models.handle import check_model_ref

        check_model_ref(cfg.model.base)
    if cfg.data.public is not None:
        if cfg.model.base is not None:
            raise UserError("--public pre-trains the embedded base model; it cannot be combined with --model "
                            "(fine-tune your model on that text yourself, or drop --model)")
        if len(load_corpus(cfg.data.public, text_field=cfg.data.text_field, fmt=None)) < 20:
            raise UserError(f"--public {cfg.data.public}: fewer than 20 records; a base model cannot be pre-trained on "
                            "so little — give more public text of your domain or drop --public")


