"""The person (or group, or distinct text) as the membership unit; exchangeable, matched evaluation sets."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from privleak.attacks.membership.selection import MIN_UNITS, mia_selection
from privleak.core.errors import UserError
from privleak.data.loaders import load_corpus
from privleak.data.records import PiiSpan, Record
from privleak.data.splits import split_corpus, text_digest, unit_of


def _note(person: str, i: int, visit: int = 0) -> Record:
    text = f"Visit {visit} of patient {person}: seen for condition number {i * 7919 % 1000} with plan {i * 31 % 97}."
    return Record(text=text, pii=[PiiSpan(0, 5, "NAME")], meta={"kind": "phi", "person_id": person})


def test_one_record_per_person_and_matched_strata():
    members = [_note(f"m{p}", p, v) for p in range(60) for v in range(1 if p % 6 else 4)]
    non_members = [_note(f"n{p}", 1000 + p, v) for p in range(80) for v in range(1 if p % 4 else 4)]
    sel = mia_selection(members, non_members, max_records=2000, seed=3)
    persons_m = [members[i].meta["person_id"] for i in sel.members]
    persons_n = [non_members[i].meta["person_id"] for i in sel.non_members]
    assert len(set(persons_m)) == len(persons_m) and len(set(persons_n)) == len(persons_n)  # one record per person
    assert sel.design.unit == "person" and sel.design.units == [60, 80]
    # matched composition: as many 4-note persons on each side, as many 1-note persons on each side
    size_m = Counter(sum(r.meta["person_id"] == p for r in members) for p in persons_m)
    size_n = Counter(sum(r.meta["person_id"] == p for r in non_members) for p in persons_n)
    assert size_m == size_n
    assert len(sel.members) == len(sel.non_members) and sel.design.available


def test_heavy_duplication_counts_once_and_near_duplicates_crossing_sides_are_dropped():
    boiler = "IT notice: the mail server will be down for maintenance on Saturday from 22:00 to 02:00. Thank you."
    members = [Record(text=boiler, pii=None, meta={"kind": "user"}) for _ in range(50)]
    members += [Record(text=f"Message {i}: the quarterly figures for unit {i * 13} look fine to me, {i}.", pii=None,
                       meta={"kind": "user"}) for i in range(40)]
    near = "Your parcel 1Z99 from Acme was delivered to the front desk at 10:14; collect it before 5 pm today."
    members.append(Record(text=near, pii=None, meta={"kind": "user"}))
    non_members = [Record(text=f"Unrelated note {i}: lunch order number {i * 17} is {i % 5} sandwiches.", pii=None,
                          meta={"kind": "user"}) for i in range(40)]
    non_members.append(Record(text=near.replace("10:14", "10:15"), pii=None, meta={"kind": "user"}))
    sel = mia_selection(members, non_members, max_records=2000, seed=0)
    chosen = [members[i].text for i in sel.members]
    assert chosen.count(boiler) <= 1  # 50 copies, one unit
    assert near not in chosen and all("10:15" not in non_members[i].text for i in sel.non_members)
    assert sel.design.near_duplicate_clusters_dropped >= 1
    assert sel.design.unit == "distinct text"


def test_too_few_units_is_unavailable_not_a_number():
    members = [_note("a", 1, v) for v in range(30)] + [_note(f"b{i}", i) for i in range(5)]
    non_members = [_note(f"c{i}", 100 + i) for i in range(40)]
    sel = mia_selection(members, non_members, max_records=2000, seed=0)
    assert not sel.design.available and str(MIN_UNITS) in sel.design.reason


def test_unit_of_prefers_person_then_group_then_text():
    assert unit_of(Record("x", meta={"person_id": 4, "group": "g"})) == ("person", "4")
    assert unit_of(Record("x", meta={"group": "g"})) == ("group", "g")
    assert unit_of(Record("  a  b ")) == ("text", text_digest("a b"))  # a digest of the normalised text


def test_split_keeps_a_group_and_its_duplicate_texts_in_one_split():
    recs = [Record(text=f"note {i} by author {i % 30}", meta={"group": f"a{i % 30}"}) for i in range(300)]
    recs += [Record(text="note 0 by author 0", meta={"group": "other"})]  # same text as a0's: joins the two groups
    splits = split_corpus(recs, seed=1, min_per_split=5)
    where = {}
    for name, rs in splits.items():
        for r in rs:
            where.setdefault(r.meta["group"], set()).add(name)
    assert all(len(v) == 1 for v in where.values())
    assert where["other"] == where["a0"]


def test_group_field_from_jsonl_and_csv(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text("\n".join(json.dumps({"text": f"t{i}", "author": f"u{i % 3}"}) for i in range(6)) + "\n")
    recs = load_corpus(p, group_field="author")
    assert [r.meta["group"] for r in recs] == ["u0", "u1", "u2", "u0", "u1", "u2"]
    c = tmp_path / "c.csv"
    c.write_text("text,author\nhello,a\nworld,b\n")
    assert [r.meta["group"] for r in load_corpus(c, group_field="author")] == ["a", "b"]
    with pytest.raises(UserError, match="no field 'writer'"):
        load_corpus(p, group_field="writer")
    t = tmp_path / "c.txt"
    t.write_text("a\nb\n")
    with pytest.raises(UserError, match="group-field"):
        load_corpus(t, group_field="author")


def test_selection_is_seeded():
    members = [_note(f"m{p}", p) for p in range(50)]
    non_members = [_note(f"n{p}", 500 + p) for p in range(50)]
    a, b = mia_selection(members, non_members, 30, 5), mia_selection(members, non_members, 30, 5)
    assert np.array_equal(a.members, b.members) and len(a.members) == len(a.non_members) <= 30
