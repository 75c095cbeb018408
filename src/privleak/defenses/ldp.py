"""Local differential privacy: Count Mean Sketch (CMS) and Hadamard CMS (HCMS).

Apple Differential Privacy Team, "Learning with Privacy at Scale" (2017),
algorithms A_client-CMS / A_server-CMS and A_client-HCMS / A_server-HCMS.
Each user holds one item d; k hash functions h_1..h_k map items to [m].

CMS client (ε-LDP): pick a row j uniformly from [k]; v ∈ {−1,+1}^m is −1
everywhere except v[h_j(d)] = +1; every coordinate is multiplied by an
independent b ∈ {−1,+1} with P(b = −1) = 1/(1 + e^{ε/2}); send (ṽ, j).
Two items differ in at most two coordinates of v, each flipped with odds
e^{ε/2}, so the report is ε-LDP. Bits sent: m (+ log2 k for j).

HCMS client (ε-LDP): pick j ∈ [k] and l ∈ [m] uniformly; send
w̃ = b · H_m[l, h_j(d)] with H_m the m × m Sylvester–Hadamard matrix
(entries ±1) and P(b = +1) = e^ε/(e^ε + 1): randomised response on one bit,
ε-LDP. Bits sent: 1 (+ log2 k + log2 m for j, l).

Server, both: c_ε = (e^{ε/2}+1)/(e^{ε/2}−1) (CMS) or (e^ε+1)/(e^ε−1)
(HCMS); CMS adds x = k((c_ε/2)ṽ + ½·1) to row j of M; HCMS adds
k·c_ε·w̃ to M_H[j, l] and sets M = M_H H_mᵀ. Then for any item d

    f̂(d) = m/(m−1) · ( (1/k) Σ_j M[j, h_j(d)] − n/m ).

Moments (derived for these exact randomisers, conditional on the hash
functions; π_i = fraction of rows j with h_j(d_i) = h_j(d), 1 when d_i = d):

    E[f̂(d)]   = m/(m−1) · (Σ_i π_i − n/m)                 (= f(d) in expectation over the hashes)
    Var_CMS   = (m/(m−1))² · ( n(c_ε²−1)/4 + Σ_i π_i(1−π_i) )
    Var_HCMS  = (m/(m−1))² · Σ_i (c_ε² − π_i²)

The paper's leading terms, (m/(m−1))² n(c_ε²−1)/4 for CMS and
≈ (m/(m−1))² n c_ε² for HCMS, are these with the hash-collision terms
dropped (Pan 2024, "Count-mean sketch as an optimized framework…", notes
errors in the paper's exact expressions; the tests check the ones above).

The hash functions are keyed BLAKE2b (a cryptographic hash, as the paper's
SHA-256): row j's value of a term is four digest bytes, modulo m.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

Method = Literal["cms", "hcms"]
METHODS: tuple[str, ...] = ("cms", "hcms")


def _check(epsilon: float, k: int, m: int, method: str) -> None:
    if method not in METHODS:
        raise ValueError(f"LDP method {method!r}: use cms or hcms")
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ValueError(f"LDP ε must be > 0 and finite, got {epsilon}")
    if k < 1 or m < 2:
        raise ValueError(f"sketch size k={k}, m={m}: need k ≥ 1 and m ≥ 2")
    if method == "hcms" and m & (m - 1):
        raise ValueError(f"HCMS needs m a power of two (the Hadamard matrix size), got m={m}")


def c_epsilon(epsilon: float, method: Method) -> float:
    """The debiasing constant: (e^{ε/2}+1)/(e^{ε/2}−1) for CMS, (e^ε+1)/(e^ε−1) for HCMS."""
    e = epsilon / 2 if method == "cms" else epsilon
    return (math.exp(e) + 1) / math.expm1(e)


def flip_probability(epsilon: float, method: Method) -> float:
    """P(a transmitted ±1 is negated): 1/(1+e^{ε/2}) per CMS coordinate, 1/(1+e^ε) for the HCMS bit."""
    e = epsilon / 2 if method == "cms" else epsilon
    return 1.0 / (1.0 + math.exp(e))


def bits_per_report(method: Method, k: int, m: int) -> dict[str, float]:
    """What one user sends: the privatised payload and the indices (row j; HCMS also column l)."""
    payload = m if method == "cms" else 1
    index = math.log2(k) + (math.log2(m) if method == "hcms" else 0.0)
    return {"payload_bits": float(payload), "index_bits": float(math.ceil(index)), "total_bits": float(payload + math.ceil(index))}


@dataclass(frozen=True)
class HashFamily:
    """k keyed hash functions from strings to [m]."""

    k: int
    m: int
    seed: int

    def __call__(self, items: Sequence[str]) -> np.ndarray:
        """(len(items), k) array: h_j(item) for every row j."""
        chunks = math.ceil(self.k / 16)  # a 64-byte digest gives 16 four-byte values
        key = self.seed.to_bytes(8, "big", signed=False)
        out = np.empty((len(items), chunks * 16), dtype=np.uint64)
        for i, item in enumerate(items):
            data = item.encode("utf-8")
            buf = b"".join(hashlib.blake2b(data, key=key, salt=c.to_bytes(16, "big"), digest_size=64).digest()
                           for c in range(chunks))
            out[i] = np.frombuffer(buf, dtype="<u4")
        return (out[:, : self.k] % np.uint64(self.m)).astype(np.int64)


@dataclass
class Reports:
    """The privatised reports of n users (what the server receives)."""

    method: Method
    epsilon: float
    k: int
    m: int
    rows: np.ndarray  # (n,) sampled hash row j
    values: np.ndarray  # CMS: (n, m) of ±1; HCMS: (n,) of ±1
    cols: np.ndarray | None = None  # HCMS: (n,) sampled Hadamard coefficient l

    @property
    def n(self) -> int:
        return int(self.rows.shape[0])


def _popcount_parity(x: np.ndarray) -> np.ndarray:
    """(−1)^{popcount(x)} for non-negative int64 x: the Sylvester–Hadamard entry H[l, p] with x = l & p."""
    x = x.astype(np.uint64)
    parity = np.zeros_like(x)
    while np.any(x):
        parity ^= x & np.uint64(1)
        x >>= np.uint64(1)
    return 1 - 2 * parity.astype(np.int64)


def privatise(positions: np.ndarray, method: Method, epsilon: float, m: int, rng: np.random.Generator) -> Reports:
    """Client side, for many users at once (each user's randomness independent).

    ``positions``: (n, k) hash values h_j(d_i) of each user's item. Equivalent
    to running the paper's client algorithm once per user.
    """
    n, k = positions.shape
    _check(epsilon, k, m, method)
    rows = rng.integers(0, k, size=n)
    p = positions[np.arange(n), rows]
    if method == "cms":
        v = -np.ones((n, m), dtype=np.int8)
        v[np.arange(n), p] = 1
        flip = rng.random((n, m)) < flip_probability(epsilon, "cms")
        v[flip] *= -1
        return Reports("cms", epsilon, k, m, rows, v)
    cols = rng.integers(0, m, size=n)
    w = _popcount_parity(cols & p)
    flip = rng.random(n) < flip_probability(epsilon, "hcms")
    w[flip] *= -1
    return Reports("hcms", epsilon, k, m, rows, w.astype(np.int8), cols)


def client_report(item: str, hashes: HashFamily, method: Method, epsilon: float,
                  rng: np.random.Generator) -> Reports:
    """One user's report of one item (the paper's client algorithm)."""
    return privatise(hashes([item]), method, epsilon, hashes.m, rng)


def fwht(a: np.ndarray) -> np.ndarray:
    """Fast Walsh–Hadamard transform along the last axis: a @ H_m (Sylvester order, unnormalised)."""
    a = np.array(a, dtype=np.float64, copy=True)
    m = a.shape[-1]
    h = 1
    while h < m:
        a = a.reshape(*a.shape[:-1], m // (2 * h), 2, h)
        x, y = a[..., 0, :].copy(), a[..., 1, :].copy()
        a[..., 0, :], a[..., 1, :] = x + y, x - y
        a = a.reshape(*a.shape[:-3], m)
        h *= 2
    return a


def sketch(reports: Reports) -> np.ndarray:
    """Server side: the debiased k × m sketch M from the reports."""
    k, m, eps = reports.k, reports.m, reports.epsilon
    c = c_epsilon(eps, reports.method)
    M = np.zeros((k, m), dtype=np.float64)
    if reports.method == "cms":
        x = k * (c / 2 * reports.values.astype(np.float64) + 0.5)
        np.add.at(M, reports.rows, x)
        return M
    np.add.at(M, (reports.rows, reports.cols), k * c * reports.values.astype(np.float64))
    return fwht(M)  # M_H H_mᵀ, H_m symmetric


def estimate(M: np.ndarray, n: int, positions: np.ndarray) -> np.ndarray:
    """f̂(d) = m/(m−1)·((1/k) Σ_j M[j, h_j(d)] − n/m) for items with hash values ``positions`` (D, k)."""
    k, m = M.shape
    s = M[np.arange(k)[None, :], positions].mean(axis=1)
    return m / (m - 1) * (s - n / m)


def collision_fractions(user_positions: np.ndarray, item_positions: np.ndarray) -> np.ndarray:
    """π_i for one item: the fraction of rows in which user i's item hashes where the item does."""
    return (user_positions == item_positions[None, :]).mean(axis=1)


