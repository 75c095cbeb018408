"""Scrubbing modes, residual PII and the quality report."""

from __future__ import annotations

import re

import pytest

from privleak.core.errors import UserError
from privleak.core.normalise import normalise_value as normalize_value
from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus
from privleak.data.records import PiiSpan, Record
from privleak.defenses.pii import DEFAULT_SCRUB_LABELS, Detection, get_analyzer
from privleak.defenses.scrub import Pseudonymizer, Scrubber, scrub_corpus
from privleak.defenses.scrub_quality import (
    evaluate_scrubber,
    residual_pii,
    value_survives,
)


@pytest.fixture(scope="module")
def analyzer():
    return get_analyzer(DEFAULT_SCRUB_LABELS)


@pytest.fixture(scope="module")
def records():
    cfg = ClinicalCorpusConfig(n_public=10, n_members=300, n_non_members=0, n_population=0,
                               phi_fraction=1.0, canary_repeats=(), seed=5)
    return generate_corpus(cfg).splits["members"]


@pytest.fixture(scope="module")
def detections(analyzer, records):
    return analyzer.analyze_batch([r.text for r in records])


def _scrub(analyzer, records, detections, mode, seed=0):
    s = Scrubber(analyzer, mode=mode, seed=seed)
    return s, [s.apply(r.text, d) for r, d in zip(records, detections)]


def test_mask_leaves_no_ground_truth_value(analyzer, records, detections):
    _, out = _scrub(analyzer, records, detections, "mask")
    masked = [o.text for o in out]
    residual = residual_pii(records, masked, DEFAULT_SCRUB_LABELS)
    assert sum(map(len, residual.values())) == 0, {k: v[:3] for k, v in residual.items() if v}
    for rec, text in zip(records, masked):
        for sp in rec.pii:
            if sp.label in DEFAULT_SCRUB_LABELS:
                assert sp.value(rec.text) not in text
    assert "<NAME>" in masked[0] and "<MRN>" in masked[0]
    assert set(re.findall(r"<([A-Z_]+)>", " ".join(masked))) <= set(DEFAULT_SCRUB_LABELS)
    # labels not scrubbed stay (CONDITION, BP ...)
    kept = [sp for r in records for sp in r.pii if sp.label == "CONDITION"]
    assert kept and all(value_survives("CONDITION", sp.value(r.text), t)
                        for r, t in zip(records, masked) for sp in r.pii if sp.label == "CONDITION")


def test_tag_mode_indexes_values_consistently(analyzer):
    s = Scrubber(analyzer, mode="tag")
    a = s.scrub_text("John Smith, MRN-123456, phone 555-234-5678.")
    b = s.scrub_text("Seen today: Mary Jones, MRN-654321. Call (555) 234-5678 about John Smith.")
    assert a == "<NAME_1>, <MRN_1>, phone <PHONE_1>."
    assert b == "Seen today: <NAME_2>, <MRN_2>. Call <PHONE_1> about <NAME_1>."


def test_pseudonyms_consistent_distinct_and_never_the_original(analyzer, records, detections):
    s, out = _scrub(analyzer, records, detections, "pseudonym", seed=3)
    fakes: dict[str, dict[str, str]] = {}
    n = 0
    for rec, res in zip(records, out):
        assert "<" not in res.text  # fluent: no tags
        for det, _, _, new in res.replacements:
            old = det.value(rec.text)
            key, fake = normalize_value(det.label, old), normalize_value(det.label, new)
            assert fake != key, (det.label, old, new)
            assert fakes.setdefault(det.label, {}).setdefault(key, fake) == fake  # consistent
            n += 1
    assert n > 1000  # enough replacements for the checks to mean something (1,458 on the house corpus)
    for label, mapping in fakes.items():
        values = list(mapping.values())
        assert len(set(values)) == len(values), f"two real {label} values share a fake"
    # the same real values met again, in another record and format, get the same fakes
    k = next(i for i, r in enumerate(records) if {"NAME", "PHONE"} <= {sp.label for sp in r.pii})
    rec = records[k]
    name = next(sp.value(rec.text) for sp in rec.pii if sp.label == "NAME")
    phone = next(sp.value(rec.text) for sp in rec.pii if sp.label == "PHONE")
    digits = re.sub(r"[^0-9]", "", phone)[-10:]
    again = s.scrub_text(f"Patient {name.upper()} asked us to call {digits[:3]}-{digits[3:6]}-{digits[6:]}.")
    name_fake = next(new for det, _, _, new in out[k].replacements if det.label == "NAME")
    phone_fake = next(new for det, _, _, new in out[k].replacements if det.label == "PHONE")
    assert name_fake.upper() in again
    assert re.sub(r"[^0-9]", "", phone_fake)[-10:] in re.sub(r"[^0-9]", "", again)


