"""What the attacks read: sizes, seeds aside (the context carries the seed).

:class:`AttackSettings` is built from the audit config
(:meth:`privleak.config.AuditConfig.attack_settings`). Each registry entry
names the fields it reads (``AttackSpec.uses``), so changing one attack's
setting redoes only that attack's family.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..core import limits as L


class PiiSizes(BaseModel):
    """Sizes of Lukas et al.'s three PII attacks. ``quick()`` ≈ 10 s per small CPU model; ``full()`` nears the paper."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # extraction: M samples of max_new_tokens from each prompt ("" = unconditioned, Lukas et al.)
    extraction_samples: int = 200
    extraction_max_new_tokens: int = 64
    extraction_prompts: tuple[str, ...] = ("",)
    top_k: int = 40  # Lukas et al. sample with top-k = 40
    # reconstruction: member slots (as many non-member slots for the floor), |C| sampled continuations each
    reconstruction_slots: int = 21
    reconstruction_candidates: int = 16
    reconstruction_max_new_tokens: int = 16
    # inference: member slots (and as many non-member), candidate set sizes (nested)
    inference_slots: int = 70  # 10 per identifying type: scoring is cheap, and 21 left ±20 % CIs
    inference_sizes: tuple[int, ...] = (10, 100)
    # scored window around a slot: characters of left context; rest of the sentence up to suffix_chars
    context_chars: int = 32
    suffix_chars: int = 16
    # the paper's game scrubs the sentence's other PII ([LABEL]); off = the attacker knows the rest of the note
    scrub_context: bool = False
    batch_size: int = 64

    @classmethod
    def quick(cls) -> PiiSizes:
        return cls()

    @classmethod
    def smoke(cls) -> PiiSizes:
        """The ``smoke`` profile's: every attack runs, on a tenth of the work (a first look, not a measurement)."""
        return cls(extraction_samples=24, extraction_max_new_tokens=32, reconstruction_slots=7,
                   reconstruction_candidates=4, reconstruction_max_new_tokens=8, inference_slots=14,
                   inference_sizes=(10,))

    @classmethod
    def small(cls) -> PiiSizes:
        """For a 100 M-parameter model on a CPU (the ``lite`` and ``smollm2`` profiles), where one scored or generated token
        costs ~10³× the embedded model's: a quarter of ``quick``'s samples and slots."""
        return cls(extraction_samples=50, extraction_max_new_tokens=32, reconstruction_slots=8,
                   reconstruction_candidates=8, reconstruction_max_new_tokens=12, inference_slots=20,
                   inference_sizes=(10,))

    @classmethod
    def for_profile(cls, profile: str) -> PiiSizes:
        """``full()`` for the ``full`` and ``gpu`` profiles, ``smoke()`` for ``smoke``, ``small()`` for ``smollm2``
        and ``lite``, else ``quick()``."""
        return {"full": cls.full, "gpu": cls.full, "smoke": cls.smoke, "smollm2": cls.small,
                "lite": cls.small}.get(profile, cls.quick)()

    @classmethod
    def full(cls) -> PiiSizes:
        return cls(extraction_samples=1000, extraction_max_new_tokens=96, reconstruction_slots=140,
                   reconstruction_candidates=64, reconstruction_max_new_tokens=24, inference_slots=140,
                   context_chars=160, suffix_chars=64)


class AttackSettings(BaseModel):
    """What the attacks read — declared once: the config's ``attacks`` section is this model.

    The fields in :data:`DERIVED` are not set in the ``attacks`` section: the config fills them from the
    sections they belong to (canaries, one-run audit, shadows, federated clients, the profile's PII sizes;
    :meth:`privleak.config.AuditConfig.attack_settings`) and leaves them out of every dump. Each registry entry
    names the fields it reads (``AttackSpec.uses``): its cache key.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    # membership family
    max_mia_records: int = Field(2000, ge=10, le=L.MAX_RECORDS)
    bootstrap: int = Field(200, ge=0, le=L.MAX_BOOTSTRAP)
    min_k_percent: float = Field(20.0, gt=0.0, le=100.0)  # k of min-k% and min-k%++, in percent of tokens
    rmia_a: float = Field(0.3, ge=0.0, le=1.0)  # Privacy Meter's offline a
    alpha: float = Field(0.05, gt=0.0, lt=1.0)  # confidence of the empirical-ε bound
    # the neighbourhood attack's neighbours per evaluated record; 0 = off (each costs a pass over those records)
    neighbours: int = Field(0, ge=0, le=100)
    # extraction
    extraction: bool = True  # prefix, canary, sampling and PHI-prompt extraction
    extraction_samples: int = Field(400, ge=10, le=L.MAX_RECORDS)  # sampling extraction: generated samples
    prefix_records: int = Field(250, ge=1, le=L.MAX_RECORDS)  # prefix extraction: records per side
    phi_records: int = Field(40, ge=1, le=L.MAX_RECORDS)  # PHI prompt extraction: records per side
    # Lukas et al. PII extraction / reconstruction / inference (sizes follow the profile: pii_sizes)
    pii: bool = True
    # Attacks by name or family (see `privleak.attacks.registry`); None = all. The two switches
    # above still turn a whole family off.
    select: tuple[str, ...] | None = None

    # derived from other sections (see DERIVED)
    global_variance: bool = Field(True, exclude=True)  # LiRA with few shadows (the paper's advice below ~64)
    clients: tuple[int, str | None] = Field((20, None), exclude=True)  # K clinics, or the user's client field
    canary_candidates: int = Field(10_000, exclude=True)
    # m, prefix words, secret words, and the words the reconstruction game gives the model (the rest it decodes)
    one_run_canaries: tuple[int, int, int, int] = Field((1000, 4, 2, 2), exclude=True)
    pii_sizes: PiiSizes = Field(PiiSizes(), exclude=True)

    @field_validator("select")
    @classmethod
    def _known(cls, v: tuple[str, ...] | None) -> tuple[str, ...] | None:
        # The names themselves are checked against the registry by the config (privleak.config), which sits
        # above the attacks: this module is imported by every attack, so it does not import their registry.
        if v is not None and not v:
            raise ValueError("name at least one attack or family, or leave attacks.select unset")
        return v


#: Attack settings filled from other config sections, and where.
DERIVED: dict[str, str] = {
    "global_variance": "shadows.global_variance", "clients": "federated.clients / data.client_field",
    "canary_candidates": "canaries.candidates", "one_run_canaries": "one_run.canaries / prefix_words / secret_words / query_words",
    "pii_sizes": "the profile",
}
