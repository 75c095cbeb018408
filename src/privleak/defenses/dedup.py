"""Deduplication: exact (normalised hash) and near-duplicate (MinHash LSH).

Repeated records are what a language model memorises first (Kandpal et al.
2022); a canary planted 16 times is exactly such a repeat. Both functions
keep the **first** occurrence of every group, preserve the input order, and
return ``(kept, report)``; they accept :class:`Record` objects or plain
strings and give back the same objects.

* :func:`dedup_exact` hashes a normalised form of each text (Unicode NFKC,
  case-folded, whitespace collapsed; optionally punctuation removed) with
  BLAKE2b and drops every later record with a hash already seen.
* :func:`dedup_near` drops a record whose **Jaccard similarity** with an
  earlier *kept* record is at least ``threshold``, over shingles of the
  normalised text: character ``ngram``-grams (default 5) or word
  ``ngram``-grams (``shingle="word"``, e.g. 3). Candidates come from a
  ``datasketch`` MinHash LSH index (``num_perm`` permutations, seeded) whose
  banding is chosen (:func:`lsh_params`) so that a pair with Jaccard exactly
  ``threshold`` becomes a candidate with probability ≥ 0.999 (more for more
  similar pairs); every candidate is then checked with the *exact* Jaccard
  of the two shingle sets, so the decision is "exact Jaccard ≥ threshold"
  up to that 0.1 % LSH miss rate at the threshold, and no false positives.
  Cost is about linear in the corpus (10k notes in a few seconds on one
  core).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
import zlib
from dataclasses import asdict, dataclass, field
from typing import Callable, Sequence, TypeVar

from privleak.core.errors import UserError
from privleak.data.records import Record

T = TypeVar("T", Record, str)

_WS = re.compile(r"\s+")


@dataclass
class DedupReport:
    """What a deduplication pass did.

    ``clusters``: one list per group of duplicates with at least two members,
    as indices into the input; the first index is the record kept.
    ``removed``: input indices dropped, ascending.
    """

    method: str
    n_in: int
    n_kept: int
    n_removed: int
    clusters: list[list[int]] = field(default_factory=list)
    removed: list[int] = field(default_factory=list)
    params: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

    def counts(self) -> dict:
        """The report without the per-index lists (what results and command output show)."""
        return {"method": self.method, "n_in": self.n_in, "n_kept": self.n_kept, "n_removed": self.n_removed,
                "n_clusters": len(self.clusters), "params": self.params}

    def summary(self) -> str:
        return (f"{self.method}: {self.n_in} in, {self.n_removed} removed in "
                f"{len(self.clusters)} duplicate group(s), {self.n_kept} kept")


def _text(item: Record | str) -> str:
    return item.text if isinstance(item, Record) else str(item)


def normalize_for_dedup(text: str, *, ignore_punctuation: bool = False) -> str:
    """NFKC, case-folded, whitespace collapsed; punctuation dropped on request."""
    s = unicodedata.normalize("NFKC", text).casefold()
    if ignore_punctuation:
        s = "".join(" " if unicodedata.category(ch).startswith("P") else ch for ch in s)
    return _WS.sub(" ", s).strip()


def _clusters(groups: dict[int, list[int]]) -> list[list[int]]:
    return [members for _, members in sorted(groups.items()) if len(members) > 1]


def dedup_exact(records: Sequence[T], *, ignore_punctuation: bool = False) -> tuple[list[T], DedupReport]:
    """Drop records whose normalised text equals an earlier record's."""
    first: dict[bytes, int] = {}
    groups: dict[int, list[int]] = {}
    kept: list[T] = []
    removed: list[int] = []
    for i, rec in enumerate(records):
        norm = normalize_for_dedup(_text(rec), ignore_punctuation=ignore_punctuation)
        h = hashlib.blake2b(norm.encode("utf-8"), digest_size=16).digest()
        j = first.get(h)
        if j is None:
            first[h] = i
            groups[i] = [i]
            kept.append(rec)
        else:
            groups[j].append(i)
            removed.append(i)
    report = DedupReport("exact", len(records), len(kept), len(removed), _clusters(groups), removed,
                         {"ignore_punctuation": ignore_punctuation})
    return kept, report


def shingles(text: str, *, shingle: str = "char", ngram: int = 5, ignore_punctuation: bool = False) -> set[int]:
    """The shingle set of a text, each shingle as a 32-bit CRC (deterministic
    across processes, unlike ``hash``). A text shorter than one shingle is
    one shingle."""
    norm = normalize_for_dedup(text, ignore_punctuation=ignore_punctuation)
    if shingle == "char":
        grams = [norm[i : i + ngram] for i in range(max(1, len(norm) - ngram + 1))]
    else:
        words = norm.split(" ")
        grams = [" ".join(words[i : i + ngram]) for i in range(max(1, len(words) - ngram + 1))]
    return {zlib.crc32(g.encode("utf-8")) for g in grams}


def jaccard(a: set[int], b: set[int]) -> float:
    if not a and not b:
        return 1.0
    inter = len(a & b) if len(a) < len(b) else len(b & a)
    return inter / (len(a) + len(b) - inter)


