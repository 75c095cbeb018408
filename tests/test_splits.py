"""Splitting a user corpus: seeded, sized, duplicates kept together."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privleak.core.errors import UserError
from privleak.data.records import Record
from privleak.data.splits import SPLIT_NAMES, normalize_text, split_corpus


def _recs(texts: list[str]) -> list[Record]:
    return [Record(text=t, meta={"kind": "user", "source_line": i + 1}) for i, t in enumerate(texts)]


def test_three_texts_are_enough() -> None:
    out = split_corpus(_recs(["a", "b", "c"]))
    assert [len(out[k]) for k in SPLIT_NAMES] == [1, 1, 1]


def test_sizes_and_keys() -> None:
    out = split_corpus(_recs([f"text {i}" for i in range(100)]))
    assert tuple(out) == SPLIT_NAMES
    assert [len(out[k]) for k in SPLIT_NAMES] == [50, 25, 25]


def test_seeded() -> None:
    recs = _recs([f"text {i}" for i in range(60)])
    a = split_corpus(recs, seed=1)
    assert a == split_corpus(recs, seed=1)
    assert a != split_corpus(recs, seed=2)


def test_order_within_split_follows_input() -> None:
    recs = _recs([f"text {i}" for i in range(40)])
    for part in split_corpus(recs, seed=3).values():
        lines = [r.meta["source_line"] for r in part]
        assert lines == sorted(lines)


def test_whitespace_variants_are_duplicates() -> None:
    assert normalize_text("  a \t b\n c ") == "a b c"
    texts = ["same  text", " same text ", "same\ttext"] + [f"other {i}" for i in range(20)]
    out = split_corpus(_recs(texts), seed=0)
    homes = [k for k in SPLIT_NAMES if any(normalize_text(r.text) == "same text" for r in out[k])]
    assert len(homes) == 1
    assert sum(normalize_text(r.text) == "same text" for r in out[homes[0]]) == 3


@settings(max_examples=60, deadline=None)
@given(
    texts=st.lists(
        st.tuples(st.sampled_from(["a", "b", "c", "d", "e", "f", "g", "h"]),
                  st.sampled_from(["", " ", "  ", "\t", "\n"]),
                  st.sampled_from(["x", "y", "z"])),
        min_size=3, max_size=80,
    ),
    seed=st.integers(0, 1000),
)
def test_duplicates_never_cross_splits(texts: list[tuple[str, str, str]], seed: int) -> None:
    raw = [f"{ws}{a}{ws}{b}" if ws else f"{a} {b}" for a, ws, b in texts]
    recs = _recs(raw)
    n_groups = len({normalize_text(t) for t in raw})
    if n_groups < 3:  # one distinct text per split at least
        with pytest.raises(UserError):
            split_corpus(recs, seed=seed)
        return
    out = split_corpus(recs, seed=seed)
    keys = {k: {normalize_text(r.text) for r in out[k]} for k in SPLIT_NAMES}
    for i, a in enumerate(SPLIT_NAMES):
        for b in SPLIT_NAMES[i + 1 :]:
            assert not keys[a] & keys[b]
    # Every record lands exactly once.
    got = Counter(id(r) for part in out.values() for r in part)
    assert got == Counter(id(r) for r in recs)
    assert all(out[k] for k in SPLIT_NAMES)


def test_too_few_records() -> None:
    with pytest.raises(UserError) as info:
        split_corpus(_recs(["a", "b"]))
    msg = str(info.value)
    assert "2 records" in msg and "2 distinct" in msg and "needs at least 3" in msg
    assert "\n" not in msg


def test_too_few_distinct_texts() -> None:
    with pytest.raises(UserError) as info:
        split_corpus(_recs(["a"] * 50 + ["b"] * 50), min_per_split=1)
    assert "100 records in 2 independent units (2 distinct texts" in str(info.value)


def test_min_per_split() -> None:
    recs = _recs([f"t{i}" for i in range(30)])
    split_corpus(recs, min_per_split=7)
    with pytest.raises(UserError, match="needs at least 39 "):
        split_corpus(recs, min_per_split=10)


def test_empty_corpus() -> None:
    with pytest.raises(UserError, match="0 records"):
        split_corpus([])


@pytest.mark.parametrize(
    "fractions",
    [(0.5, 0.5), (0.5, 0.3, 0.3), (1.0, 0.0, 0.0), (0.6, -0.1, 0.5), ("a", 0.5, 0.5),
     (float("nan"), 0.5, 0.5)],
)
def test_bad_fractions(fractions) -> None:
    with pytest.raises(UserError):
        split_corpus(_recs([f"t{i}" for i in range(40)]), fractions=fractions)


def test_custom_fractions_exact_sum() -> None:
    out = split_corpus(_recs([f"t{i}" for i in range(10)]), fractions=(0.6, 0.2, 0.2))
    assert [len(out[k]) for k in SPLIT_NAMES] == [6, 2, 2]
