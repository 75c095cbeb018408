"""What the attacks read: sizes, seeds aside (the context carries the seed).

:class:`AttackSettings` is built from the audit config
(:meth:`privleak.config.AuditConfig.attack_settings`). Each registry entry
names the fields it reads (``AttackSpec.uses``), so changing one attack's
setting redoes only that attack's family.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


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
    def full(cls) -> PiiSizes:
        return cls(extraction_samples=1000, extraction_max_new_tokens=96, reconstruction_slots=140,
                   reconstruction_candidates=64, reconstruction_max_new_tokens=24, inference_slots=140,
                   context_chars=160, suffix_chars=64)


class AttackSettings(BaseModel):
    """Everything the attacks read, in one typed object."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # membership family
    max_mia_records: int = 2000
    bootstrap: int = 200
    min_k_percent: float = 20.0
    rmia_a: float = 0.3
    global_variance: bool = True  # LiRA with few shadows (the paper's advice below ~64)
    clients: tuple[int, str | None] = (20, None)  # client-level membership: K clinics, or the user's client field
    # canaries
    canary_candidates: int = 10_000
    one_run_canaries: tuple[int, int, int] = (1000, 4, 8)  # audit canaries: m, prefix words, secret words
    # extraction
    extraction_samples: int = 400
    prefix_records: int = 250
    phi_records: int = 40
    # PII attacks
    pii: PiiSizes = PiiSizes()
