"""The one-run audit canaries as an attack: the loss on each canary's tokens after its first.

Panda et al. (ICLR 2025) score an audit canary by the model's loss on its
secret tokens, the prefix being context. Ours are random words end to end —
the prefix is as unpredictable and as unique to its canary as the secret — so
every token is evidence except the first, whose only context is the start
of a record: its loss measures how often canaries start with that pool word
(shared by ~m / |pool| canaries), not whether this one was trained on.
Score (higher = "included"): −mean NLL of tokens 2..k under the target.

Scoring every token after the first raised dp-8's canary AUC and one-run
bound on the default audit's own models (the choice is the auditor's, not
the data's: the canaries are ours and public; figures: docs/results/2026-11-25-figures-from-code.md). A reference
model's calibration, NLL_ref − NLL_target, was no better on these random
words, which every model of the vocabulary finds equally surprising; nor was
the secret's probability normalised over the pool words or its rank among
them. The ε bound from these scores is computed by the audit layer
(:func:`privleak.audit.one_run.one_run_audit`), which knows the arm's δ.

:func:`rare_word_pool` picks the canary vocabulary: whole-word tokens of the
base tokenizer that public text uses least.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import replace
from collections import Counter
from typing import TYPE_CHECKING, ClassVar, Literal, Sequence

import numpy as np

from ..core.metrics import roc_auc
from ..data.audit_canaries import AuditCanary
from ..core.present import Block
from ..core.typed import Nats, Probability
from .base import AttackContext, Figure, KeepsScores, PresentContext, Runs

if TYPE_CHECKING:
    from ..models.handle import ModelHandle

_WORD = re.compile(r"^ [a-z]{3,}$")
MIN_POOL = 64


def rare_word_pool(tokenizer, public_texts: Sequence[str], fraction: float = 0.5) -> list[str]:
    """Whole-word tokens (" xyz", lower-case letters) in the rarest ``fraction`` by public-text frequency.

    Each pool word is one token of the vocabulary, so a canary of k words is
    k secret tokens (the byte-level pre-tokenizer splits before each space).
    """
    vocab = tokenizer.get_vocab()
    words = {}
    for tok, idx in vocab.items():
        text = tokenizer.decode([idx])
        if _WORD.match(text):
            words[idx] = text
    counts: Counter[int] = Counter()
    texts = list(public_texts)
    for ids in tokenizer(texts, add_special_tokens=False)["input_ids"] if texts else []:
        counts.update(i for i in ids if i in words)
    # Ties (and no public text at all, as with a user's model): later BPE merges are rarer strings.
    ranked = sorted(words, key=lambda i: (counts[i], -i))
    pool = [words[i] for i in ranked[: int(len(ranked) * fraction)]]
    if len(pool) < MIN_POOL:
        # A toy vocabulary with few whole-word tokens: random letter strings are rare under any tokenizer
        # (several tokens each, all of them scored).
        rng = random.Random(len(vocab))
        letters = "abcdefghijklmnopqrstuvwxyz"
        while len(pool) < MIN_POOL:
            pool.append(" " + "".join(rng.choice(letters) for _ in range(6)))
    return pool


def canary_nll(handle: ModelHandle, canaries: Sequence[AuditCanary], desc: str = "score audit canaries") -> np.ndarray:
    """Mean NLL of each canary's tokens after its first (the module docstring says why), one value per canary."""
    from .scoring import score_texts

    if not canaries:
        return np.zeros(0)
    scores = score_texts(handle, [c.text for c in canaries], desc=desc, moments=False)
    n_body = [len(x) for x in handle.tokenizer([c.text for c in canaries], add_special_tokens=False)["input_ids"]]
    lead = len(handle.lead_ids())
    out = np.empty(len(canaries))
    for i in range(len(canaries)):
        # predicted token k is sequence token k + 1, so body token b is predicted token lead + b − 1: keep
        # b = 1 … n_body − 1 (not the first, nor the format's tail after the body)
        start, end = int(scores.offsets[i]), int(scores.offsets[i + 1])
        lp = scores.logprob[start + lead: min(start + lead + n_body[i] - 1, end)]
        out[i] = -float(np.mean(lp)) if lp.size else 0.0
    return out


