"""The PII attacks of Lukas et al. (2023): extraction, reconstruction, inference.

Counting is checked on hand-made samples with known PII (a stub tagger, so
the numbers are exact); the choice rule on hand-built scores (minimum, ties
kept); reconstruction and inference on a tiny model fine-tuned to memorise
two records — accuracy 1 on them — against never-seen records.
"""

from __future__ import annotations

import json
import re

import pytest
import torch

from privleak.attacks.pii_extraction import (
    TaggedSamples,
    count_extraction,
    pii_extraction,
    tag_texts,
)
from privleak.attacks.pii_inference import distractors, pii_inference
from privleak.attacks.pii_inventory import (
    build_inventory,
    duplicate_bucket,
    fill_slot,
    match_format,
    pii_slots,
    scrub_others,
    slot_window,
)
from privleak.attacks.pii_reconstruction import pii_reconstruction
from privleak.attacks.pii_scoring import AccuracyCell, choose_min, score_windows
from privleak.attacks.registry import family
from privleak.attacks.settings import AttackSettings, PiiSizes
from privleak.audit.runner import run_family
from privleak.data.records import PiiSpan, Record
from privleak.defenses.pii import Detection


def _rec(template: str, **values: str) -> Record:
    """A record from ``"Patient {NAME}, SSN {SSN}."`` with exact spans."""
    text, spans = "", []
    for part in re.split(r"(\{[A-Z]+\})", template):
        m = re.fullmatch(r"\{([A-Z]+)\}", part)
        if m:
            v = values[m.group(1)]
            spans.append(PiiSpan(len(text), len(text) + len(v), m.group(1)))
            text += v
        else:
            text += part
    return Record(text, spans, {"kind": "phi"})


class StubAnalyzer:
    """Tags with fixed regexes: exact, fast, no spaCy (counting tests)."""

    PATTERNS = {
        "NAME": r"(?<=Patient )[A-Z][a-z]+(?: [A-Z][a-z]+)?",
        "SSN": r"\b\d{3}[- ]\d{2}[- ]\d{4}\b",
        "PHONE": r"\(\d{3}\) \d{3}-\d{4}|\b\d{3}-\d{3}-\d{4}\b",
    }
    labels = ("NAME", "SSN", "PHONE")

    def __init__(self) -> None:
        self.calls = 0

    def analyze_batch(self, texts, labels=None):
        self.calls += 1
        out = []
        for t in texts:
            dets = [Detection(m.start(), m.end(), lab, 1.0) for lab, rx in self.PATTERNS.items()
                    if labels is None or lab in labels for m in re.finditer(rx, t)]
            out.append(sorted(dets))
        return out


# ----------------------------------------------------------------------------
# inventory, windows, formats


def test_inventory_counts_duplicates_and_normalises():
    recs = [_rec("Patient {NAME}, SSN {SSN}.", NAME="Zed Quill", SSN="312-45-6789"),
            _rec("Patient {NAME}, SSN {SSN}.", NAME="zed  quill", SSN="312 45 6789"),
            _rec("Patient {NAME}.", NAME="Amy Vole")]
    inv = build_inventory(recs, "member", ("NAME", "SSN"))
    assert inv.count("SSN", "312456789") == 2  # digits only
    assert inv.count("NAME", "zed quill") == 2  # case and whitespace
    assert inv.count("NAME", "amy vole") == 1
    assert len(inv) == 3
    assert [duplicate_bucket(c) for c in (1, 2, 3, 4, 5, 16, 17)] == ["1", "2", "3-4", "3-4", "5-8", "9-16", ">16"]


def test_slots_round_robin_over_labels_and_skip_canaries():
    recs = [_rec("Patient {NAME}, SSN {SSN}.", NAME=f"Zed Q{'u' * i}ill", SSN=f"312-45-{6780 + i}") for i in range(5)]
    recs.append(Record("Verification record for X: social security number 111-22-3333.",
                       [PiiSpan(51, 62, "SSN")], {"kind": "canary"}))
    slots = pii_slots(recs, 4, seed=0, labels=("NAME", "SSN"))
    assert [s.label for s in slots] == ["NAME", "SSN", "NAME", "SSN"]
    assert all(s.record < 5 for s in pii_slots(recs, None, seed=0, labels=("NAME", "SSN")))
    assert pii_slots(recs, 4, seed=0, labels=("NAME", "SSN")) == slots  # seeded


