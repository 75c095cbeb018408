"""Exact and near-duplicate removal."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from privleak.core.errors import UserError
from privleak.data.canaries import make_canaries, plant_canaries
from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus
from privleak.data.records import Record
from privleak.defenses.dedup import (
    dedup,
    dedup_exact,
    dedup_near,
    jaccard,
    normalize_for_dedup,
    shingles,
)


@pytest.fixture(scope="module")
def members_with_canaries():
    cfg = ClinicalCorpusConfig(n_public=10, n_members=400, n_non_members=0, n_population=0,
                               phi_fraction=0.3, canary_repeats=(), seed=2)
    members = generate_corpus(cfg).splits["members"]
    canaries = make_canaries(repeats=(1, 2, 4, 8, 16), per_repeat=2, seed=2)
    return plant_canaries(members, canaries, seed=2), canaries


def _canary_counts(records):
    return Counter(r.meta["canary_id"] for r in records if r.kind == "canary")


@pytest.mark.parametrize("method", ["exact", "near"])
def test_dedup_leaves_one_copy_of_each_canary(members_with_canaries, method):
    records, canaries = members_with_canaries
    assert max(_canary_counts(records).values()) == 16
    if method == "exact":
        kept, rep = dedup_exact(records)
    else:
        kept, rep = dedup_near(records, threshold=0.8)
    assert _canary_counts(kept) == {c.canary_id: 1 for c in canaries}
    planted_repeats = sum(c.repeats - 1 for c in canaries)
    assert rep.n_in == len(records) and rep.n_kept == len(kept) == len(records) - rep.n_removed
    canary_removed = [i for i in rep.removed if records[i].kind == "canary"]
    assert len(canary_removed) == planted_repeats
    if method == "exact":  # the generator makes no other exact repeats
        assert rep.n_removed == planted_repeats
    for cluster in rep.clusters:
        assert cluster == sorted(cluster) and any(k is records[cluster[0]] for k in kept)
        if records[cluster[0]].kind == "canary":
            assert len({records[i].meta["canary_id"] for i in cluster}) == 1
        else:  # near: a real near-duplicate ("Health tip: X" after "X")
            a = shingles(records[cluster[0]].text)
            assert all(jaccard(a, shingles(records[i].text)) >= 0.8 for i in cluster[1:])
    canary_clusters = [c for c in rep.clusters if records[c[0]].kind == "canary"]
    assert len(canary_clusters) == sum(1 for c in canaries if c.repeats > 1)
    # order preserved
    positions = [records.index(k) for k in kept]
    assert positions == sorted(positions)


def test_exact_normalisation():
    texts = ["Hello   World.", "hello world.", "HELLO WORLD", "Hello, world!", "Goodbye world."]
    kept, rep = dedup_exact(texts)
    assert kept == ["Hello   World.", "HELLO WORLD", "Hello, world!", "Goodbye world."]
    assert rep.clusters == [[0, 1]]
    kept, rep = dedup_exact(texts, ignore_punctuation=True)
    assert kept == ["Hello   World.", "Goodbye world."] and rep.clusters == [[0, 1, 2, 3]]
    assert normalize_for_dedup("Ｆｕｌｌ\u00a0width") == "full width"


def _edit_to_jaccard(base: str, target: float, rng: random.Random, above: bool) -> str:
    """Replace letters of ``base`` one at a time (seeded) until the char-5-gram
    Jaccard to ``base`` crosses ``target`` from above; return the last text on
    the requested side."""
    ref = shingles(base)
    chars = list(base)
    order = [i for i, ch in enumerate(chars) if ch.isalpha()]
    rng.shuffle(order)
    prev = base
    for i in order:
        chars[i] = "x" if chars[i] != "x" else "y"
        cur = "".join(chars)
        if jaccard(ref, shingles(cur)) < target:
            return prev if above else cur
        prev = cur
    raise AssertionError("could not reach the target similarity")


def test_near_duplicates_at_the_threshold():
    rng = random.Random(0)
    cfg = ClinicalCorpusConfig(n_public=10, n_members=60, n_non_members=0, n_population=0,
                               phi_fraction=1.0, canary_repeats=(), seed=9)
    bases = [r.text for r in generate_corpus(cfg).splits["members"]]
    threshold = 0.8
    above = [_edit_to_jaccard(b, threshold, rng, above=True) for b in bases[:30]]
    below = [_edit_to_jaccard(b, threshold, rng, above=False) for b in bases[30:]]
    # One replaced letter changes up to five char-5-grams, so on notes of
    # ~250 shingles the construction moves in steps of ~0.03: 0.04 is one step.
    for b, a in zip(bases, above):
        assert threshold <= jaccard(shingles(b), shingles(a)) < threshold + 0.04
    for b, a in zip(bases[30:], below):
        assert threshold - 0.04 < jaccard(shingles(b), shingles(a)) < threshold
    corpus = bases + above + below
    kept, rep = dedup_near(corpus, threshold=threshold, num_perm=128, seed=1)
    removed = set(rep.removed)
    assert removed == set(range(60, 90)), f"missed {sorted(set(range(60, 90)) - removed)}"
    assert rep.clusters == [[i, 60 + i] for i in range(30)]
    # exact dedup sees none of these
    assert dedup_exact(corpus)[1].n_removed == 0
    # deterministic
    assert dedup_near(corpus, threshold=threshold, num_perm=128, seed=1)[1] == rep


def test_word_shingles_and_params():
    a = "the quick brown fox jumps over the lazy dog near the river bank today"
    b = "the quick brown fox jumps over the lazy dog near the river bank tonight"
    kept, rep = dedup_near([a, b, "something else entirely different here"], shingle="word", ngram=3,
                           threshold=0.8)
    assert kept == [a, "something else entirely different here"] and rep.params["ngram"] == 3
    assert dedup_near(["", "", "x"])[1].n_removed == 1  # empty texts are duplicates of each other
    for bad in ({"threshold": 0}, {"threshold": 1.5}, {"num_perm": 4}, {"shingle": "byte"}, {"ngram": 0}):
        with pytest.raises(UserError):
            dedup_near(["a"], **bad)


def test_dedup_both_and_records():
    recs = [Record("Alpha note about gout and its treatment with colchicine."),
            Record("alpha note about gout and its treatment with colchicine."),
            Record("Alpha note about gout and its treatment with colchicine!"),
            Record("Beta note.")]
    kept, reports = dedup(recs, method="both", threshold=0.8)
    assert kept == [recs[0], recs[3]]
    assert [r.method for r in reports] == ["exact", "near"]
    assert [r.n_removed for r in reports] == [1, 1]
    with pytest.raises(UserError):
        dedup(recs, method="fuzzy")


def test_near_dedup_finds_the_one_near_duplicate_among_10k_records():
    rng = random.Random(0)
    words = [f"w{i}" for i in range(3000)]
    texts = [" ".join(rng.choice(words) for _ in range(25)) for _ in range(10_000)]
    texts[5000] = texts[10] + " extra"
    kept, rep = dedup_near(texts, threshold=0.8)
    assert rep.removed == [5000]  # speed: bench/bench_primitives.py
