"""Verbatim-substring index: planted spans found, unrelated text not, lookup cost flat in corpus size."""

import random

import numpy as np
import pytest

from privleak.core.verbatim_index import VerbatimIndex, normalise_ws

_VOCAB_RNG = random.Random(123)
_VOCAB = ["".join(_VOCAB_RNG.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(_VOCAB_RNG.randint(2, 9)))
          for _ in range(20_000)]


def _rand_text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choices(_VOCAB, k=n))


@pytest.fixture(scope="module")
def corpus():
    rng = random.Random(0)
    return [_rand_text(rng, 60) for _ in range(200)]


def test_every_planted_span_is_found_and_located(corpus):
    idx = VerbatimIndex.build(corpus, window=50)
    rng = random.Random(1)
    for _ in range(50):
        doc = rng.choice(corpus)
        L = rng.randint(50, 90)
        s = rng.randint(0, len(doc) - L)
        span = doc[s : s + L]
        left, right = _rand_text(rng, 8), _rand_text(rng, 8)
        query = f"{left}\n{span}\t{right}"
        m = idx.match(query)
        assert m.found and idx.contains(query)
        assert m.length >= L  # the whole planted span (maybe a char or two more by chance)
        assert span in query[m.start : m.end]
        assert idx.longest_verbatim_match(query) == m.length


def test_no_false_hit_and_window_is_strict(corpus):
    idx = VerbatimIndex.build(corpus, window=50)
    rng = random.Random(2)
    for _ in range(30):
        q = _rand_text(rng, 40)
        assert not idx.contains(q) and idx.longest_verbatim_match(q) == 0
    doc = corpus[3]
    assert not idx.contains("ZZ" + doc[10:59] + "ZZ")  # 49 characters: below the window
    assert idx.contains("ZZ" + doc[10:60] + "ZZ")  # exactly 50


def test_whitespace_normalisation_both_sides(corpus):
    doc = corpus[5]
    idx = VerbatimIndex.build(corpus, window=50)
    respaced = "  " + doc[:80].replace(" ", "  \n ", 3)
    assert idx.contains(respaced)
    strict = VerbatimIndex.build(corpus, window=50, normalise=False)
    assert not strict.contains(doc[:80].replace(" ", "  ")) and strict.contains(doc[:80])
    s, pos = normalise_ws("  a \n b  ")
    assert s == "a b" and list(pos) == [2, 3, 6]


def test_normalise_ws_is_the_regex_substitution_with_positions():
    """normalise_ws equals ``re.sub(r"\\s+", " ", text.strip())`` (how the index's corpus side normalises) on
    texts of every kind of Unicode whitespace, accents, astral characters and a lone surrogate; each kept
    character maps to its own position, and each space to the first character of its run."""
    import re

    rng = random.Random(5)
    alphabet = list("ab c\t\n\r\x0b\x0c\x1c\x85\xa0\u1680\u2028\u202f\u3000é𝔸\ud800x")
    texts = ["", " ", "a", " a ", "\u3000a\u2028\u2028b\x85"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))) for _ in range(2_000)]
    for text in texts:
        s, pos = normalise_ws(text)
        assert s == re.sub(r"\s+", " ", text.strip()), repr(text)
        assert len(pos) == len(s) and all(np.diff(pos) > 0)
        for ch, i in zip(s, pos.tolist()):
            assert ch == text[i] or (ch == " " and text[i].isspace() and (i == 0 or not text[i - 1].isspace()))


def test_windows_do_not_cross_texts():
    a, b = "x" * 30 + "A", "B" + "y" * 30
    idx = VerbatimIndex.build([a, b], window=50)
    assert not idx.contains(a + " " + b) and len(idx) == 0


def test_save_load_roundtrip_without_pickle(tmp_path, corpus):
    idx = VerbatimIndex.build(corpus, window=50)
    p = tmp_path / "idx.npy"
    idx.save(p)
    back = VerbatimIndex.load(p)
    assert back.window == 50 and back.normalise and np.array_equal(back.hashes, idx.hashes)
    assert back.contains(corpus[7][:60])
    np.save(tmp_path / "bad.npy", np.arange(10, dtype=np.uint64))
    with pytest.raises(ValueError):
        VerbatimIndex.load(tmp_path / "bad.npy")


def test_lookups_in_a_large_index_find_exactly_the_indexed_windows():
    """(How lookup time grows with the corpus is measured in bench/bench_primitives.py.)"""
    rng = random.Random(3)
    texts = [_rand_text(rng, 60) for _ in range(2000)]
    big = VerbatimIndex.build(texts)
    for t in texts[::97]:
        assert big.contains(t)
    assert not any(big.contains(_rand_text(rng, 60)) for _ in range(50))