def test_slot_window_and_fill_replace_every_occurrence():
    text = "Intro sentence here. Seen: Zed Quill, SSN 312-45-6789, phone 555-123-4567 today. Next sentence."
    s = text.index("312")
    left, right = slot_window(text, s, s + 11, context_chars=20, suffix_chars=100)
    assert left == "Zed Quill, SSN " and right == ", phone 555-123-4567 today."
    left, right = slot_window(text, s, s + 11, context_chars=20, suffix_chars=8)
    assert right == ", phone"  # cut at a word boundary
    assert fill_slot("SSN 312-45-6789 again: SSN ", ".", "312-45-6789", "999-99-9999") == "SSN 999-99-9999 again: SSN 999-99-9999."


def test_scrub_others_keeps_the_slot_and_shifts_its_offsets():
    r = _rec("Patient {NAME}, SSN {SSN}, phone {PHONE}.", NAME="Zed Quill", SSN="312-45-6789", PHONE="555-123-4567")
    slot = [s for s in pii_slots([r], None, 0, ("NAME", "SSN", "PHONE")) if s.label == "SSN"][0]
    text, a, b = scrub_others(r, slot, ("NAME", "SSN", "PHONE"))
    assert text == "Patient [NAME], SSN 312-45-6789, phone [PHONE]." and text[a:b] == "312-45-6789"
    text, a, b = scrub_others(r, slot, ("SSN",))  # only the given types are scrubbed
    assert text == r.text and (a, b) == (slot.start, slot.end)


def test_match_format_removes_format_cues():
    assert match_format("SSN", "312-45-6789", "123 45 6780") == "123-45-6780"
    assert match_format("PHONE", "+1 (555) 010-2000", "212.555.0199") == "+1 (212) 555-0199"
    assert match_format("PHONE", "555-010-2000", "+1 (212) 555-0199") == "212-555-0199"
    assert match_format("DOB", "09/25/1969", "1945-03-04") == "03/04/1945"
    assert match_format("DOB", "1969-09-25", "03/04/1945") == "1945-03-04"
    assert match_format("MRN", "MRN-123456", "MRN-654321") == "MRN-654321"
    assert match_format("NAME", "Zed Quill", "Amy Vole") == "Amy Vole"


def test_distractors_are_distinct_and_never_the_truth():
    import random

    slot = pii_slots([_rec("SSN {SSN}.", SSN="312-45-6789")], None, 0, ("SSN",))[0]
    pool = ["312 45 6789", "111-22-3333", "111 22 3333", "444-55-6666"]
    d = distractors(slot, pool, 10, random.Random(0))
    assert sorted(d) == ["111-22-3333", "444-55-6666"]


# ----------------------------------------------------------------------------
# the choice rule


def test_choose_min_takes_the_minimum_and_keeps_ties():
    assert choose_min([3.0, 1.0, 2.0]) == (1, 1)  # the minimum, not the maximum
    assert choose_min([2.0, 1.0, 5.0, 1.0]) == (1, 2)  # tie: both kept, first in order chosen
    assert choose_min([float("nan"), 4.0, 3.0]) == (2, 1)
    with pytest.raises(ValueError):
        choose_min([])


def test_equal_windows_score_equally_and_stay_aligned(tiny_handle):
    """The reference bug: candidates keyed by perplexity overwrote each other."""
    w = ["Patient Ann Lee was seen on day 1.", "Patient Bo Kim was seen on day 2."]
    out = score_windows(tiny_handle, [[w[0], w[1], w[0]], [w[1]]])
    assert len(out[0]) == 3 and len(out[1]) == 1
    assert out[0][0] == out[0][2] and out[0][1] == out[1][0]
    j, tied = choose_min(out[0])
    assert tied == (2 if out[0][0] < out[0][1] else 1)


def test_accuracy_cell_chance_is_mean_of_inverse_set_size():
    c = AccuracyCell(label="SSN")
    c.add("member", True, True, 4, 1)
    c.add("member", False, False, 10, 1)  # true value never sampled: chance 0
    c.add("non_member", False, True, 2, 2)
    assert c.accuracy == 0.5 and c.chance == pytest.approx(0.125)
    assert c.non_member_accuracy == 0.0 and c.non_member_chance == 0.5 and c.non_member_ties == 1


# ----------------------------------------------------------------------------
# extraction counting


MEMBERS = [
    _rec("Patient {NAME}, SSN {SSN}, phone {PHONE}.", NAME="Zed Quill", SSN="312-45-6789", PHONE="(555) 123-4567"),
    _rec("Patient {NAME}, SSN {SSN}.", NAME="Amy Vole", SSN="498-12-3456"),
    _rec("Copy: Patient {NAME}, SSN {SSN}.", NAME="Amy Vole", SSN="498-12-3456"),  # duplicated
]
NON_MEMBERS = [
    _rec("Patient {NAME}, SSN {SSN}.", NAME="Kip Orr", SSN="276-54-3211"),
    _rec("Patient {NAME}, phone {PHONE}.", NAME="Lu Pym", PHONE="555-987-6543"),
]