class OneRunCanaryResult(KeepsScores):
    """Scores of the m audit canaries; the ε bounds from them are the arm's ``one_run_epsilon``.

    ``scores``: (score per canary, inclusion bits). ``canary_scores`` / ``included``: the same, kept in
    results.json, so the canaries' membership test (:meth:`assess_all`) is re-judged from the file alone.
    """

    kind: Literal["one_run_canaries"] = "one_run_canaries"
    title: ClassVar[str] = "one-run audit canaries"

    m: int
    n_included: int
    score: Literal["loss", "reference"]
    auc: Probability  # included vs left-out canaries (a diagnostic; the bound counts guesses)
    nll_included: Nats
    nll_excluded: Nats
    canary_scores: list[float] | None = None
    included: list[bool] | None = None

    def as_membership(self):
        """The included canaries as members and the left-out ones as non-members: a membership design whose
        inclusion bits are fair coins (Steinke et al. 2023), so the canaries are exchangeable by construction —
        no split shift, no control needed to read it against chance."""
        from .membership.attacks import scores_result

        if not self.canary_scores or not self.included or all(self.included) or not any(self.included):
            return None
        s, inc = np.asarray(self.canary_scores), np.asarray(self.included, dtype=bool)
        bits = hashlib.sha256(np.packbits(inc).tobytes()).hexdigest()[:16]
        return scores_result(s[inc], s[~inc], evaluated=f"audit-canaries:{self.m}:{bits}")

    def assess_all(self, attack: str, control, policy) -> list:
        """The audit canaries judged as a membership attack is (AUC, and the advantage at each target FPR),
        included against left-out canaries; the control's canaries, scored on the same canaries, are its
        reference. Nothing without kept scores (a results.json written before they were kept)."""
        mine = self.as_membership()
        if mine is None:
            return []
        ref = control.as_membership() if isinstance(control, OneRunCanaryResult) else None
        out = []
        for f in mine.assess_all(attack, ref, policy):
            out.append(replace(f, items="audit canaries per side",
                               margin=f.margin.replace("the control's", "the control's on the same canaries"),
                               reason=f.reason.replace(f"the {attack} membership attack", "the audit canaries' loss")))
        return out

    @classmethod
    def present(cls, runs: Runs, ctx: PresentContext) -> list[Block]:
        """Nothing in the canaries section: the one-run audit has its own, with the bounds these scores give."""
        return []

    def headline(self) -> list[Figure]:
        return [Figure("canary AUC", self.auc, "auc", chance=0.5),
                Figure("NLL inserted (nats)", self.nll_included, "number"),
                Figure("NLL left out (nats)", self.nll_excluded, "number"),
                Figure("canaries", self.m, "count")]


def run(target: ModelHandle, ctx: AttackContext) -> OneRunCanaryResult:
    canaries = ctx.audit_canaries
    included = np.array([c.included for c in canaries], dtype=bool)
    nll_t = canary_nll(target, canaries, desc=f"score audit canaries {getattr(target, 'name', '')}".strip())
    score, kind = -nll_t, "loss"
    auc = roc_auc(score[included], score[~included]) if included.any() and (~included).any() else 0.5
    res = OneRunCanaryResult(m=len(canaries), n_included=int(included.sum()), score=kind, auc=float(auc),
                             nll_included=float(nll_t[included].mean()) if included.any() else 0.0,
                             nll_excluded=float(nll_t[~included].mean()) if (~included).any() else 0.0,
                             canary_scores=[float(f"{v:.7g}") for v in score], included=[bool(b) for b in included])
    res._scores = (score, included)
    return res
