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

**Reconstruction** (the k-ary game of Mahloujifar, Melis & Chaudhuri 2025):
each canary's secret is ``secret_words`` words drawn uniformly from the pool,
so it is one of k = |pool|^w values, drawn independently of everything else.
For every *included* canary the auditor decodes the secret from the model
alone — greedily, word by word, the pool word the model finds likeliest
after the prefix and the words decoded so far (:func:`reconstruct_secrets`)
— and ranks the canaries by the model's probability of its decoded secret
(normalised over the pool at each word). A guess is right only when every
word is; the audit layer counts right guesses among the most confident r
(:func:`privleak.audit.one_run.reconstruction_counts`). Under DP a right
guess is evidence in proportion to k, which is why this game, not the
in/out one, can refute ε = 8 at a thousand canaries
(docs/definitions.md, "One-run f-DP tests": why both, and the sizes).

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
from pydantic import PrivateAttr

from ..core.metrics import roc_auc
from ..data.audit_canaries import AuditCanary
from ..core.present import Block
from ..core.typed import Nats, Probability
from .base import AttackContext, Figure, KeepsScores, PresentContext, Runs

if TYPE_CHECKING:
    import torch

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


def pool_words(canary: AuditCanary) -> list[str]:
    """The pool words a canary is made of (prefix, then secret), each as the pool spells it (" xyz")."""
    return [" " + w for w in canary.text.split()]


def split_query(canary: AuditCanary, query_words: int) -> tuple[str, list[str]]:
    """(the text of the canary's first ``query_words`` words — what the auditor gives the model —, the rest:
    the game's secret, each word as the pool spells it)."""
    words = canary.text.split()
    return " ".join(words[:query_words]), [" " + w for w in words[query_words:]]


#: Contexts per forward pass when every pool word is one token.
_DECODE_BATCH = 256


def _last_logits(handle: ModelHandle, contexts: list[list[int]]) -> torch.Tensor:
    """The next-token logits after each context (right-padded batches; the logits at each one's last token)."""
    import torch

    from ..models.batching import pad_batch
    from ..models.device import model_device

    model, dev = handle.model, model_device(handle.model)
    # A context longer than the model's positions keeps its last tokens (the ones the next token follows): a
    # canary longer than a small model's window would otherwise index past its position embeddings.
    cfg = getattr(model, "config", None)
    window = getattr(cfg, "n_positions", None) or getattr(cfg, "max_position_embeddings", None)
    if window:
        contexts = [c[-int(window):] for c in contexts]
    out = []
    with torch.inference_mode():
        for b0 in range(0, len(contexts), _DECODE_BATCH):
            ids, mask = pad_batch(contexts[b0: b0 + _DECODE_BATCH], handle.pad_id)
            ids, mask = ids.to(dev), mask.to(dev)
            logits = model(input_ids=ids, attention_mask=mask).logits
            out.append(logits[torch.arange(ids.shape[0], device=dev), mask.sum(1) - 1].float().cpu())
    return torch.cat(out)


def _pool_trie(seqs: list[list[int]]) -> tuple[list[dict[int, int]], list[int]]:
    """The pool words' token sequences as a trie: ``children[node]`` maps a token to a node; ``word[node]`` is the
    pool index of the word ending there (−1: none). Node 0 is the root."""
    children: list[dict[int, int]] = [{}]
    word = [-1]
    for idx, seq in enumerate(seqs):
        node = 0
        for tok in seq:
            if tok not in children[node]:
                children[node][tok] = len(children)
                children.append({})
                word.append(-1)
            node = children[node][tok]
        if word[node] < 0:
            word[node] = idx
    return children, word


def reconstruct_secrets(handle: ModelHandle, canaries: Sequence[AuditCanary], pool: Sequence[str],
                        query_words: int) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """Greedy decoding of each canary's words after its first ``query_words`` (:func:`split_query`), over
    ``pool`` only (every word is drawn from it), one token at a time: the likeliest token among those that
    continue some pool word, until a word is complete (the shorter one where a word is a prefix of another),
    then the next word. Returns the decoded words (pool indices) and each guess's log-probability Σ log p̂
    over its tokens, p̂ normalised over the allowed tokens (the guess's confidence; with one-token words,
    over the pool). Uses nothing of a canary but its query and its length (the public parts)."""
    import torch

    from ..models.batching import token_ids

    if not canaries:
        return [], np.zeros(0)
    children, word = _pool_trie(token_ids(handle.tokenizer, list(pool)))
    queries = [split_query(c, query_words) for c in canaries]
    n_words = len(queries[0][1])
    lead = handle.lead_ids()
    contexts = [lead + list(x) for x in token_ids(handle.tokenizer, [q for q, _ in queries])]
    guesses: list[list[int]] = [[] for _ in canaries]
    conf = np.zeros(len(canaries))
    for _ in range(n_words):
        state = [0] * len(canaries)
        active = list(range(len(canaries)))
        while active:
            logits = _last_logits(handle, [contexts[i] for i in active])
            still = []
            for row, i in enumerate(active):
                allowed = list(children[state[i]])
                lp = torch.log_softmax(logits[row, allowed].float(), dim=-1)
                b = int(lp.argmax())
                conf[i] += float(lp[b])
                contexts[i].append(allowed[b])
                state[i] = children[state[i]][allowed[b]]
                if word[state[i]] >= 0:
                    guesses[i].append(word[state[i]])
                else:
                    still.append(i)
            active = still
    return [tuple(g) for g in guesses], conf


