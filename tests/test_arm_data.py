"""The training data of data-defence arms: scrubbed / deduplicated members and their reports."""

from __future__ import annotations

from privleak.data.canaries import make_canaries, plant_canaries
from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus
from privleak.data.records import Record
from privleak.defenses.arm_data import dedup_members, scrub_members


def _members(n: int = 60) -> list[Record]:
    cfg = ClinicalCorpusConfig(n_public=10, n_members=n, n_non_members=10, n_population=10, phi_fraction=0.5,
                               canary_repeats=(), seed=3)
    return generate_corpus(cfg).splits["members"]


def test_scrub_members_reports_quality_and_what_went_into_training():
    members = _members()
    scrubbed, report = scrub_members(members, mode="mask", entities=None, seed=0)
    assert len(scrubbed) == len(members)
    assert [r.meta.get("person_id") for r in scrubbed] == [r.meta.get("person_id") for r in members]
    ssn = report.quality.per_type["SSN"]
    assert ssn.support > 0 and ssn.recall >= 0.95
    for label, v in report.pii_in_training.items():
        assert 0 <= v.values_left <= v.ground_truth_spans, label
    assert report.pii_in_training["SSN"].values_left == 0
    for r in scrubbed:
        for s in r.pii or []:  # surviving spans are re-positioned onto the scrubbed text
            assert s.value(r.text).strip()
    # Counts only: no PII value can reach results.json through the report.
    text = report.model_dump_json()
    values = {s.value(r.text) for r in members for s in r.pii or [] if len(s.value(r.text)) >= 6}
    assert values and not [v for v in values if v in text]


def test_scrub_members_removes_canary_secrets():
    canaries = make_canaries(repeats=(2,), per_repeat=2, seed=1)
    members = plant_canaries(_members(20), canaries, seed=1)
    scrubbed, report = scrub_members(members, mode="mask", entities=None, seed=0)
    assert report.canary_copies == 4 and report.canary_copies_scrubbed == 4
    assert not any(c.secret in r.text for c in canaries for r in scrubbed)


def test_dedup_members_collapses_canary_repeats_and_reports_copies():
    canaries = make_canaries(repeats=(1, 8), per_repeat=1, seed=2)
    members = plant_canaries(_members(30), canaries, seed=2)
    kept, report = dedup_members(members, method="both", threshold=0.8, num_perm=128, seed=0)
    copies = report.canary_copies
    assert sorted(v.before for v in copies.values()) == [1, 8]
    assert all(v.after == 1 for v in copies.values())
    assert report.n_removed == len(members) - len(kept) >= 7
    assert report.n_in == len(members)
