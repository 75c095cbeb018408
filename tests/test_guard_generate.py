"""The generate() output-filter hook and the guarded generation wrapper (tiny model)."""

from __future__ import annotations

from conftest import TINY_TEXTS

from privleak.defenses.guard import Guard, GuardPolicy, ScanSettings
from privleak.defenses.guard.generate import (
    GuardedHandle,
    generate_guarded,
    guarded_handle,
)
from privleak.models.generation import GenerationSettings, generate

PROMPTS = ["Patient Ann", "Patient Bo", "General advice:"]


def test_hook_filters_every_text_and_keeps_draws(tiny_handle):
    s = GenerationSettings(max_new_tokens=12, greedy=False, num_return_sequences=2, seed=3)
    raw = generate(tiny_handle, PROMPTS, s)
    assert raw == generate(tiny_handle, PROMPTS, s)  # no filter: unchanged, deterministic
    seen: list[tuple[str, str]] = []

    def filt(texts: list[str], prompts: list[str]) -> list[str]:
        seen.extend(zip(prompts, texts))
        return [t.upper() for t in texts]

    h = GuardedHandle(tiny_handle.model, tiny_handle.tokenizer, tiny_handle.max_length, output_filter=filt)
    out = generate(h, PROMPTS, s)
    assert out == [[t.upper() for t in ts] for ts in raw]
    assert sorted(seen) == sorted((p, t) for p, ts in zip(PROMPTS, raw) for t in ts)


def test_generate_guarded_never_returns_blocked_text(tiny_handle):
    # The tiny model's greedy output degenerates into "phone phone ...": make that training text.
    guard = Guard.build(TINY_TEXTS + ["phone " * 12], threshold=12, policy=GuardPolicy(pii="off"), scan=ScanSettings(ner=False))
    s = GenerationSettings(max_new_tokens=20, greedy=True)
    out = generate_guarded(tiny_handle, guard, PROMPTS, s, max_attempts=2, on_block="refuse", refusal="[no]")
    flat = [x for xs in out for x in xs]
    assert len(flat) == len(PROMPTS)
    assert any(not x.allowed for x in flat) or any(x.attempts > 1 for x in flat)
    for x in flat:
        assert x.text == "[no]" if not x.allowed else guard.check(x.text).allowed
        assert 1 <= x.attempts <= 2
    redacted = generate_guarded(tiny_handle, guard, PROMPTS, s, max_attempts=1, on_block="redact")
    for x in (y for ys in redacted for y in ys):
        assert x.text == x.verdict.text


def test_guarded_handle_shares_the_model(tiny_handle):
    guard = Guard.build(TINY_TEXTS + ["phone " * 12], threshold=12, policy=GuardPolicy(pii="off"),
                        scan=ScanSettings(ner=False))
    h = guarded_handle(tiny_handle, guard)
    assert h.model is tiny_handle.model and h.output_filter is not None
    out = generate(h, PROMPTS, GenerationSettings(max_new_tokens=20))
    assert all(guard.check(t).allowed or "<VERBATIM>" in t for ts in out for t in ts)
    assert any("<VERBATIM>" in t for ts in out for t in ts)