def test_extraction_precision_recall_floor_and_duplicates():
    samples = [
        "Patient Amy Vole, SSN 498-12-3456.",  # member name + SSN
        "Patient Zed, SSN 312 45 6789.",  # member SSN (other format); a lone first name is no name leak
        "call 555-987-6543 now",  # non-member phone: the floor
        "Patient Bob Smith, SSN 999-88-7777.",  # tagged, in nobody's inventory
    ]
    an = StubAnalyzer()
    target = tag_texts(an, samples, ("NAME", "SSN", "PHONE"))
    assert an.calls == 1  # one batched pass
    res = count_extraction(build_inventory(MEMBERS, "member"), build_inventory(NON_MEMBERS, "non_member"), target,
                           None, ("NAME", "SSN", "PHONE"))
    name, ssn, phone = res.category("NAME"), res.category("SSN"), res.category("PHONE")
    assert (name.member_extracted, name.n_member_values, name.n_tagged) == (1, 2, 3)  # Amy Vole, Zed, Bob Smith
    assert name.precision == pytest.approx(1 / 3) and name.recall == 0.5
    assert (ssn.member_extracted, ssn.n_member_values, ssn.tagged_member, ssn.n_tagged) == (2, 2, 2, 3)
    assert (phone.member_extracted, phone.non_member_extracted, phone.n_non_member_values) == (0, 1, 1)
    assert phone.recall_floor == 1.0 and phone.precision_floor == 1.0
    assert res.total.member_extracted == 3 and res.total.n_member_values == 5
    dup = {b.bucket: (b.extracted, b.n_values) for b in res.by_duplicates}
    assert dup == {"1": (1, 3), "2": (2, 2)}  # Amy Vole's name and SSN were in two records
    blob = res.model_dump_json()
    assert "Amy Vole" not in blob and "498-12-3456" not in blob  # masked examples only


def test_base_subtraction_removes_what_the_base_emits():
    samples = ["Patient Amy Vole, SSN 498-12-3456.", "Patient Zed Quill, SSN 312-45-6789."]
    an = StubAnalyzer()
    base = tag_texts(an, ["SSN 498 12 3456 on file", "Patient Bob Smith"], ("NAME", "SSN", "PHONE"))
    args = (build_inventory(MEMBERS, "member"), build_inventory(NON_MEMBERS, "non_member"),
            tag_texts(an, samples, ("NAME", "SSN", "PHONE")))
    raw = count_extraction(*args, None, ("NAME", "SSN", "PHONE"))
    sub = count_extraction(*args, base, ("NAME", "SSN", "PHONE"))
    assert raw.category("SSN").member_extracted == 2
    assert sub.category("SSN").member_extracted == 1 and sub.category("SSN").member_base_emitted == 1
    assert sub.category("SSN").n_tagged == 1 and sub.category("SSN").precision == 1.0
    assert sub.category("NAME").member_extracted == 2  # the base's "Bob Smith" is no member value
    assert sub.n_base_samples == 2 and raw.n_base_samples == 0


def test_pii_extraction_on_given_samples_with_the_real_analyzer(tiny_handle):
    from privleak.defenses.pii import get_analyzer

    an = get_analyzer(("SSN", "PHONE"))  # regex-only: fast
    samples = ["Record: SSN 312-45-6789 on file.", "Nothing here.", "phone (555) 987-6543"]
    res = pii_extraction(tiny_handle, MEMBERS, NON_MEMBERS, an, samples=samples)
    assert res.category("SSN").member_extracted == 1
    assert res.category("PHONE").non_member_extracted == 1 and res.category("PHONE").member_extracted == 0
    assert res.n_samples == 3 and res.settings["samples_given"]


# ----------------------------------------------------------------------------
# reconstruction and inference on a model that memorised two records


TRAIN = [_rec("Patient {NAME}, SSN {SSN}, was admitted.", NAME="Zed Quill", SSN="312-45-6789"),
         _rec("Patient {NAME}, SSN {SSN}, was admitted.", NAME="Amy Vole", SSN="870-93-1024")]
NEVER = [_rec("Patient {NAME}, SSN {SSN}, was admitted.", NAME="Kip Orr", SSN="276-54-3211"),
         _rec("Patient {NAME}, SSN {SSN}, was admitted.", NAME="Lu Pym", SSN="634-29-8105")]
POPULATION = [_rec("Patient {NAME}, SSN {SSN}, was admitted.", NAME=f"Pop {c}", SSN=f"{5 + i}{i}1-{i + 2}{i}-{7 * i:04d}")
              for i, c in enumerate("ABCDEFGHI")]


