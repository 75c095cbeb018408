"""Canaries: distinct prefixes and secrets, candidate sampling, planting, I/O."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from privleak.core.errors import UserError
from privleak.data.canaries import (
    Canary,
    canary_records,
    load_canaries,
    make_canaries,
    plant_canaries,
    sample_candidates,
    save_canaries,
)
from privleak.data.records import Record


@pytest.fixture(scope="module")
def canaries() -> list[Canary]:
    return make_canaries(seed=0)


def test_make_canaries_counts_and_distinctness(canaries: list[Canary]) -> None:
    assert len(canaries) == 15
    assert Counter(c.repeats for c in canaries) == {1: 3, 2: 3, 4: 3, 8: 3, 16: 3}
    assert len({c.canary_id for c in canaries}) == 15
    assert len({c.prefix for c in canaries}) == 15
    assert len({c.secret for c in canaries}) == 15
    for c in canaries:
        assert re.fullmatch(r"\d{3}-\d{2}-\d{4}", c.secret)
        assert c.secret_format == "###-##-####"
        assert c.space_size() == 10**9
        assert c.text() == c.prefix + c.secret + c.suffix
        assert c.text("000-00-0000") == c.prefix + "000-00-0000" + c.suffix
        assert c.prefix.startswith("Verification record for ")


def test_make_canaries_seeded(canaries: list[Canary]) -> None:
    assert make_canaries(seed=0) == canaries
    other = make_canaries(seed=1)
    assert {c.secret for c in other}.isdisjoint({c.secret for c in canaries})
    assert {c.prefix for c in other} != {c.prefix for c in canaries}


def test_make_canaries_custom_frame_and_format() -> None:
    cs = make_canaries(repeats=(2,), per_repeat=4, seed=3,
                       frame="{name}'s locker code is {secret}, keep it safe.",
                       secret_format="####")
    assert len(cs) == 4 and all(c.repeats == 2 for c in cs)
    assert all(re.fullmatch(r"\d{4}", c.secret) and c.suffix == ", keep it safe." for c in cs)
    assert all(c.space_size() == 10_000 for c in cs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"frame": "no placeholders"},
        {"frame": "{secret} belongs to {name}"},
        {"secret_format": "abc"},
        {"repeats": (1, 0)},
        {"per_repeat": -1},
        {"repeats": (1,), "per_repeat": 11, "secret_format": "#"},
    ],
)
def test_make_canaries_rejects_bad_input(kwargs: dict) -> None:
    with pytest.raises(UserError):
        make_canaries(**kwargs)


def test_secrets_roughly_uniform() -> None:
    cs = make_canaries(repeats=(1,), per_repeat=1000, seed=5, secret_format="#####")
    first_digits = Counter(c.secret[0] for c in cs)
    assert set(first_digits) == set("0123456789")
    assert max(first_digits.values()) < 160  # expected 100 each


def test_sample_candidates_large(canaries: list[Canary]) -> None:
    c = canaries[0]
    cands = sample_candidates(c, 10_000, np.random.default_rng(0))
    assert len(cands) == 10_000 == len(set(cands))
    assert c.secret not in cands
    assert all(re.fullmatch(r"\d{3}-\d{2}-\d{4}", s) for s in cands)
    assert cands == sample_candidates(c, 10_000, np.random.default_rng(0))


def test_sample_candidates_excludes_secret_in_tiny_space() -> None:
    c = Canary("c", "code ", "7", ".", 1, secret_format="#")
    cands = sample_candidates(c, 9, np.random.default_rng(1))
    assert sorted(cands) == [d for d in "012345689"]
    with pytest.raises(UserError, match="only 9"):
        sample_candidates(c, 10, np.random.default_rng(1))


def test_sample_candidates_uniform() -> None:
    c = Canary("c", "code ", "3", ".", 1, secret_format="#")
    rng = np.random.default_rng(2)
    counts = Counter(sample_candidates(c, 1, rng)[0] for _ in range(1800))
    assert set(counts) == set("012456789")
    assert all(140 < v < 260 for v in counts.values())  # expected 200 each


def test_sample_candidates_secret_never_drawn_when_space_small() -> None:
    c = Canary("c", "pin ", "42", "", 1, secret_format="##")
    rng = np.random.default_rng(3)
    for n in (1, 10, 30, 60, 99):
        cands = sample_candidates(c, n, rng)
        assert len(set(cands)) == n and "42" not in cands


def test_canary_records(canaries: list[Canary]) -> None:
    recs = canary_records(canaries)
    assert len(recs) == sum(c.repeats for c in canaries) == 93
    by_id = {c.canary_id: c for c in canaries}
    for r in recs:
        c = by_id[r.meta["canary_id"]]
        assert r.kind == "canary" and r.text == c.text()
        assert r.pii is not None and len(r.pii) == 1
        span = r.pii[0]
        assert span.label == "SSN" and r.text[span.start : span.end] == c.secret


def test_plant_canaries(canaries: list[Canary]) -> None:
    members = [Record(text=f"member {i}", pii=[], meta={"kind": "generic"}) for i in range(500)]
    planted = plant_canaries(members, canaries, seed=0)
    assert len(planted) == 593
    assert [r for r in planted if r.kind != "canary"] == members  # order kept
    assert Counter(r.meta["canary_id"] for r in planted if r.kind == "canary") == {
        c.canary_id: c.repeats for c in canaries
    }
    positions = [i for i, r in enumerate(planted) if r.kind == "canary"]
    assert positions[0] < 100 and positions[-1] > 493  # spread, not appended
    # Copies of one canary are scattered over the epoch, not clustered.
    for c in canaries:
        if c.repeats == 16:
            pos = [i for i, r in enumerate(planted) if r.meta.get("canary_id") == c.canary_id]
            assert pos[0] < 150 and pos[-1] > 443
    assert [r.text for r in plant_canaries(members, canaries, seed=0)] == [r.text for r in planted]
    assert [r.text for r in plant_canaries(members, canaries, seed=1)] != [r.text for r in planted]
    assert len(members) == 500  # input untouched


def test_save_load_roundtrip(tmp_path: Path, canaries: list[Canary]) -> None:
    path = tmp_path / "canaries.json"
    save_canaries(path, canaries)
    assert load_canaries(path) == canaries


def test_load_canaries_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not found"):
        load_canaries(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(UserError, match="bad.json"):
        load_canaries(bad)
    bad.write_text(json.dumps({"canaries": [{"canary_id": "x"}]}))
    with pytest.raises(UserError, match="bad.json"):
        load_canaries(bad)
    bad.write_text(json.dumps({"canaries": [{"canary_id": "x", "prefix": "p ", "secret": "12a",
                                             "suffix": ".", "repeats": 1, "secret_format": "###"}]}))
    with pytest.raises(UserError):
        load_canaries(bad)
