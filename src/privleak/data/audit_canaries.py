"""Audit canaries for the one-run DP audit: random rare-token sequences, each inserted with probability ½.

Panda et al. (ICLR 2025, "Privacy auditing of large language models") show
that the canaries which make an LM's membership visible are not natural
sentences but random sequences of rare (or brand-new) tokens, scored by the
model's loss on them: nothing in pre-training predicts them, so any drop in
their loss is memorisation. Steinke, Nasr & Jagielski
(NeurIPS 2023) turn m such canaries, each included independently with
probability ½, into an ε lower bound from one training run
(:mod:`privleak.audit.one_run`).

Here a canary is ``prefix + secret``: both random sequences of rare words of
the base model's vocabulary (the rare-word pool comes from
:func:`privleak.attacks.one_run_canaries.rare_word_pool`; tokens the
tokenizer has but public text almost never uses — the closest this
embedded, fixed vocabulary gets to Panda et al.'s new tokens). The prefix
makes each canary unique and gives the secret a context; the score is the
loss on every token after the first (:mod:`privleak.attacks.one_run_canaries`
says why). Unlike the exposure canaries
(:mod:`.canaries`) they carry no PII and are never part of any split or PII
inventory: the pipeline adds the included ones to each trained model's
training data only.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

from privleak.core.errors import UserError
from privleak.core.io import atomic_open
from privleak.data.canaries import derive_seed
from privleak.data.records import Record

KIND = "audit_canary"


@dataclass(frozen=True)
class AuditCanary:
    canary_id: str
    prefix: str
    secret: str  # starts with a space: the tokenizer splits prefix and secret at the boundary
    included: bool

    @property
    def text(self) -> str:
        return self.prefix + self.secret


def make_audit_canaries(pool: Sequence[str], m: int, prefix_words: int, secret_words: int,
                        seed: int, query_words: int = 2) -> list[AuditCanary]:
    """m canaries of uniformly random words from ``pool`` (each word " xyz"), included with probability ½.

    Inclusion bits come from their own seeded stream, independent of the
    texts, as the one-run theorem requires (S_i i.i.d. Bernoulli(½)). The
    first ``query_words`` words are unique across the canaries (a draw whose
    query is taken is drawn again, all its words): each later word stays
    uniform over the pool and independent of every other canary, as the
    reconstruction game requires, and each query points at one canary.
    """
    if m < 0:
        raise UserError(f"one_run.canaries must be ≥ 0, got {m}")
    words = list(dict.fromkeys(w for w in pool if w.startswith(" ") and w.strip()))
    if m and len(words) < 20:
        raise UserError(f"the base model's vocabulary gives only {len(words)} rare words for audit canaries; "
                        "use a larger vocabulary or set one_run.canaries = 0")
    if m and 2 * m > len(words) ** min(query_words, 16):
        raise UserError(f"one_run.canaries = {m} needs unique {query_words}-word queries from {len(words)} rare words "
                        f"(at most {len(words) ** query_words // 2} canaries); raise one_run.query_words or lower "
                        "one_run.canaries")
    rng = random.Random(derive_seed(seed, "audit-canaries.text"))
    bits = random.Random(derive_seed(seed, "audit-canaries.include"))
    out: list[AuditCanary] = []
    seen: set[tuple[str, ...]] = set()
    while len(out) < m:
        drawn = [rng.choice(words) for _ in range(prefix_words + secret_words)]
        prefix, secret = "".join(drawn[:prefix_words]).lstrip(), "".join(drawn[prefix_words:])
        query = tuple(drawn[:query_words])
        if query in seen:  # unique queries: each points at one canary
            continue
        seen.add(query)
        out.append(AuditCanary(canary_id=f"audit-{len(out):04d}", prefix=prefix, secret=secret,
                               included=bits.random() < 0.5))
    return out


def audit_canary_records(canaries: Sequence[AuditCanary]) -> list[Record]:
    """The included canaries as training records (no PII: they are random words)."""
    return [Record(text=c.text, pii=[], meta={"kind": KIND, "canary_id": c.canary_id})
            for c in canaries if c.included]


def insert_audit_canaries(records: Sequence[Record], canaries: Sequence[AuditCanary], seed: int) -> list[Record]:
    """``records`` with the included canaries at seeded random positions (the records keep their order)."""
    planted = audit_canary_records(canaries)
    if not planted:
        return list(records)
    rng = random.Random(derive_seed(seed, "audit-canaries.insert"))
    total = len(records) + len(planted)
    slots = set(rng.sample(range(total), len(planted)))
    it_r, it_c = iter(records), iter(planted)
    return [next(it_c) if i in slots else next(it_r) for i in range(total)]


def save_audit_canaries(path: str | os.PathLike[str], canaries: Sequence[AuditCanary], info: dict) -> None:
    with atomic_open(path) as fh:
        json.dump({"version": 1, "info": info, "canaries": [asdict(c) for c in canaries]}, fh, ensure_ascii=False)
        fh.write("\n")


def load_audit_canaries(path: str | os.PathLike[str]) -> list[AuditCanary]:
    p = Path(path)
    if not p.is_file():
        return []
    try:
        items = json.loads(p.read_text(encoding="utf-8"))["canaries"]
        return [AuditCanary(canary_id=str(d["canary_id"]), prefix=str(d["prefix"]), secret=str(d["secret"]),
                            included=bool(d["included"])) for d in items]
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError(f"{p}: not a valid audit-canary file ({type(exc).__name__}: {exc}); delete it and rerun") from exc
