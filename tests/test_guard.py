"""Output guard: verbatim blocker, canary tripwire, PII scanner, policies, index on disk, generate hook."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from privleak.core.errors import UserError
from privleak.core.verbatim_index import VerbatimIndex, fold_case
from privleak.defenses.guard import Guard, GuardPolicy, ScanSettings, Verdict
from privleak.defenses.guard.tripwire import Tripwire

_RNG = random.Random(7)
_VOCAB = ["".join(_RNG.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(_RNG.randint(2, 9))) for _ in range(5000)]
REGEX_ONLY = ScanSettings(ner=False)  # no spaCy model: fast; NER is covered by test_pii_scanner_with_ner


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choices(_VOCAB, k=n))


@pytest.fixture(scope="module")
def corpus() -> list[str]:
    rng = random.Random(0)
    return [_text(rng, 50) for _ in range(100)] + [
        "Verification record for Ann Lee-Park: social security number 376-45-8448."]


@pytest.fixture(scope="module")
def guard(corpus) -> Guard:
    return Guard.build(corpus, canaries=["376-45-8448"], inventory=[("NAME", "Maria Gonzalez"), ("NAME", "Bob"),
                                                                    ("PHONE", "(555) 010-2000")],
                       scan=REGEX_ONLY)


def test_verbatim_span_blocked_and_redacted(guard, corpus):
    span = corpus[3][20:95]
    v = guard.check(f"Sure! Here it is: {span} -- hope that helps.")
    assert not v.allowed and "verbatim" in v.reasons()
    f = next(f for f in v.findings if f.reason == "verbatim")
    assert f.start <= 18 and f.end >= 18 + len(span) and f.action == "block"
    assert span not in v.text and "<VERBATIM>" in v.text
    assert set(f.to_json()) == {"reason", "label", "start", "end", "action", "score"}  # spans, never values


def test_verbatim_threshold_is_strict(guard, corpus):
    doc = corpus[5]
    assert guard.check("ZZ" + doc[10:59] + "ZZ").allowed  # 49 characters
    assert not guard.check("ZZ" + doc[10:60] + "ZZ").allowed  # 50
    assert guard.check(_text(random.Random(99), 60)).allowed  # unrelated text


def test_whitespace_and_case_normalisation(corpus):
    span = corpus[8][:90]
    respaced = span.replace(" ", " \n\t ", 4)
    plain = Guard.build(corpus, scan=REGEX_ONLY, policy=GuardPolicy(pii="off"))
    assert not plain.check(respaced).allowed
    assert plain.check(span.upper()).allowed  # case-sensitive by default
    folded = Guard.build(corpus, casefold=True, scan=REGEX_ONLY, policy=GuardPolicy(pii="off"))
    assert not folded.check(span.upper()).allowed
    assert fold_case("ΑΣ İx") == "ασ İx" and len(fold_case("İ")) == 1


@pytest.mark.parametrize("form", ["376-45-8448", "376 45 8448", "376.45.8448", "376458448", "(376) 45-8448",
                                  "x376458448y", "id 12376-45-8448"])
def test_canary_tripwire_any_separators(guard, form):
    v = guard.check(f"The number is {form} ok")
    assert not v.allowed and "canary" in v.reasons()
    assert "8448" not in v.text


@pytest.mark.parametrize("text", ["376-45-8449", "376-45 / call 8448 later today", "3 7 6 a 4 5 8 4 4 8"])
def test_canary_tripwire_no_false_hit(guard, text):
    assert "canary" not in guard.check(text).reasons()


def test_inventory_values(guard):
    assert "canary" in guard.check("seen by MARIA   gonzalez yesterday").reasons()
    assert "canary" in guard.check("call 555.010.2000").reasons()
    assert "canary" not in guard.check("Bob said hi").reasons()  # one-word names are not keyed
    # keys are salted hashes: the stored tripwire never lists the values
    dumped = json.dumps(guard.tripwire.to_json())
    assert "gonzalez" not in dumped.lower() and "8448" not in dumped


def test_tripwire_json_roundtrip():
    tw = Tripwire.build(["A-123-456"], [("EMAIL", "ann.lee@example.com")])
    back = Tripwire.from_json(json.loads(json.dumps(tw.to_json())))
    assert [h.label for h in back.scan("mail ann lee@example com or a123456")] == ["CANARY", "EMAIL"] or \
        {h.label for h in back.scan("mail ann lee@example com or a123456")} == {"CANARY", "EMAIL"}


def test_pii_policies(corpus):
    text = "Call me at (617) 555-0142 tomorrow."
    red = Guard.build(corpus, scan=REGEX_ONLY).check(text)
    assert red.allowed and red.text == "Call me at <PHONE> tomorrow." and red.intervened
    logged = Guard.build(corpus, scan=REGEX_ONLY, policy=GuardPolicy(pii="log")).check(text)
    assert logged.allowed and logged.text == text and logged.findings and not logged.intervened
    blocked = Guard.build(corpus, scan=REGEX_ONLY, policy=GuardPolicy(pii="block")).check(text)
    assert not blocked.allowed and "(617)" not in blocked.text
    off = Guard.build(corpus, scan=REGEX_ONLY, policy=GuardPolicy(pii="off")).check(text)
    assert off.allowed and off.text == text and not off.findings


def test_mask_format_matches_scrubber():
    from privleak.defenses.guard.verdict import mask_token
    from privleak.defenses.pii import get_analyzer
    from privleak.defenses.scrub import Scrubber

    assert mask_token("PHONE") == Scrubber(get_analyzer(ner=False), mode="mask").replacement("PHONE", "x")


def test_policy_parse():
    assert GuardPolicy.parse("pii=log, canary=redact") == GuardPolicy(pii="log", verbatim="block", canary="redact")
    assert GuardPolicy.parse(None) == GuardPolicy()
    for bad in ("pii", "foo=block", "pii=maybe"):
        with pytest.raises(UserError):
            GuardPolicy.parse(bad)


def test_overlapping_findings_merge(guard, corpus):
    span = corpus[2][:80]
    v = guard.check(span + " 376-45-8448")
    assert v.text.count("<") == 2 and "<VERBATIM>" in v.text and "<CANARY>" in v.text


def test_save_load_mmap_same_verdicts(tmp_path, guard, corpus):
    guard.save(tmp_path / "idx")
    back = Guard.load(tmp_path / "idx", scan=REGEX_ONLY)
    assert isinstance(back.index.hashes, np.ndarray) and not back.index.hashes.flags.writeable  # mapped, read-only
    for t in [corpus[1][:70], "ssn 376 45 8448", "nothing here", "Maria Gonzalez"]:
        assert back.check(t) == guard.check(t)
    assert back.describe()["n_tripwire_keys"] == guard.describe()["n_tripwire_keys"]
    (tmp_path / "idx" / "guard.json").write_text("{not json")
    with pytest.raises(UserError):
        Guard.load(tmp_path / "idx")
    with pytest.raises(UserError):
        Guard.load(tmp_path / "nope")


def test_threshold_validation(corpus):
    with pytest.raises(UserError):
        Guard.build(corpus, threshold=3)


def test_verbatim_index_extensions(tmp_path, corpus):
    idx = VerbatimIndex.build(corpus, window=50, casefold=True)
    idx.save(tmp_path / "i.npy")
    back = VerbatimIndex.load(tmp_path / "i.npy", mmap=True)
    assert back.casefold and back.normalise and back.contains(corpus[0][:60].upper())
    q = "zz " + corpus[1][:60] + " zz " + corpus[2][5:70] + " zz"
    spans = back.spans(q)
    assert len(spans) == 2 and corpus[1][:60] in q[spans[0][0] : spans[0][1]]
    # chunked build == one-shot build
    assert np.array_equal(VerbatimIndex.build(corpus, chunk_chars=500).hashes, VerbatimIndex.build(corpus).hashes)


def test_check_batch_matches_check(guard, corpus):
    texts = [corpus[0][:70], "ssn 376-45-8448", "", "plain words", "\ud800 lone surrogate"]
    assert guard.check_batch(texts) == [guard.check(t) for t in texts]
    assert all(isinstance(v, Verdict) for v in guard.check_batch(texts))
    with pytest.raises(TypeError):
        guard.check_batch("one string")


def test_pii_scanner_with_ner(corpus):
    g = Guard.build(corpus, scan=ScanSettings(pii_labels=("NAME", "EMAIL"), ner=True, score_threshold=0.4))
    v = g.check("Please forward this to Jennifer Hopkins at jen.hopkins@example.org today.")
    labels = {f.label for f in v.findings if f.reason == "pii"}
    assert labels == {"NAME", "EMAIL"} and "Hopkins" not in v.text


def test_context_catches_spans_crossing_the_prompt(corpus):
    g = Guard.build(corpus, scan=REGEX_ONLY, policy=GuardPolicy(pii="off"))
    doc = corpus[4]
    prompt, output = "Continue: " + doc[:30], doc[30:60] + " and then something else"
    assert g.check(output).allowed  # 30 characters alone: below the threshold
    v = g.check(output, context=prompt)
    assert not v.allowed and v.findings[0].start == 0 and v.findings[0].end == 30
    assert v.text.startswith("<VERBATIM>") and prompt not in v.text
    assert g.check_batch([output], [prompt]) == [v]


def test_allow_texts_unblocks_public_boilerplate(corpus):
    boiler = corpus[6]
    g = Guard.build(corpus, scan=REGEX_ONLY, policy=GuardPolicy(pii="off"), allow_texts=[boiler])
    assert g.check(boiler[:80]).allowed and not g.check(corpus[7][:80]).allowed
    assert g.meta["n_windows_allowed"] > 0