class OneRunCanaryResult(KeepsScores):
    """Scores of the m audit canaries; the ε bounds from them are the arm's ``one_run_epsilon``.

    ``scores``: (score per canary, inclusion bits). ``canary_scores`` / ``included``: the same, kept in
    results.json, so the canaries' membership test (:meth:`assess_all`) is re-judged from the file alone.
    ``reconstruction``: (confidence, right) per included canary, the secrets decoded from the model
    (:func:`reconstruct_secrets`), in memory only; ``pool_size`` and ``secret_words`` give the game's
    k = pool_size ** secret_words (0: not played, and ``reconstruction_note`` says why).
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
    pool_size: int = 0
    secret_words: int = 0
    reconstructed: int = 0  # included canaries whose whole secret the greedy decoding recovered
    reconstruction_note: str = ""
    _reconstruction: tuple[np.ndarray, np.ndarray] | None = PrivateAttr(default=None)

    @property
    def reconstruction(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(confidence, right) per included canary; only on a freshly computed result (as ``scores``)."""
        return self._reconstruction

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


def _reconstruction(target: ModelHandle, ctx: AttackContext, canaries: Sequence[AuditCanary],
                    included: np.ndarray) -> tuple[dict, tuple[np.ndarray, np.ndarray] | None]:
    """The reconstruction game on the included canaries: (result fields, (confidence, right) or None)."""
    import torch

    planted = [c for c, inc in zip(canaries, included) if inc]
    if not planted or not isinstance(getattr(target, "model", None), torch.nn.Module):
        return {"reconstruction_note": "no included canaries" if not planted else "not a model the auditor can read"}, None
    # the data stage's pool, rebuilt from what it read (the tokenizer, the public split): once per stage
    pool = ctx.memo(f"audit_canary_pool:{id(target.tokenizer)}",
                    lambda: rare_word_pool(target.tokenizer, [r.text for r in ctx.public]))
    index = {w: i for i, w in enumerate(pool)}
    query = ctx.settings.one_run_canaries[3]
    lengths = {len(c.text.split()) for c in canaries}
    # The game's k is |pool|^w only if every word was drawn from this very pool (the data stage's): otherwise
    # the pool differs (another tokenizer or public split) and there is no game to score.
    if len(lengths) != 1 or any(w not in index for c in canaries for w in pool_words(c)):
        return {"reconstruction_note": "the audit canaries were not drawn from this model's rare-word pool"}, None
    n_secret = lengths.pop() - query
    if n_secret < 1:
        return {"reconstruction_note": f"the canaries have no words after the first {query}"}, None
    guesses, conf = reconstruct_secrets(target, planted, pool, query)
    right = np.array([g == tuple(index[w] for w in split_query(c, query)[1]) for g, c in zip(guesses, planted)])
    return ({"pool_size": len(pool), "secret_words": n_secret, "reconstructed": int(right.sum())}, (conf, right))


def run(target: ModelHandle, ctx: AttackContext) -> OneRunCanaryResult:
    canaries = ctx.audit_canaries
    included = np.array([c.included for c in canaries], dtype=bool)
    nll_t = canary_nll(target, canaries, desc=f"score audit canaries {getattr(target, 'name', '')}".strip())
    score, kind = -nll_t, "loss"
    auc = roc_auc(score[included], score[~included]) if included.any() and (~included).any() else 0.5
    fields, recon = _reconstruction(target, ctx, canaries, included)
    res = OneRunCanaryResult(m=len(canaries), n_included=int(included.sum()), score=kind, auc=float(auc),
                             nll_included=float(nll_t[included].mean()) if included.any() else 0.0,
                             nll_excluded=float(nll_t[~included].mean()) if (~included).any() else 0.0,
                             canary_scores=[float(f"{v:.7g}") for v in score], included=[bool(b) for b in included],
                             **fields)
    res._scores = (score, included)
    res._reconstruction = recon
    return res
