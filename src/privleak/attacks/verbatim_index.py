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

Saved as one ``.npy`` file (uint64; a 5-word header then the sorted
hashes), loaded with ``allow_pickle=False``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Iterable

import numpy as np

_B = np.uint64(0x100000001B3 * 2 + 1)  # an odd 64-bit multiplier
_MAGIC = np.uint64(0x50524956_56494458)  # "PRIVVIDX"
_VERSION = np.uint64(2)
_WS = re.compile(r"\s+")


def normalise_ws(text: str) -> tuple[str, np.ndarray]:
    """Whitespace-collapsed text and, for each of its characters, the index in ``text``."""
    out: list[str] = []
    idx: list[int] = []
    pos = 0
    stripped_start = len(text) - len(text.lstrip())
    body = text.strip()
    for m in _WS.finditer(body):
        out.append(body[pos : m.start()])
        idx.extend(range(stripped_start + pos, stripped_start + m.start()))
        out.append(" ")
        idx.append(stripped_start + m.start())
        pos = m.end()
    out.append(body[pos:])
    idx.extend(range(stripped_start + pos, stripped_start + len(body)))
    return "".join(out), np.asarray(idx, dtype=np.int64)


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
    return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)


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

    def __init__(self, hashes: np.ndarray, window: int = 50, normalise: bool = True) -> None:
        self.hashes = np.asarray(hashes, dtype=np.uint64)
        self.window = int(window)
        self.normalise = bool(normalise)

    # ------------------------------------------------------------- build
    @classmethod
    def build(cls, texts: Iterable[str], window: int = 50, normalise: bool = True) -> "VerbatimIndex":
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        # One vectorised pass over all texts joined by a sentinel; windows that
        # contain a sentinel (i.e. cross from one text into the next) are dropped.
        strs = [_WS.sub(" ", t.strip()) if normalise else t for t in texts]
        strs = [t for t in strs if len(t) >= window]
        if not strs:
            return cls(np.empty(0, dtype=np.uint64), window, normalise)
        codes = _codes("\x00".join(strs)).copy()
        sentinel = np.zeros(len(codes) + 1, dtype=np.int64)
        lengths = np.fromiter((len(t) for t in strs), dtype=np.int64, count=len(strs))
        seps = np.cumsum(lengths + 1)[:-1] - 1  # positions of the joining "\x00"
        codes[seps] = 0x110000  # above every code point: never part of a real window
        sentinel[1:] = np.cumsum(codes == 0x110000)
        h = _window_hashes(codes, window)
        clean = (sentinel[window:] - sentinel[: len(codes) - window + 1]) == 0
        hashes = np.sort(h[clean])
        if hashes.size:
            hashes = hashes[np.concatenate([[True], hashes[1:] != hashes[:-1]])]
        return cls(hashes, window, normalise)

    def __len__(self) -> int:
        return int(self.hashes.size)

    # ------------------------------------------------------------ lookup
    def _hits(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        if self.normalise:
            s, idx = normalise_ws(text)
        else:
            s, idx = text, np.arange(len(text), dtype=np.int64)
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

    # ----------------------------------------------------------- storage
    def save(self, path: str | os.PathLike[str]) -> None:
        header = np.array([_MAGIC, _VERSION, np.uint64(self.window), np.uint64(int(self.normalise)),
                           np.uint64(self.hashes.size)], dtype=np.uint64)
        np.save(path, np.concatenate([header, self.hashes]), allow_pickle=False)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "VerbatimIndex":
        arr = np.load(path, allow_pickle=False)
        if arr.dtype != np.uint64 or arr.size < 5 or arr[0] != _MAGIC or arr[1] != _VERSION:
            raise ValueError(f"{path}: not a PrivLeak verbatim index (version {int(_VERSION)})")
        n = int(arr[4])
        if arr.size != 5 + n:
            raise ValueError(f"{path}: truncated verbatim index")
        return cls(arr[5:].copy(), window=int(arr[2]), normalise=bool(arr[3]))
