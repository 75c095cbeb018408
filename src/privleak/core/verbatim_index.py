"""An index over training text for fast verbatim-substring lookup.

Every window of ``w`` characters (default 50) of every indexed text is hashed
(a polynomial hash mod 2^64 over splitmix64-mixed characters) and the hashes are kept in one sorted numpy array. A query computes
the hashes of its own windows (``w`` vectorised numpy passes) and looks them
up with ``np.searchsorted``: the cost depends on the query length and only
logarithmically on the corpus size; no scan over the corpus.

Texts may be whitespace-normalised (runs of whitespace → one space, ends
stripped) before hashing, on both sides, so a generated text that differs
only in spacing still matches. Windows never cross from one indexed text
into the next.

``longest_verbatim_match`` reports the longest run of consecutive matching
windows: a run of r hits starting at i means every ``w``-window of
``text[i : i + r - 1 + w]`` occurs in the corpus. For r = 1 this is exact
("a ≥ w-character verbatim substring exists"); for longer runs the windows
could in principle come from different places, so the length is an upper
bound on the true longest common substring (exact in practice for text of
this kind). Accidental collisions of the 64-bit hash are negligible (~N/2^64 per
lookup); it is not built to resist adversarially constructed text.

``casefold=True`` also lower-cases both sides (final sigma folded to σ, so
the mapping is per character and context-free; characters whose lower case
is longer than one character are kept as they are, so positions still map
back to the query). ``spans`` lists every maximal run of matching windows,
for redaction.

Saved as one ``.npy`` file (uint64; a 5-word header then the sorted
hashes), loaded with ``allow_pickle=False``; ``load(..., mmap=True)`` maps
the hashes instead of reading them (a large index opens in milliseconds and
pages in only what lookups touch). The header's flag word holds
whitespace normalisation in bit 0 and case folding in bit 1, so files
written before case folding existed load unchanged.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

_B = np.uint64(0x100000001B3 * 2 + 1)  # an odd 64-bit multiplier
_MAGIC = np.uint64(0x50524956_56494458)  # "PRIVVIDX"
_VERSION = np.uint64(2)
_WS = re.compile(r"\s+")


@functools.lru_cache(maxsize=1)
def _is_space() -> np.ndarray:
    """For every code point, whether ``\\s`` matches it in a str pattern (``str.isspace``; 29 of them in Python
    3.11's Unicode): a table indexed by code point, 1.1 MB."""
    table = np.zeros(sys.maxunicode + 1, dtype=bool)
    table[[c for c in range(sys.maxunicode + 1) if chr(c).isspace()]] = True
    return table


def normalise_ws(text: str) -> tuple[str, np.ndarray]:
    """Whitespace-collapsed text and, for each of its characters, the index in ``text``.

    ``_WS.sub(" ", text.strip())``, with positions: each run of whitespace becomes one space at the run's first
    character. In numpy over the code points (a Python loop over the matches took 3 s for 10 MB).
    """
    codes = _codes(text)
    space = _is_space()[codes]
    word = ~space
    if not word.any():
        return "", np.empty(0, dtype=np.int64)
    lo, hi = int(word.argmax()), len(word) - int(word[::-1].argmax())  # strip()
    codes, space, keep = codes[lo:hi], space[lo:hi], word[lo:hi]
    # and the first character of each run of whitespace (keep is a view of word: numpy reads overlapping
    # operands of a ufunc as if copied first)
    keep[1:] |= space[1:] & word[lo:hi - 1]
    idx = np.flatnonzero(keep)
    out = codes[idx]
    out[space[idx]] = 32
    idx += lo
    return out.tobytes().decode("utf-32-le", "surrogatepass"), idx


def _mix(codes: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser of each code point: structureless 64-bit character values."""
    z = codes.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _window_hashes(codes: np.ndarray, w: int) -> np.ndarray:
    """uint64 hash of every length-``w`` window of ``codes`` (len(codes) - w + 1 of them).

    Polynomial hash mod 2^64 (numpy's wrapping uint64 arithmetic) over
    splitmix64-mixed characters: w vectorised multiply-adds, no division.
    """
    n = len(codes) - w + 1
    if n <= 0:
        return np.empty(0, dtype=np.uint64)
    c = _mix(codes)
    h = np.zeros(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(w):  # Horner over the window
            h *= _B
            h += c[j : j + n]
    return h


def _codes(text: str) -> np.ndarray:
    # Code points (< 2^21) fit comfortably; products stay below 2^63.
    # surrogatepass: a lone surrogate (possible in JSON input) hashes like any other code point.
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def fold_case(text: str) -> str:
    """Lower case, one character for one character (positions are preserved).

    ``str.lower`` is used when it keeps the length (it never merges
    characters, so equal length means a per-character mapping); otherwise
    characters whose lower case is longer (e.g. "İ") are left as they are.
    Final sigma is folded to σ so the mapping does not depend on context.
    """
    low = text.lower()
    if len(low) != len(text):
        low = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
    return low.replace("ς", "σ")


def _sorted_unique(a: np.ndarray) -> np.ndarray:
    """Sorted distinct values, in place. (np.unique's hash-based path is several times slower on uint64.)"""
    a.sort()
    if a.size:
        a = a[np.concatenate([[True], a[1:] != a[:-1]])]
    return a


@dataclass
class VerbatimMatch:
    length: int  # characters of the longest matched span (0 when < w)
    start: int  # span in the query text (original coordinates); -1 when none
    end: int

    @property
    def found(self) -> bool:
        return self.length > 0


class VerbatimIndex:
    """Sorted hashed ``w``-character windows of a corpus."""

    def __init__(self, hashes: np.ndarray, window: int = 50, normalise: bool = True, casefold: bool = False) -> None:
        self.hashes = np.asarray(hashes, dtype=np.uint64)
        self.window = int(window)
        self.normalise = bool(normalise)
        self.casefold = bool(casefold)

    # ------------------------------------------------------------- build
    @classmethod
    def build(cls, texts: Iterable[str], window: int = 50, normalise: bool = True,
              casefold: bool = False, chunk_chars: int = 8_000_000) -> VerbatimIndex:
        """Index every ``window``-character window of ``texts``.

        Texts are hashed in chunks of about ``chunk_chars`` characters (each
        chunk's unique hashes kept, then merged), so peak memory stays near
        the size of the final index instead of several times the corpus.
        """
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        parts: list[np.ndarray] = []
        chunk: list[str] = []
        size = 0
        for t in texts:
            t = _WS.sub(" ", t.strip()) if normalise else t
            if casefold:
                t = fold_case(t)
            if len(t) < window:
                continue
            chunk.append(t)
            size += len(t) + 1
            if size >= chunk_chars:
                parts.append(cls._chunk_hashes(chunk, window))
                chunk, size = [], 0
        if chunk:
            parts.append(cls._chunk_hashes(chunk, window))
        if not parts:
            return cls(np.empty(0, dtype=np.uint64), window, normalise, casefold)
        hashes = parts[0] if len(parts) == 1 else _sorted_unique(np.concatenate(parts))
        return cls(hashes, window, normalise, casefold)

    @staticmethod
    def _chunk_hashes(strs: list[str], window: int) -> np.ndarray:
        """Sorted unique window hashes of already-normalised texts (each ≥ window long)."""
        # One vectorised pass over all texts joined by a sentinel; windows that
        # contain a sentinel (i.e. cross from one text into the next) are dropped.
        codes = _codes("\x00".join(strs)).copy()
        sentinel = np.zeros(len(codes) + 1, dtype=np.int64)
        lengths = np.fromiter((len(t) for t in strs), dtype=np.int64, count=len(strs))
        seps = np.cumsum(lengths + 1)[:-1] - 1  # positions of the joining "\x00"
        codes[seps] = 0x110000  # above every code point: never part of a real window
        sentinel[1:] = np.cumsum(codes == 0x110000)
        h = _window_hashes(codes, window)
        clean = (sentinel[window:] - sentinel[: len(codes) - window + 1]) == 0
        del codes, sentinel
        hashes = h[clean]
        del h
        return _sorted_unique(hashes)

    def __len__(self) -> int:
        return int(self.hashes.size)

    # ------------------------------------------------------------ lookup
    def _hits(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        if self.normalise:
            s, idx = normalise_ws(text)
        else:
            s, idx = text, np.arange(len(text), dtype=np.int64)
        if self.casefold:
            s = fold_case(s)
        h = _window_hashes(_codes(s), self.window)
        if h.size == 0 or self.hashes.size == 0:
            return np.zeros(h.size, dtype=bool), idx
        pos = np.searchsorted(self.hashes, h)
        pos = np.minimum(pos, self.hashes.size - 1)
        return self.hashes[pos] == h, idx

    def window_hits(self, text: str) -> np.ndarray:
        """For each ``window``-character window of ``text`` (after normalisation), whether it occurs in the corpus.

        Two indexes with the same window and normalisation give aligned arrays,
        so ``a.window_hits(t) & ~b.window_hits(t)`` finds text in corpus a only.
        """
        return self._hits(text)[0]

    def contains(self, text: str) -> bool:
        """Whether ``text`` has a ≥ ``window``-character substring that occurs in the corpus."""
        return bool(self._hits(text)[0].any())

    def longest_verbatim_match(self, text: str) -> int:
        """Length in characters of the longest verbatim match (0 if shorter than the window)."""
        return self.match(text).length

    def match(self, text: str) -> VerbatimMatch:
        """Longest run of matching windows, with its span in ``text``."""
        hits, idx = self._hits(text)
        if not hits.any():
            return VerbatimMatch(0, -1, -1)
        # Runs of consecutive True: find starts/ends via diff of padded array.
        padded = np.concatenate([[False], hits, [False]]).astype(np.int8)
        d = np.diff(padded)
        starts = np.flatnonzero(d == 1)
        ends = np.flatnonzero(d == -1)  # exclusive
        lens = ends - starts
        best = int(np.argmax(lens))
        i, r = int(starts[best]), int(lens[best])
        length = r - 1 + self.window
        last = i + length - 1  # inclusive, in normalised coordinates
        return VerbatimMatch(length, int(idx[i]), int(idx[last]) + 1)

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Every maximal run of matching windows as a ``(start, end)`` span of ``text``.

        Each span covers characters of which every ``window``-window occurs in
        the corpus; every ≥ ``window``-character substring of ``text`` that
        occurs verbatim in the corpus lies inside one span (up to the hash
        collisions described in the module docstring).
        """
        hits, idx = self._hits(text)
        if not hits.any():
            return []
        padded = np.concatenate([[False], hits, [False]]).astype(np.int8)
        d = np.diff(padded)
        starts = np.flatnonzero(d == 1)
        ends = np.flatnonzero(d == -1)
        return [(int(idx[i]), int(idx[e - 1 + self.window - 1]) + 1) for i, e in zip(starts, ends)]

    # ----------------------------------------------------------- storage
    def save(self, path: str | os.PathLike[str]) -> None:
        flags = int(self.normalise) | (int(self.casefold) << 1)
        header = np.array([_MAGIC, _VERSION, np.uint64(self.window), np.uint64(flags),
                           np.uint64(self.hashes.size)], dtype=np.uint64)
        np.save(path, np.concatenate([header, self.hashes]), allow_pickle=False)

    @classmethod
    def load(cls, path: str | os.PathLike[str], mmap: bool = False) -> VerbatimIndex:
        """Read an index written by :meth:`save`; ``mmap=True`` maps the hashes read-only instead of copying them."""
        arr = np.load(path, allow_pickle=False, mmap_mode="r" if mmap else None)
        if arr.dtype != np.uint64 or arr.ndim != 1 or arr.size < 5 or arr[0] != _MAGIC or arr[1] != _VERSION:
            raise ValueError(f"{path}: not a PrivLeak verbatim index (version {int(_VERSION)})")
        n = int(arr[4])
        if arr.size != 5 + n:
            raise ValueError(f"{path}: truncated verbatim index")
        flags = int(arr[3])
        hashes = arr[5:] if mmap else arr[5:].copy()
        return cls(hashes, window=int(arr[2]), normalise=bool(flags & 1), casefold=bool(flags & 2))
