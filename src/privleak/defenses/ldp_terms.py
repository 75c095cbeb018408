"""Term and n-gram frequencies of a corpus under local DP, each record one user.

The rule: a record's terms are its distinct lower-cased word n-grams (words
are letters, inner hyphens and apostrophes only, so digit strings such as
SSNs, MRNs and phone numbers are never terms); each user samples **one** term uniformly from its own set and
sends one ε-LDP report of it (:mod:`privleak.defenses.ldp`), so each user
spends ε once. The server ranks a candidate dictionary by the estimated
counts. What that ranking targets is Σ_u 1{t ∈ T_u}/|T_u| (a term's share of
the users' samples); it is scored against the exact **document frequency**
top-K — the list a user actually wants — by precision and recall.

The server must know the candidate terms (as Apple's emoji and health-type
deployments do): :func:`evaluate_file` uses every term of the file by default
(the best case for the estimator; a deployment needs a dictionary from
elsewhere), :func:`discover` takes a public candidate list.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from .ldp import Method, bits_per_report, frequencies, paper_variance

_WORD = re.compile(r"[a-z]+(?:['\-][a-z]+)*")  # letters only: "MRN-114405" gives "mrn", never the number


def record_terms(text: str, ngram: int = 1) -> list[str]:
    """The distinct word n-grams of one record, in first-seen order."""
    words = _WORD.findall(text.lower())
    grams = (" ".join(words[i:i + ngram]) for i in range(len(words) - ngram + 1))
    return list(dict.fromkeys(grams))


def sample_terms(texts: Sequence[str], ngram: int, rng: np.random.Generator) -> list[str]:
    """One term per user (uniform over the user's distinct terms); users with no term send nothing."""
    out = []
    for t in texts:
        terms = record_terms(t, ngram)
        if terms:
            out.append(terms[int(rng.integers(len(terms)))])
    return out


def document_frequency(texts: Sequence[str], ngram: int) -> Counter[str]:
    c: Counter[str] = Counter()
    for t in texts:
        c.update(record_terms(t, ngram))
    return c


def top(counts: dict[str, float], k: int) -> list[str]:
    """The k largest, ties broken by the term (deterministic)."""
    return [t for t, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:k]]


@dataclass
class TopKScore:
    method: str
    epsilon: float
    top_k: int
    precision: float  # share of the LDP top-K whose exact count reaches the K-th exact count (ties count)
    recall: float  # share of the exact top-K found in the LDP top-K
    payload_bits: float
    index_bits: float
    total_bits: float
    noise_sd: float  # √ of the leading variance term: the estimate's noise in users


@dataclass
class LdpEvaluation:
    n_records: int
    n_users_reporting: int
    ngram: int
    dictionary_size: int
    dictionary: str
    k: int
    m: int
    seed: int
    rule: str
    # The same top-K from the users' samples counted exactly (no privacy): the most any ε can reach
    # under the one-term-per-user rule.
    sampling_only_precision: float
    sampling_only_recall: float
    scores: list[TopKScore] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


RULE = ("each record is one user; it samples one of its distinct lower-cased word n-grams uniformly and sends one "
        "ε-LDP report of it (ε spent once per user)")


def evaluate(texts: Sequence[str], epsilons: Sequence[float], methods: Sequence[Method] = ("cms", "hcms"),
             top_k: int = 50, k: int = 128, m: int = 1024, seed: int = 0, ngram: int = 1,
             dictionary: Sequence[str] | None = None) -> LdpEvaluation:
    """Top-K precision and recall of LDP-estimated term counts against exact document frequencies."""
    exact = document_frequency(texts, ngram)
    cands = list(dict.fromkeys(dictionary)) if dictionary is not None else sorted(exact)
    truth = top(dict(exact), top_k)
    kth = exact[truth[-1]] if truth else math.inf
    sampled = sample_terms(texts, ngram, np.random.default_rng(seed))

    def score(found: list[str]) -> tuple[float, float]:
        precision = sum(exact.get(t, 0) >= kth for t in found) / max(len(found), 1)
        return precision, len(set(found) & set(truth)) / max(len(truth), 1)

    counted = Counter(t for t in sampled if t in set(cands))
    ceiling = score(top({t: float(counted.get(t, 0)) for t in cands}, top_k))
    ev = LdpEvaluation(sampling_only_precision=ceiling[0], sampling_only_recall=ceiling[1], n_records=len(texts), n_users_reporting=len(sampled), ngram=ngram, dictionary_size=len(cands),
                       dictionary="the file's own terms" if dictionary is None else "given", k=k, m=m, seed=seed,
                       rule=RULE)
    for method in methods:
        for eps in epsilons:
            est = frequencies(sampled, cands, method, eps, k, m, seed=seed)
            precision, recall = score(top(dict(zip(cands, est.tolist())), top_k))
            bits = bits_per_report(method, k, m)
            ev.scores.append(TopKScore(method=method, epsilon=float(eps), top_k=top_k, precision=precision,
                                       recall=recall, noise_sd=math.sqrt(paper_variance(len(sampled), method, eps, m)),
                                       **bits))
    return ev


@dataclass
class DiscoveredTerms:
    """Frequent member terms found under ε-LDP: candidates from public text only, estimates from the members."""

    epsilon: float
    method: str
    k: int
    m: int
    n_users: int
    n_candidates: int
    threshold: float
    terms: list[tuple[str, float]]  # (term, estimated count of users whose sample it was)
    candidates_from: str = "the public split's terms"
    rule: str = RULE

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def discover(member_texts: Sequence[str], candidates: Sequence[str], epsilon: float, method: Method = "hcms",
             top_n: int = 50, k: int = 128, m: int = 1024, seed: int = 0, alpha: float = 0.05) -> DiscoveredTerms:
    """The members' most frequent candidate terms under ε-LDP, kept only when the estimate clears
    z = Φ⁻¹(1 − α/C) noise sd for C candidates: a term no member wrote is listed with probability ≤ α
    over the whole list (Bonferroni, the estimate ≈ Gaussian), so noise alone rarely names a rare term."""
    from scipy.stats import norm

    rng = np.random.default_rng(seed)
    sampled = sample_terms(member_texts, 1, rng)
    cands = list(dict.fromkeys(candidates))
    est = frequencies(sampled, cands, method, epsilon, k, m, seed=seed) if cands else np.zeros(0)
    z = float(norm.isf(alpha / max(len(cands), 1)))
    threshold = z * math.sqrt(paper_variance(len(sampled), method, epsilon, m))
    ranked = sorted(zip(cands, est.tolist()), key=lambda kv: (-kv[1], kv[0]))
    kept = [(t, round(float(v), 1)) for t, v in ranked[:top_n] if v >= threshold]
    return DiscoveredTerms(epsilon=float(epsilon), method=method, k=k, m=m, n_users=len(sampled),
                           n_candidates=len(cands), threshold=threshold, terms=kept)
