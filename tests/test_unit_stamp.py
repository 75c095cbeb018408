"""The privacy unit is fixed from the raw data, before any defence (issue 37 item 2).

Scrubbing rewrites texts: the exposure canaries have no person id, and after masking every canary reads
"Verification record for <NAME>: social security number <SSN>." — keyed on text, all of them became one
"person" (three canaries planted twice: ``person_sizes`` {"2": 3} → {"5-8": 1}; on the default audit
dp-8+scrub reported ε per person 11,988 against dp-8's 484). Each record's unit is now stamped from its raw
person id, group, canary id or raw text when the splits are written, and every reader of the unit reads the
stamp. Real scrubbing (Presidio) and real deduplication below, no stand-ins.
"""

from __future__ import annotations

import pytest

from privleak.arms.common import person_privacy, person_sizes
from privleak.data.canaries import make_canaries, plant_canaries
from privleak.data.records import Record
from privleak.data.splits import stamp_units, text_digest, unit_of
from privleak.data.unlearning import person_of
from privleak.defenses.arm_data import dedup_members, scrub_members
from privleak.models.user_dp import person_labels

# One record-level DP-SGD run, as a dp-8 arm's (q, σ, T, δ).
RUN = {"sample_rate": 0.1, "noise_multiplier": 0.9, "steps": 200, "delta": 1e-5}


def _members() -> list[Record]:
    people = []
    for p in range(12):
        for v in range(1 + p % 3):
            text = f"Visit {v} of patient number {p}: follow-up for asthma, plan {p * 7 + v}."
            people.append(Record(text=text, pii=[], meta={"kind": "phi", "person_id": f"P{p:03d}"}))
    canaries = make_canaries(repeats=(2,), per_repeat=3, seed=0)  # three canaries, two copies each
    return stamp_units(plant_canaries(people, canaries, seed=0))


@pytest.fixture(scope="module")
def scrubbed():
    members = _members()
    out, report = scrub_members(members, mode="mask", entities=None, seed=0, desc="test")
    return members, out, report


def test_scrubbed_canaries_read_alike_but_stay_three_people(scrubbed):
    members, out, report = scrubbed
    canaries = [r for r in out if r.kind == "canary"]
    assert report.canary_copies_scrubbed == 6 and len({r.text for r in canaries}) == 1  # masked: one text
    assert person_sizes(members, canaries=True) == person_sizes(out, canaries=True) == {"2": 3}
    assert person_sizes(out) == person_sizes(members) == {"1": 4, "2": 4, "3-4": 4}
    assert [unit_of(r) for r in out] == [unit_of(r) for r in members]
    assert [person_of(r) for r in out] == [person_of(r) for r in members]  # the forget set's key
    assert person_labels(out) == person_labels(members)  # the user-level arms' person


def test_dp_plus_scrub_guarantees_a_person_what_dp_does(scrubbed):
    """dp-8+scrub's ε per person equals dp-8's on the same people: the same run parameters, the same units."""
    members, out, _ = scrubbed
    raw, after = person_privacy(members, **RUN), person_privacy(out, **RUN)
    assert after == raw
    assert raw["person_records"] == 3 and raw["canary_records"] == 2  # real people and canaries apart
    assert raw["records_per_person"] == {"1": 4, "2": 4, "3-4": 4} and raw["records_per_canary"] == {"2": 3}


def test_deduplication_keeps_each_survivor_in_its_unit():
    members = _members()
    kept, report = dedup_members(members, method="exact", threshold=0.8, num_perm=64, seed=0, desc="test")
    assert report.n_removed == 3  # one copy of each canary
    assert person_sizes(kept, canaries=True) == {"1": 3}
    assert {unit_of(r) for r in kept} <= {unit_of(r) for r in members}


def test_the_unit_comes_from_the_raw_record():
    assert unit_of(Record("x", meta={"kind": "canary", "canary_id": "canary-001"})) == ("canary", "canary-001")
    assert unit_of(Record("x", meta={"kind": "audit_canary", "canary_id": "audit-0004"})) == ("canary", "audit-0004")
    assert unit_of(Record("x", meta={"person_id": 4, "group": "g"})) == ("person", "4")
    assert unit_of(Record("x", meta={"group": "g"})) == ("group", "g")
    assert unit_of(Record("  a  b ")) == ("text", text_digest("a b")) and "a b" not in text_digest("a b")
    # A stamped record keeps its unit whatever its text becomes.
    [stamped] = stamp_units([Record("Jane Roe, SSN 123-45-6789", meta={"kind": "user"})])
    rewritten = Record("<NAME>, SSN <SSN>", meta=stamped.meta)
    assert unit_of(rewritten) == unit_of(stamped) == ("text", text_digest("Jane Roe, SSN 123-45-6789"))
    assert stamp_units([stamped])[0] is stamped  # a stamp is never replaced
    raw = Record("t", meta={"group": "g"})
    assert stamp_units([raw])[0].meta["unit"] == "group:g" and "unit" not in raw.meta  # the input is not changed


def test_the_data_stage_writes_the_stamp(tmp_path):
    """`make_data` stamps every split it writes, canaries included (the planted ones by their id)."""
    from conftest import SMALL

    from privleak.config import build_config
    from privleak.data.records import read_jsonl
    from privleak.pipeline.data import make_data
    from privleak.pipeline.rundir import RunDir

    cfg = build_config({**SMALL, "arms": ["baseline"]})
    with RunDir.locked(tmp_path / "run"):
        make_data(cfg, RunDir.open(tmp_path / "run"))
    members = read_jsonl(tmp_path / "run" / "splits" / "members.jsonl")
    assert all(isinstance(r.meta.get("unit"), str) for r in members)
    assert {r.meta["unit"] for r in members if r.kind == "canary"} == {
        f"canary:{r.meta['canary_id']}" for r in members if r.kind == "canary"}
    phi = [r for r in members if r.meta.get("person_id")]
    assert phi and all(r.meta["unit"] == f"person:{r.meta['person_id']}" for r in phi)