def expected_estimate(pi: np.ndarray, m: int) -> float:
    """E[f̂(d)] given the hash functions (see the module docstring)."""
    return m / (m - 1) * (float(pi.sum()) - len(pi) / m)


def estimate_variance(pi: np.ndarray, method: Method, epsilon: float, m: int) -> float:
    """Var[f̂(d)] given the hash functions (see the module docstring)."""
    c = c_epsilon(epsilon, method)
    scale = (m / (m - 1)) ** 2
    if method == "cms":
        return scale * (len(pi) * (c * c - 1) / 4 + float((pi * (1 - pi)).sum()))
    return scale * float((c * c - pi * pi).sum())


def paper_variance(n: int, method: Method, epsilon: float, m: int) -> float:
    """The leading term of the variance, without hash collisions: what a user plans with."""
    c = c_epsilon(epsilon, method)
    return (m / (m - 1)) ** 2 * n * ((c * c - 1) / 4 if method == "cms" else c * c)


def frequencies(items: Sequence[str], dictionary: Sequence[str], method: Method, epsilon: float, k: int, m: int,
                seed: int) -> np.ndarray:
    """Estimated counts of every dictionary term from one ε-LDP report per user (``items``: one per user)."""
    _check(epsilon, k, m, method)
    hashes = HashFamily(k, m, seed)
    rng = np.random.default_rng([seed, 0x1D9])  # the users' coins: a stream apart from the (public) hash key
    M = np.zeros((k, m))
    # In chunks: a CMS report is m values per user.
    step = max(1, 2_000_000 // m)
    uniq, inverse = np.unique(np.asarray(items, dtype=object), return_inverse=True)
    upos = hashes(list(uniq))[inverse] if len(items) else np.zeros((0, k), dtype=np.int64)
    for s in range(0, len(items), step):
        M += sketch(privatise(upos[s:s + step], method, epsilon, m, rng))
    return estimate(M, len(items), hashes(list(dictionary)))