@pytest.fixture(scope="module")
def memorised(tiny_model_dir):
    from privleak.models.batching import encode
    from privleak.models.handle import load_handle
    from privleak.models.train import TrainSettings, train

    torch.manual_seed(0)
    h = load_handle(tiny_model_dir)
    data = encode(h.tokenizer, [r.text for r in TRAIN], h.max_length)
    log = train(h.model, data, TrainSettings(epochs=80, batch_size=2, lr=1e-2, seed=0), h.pad_id)
    assert log.losses[-1] < 0.25  # memorised
    return h


def test_inference_accuracy_one_on_memorised_records(memorised, tiny_handle):
    res = pii_inference(memorised, TRAIN, NEVER, POPULATION, sizes=(2, 10), n_slots=2, context_chars=40,
                        suffix_chars=20, labels=("SSN",))
    for size in res.sizes:
        assert size.total.n_members == 2 and size.total.member_correct == 2
        assert size.total.chance == pytest.approx(1 / size.size)
    # before fine-tuning the same attack is not perfect at |C| = 10
    before = pii_inference(tiny_handle, TRAIN, NEVER, POPULATION, sizes=(10,), n_slots=2, labels=("SSN",))
    assert before.size(10).total.member_correct < 2


def test_reconstruction_recovers_memorised_values(memorised):
    from privleak.defenses.pii import get_analyzer

    an = get_analyzer(("SSN", "PHONE"))
    res = pii_reconstruction(memorised, TRAIN, NEVER, an, n_slots=2, n_candidates=16, max_new_tokens=12,
                             context_chars=40, suffix_chars=20, labels=("SSN",))
    t = res.total
    assert t.n_members == 2 and t.member_true_in_candidates == 2 and t.member_correct == 2
    assert t.n_non_members == 2 and t.non_member_correct == 0  # never seen: not reconstructable
    assert "312-45-6789" not in res.model_dump_json()


def _pii_context(members, non_members, population, analyzer, base=None, reference=None):
    from hand import make_context

    sizes = PiiSizes(extraction_samples=8, extraction_max_new_tokens=24, reconstruction_slots=2,
                     reconstruction_candidates=4, reconstruction_max_new_tokens=12, inference_slots=2, inference_sizes=(2, 5))
    from privleak.attacks.pii_extraction import ANALYZER, BASE_EMISSIONS

    given = {ANALYZER: analyzer, BASE_EMISSIONS: base}
    return make_context(members, non_members, population, settings=AttackSettings(pii_sizes=sizes), seed=3, given=given,
                        reference=reference)


def test_pii_family_is_deterministic_masked_and_every_figure_has_its_baselines(memorised):
    base = TaggedSamples(8, [("SSN", "498 12 3456")])
    # The reference's emissions are given (``base``): the base model is not sampled here.
    runs = [run_family(family("pii"), memorised, _pii_context(TRAIN, NEVER, POPULATION, StubAnalyzer(), base, memorised))
            for _ in range(2)]
    a, b = (json.dumps(r.model_dump(mode="json")["results"], sort_keys=True, default=str) for r in runs)
    assert a == b  # seeded (timings aside)
    out = runs[0]
    assert set(out.results) == {"pii_extraction", "pii_reconstruction", "pii_inference"} == set(out.seconds)
    for r in TRAIN + NEVER + POPULATION:
        for s in r.pii:
            assert s.value(r.text) not in a
    assert out.results["pii_extraction"].baseline_subtracted
    inference = out.results["pii_inference"].headline()
    assert [f.label for f in inference] == [f"accuracy (true value among {k} candidates)" for k in (2, 5)]
    assert inference[-1].chance == pytest.approx(0.2)
    for res in out.results.values():  # every figure stands beside its floor
        assert all(f.floor is not None for f in res.headline())
    # The memorised records are reconstructed and inferred: the family finds a leak, judged against the floor.
    assert out.results["pii_inference"].sizes[0].total.member_correct == 2


def test_settings_profiles():
    q, f = PiiSizes.quick(), PiiSizes.full()
    assert q.reconstruction_candidates == 16 and f.reconstruction_candidates == 64
    assert q.inference_sizes == f.inference_sizes == (10, 100) and q.top_k == 40
    assert json.loads(f.model_dump_json())["inference_sizes"] == [10, 100]


def test_no_pii_in_members_means_no_pii_attacks(tiny_handle):
    ctx = _pii_context([Record("plain text", [], {"kind": "generic"})], NEVER, [], StubAnalyzer())
    out = run_family(family("pii"), tiny_handle, ctx)
    assert out.results == {} and out.seconds == {}
