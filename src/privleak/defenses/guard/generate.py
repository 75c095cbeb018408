"""A model behind the guard: filtered generation for attacks and for users.

* :class:`GuardedHandle` — a :class:`ModelHandle` whose ``output_filter``
  :func:`privleak.attacks.generation.generate` applies to every decoded batch,
  so the existing extraction attacks run through the guard unchanged.
* :func:`generate_guarded` — what a deployment calls: generate, check each
  sample, re-sample blocked ones (a new seed each attempt), and if a sample is
  still blocked after ``max_attempts``, return its redacted text or a refusal.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ...models.generation import GenerationSettings, generate
from ...models.handle import ModelHandle
from .guard import Guard
from .verdict import Verdict

OutputFilter = Callable[[list[str], list[str]], list[str]]  # (texts, their prompts) -> texts
ON_BLOCK = ("redact", "refuse")


@dataclass
class GuardedHandle(ModelHandle):
    """A model handle whose generated texts pass through ``output_filter``."""

    output_filter: OutputFilter | None = None


def guard_filter(guard: Guard, on_block: str = "redact", refusal: str = "",
                 on_verdicts: Callable[[list[str], list[Verdict]], None] | None = None) -> OutputFilter:
    """A batch filter: allowed outputs come back redacted per policy; blocked ones
    as their fully redacted text (``on_block="redact"``) or ``refusal``.
    ``on_verdicts(texts, verdicts)`` sees every batch (e.g. to count interventions)."""
    if on_block not in ON_BLOCK:
        raise ValueError(f"on_block must be one of {ON_BLOCK}, got {on_block!r}")

    def apply(texts: list[str], prompts: list[str]) -> list[str]:
        verdicts = guard.check_batch(list(texts), list(prompts))
        if on_verdicts is not None:
            on_verdicts(list(texts), verdicts)
        return [v.text if v.allowed or on_block == "redact" else refusal for v in verdicts]

    return apply


def guarded_handle(handle: ModelHandle, guard: Guard, on_block: str = "redact", refusal: str = "",
                   on_verdicts: Callable[[list[str], list[Verdict]], None] | None = None) -> GuardedHandle:
    """``handle`` (same model and tokenizer, not copied) behind ``guard``."""
    return GuardedHandle(model=handle.model, tokenizer=handle.tokenizer, max_length=handle.max_length,
                         name=f"{handle.name}+guard" if handle.name else "guard", text_format=handle.text_format,
                         output_filter=guard_filter(guard, on_block, refusal, on_verdicts))


@dataclass(frozen=True)
class GuardedSample:
    text: str  # what may be shown: the allowed (possibly redacted) text, the redacted text, or the refusal
    verdict: Verdict  # the verdict on the last attempt
    attempts: int  # generations tried for this sample (1 = first one passed)

    @property
    def allowed(self) -> bool:
        return self.verdict.allowed


def generate_guarded(
    handle: ModelHandle,
    guard: Guard,
    prompts: Sequence[str],
    settings: GenerationSettings | None = None,
    *,
    max_attempts: int = 3,
    on_block: str = "redact",
    refusal: str = "[withheld by the output guard]",
) -> list[list[GuardedSample]]:
    """Continuations of each prompt, each checked by ``guard``.

    A blocked sample is re-sampled (top-k, seed ``settings.seed + attempt``;
    greedy decoding would only repeat itself) up to ``max_attempts`` in all.
    A sample still blocked after that is replaced by its redacted text
    (``on_block="redact"``) or by ``refusal``. Guarantee: nothing the guard
    blocks is ever returned; re-sampling only raises the chance of a useful
    answer.
    """
    if on_block not in ON_BLOCK:
        raise ValueError(f"on_block must be one of {ON_BLOCK}, got {on_block!r}")
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
    settings = settings or GenerationSettings()
    raw = generate(handle, list(prompts), settings, desc="guarded generation")
    flat = [(i, j, t) for i, outs in enumerate(raw) for j, t in enumerate(outs)]
    verdicts = guard.check_batch([t for _, _, t in flat], [prompts[i] for i, _, _ in flat])
    final: dict[tuple[int, int], tuple[Verdict, int]] = {(i, j): (v, 1) for (i, j, _), v in zip(flat, verdicts)}
    for attempt in range(1, max_attempts):
        todo = [key for key, (v, _) in final.items() if not v.allowed]
        if not todo:
            break
        again = replace(settings, greedy=False, num_return_sequences=1, seed=settings.seed + attempt)
        outs = generate(handle, [prompts[i] for i, _ in todo], again, desc="guarded generation (retry)")
        new_v = guard.check_batch([o[0] for o in outs], [prompts[i] for i, _ in todo])
        for key, v in zip(todo, new_v):
            final[key] = (v, attempt + 1)
    result: list[list[GuardedSample]] = [[] for _ in prompts]
    for (i, j), (v, n) in sorted(final.items()):
        text = v.text if v.allowed or on_block == "redact" else refusal
        result[i].append(GuardedSample(text=text, verdict=v, attempts=n))
    return result
