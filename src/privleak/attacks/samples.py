"""One pool of a model's unprompted samples, shared by the attacks that draw them the same way.

Carlini et al.'s sampling extraction (``sampling_extraction``) and Lukas et al.'s PII extraction
(``pii_extraction``, and the base model's emissions it subtracts) both draw top-k continuations of a fixed
length from fixed prompts and then look for different things in them (verbatim training text, PII values):
one set of draws serves both, as it would an attacker who sampled once. A pool is a seeded stream per
:class:`SampleSpec` — batch b of :data:`BATCH` continuations is drawn with a seed derived from (seed, spec,
b) — so the first n samples are the same whoever asks and however many a larger request drew: the pipeline
draws each model's pool once (``samples/<model>``; each attack says how many of each spec it reads,
``AttackSpec.draws``, and :func:`requests` merges them) and the stages read it from ``arms/<model>/samples.json``; a caller without a stored pool
(tests, ``privleak attack`` without one) draws the same stream itself.

Not pooled, because their designs prompt with the data: prefix and canary extraction (a member's or a
canary's own prefix), PHI prompts (the text before each PHI value), PII reconstruction (the text before each
masked slot).

A served arm (the output guard) reads its source model's pool — the same draws its model would make — and
passes them through its output filter, as :func:`~privleak.models.generation.generate` does.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.io import write_json

if TYPE_CHECKING:
    from ..models.handle import ModelHandle

#: Continuations per batch: each batch has its own seed, so a pool grows by whole batches.
BATCH = 64


@dataclass(frozen=True)
class SampleSpec:
    """How a stream's samples are drawn: top-k sampling of ``max_new_tokens`` after ``prompt``."""

    prompt: str
    max_new_tokens: int
    top_k: int

    def key(self) -> str:
        return json.dumps([self.prompt, self.max_new_tokens, self.top_k])

    def batch_seed(self, seed: int, b: int) -> int:
        h = hashlib.sha256(json.dumps([seed, self.key(), b]).encode()).digest()
        return int.from_bytes(h[:4], "little")


def split_evenly(n: int, prompts: Iterable[str]) -> list[tuple[str, int]]:
    """``n`` samples over ``prompts`` as the attacks split them: the first ``n mod len`` prompts one more."""
    prompts = list(prompts) or [""]
    return [(p, n // len(prompts) + (1 if i < n % len(prompts) else 0)) for i, p in enumerate(prompts)]


@dataclass
class SamplePool:
    """A model's stored streams (``stored``: spec key → continuations, prompt text excluded)."""

    seed: int
    stored: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path, seed: int) -> SamplePool:
        """The pool saved at ``path`` (an empty one when there is none or it was drawn with another seed)."""
        try:
            saved = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return cls(seed)
        if not isinstance(saved, dict) or saved.get("seed") != seed or not isinstance(saved.get("streams"), dict):
            return cls(seed)
        return cls(seed, {k: list(v) for k, v in saved["streams"].items()})

    def save(self, path: Path) -> None:
        write_json(path, {"seed": self.seed, "batch": BATCH, "streams": self.stored})

    def _grow(self, handle: ModelHandle, spec: SampleSpec, n: int, desc: str) -> list[str]:
        """The stream's first ``n`` raw continuations, drawing the missing batches from ``handle``."""
        from ..models.generation import GenerationSettings, generate

        have = self.stored.setdefault(spec.key(), [])
        for b in range(len(have) // BATCH, math.ceil(n / BATCH)):
            settings = GenerationSettings(max_new_tokens=spec.max_new_tokens, greedy=False, top_k=spec.top_k,
                                          seed=spec.batch_seed(self.seed, b), batch_size=BATCH)
            have.extend(o[0] for o in generate(handle, [spec.prompt] * BATCH, settings, desc=desc))
        return have[:n]

    def draw(self, handle: ModelHandle, spec: SampleSpec, n: int, desc: str = "sampling") -> list[str]:
        """The first ``n`` continuations of ``spec``'s stream from ``handle``'s model, through the handle's
        output filter if it has one (a guarded arm: its source model's draws, as its users would see them)."""
        from ..models.handle import ModelHandle

        out_filter = getattr(handle, "output_filter", None)
        raw = handle if out_filter is None else ModelHandle(model=handle.model, tokenizer=handle.tokenizer,
                                                            max_length=handle.max_length, name=handle.name,
                                                            text_format=handle.text_format)
        texts = self._grow(raw, spec, n, desc)
        return texts if out_filter is None else list(out_filter(list(texts), [spec.prompt] * len(texts)))


def requests(settings: Any, attacks: Iterable[Any]) -> dict[SampleSpec, int]:
    """How many samples of each spec the ``attacks`` (registry entries) read, as each says (``AttackSpec.draws``):
    the most any one reads."""
    want: dict[SampleSpec, int] = {}
    for a in attacks:
        for spec, n in (a.draws(settings) if a.draws is not None else {}).items():
            want[spec] = max(want.get(spec, 0), n)
    return want


def draw_pool(handle: ModelHandle, want: dict[SampleSpec, int], seed: int, path: Path) -> SamplePool:
    """Draw every stream ``want`` asks for and save the pool at ``path``."""
    pool = SamplePool.load(path, seed)
    for spec, n in want.items():
        pool._grow(handle, spec, n, desc=f"samples {handle.name or ''} {spec.prompt!r}".strip())
    pool.save(path)
    return pool


#: Carlini et al.'s sampling extraction: top-k = 40, 64 new tokens, from nothing and from a note's first word.
SAMPLING_PROMPTS = ("", "Patient")
SAMPLING_MAX_NEW_TOKENS = 64
SAMPLING_TOP_K = 40