def test_pseudonym_formats_and_determinism():
    p = Pseudonymizer(seed=1)
    # formats follow each occurrence, digits agree
    d1 = re.sub(r"\D", "", p("PHONE", "(555) 234-5678"))
    d2 = re.sub(r"\D", "", p("PHONE", "+1 555.234.5678"))
    assert d1 == d2[1:] and d2.startswith("1")
    assert re.fullmatch(r"\+1 \d{3}\.\d{3}\.\d{4}", p("PHONE", "+1 555.234.5678"))
    assert re.fullmatch(r"\d{3}-\d{2}-\d{4}", p("SSN", "123-45-6789"))
    assert re.fullmatch(r"MRN-\d{6}", p("MRN", "MRN-123456"))
    assert re.fullmatch(r"[a-z0-9._]+@example\.(com|org|net)", p("EMAIL", "ann@hospital.org"))
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", p("DOB", "1970-03-04"))
    assert re.fullmatch(r"\d{2}/\d{2}/\d{4}", p("DOB", "03/04/1970"))
    full = p("NAME", "John Smith")
    assert p("NAME", "Mr. Smith") == "Mr. " + full.split()[1]  # token-level consistency
    assert Pseudonymizer(seed=1)("NAME", "John Smith") == full  # seeded
    assert Pseudonymizer(seed=2)("NAME", "John Smith") != full
    addr = p("ADDRESS", "12 Oak St, Springfield, IL 62704")
    assert re.search(r", [A-Z]{2} \d{5}$", addr) and addr != "12 Oak St, Springfield, IL 62704"


def test_scrub_records_keeps_only_surviving_spans(analyzer, records):
    out = scrub_corpus(records[:20], mode="pseudonym", analyzer=analyzer, seed=0)
    for before, after in zip(records[:20], out):
        assert after.meta["scrub_mode"] == "pseudonym" and after.meta["n_scrubbed"] > 0
        assert {s.label for s in after.pii}.isdisjoint(DEFAULT_SCRUB_LABELS)
        survivors = [s for s in before.pii if s.label not in DEFAULT_SCRUB_LABELS]
        assert [s.value(before.text) for s in survivors] == [s.value(after.text) for s in after.pii]
    unknown = scrub_corpus([Record("Call John Smith.", pii=None)], analyzer=analyzer)
    assert unknown[0].pii is None and unknown[0].text == "Call <NAME>."


def test_residual_reports_what_a_weak_scrubber_leaves(analyzer, records, detections):
    s = Scrubber(analyzer, mode="mask", labels=["EMAIL"])
    masked = [s.apply(r.text, d).text for r, d in zip(records[:50], detections[:50])]
    residual = residual_pii(records[:50], masked, ["NAME", "EMAIL", "PHONE"])
    n_names = sum(1 for r in records[:50] for sp in r.pii if sp.label == "NAME")
    assert residual["EMAIL"] == [] and len(residual["NAME"]) == n_names and residual["PHONE"]


def test_value_survives_normalisation():
    assert value_survives("PHONE", "(555) 234-5678", "call 555.234.5678 now")
    assert value_survives("PHONE", "+1 555-234-5678", "call (555) 234 5678")
    assert not value_survives("PHONE", "(555) 234-5678", "call <PHONE> or 555-0000")
    assert value_survives("SSN", "123-45-6789", "ssn 123 45 6789")
    assert not value_survives("SSN", "123-45-6789", "ssn 123-45-0000, 6789")
    assert value_survives("NAME", "John  Smith", "Seen: JOHN SMITH.")
    assert not value_survives("NAME", "John Smith", "Seen: John <NAME>.")


def test_evaluate_scrubber_end_to_end(analyzer, records):
    recs = records[:30] + [Record("General advice: sleep well, Ann.", pii=[]), Record("x", pii=None)]
    q = evaluate_scrubber(recs, analyzer)
    assert q.n_records == 31 and q.labels == DEFAULT_SCRUB_LABELS
    assert q.per_type["EMAIL"].recall == 1.0 and q.overall.n_residual == 0
    assert "overall" in q.table() and q.to_dict()["overall"]["support"] == q.overall.support