def _check_near_params(threshold: float, num_perm: int, shingle: str, ngram: int) -> None:
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.0 < threshold <= 1.0:
        raise UserError(f"near-duplicate threshold must be in (0, 1], got {threshold!r}; try 0.8")
    if isinstance(num_perm, bool) or not isinstance(num_perm, int) or num_perm < 16:
        raise UserError(f"num_perm must be an integer >= 16, got {num_perm!r}; try 128")
    if shingle not in ("char", "word"):
        raise UserError(f"shingle must be 'char' or 'word', got {shingle!r}")
    if isinstance(ngram, bool) or not isinstance(ngram, int) or ngram < 1:
        raise UserError(f"ngram must be a positive integer, got {ngram!r}; try 5 (char) or 3 (word)")


def dedup_near(
    records: Sequence[T],
    *,
    threshold: float = 0.8,
    num_perm: int = 128,
    shingle: str = "char",
    ngram: int | None = None,
    seed: int = 0,
    ignore_punctuation: bool = False,
    on_progress: Callable[[int], None] | None = None,
) -> tuple[list[T], DedupReport]:
    """Drop records with Jaccard ≥ ``threshold`` to an earlier kept record.

    ``ngram`` defaults to 5 for ``shingle="char"`` and 3 for ``"word"``.
    """
    from datasketch import MinHash, MinHashLSH

    ngram = (5 if shingle == "char" else 3) if ngram is None else ngram
    _check_near_params(threshold, num_perm, shingle, ngram)
    bands, rows = lsh_params(threshold, num_perm)
    lsh = MinHashLSH(num_perm=num_perm, params=(bands, rows))
    template = MinHash(num_perm=num_perm, seed=seed, hashfunc=_identity)
    kept_sets: dict[int, set[int]] = {}
    groups: dict[int, list[int]] = {}
    kept: list[T] = []
    removed: list[int] = []
    for i, rec in enumerate(records):
        sh = shingles(_text(rec), shingle=shingle, ngram=ngram, ignore_punctuation=ignore_punctuation)
        mh = template.copy()
        mh.update_batch(sorted(sh))
        best, best_j = -1, -1.0
        for cand in sorted(lsh.query(mh)):
            j = jaccard(sh, kept_sets[cand])
            if j >= threshold and j > best_j:
                best, best_j = cand, j
        if best >= 0:
            groups[best].append(i)
            removed.append(i)
        else:
            lsh.insert(i, mh, check_duplication=False)
            kept_sets[i] = sh
            groups[i] = [i]
            kept.append(rec)
        if on_progress is not None:
            on_progress(1)
    report = DedupReport("near", len(records), len(kept), len(removed), _clusters(groups), removed,
                         {"threshold": threshold, "num_perm": num_perm, "shingle": shingle, "ngram": ngram,
                          "seed": seed, "ignore_punctuation": ignore_punctuation,
                          "lsh_bands": bands, "lsh_rows": rows})
    return kept, report


def lsh_params(threshold: float, num_perm: int, recall_at_threshold: float = 0.999) -> tuple[int, int]:
    """LSH banding (bands b, rows r, b*r <= num_perm): the largest r (fewest
    spurious candidates) for which a pair with Jaccard exactly ``threshold``
    shares a band with probability 1-(1-t^r)^b >= ``recall_at_threshold``."""
    best = (num_perm, 1)
    for r in range(1, num_perm + 1):
        b = num_perm // r
        if 1.0 - (1.0 - threshold**r) ** b >= recall_at_threshold:
            best = (b, r)
    return best


def _identity(value: int) -> int:
    return value


def dedup(
    records: Sequence[T],
    *,
    method: str = "both",
    threshold: float = 0.8,
    num_perm: int = 128,
    shingle: str = "char",
    ngram: int | None = None,
    seed: int = 0,
    ignore_punctuation: bool = False,
    on_progress: Callable[[int], None] | None = None,
) -> tuple[list[T], list[DedupReport]]:
    """``method``: "exact", "near" or "both" (exact first, then near on the
    survivors; the near report's indices then refer to the exact pass's output)."""
    if method not in ("exact", "near", "both"):
        raise UserError(f"unknown dedup method {method!r}; use exact, near or both")
    reports: list[DedupReport] = []
    out: list[T] = list(records)
    if method in ("exact", "both"):
        out, rep = dedup_exact(out, ignore_punctuation=ignore_punctuation)
        reports.append(rep)
        if on_progress is not None:
            # exact is near-instant: count its records as done (all of them,
            # or, before the near pass, those it removed)
            on_progress(len(records) if method == "exact" else rep.n_removed)
    if method in ("near", "both"):
        out, rep = dedup_near(out, threshold=threshold, num_perm=num_perm, shingle=shingle, ngram=ngram,
                              seed=seed, ignore_punctuation=ignore_punctuation, on_progress=on_progress)
        reports.append(rep)
    return out, reports


__all__ = ["DedupReport", "dedup", "dedup_exact", "dedup_near", "jaccard", "lsh_params", "normalize_for_dedup",
           "shingles"]
