"""Property: every exact member span ≥ threshold inside arbitrary Unicode is caught; check never crashes."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privleak.defenses.guard import Guard, GuardPolicy, ScanSettings

_RNG = random.Random(11)
_WORDS = ["".join(_RNG.choice("abcdefghijklmnopqrstuvwxyzäöüßéçøñ日本語текст0123456789") for _ in range(_RNG.randint(1, 9)))
          for _ in range(3000)]
CORPUS = [" ".join(_RNG.choices(_WORDS, k=40)) for _ in range(60)]
THRESHOLD = 50


@pytest.fixture(scope="module")
def verbatim_guard() -> Guard:
    return Guard.build(CORPUS, threshold=THRESHOLD, policy=GuardPolicy(pii="off"), scan=ScanSettings(ner=False))


@pytest.fixture(scope="module")
def full_guard() -> Guard:
    return Guard.build(CORPUS, canaries=["123-45-6789"], threshold=THRESHOLD, scan=ScanSettings(ner=False))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=st.integers(0, len(CORPUS) - 1), start=st.integers(0, 10_000), length=st.integers(THRESHOLD, 200),
       left=st.text(max_size=80), right=st.text(max_size=80))
def test_member_span_always_caught(verbatim_guard, doc, start, length, left, right):
    text = CORPUS[doc]
    start = start % (len(text) - THRESHOLD + 1)
    span = text[start : start + length].strip()
    if len(span) < THRESHOLD:  # stripping the span's edge spaces can shorten it below the threshold
        return
    out = left + span + right
    v = verbatim_guard.check(out)
    a, b = len(left), len(left) + len(span)
    assert not v.allowed
    assert any(f.reason == "verbatim" and f.start <= a and f.end >= b for f in v.findings)
    assert span not in v.text


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(alphabet=st.characters(codec=None, categories=None), max_size=300))
def test_check_never_crashes(full_guard, text):
    v = full_guard.check(text)
    assert isinstance(v.allowed, bool) and isinstance(v.text, str)
    for f in v.findings:
        assert 0 <= f.start <= f.end <= len(text)