def test_bad_mode_and_overlapping_input(analyzer):
    with pytest.raises(UserError, match="unknown scrub mode"):
        Scrubber(analyzer, mode="redact-ish")
    s = Scrubber(analyzer)
    with pytest.raises(ValueError, match="overlap"):
        s.apply("abcdef", [Detection(0, 4, "NAME", 1.0), Detection(2, 6, "NAME", 1.0)])
    assert s.apply("abcdef", []).text == "abcdef"
    # a canary's SSN is scrubbed like any other
    text = "Verification record for Ann Lee-Kim: social security number 000-12-3456."
    rec = Record(text, pii=[PiiSpan(text.index("000"), text.index("000") + 11, "SSN")])
    assert "000-12-3456" not in s.scrub_records([rec])[0].text


def test_a_reserved_real_value_is_never_a_fake():
    """Without reservation the seed gives these fakes; once each is reserved as another person's real value,
    the same values get other fakes (names whole: the leak rule never counts one name token)."""
    values = [("NAME", "John Smith"), ("SSN", "123-45-6789"), ("DOB", "1970-03-04"), ("EMAIL", "ann@hospital.org"),
              ("PHONE", "(555) 234-5678"), ("ADDRESS", "12 Oak St, Springfield, IL 62704")]
    free = Pseudonymizer(seed=1)
    first = {label: free(label, v) for label, v in values}
    p = Pseudonymizer(seed=1)
    for label, fake in first.items():
        p.reserve(label, fake)
    for label, v in values:
        again = p(label, v)
        assert normalize_value(label, again) != normalize_value(label, first[label]), label
        assert normalize_value(label, again) != normalize_value(label, v), label
    # names stay consistent token by token where they do not spell a reserved whole name
    assert p("NAME", "Mr. Jones").split()[1] == p("NAME", "Kate Jones").split()[1]


@pytest.mark.parametrize("corpus", ["clinical", "forum"])
def test_scrubbing_never_writes_another_persons_value_into_a_record(analyzer, corpus):
    """The arm's scrubber (scrub_members) in pseudonym mode: every real value found in a scrubbed record was in
    that record before (a value the analyser missed), never one a fake brought from another person. Clinical
    names and the fakes share Faker's en_US pools; the forum (another generator: en_GB, nl, de people, heavy
    repetition per person, free text) shares some."""
    from corpora.forum import build_forum_corpus

    from privleak.core.normalise import find_values
    from privleak.defenses.arm_data import scrub_members
    from privleak.defenses.pii import ENTITY_TO_LABEL

    if corpus == "clinical":
        cfg = ClinicalCorpusConfig(n_public=10, n_members=400, n_non_members=0, n_population=0,
                                   phi_fraction=1.0, canary_repeats=(), seed=11)
        records = generate_corpus(cfg).splits["members"]
    else:
        records = [Record(d["text"], pii=[PiiSpan(a, b, label) for a, b, label in d["pii"]])
                   for d in build_forum_corpus(300, seed=4)]
    scrubbed, _ = scrub_members(records, mode="pseudonym", entities=None, seed=0)

    class V:
        def __init__(self, label, key):
            self.label, self.key = label, key

    keyed = {}
    for r in records:
        for sp in r.pii or ():
            label = ENTITY_TO_LABEL.get(sp.label, sp.label)
            key = normalize_value(label, sp.value(r.text))
            if label in analyzer.labels and key:
                keyed.setdefault((label, key), V(label, key))
    values = list(keyed.values())
    before = find_values(values, [r.text for r in records])
    after = find_values(values, [r.text for r in scrubbed])
    assert len(values) > 100
    brought = [(v.label, j) for v, b, a in zip(values, before, after) for j in set(a) - set(b)]
    assert not brought, brought[:5]


def test_the_arm_keeps_the_other_splits_values_out_of_its_fakes():
    """scrub_members(reserve=…): a fake may not be a non-member's real value either (it would lift the floor
    the attacks compare with). The fakes drawn freely become another split's values; then they are not drawn."""
    from privleak.defenses.arm_data import scrub_members

    text = "Patient John Smith, SSN 123-45-6789, seen today."
    rec = Record(text, pii=[PiiSpan(8, 18, "NAME"), PiiSpan(24, 35, "SSN")])
    free = scrub_members([rec], mode="pseudonym", entities=None, seed=0)[0][0].text
    m = re.fullmatch(r"Patient (.+), SSN (\d{3}-\d{2}-\d{4}), seen today\.", free)
    assert m, free
    other = Record(free, pii=[PiiSpan(m.start(1), m.end(1), "NAME"), PiiSpan(m.start(2), m.end(2), "SSN")])
    again = scrub_members([rec], mode="pseudonym", entities=None, seed=0, reserve=[other])[0][0].text
    assert m.group(1) not in again and m.group(2) not in again, again
    assert "John Smith" not in again and "123-45-6789" not in again
