"""Membership attacks that calibrate a text's likelihood against public text: ReCaLL, Con-ReCall, DC-PDD and
the neighbourhood attack.

Every score is oriented like the others (higher = member). LL(x) is the mean over x's predicted tokens of
log p(x_t | x_<t) (negative; −NLL(x)), and LL(x | P) the same mean with the text P before x in the context:

* **ReCaLL** (Xie et al., EMNLP 2024): ``LL(x | P_non) / LL(x)``, P_non a prefix of non-member text. A
  non-member prefix lowers the likelihood of a member more than of a non-member, in proportion (the paper's
  finding; its code ranks by this ratio, higher = member).
* **Con-ReCall** (Wang et al. 2024): ``(LL(x | P_non) − γ·LL(x | P_mem)) / LL(x)``, P_mem a prefix of member
  text, γ = :data:`GAMMA`.
* **DC-PDD** (Zhang et al., EMNLP 2024): per token α_t = −p(x_t | x_<t) · log f(x_t), f the token's frequency
  in a reference corpus with Laplace smoothing ((count + 1) / (N + |V|)), capped at a = :data:`DC_PDD_A`;
  the score is the mean of α over the first occurrence of each distinct token of x.
* **Neighbourhood** (Mattern et al., Findings of ACL 2023): ``mean_j NLL(x̃_j) − NLL(x)`` over neighbours x̃_j
  of x (the paper's L(x) − mean L(x̃), negated).

What each reads, from public data only — never the held-out non-members the AUC is judged on, which would
contaminate it:

* the non-member prefix: records of the **population** split (the members' population, which no model trained
  on), else of the public split (:data:`NON_MEMBER_PREFIX`);
* the member prefix: member records of people none of whose records is evaluated, else the planted exposure
  canaries (members by construction, never evaluated; :data:`MEMBER_PREFIX`);
* DC-PDD's reference corpus: the public and population splits (:data:`REFERENCE_CORPUS`), tokenised with the
  attacked model's tokenizer;
* the neighbours: each a copy of x with :data:`NEIGHBOUR_FRACTION` of its tokens replaced, each by one of the
  **base model's** top-:data:`NEIGHBOUR_TOP_K` predictions at that position (not the token itself), drawn
  with the audit's seed (:data:`NEIGHBOURS`). Mattern et al. substitute words with a BERT masked language
  model; PrivLeak downloads nothing at run time, so the base model — which every arm starts from and which
  never saw the members — proposes the substitutes, the same neighbours for every model of the audit.

Cost: ReCaLL adds one pass over the evaluated records with the prefix in the context (the records are
truncated so that prefix and record fit in ``min(context, 2·max_length)`` tokens; LL(x) is then read off the
scoring pass over the same tokens), Con-ReCall one more (its non-member pass is ReCaLL's, shared through the
stage's memo), DC-PDD none (the scoring pass and a tokenisation of the public text); the neighbourhood attack
scores ``attacks.neighbours`` neighbours per evaluated record, which is why it runs where that setting is
above 0 (the ``full`` profile).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ...core.inputs import Input, Persist, provides
from ...core.io import read_json, write_json
from ...data.canaries import derive_seed
from ...data.splits import unit_of
from ..inputs import BASE, SCORED_TEXTS, SEED, SELECTION, SETTINGS, SPLITS
from .attacks import MembershipResult, membership_result

if TYPE_CHECKING:
    from ...models.handle import ModelHandle
    from ..base import AttackContext
    from ..scoring import TokenScores

#: Records drawn for each prefix (joined, then its last tokens kept: see :func:`prefix_budget`).
SHOTS = 4
#: Con-ReCall's weight of the member-prefixed likelihood: the middle of the paper's sweep, fixed a priori
#: (choosing γ on the evaluated records would tune the attack on the answer).
GAMMA = 0.5
#: DC-PDD's cap a on a token's contribution: the authors' code's default (also MIMIR's and Fast-MIA's).
DC_PDD_A = 0.01
#: Share of a text's tokens a neighbour replaces (at least one), and from how many of the base model's top
#: predictions each substitute is drawn.
NEIGHBOUR_FRACTION = 0.1
NEIGHBOUR_TOP_K = 10


# --------------------------------------------------------------------------- the scores (pure)

def recall_scores(ll_prefixed: np.ndarray, ll: np.ndarray) -> np.ndarray:
    """ReCaLL (Xie et al. 2024): LL(x | P_non) / LL(x), both mean token log-likelihoods (≤ 0). Higher = member.
    A text whose LL(x) is 0 (every token certain) scores 1 (no relative change)."""
    ll_prefixed, ll = np.asarray(ll_prefixed, dtype=np.float64), np.asarray(ll, dtype=np.float64)
    return np.where(ll < 0, ll_prefixed / np.where(ll < 0, ll, -1.0), 1.0)


def con_recall_scores(ll_non: np.ndarray, ll_member: np.ndarray, ll: np.ndarray, gamma: float = GAMMA) -> np.ndarray:
    """Con-ReCall (Wang et al. 2024): (LL(x | P_non) − γ·LL(x | P_mem)) / LL(x). Higher = member."""
    ll_non, ll_member = np.asarray(ll_non, dtype=np.float64), np.asarray(ll_member, dtype=np.float64)
    return recall_scores(ll_non - gamma * ll_member, ll)


def token_frequencies(id_lists: list[list[int]], vocab_size: int) -> np.ndarray:
    """DC-PDD's reference distribution: f(v) = (count(v) + 1) / (N + |V|) over the corpus's N tokens."""
    counts = np.zeros(vocab_size, dtype=np.float64)
    for ids in id_lists:
        np.add.at(counts, np.asarray(ids, dtype=np.int64), 1.0)
    return (counts + 1.0) / (counts.sum() + vocab_size)


def dc_pdd_scores(logprob: np.ndarray, offsets: np.ndarray, token_ids: np.ndarray, freq: np.ndarray,
                  a: float = DC_PDD_A) -> np.ndarray:
    """DC-PDD (Zhang et al. 2024): per text, the mean over the first occurrence of each distinct predicted token
    x_t of min(a, −p(x_t | x_<t) · log f(x_t)). Higher = member. ``logprob``, ``offsets``: a scoring pass's flat
    per-token log p; ``token_ids``: the predicted tokens, aligned with it; ``freq``: :func:`token_frequencies`.
    A text with no predicted token scores 0."""
    logprob, token_ids = np.asarray(logprob, dtype=np.float64), np.asarray(token_ids, dtype=np.int64)
    if len(logprob) != len(token_ids):
        raise ValueError(f"dc_pdd_scores: {len(token_ids)} token ids for {len(logprob)} scored tokens")
    alpha = np.minimum(-np.exp(logprob) * np.log(freq[token_ids]), a)
    offsets = np.asarray(offsets, dtype=np.int64)
    n_texts, n_tok = len(offsets) - 1, np.diff(offsets)
    text = np.repeat(np.arange(n_texts), n_tok)
    # np.unique's index is each (text, token) pair's first position: its first occurrence in that text.
    _, first = np.unique(text * (int(token_ids.max(initial=0)) + 1) + token_ids, return_index=True)
    sums = np.bincount(text[first], weights=alpha[first], minlength=n_texts)
    counts = np.bincount(text[first], minlength=n_texts)
    return np.where(counts > 0, sums / np.maximum(counts, 1), 0.0)


def neighbourhood_scores(nll: np.ndarray, nll_neighbours: np.ndarray) -> np.ndarray:
    """Neighbourhood attack (Mattern et al. 2023): mean_j NLL(x̃_j) − NLL(x); ``nll_neighbours`` is (texts, n).
    Higher = member (the model prefers x to texts next to it)."""
    return np.asarray(nll_neighbours, dtype=np.float64).mean(axis=1) - np.asarray(nll, dtype=np.float64)


# --------------------------------------------------------------------------- inputs, from public data only

REFERENCE_CORPUS: Input[list[str]] = Input(
    "reference-corpus", "public text (the public and population splits) for DC-PDD's token frequencies",
    present=bool)
NON_MEMBER_PREFIX: Input[list[str]] = Input(
    "non-member-prefix", "ReCaLL's non-member prefix: population records (else public ones)", present=bool)
MEMBER_PREFIX: Input[list[str]] = Input(
    "member-prefix", "Con-ReCall's member prefix: members of people never evaluated (else planted canaries)",
    present=bool)
TOKEN_FREQUENCIES: Input[tuple[Any, np.ndarray]] = Input(
    "token-frequencies", "DC-PDD's reference distribution under the base model's tokenizer (with its fingerprint), "
                         "made once per process for every model that shares that tokenizer")
NEIGHBOURS: Input[list[list[str]]] = Input(
    "neighbours", "the neighbourhood attack's neighbours of every evaluated record (members, then non-members)")


def _draw(records: list, k: int, seed: int, tag: str) -> list[str]:
    if not records:
        return []
    rng = np.random.default_rng(derive_seed(seed, tag) % 2**32)
    pick = rng.choice(len(records), size=min(k, len(records)), replace=False)
    return [records[int(i)].text for i in pick]


@provides(REFERENCE_CORPUS, needs=(SPLITS,), pure=True)
def _reference_corpus(view: Any) -> list[str]:
    s = view[SPLITS]
    return [r.text for r in (*s["public"], *s["population"])]


@provides(NON_MEMBER_PREFIX, needs=(SPLITS, SEED), pure=True)
def _non_member_prefix(view: Any) -> list[str]:
    s = view[SPLITS]
    return _draw(s["population"] or s["public"], SHOTS, view[SEED], "recall-non-member-prefix")


@provides(MEMBER_PREFIX, needs=(SPLITS, SELECTION, SEED), pure=True)
def _member_prefix(view: Any) -> list[str]:
    members = view[SPLITS]["members"]
    plain = [r for r in members if r.kind != "canary"]  # the order the selection indexes
    evaluated = {unit_of(plain[int(i)]) for i in view[SELECTION].members}
    # A prefix record of an evaluated person would lift that person's evaluated record by its own context.
    unseen = [r for r in plain if unit_of(r) not in evaluated]
    return _draw(unseen or [r for r in members if r.kind == "canary"], SHOTS, view[SEED], "recall-member-prefix")


def _fingerprint(handle: ModelHandle, corpus: list[str]) -> Any:
    """What tells two tokenizers apart for DC-PDD: the vocabulary's size and the ids of the first public record."""
    from ...models.batching import encode

    return len(handle.tokenizer), tuple(encode(handle.tokenizer, corpus[:1], handle.max_length, handle.text_format).ids[0]
                                        if corpus else ())


def frequencies_for(handle: ModelHandle, corpus: list[str]) -> np.ndarray:
    """:func:`token_frequencies` of ``corpus`` encoded as ``handle``'s scoring pass encodes text."""
    from ...models.batching import encode

    ids = encode(handle.tokenizer, corpus, handle.max_length, handle.text_format).ids
    return token_frequencies(ids, max(len(handle.tokenizer), 1 + max((max(i, default=0) for i in ids), default=0)))


@provides(TOKEN_FREQUENCIES, needs=(BASE, REFERENCE_CORPUS), when=lambda w: w.available(BASE))
def _token_frequencies(view: Any) -> tuple[Any, np.ndarray]:
    base, corpus = view[BASE], view[REFERENCE_CORPUS]
    return _fingerprint(base, corpus), frequencies_for(base, corpus)


def _evaluated_texts(view: Any) -> list[str]:
    t, sel = view[SCORED_TEXTS], view[SELECTION]
    return [t["members"][int(i)] for i in sel.members] + [t["non_members"][int(i)] for i in sel.non_members]


def _save_neighbours(value: list[list[str]], view: Any) -> None:
    write_json(view.path("neighbours.json"), value, indent=None)


@provides(NEIGHBOURS, needs=(BASE, SCORED_TEXTS, SELECTION, SETTINGS, SEED),
          when=lambda w: w.available(BASE) and w.get(SETTINGS).neighbours > 0,
          persist=Persist("neighbours", ("neighbours.json",), save=_save_neighbours, kind="eval",
                          load=lambda view: read_json(view.path("neighbours.json"))))
def _neighbours(view: Any) -> list[list[str]]:
    return make_neighbours(view[BASE], _evaluated_texts(view), view[SETTINGS].neighbours, view[SEED])


# --------------------------------------------------------------------------- the passes

def context_limit(handle: ModelHandle) -> int:
    """How many positions the model takes (its config's), never more than twice a record (the cost cap)."""
    cfg = getattr(handle.model, "config", None)
    ctx = getattr(cfg, "n_positions", None) or getattr(cfg, "max_position_embeddings", None) or handle.max_length
    return int(min(int(ctx), 2 * handle.max_length))


def prefix_budget(limit: int, longest: int, available: int) -> int:
    """Prefix tokens kept: what fits beside the longest record, but at least a quarter of the context (the
    records are then cut to fit), and no more than the prefix has."""
    return max(0, min(available, max(limit - longest, limit // 4)))


def length_batches(order: list[int], lengths: list[int], max_tokens: int) -> Iterator[list[int]]:
    """Consecutive runs of ``order`` (sorted by length) whose padded size, rows × longest, stays within
    ``max_tokens`` (a sequence longer than that goes alone)."""
    at = 0
    while at < len(order):
        width, end = lengths[order[at]], at
        while end < len(order) and max(width, lengths[order[end]]) * (end - at + 1) <= max(max_tokens, width):
            width = max(width, lengths[order[end]])
            end += 1
        yield order[at:end]
        at = end


def token_logprobs(handle: ModelHandle, seqs: list[list[int]], max_tokens: int | None = None) -> list[np.ndarray]:
    """log p(s_t | s_<t) for t ≥ 1 of each id sequence (one forward pass per length-sorted batch, right
    padding, as the scoring pass; :func:`privleak.attacks.scoring.score_texts` for texts)."""
    import torch

    from ...models.batching import pad_batch, position_ids_for
    from ...models.device import activation_bytes_per_token, autocast, evaluation_model, model_device, token_budget

    model = evaluation_model(handle.model)
    model.eval()
    dev = model_device(model)
    lengths = [len(s) for s in seqs]
    if max_tokens is None:
        max_tokens = token_budget(dev, activation_bytes_per_token(model, max(lengths, default=1), training=False), 8192)
    order = sorted(range(len(seqs)), key=lambda i: lengths[i])
    out: list[np.ndarray] = [np.zeros(0, dtype=np.float32)] * len(seqs)
    with torch.inference_mode():
        for idx in length_batches(order, lengths, max_tokens):
            ids, mask = pad_batch([seqs[i] for i in idx], handle.pad_id)
            ids, mask = ids.to(dev), mask.to(dev)
            with autocast(dev, model=model):
                logits = model(input_ids=ids, attention_mask=mask, position_ids=position_ids_for(mask)).logits
            logits = logits[:, :-1].float()
            lp = logits.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)
            lp = lp.cpu().numpy()
            for j, i in enumerate(idx):
                out[i] = lp[j, : max(0, lengths[i] - 1)].astype(np.float32)
    return out


def prefixed_token_logprobs(handle: ModelHandle, prefix: list[int], bodies: list[list[int]],
                            max_tokens: int | None = None) -> list[np.ndarray]:
    """log p(b_t | prefix, b_<t) for t ≥ 1 of each body b: :func:`token_logprobs` of ``prefix + b``'s last
    ``len(b) − 1`` entries, with the prefix run once.

    Every record of a ReCaLL pass shares one prefix (as long as the records, so half of each sequence): its
    keys/values are computed once and repeated over each batch, the bodies continue at the prefix's positions,
    and the LM head runs on the bodies' predicted tokens only where the logits are ``head(decoder(...))``. The
    same numbers as the one pass over ``prefix + b`` to float tolerance (``tests/test_recall_prefix.py``).
    """
    if not prefix:
        return token_logprobs(handle, bodies, max_tokens)
    import copy

    import torch

    from ...models.batching import pad_batch, position_ids_for
    from ...models.decoders import decoder_and_head
    from ...models.device import activation_bytes_per_token, autocast, evaluation_model, model_device, token_budget

    model = evaluation_model(handle.model)
    model.eval()
    dev = model_device(model)
    lengths = [len(b) for b in bodies]
    if max_tokens is None:
        max_tokens = token_budget(dev, activation_bytes_per_token(model, len(prefix) + max(lengths, default=1),
                                                                   training=False), 8192)
    split = decoder_and_head(model)
    out: list[np.ndarray] = [np.zeros(0, dtype=np.float32)] * len(bodies)
    order = [i for i in sorted(range(len(bodies)), key=lambda i: lengths[i]) if lengths[i] >= 2]
    n_prefix = len(prefix)
    with torch.inference_mode():
        with autocast(dev, model=model):
            shared = model(input_ids=torch.tensor([prefix], device=dev), use_cache=True).past_key_values
        for idx in length_batches(order, lengths, max_tokens):
            ids, mask = pad_batch([bodies[i] for i in idx], handle.pad_id)
            ids, mask = ids.to(dev), mask.to(dev)
            cache = copy.deepcopy(shared)  # the forward appends the bodies' keys to the cache it is given
            cache.batch_repeat_interleave(len(idx))
            kwargs = dict(input_ids=ids, position_ids=position_ids_for(mask) + n_prefix, past_key_values=cache,
                          attention_mask=torch.cat([torch.ones(len(idx), n_prefix, dtype=mask.dtype, device=dev),
                                                    mask], dim=1), use_cache=True)
            keep = mask[:, 1:].bool()
            target = ids[:, 1:][keep]
            with autocast(dev, model=model):
                if split is not None:
                    hidden = split[0](**kwargs).last_hidden_state[:, :-1][keep]
                    logits_of = lambda r0: split[1](hidden[r0 : r0 + 1024])  # noqa: E731
                else:
                    full = model(**kwargs).logits[:, :-1][keep]
                    logits_of = lambda r0: full[r0 : r0 + 1024]  # noqa: E731
                lp = torch.cat([_picked_logp(logits_of(r0).float(), target[r0 : r0 + 1024])
                                for r0 in range(0, len(target), 1024)])
            lp = lp.cpu().numpy()
            ends = np.cumsum([lengths[i] - 1 for i in idx])
            for i, stop, n in zip(idx, ends, (lengths[i] - 1 for i in idx)):
                out[i] = lp[stop - n : stop].astype(np.float32)
    return out


def _picked_logp(logits: Any, target: Any) -> Any:
    """log_softmax(logits)[row, target]: the logit minus the row's logsumexp."""
    import torch

    return logits.gather(-1, target.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)


@dataclass
class Prefixed:
    """Mean log-likelihoods of the evaluated records (members, then non-members) over the same tokens, with and
    without a prefix: ``ll_prefixed`` = LL(x | P), ``ll`` = LL(x); ``prefix_tokens`` P's length."""

    ll_prefixed: np.ndarray
    ll: np.ndarray
    prefix_tokens: int


def prefixed_likelihoods(handle: ModelHandle, prefix: list[str], texts: list[str], passes: list[TokenScores],
                         rows: list[int]) -> Prefixed:
    """LL(x | P) and LL(x) of ``texts`` (``passes[k]``'s text ``rows[k]`` is ``texts[k]``), P the ``prefix``
    records joined and followed by blank lines, cut to its last :func:`prefix_budget` tokens.

    A record is encoded as the scoring pass encodes it (its lead token then separates it from the prefix) and
    cut to what fits; its first token, which the scoring pass does not predict, is left out of both."""
    from ...models.batching import encode, token_ids

    enc = encode(handle.tokenizer, texts, handle.max_length, handle.text_format).ids
    limit = context_limit(handle)
    # A blank line after the prefix too: the record starts a paragraph of its own, whatever the format's lead.
    p_ids = token_ids(handle.tokenizer, ["\n\n".join(prefix) + "\n\n"])[0] if prefix else []
    keep = prefix_budget(limit, max((len(e) for e in enc), default=0), len(p_ids))
    p_ids = list(p_ids[len(p_ids) - keep:]) if keep else []
    bodies = [e[: max(1, limit - keep)] for e in enc]
    lps = prefixed_token_logprobs(handle, list(p_ids), bodies)
    ll_p, ll = np.zeros(len(texts)), np.zeros(len(texts))
    for k, (b, lp) in enumerate(zip(bodies, lps)):
        n = len(b) - 1  # x's predicted tokens
        if n <= 0:
            continue
        base = passes[k].logprob[passes[k].tokens(rows[k])][:n].astype(np.float64)
        if len(base) != n:
            raise ValueError(f"ReCaLL: record {k} has {len(base)} scored tokens, {n} expected")
        ll_p[k], ll[k] = float(lp[-n:].astype(np.float64).mean()), float(base.mean())
    return Prefixed(ll_p, ll, keep)


def make_neighbours(base: ModelHandle, texts: list[str], n: int, seed: int) -> list[list[str]]:
    """``n`` neighbours of each text: a copy with ⌈:data:`NEIGHBOUR_FRACTION` · tokens⌉ of its tokens replaced,
    each by one of ``base``'s top-:data:`NEIGHBOUR_TOP_K` next-token predictions at that position other than
    the token itself (one pass of ``base``; the positions and choices drawn from ``seed``)."""
    import torch

    from ...models.batching import encode

    tok = base.tokenizer
    f = encode(tok, texts, base.max_length, base.text_format)
    special = set(getattr(tok, "all_special_ids", None) or ())
    rng = np.random.default_rng(derive_seed(seed, "neighbours") % 2**32)
    out: list[list[str]] = []
    model = base.model
    model.eval()
    with torch.inference_mode():
        for ids in f.ids:
            lead = f.lead
            body = list(ids[lead:])
            if not body or len(ids) < 2:
                out.append([tok.decode(body, skip_special_tokens=True)] * n)
                continue
            logits = model(input_ids=torch.tensor([ids], device=next(model.parameters()).device)).logits[0, :-1]
            top = torch.topk(logits.float(), NEIGHBOUR_TOP_K + 1, dim=-1).indices.cpu().numpy()  # predicts ids[1:]
            # Substitutable: the text's own tokens that the model predicts (position ≥ 1), not the format's.
            spots = [p for p in range(max(1, lead), len(ids)) if ids[p] not in special] or [len(ids) - 1]
            m = max(1, int(np.ceil(NEIGHBOUR_FRACTION * len(spots))))
            mine = []
            for _ in range(n):
                new = list(ids)
                for p in rng.choice(spots, size=min(m, len(spots)), replace=False):
                    cands = [int(c) for c in top[int(p) - 1] if int(c) != ids[int(p)] and int(c) not in special]
                    if cands:
                        new[int(p)] = cands[: NEIGHBOUR_TOP_K][int(rng.integers(min(len(cands), NEIGHBOUR_TOP_K)))]
                mine.append(tok.decode(new[lead:], skip_special_tokens=True))
            out.append(mine)
    return out


# --------------------------------------------------------------------------- the attacks

def _placed(ctx: AttackContext, scores: np.ndarray, **parameters: Any) -> MembershipResult:
    """Scores of the evaluated records (members, then non-members) placed back into full-length arrays."""
    n_m, n_n = len(ctx.scoring.texts["members"]), len(ctx.scoring.texts["non_members"])
    pos, neg = np.full(n_m, np.nan), np.full(n_n, np.nan)
    k = len(ctx.mia_members)
    pos[ctx.mia_members], neg[ctx.mia_non_members] = scores[:k], scores[k:]
    return membership_result(ctx, pos, neg, **parameters)


def _evaluated(ctx: AttackContext) -> tuple[list[str], list[TokenScores], list[int]]:
    s, t = ctx.scoring, ctx.scoring.texts
    m, h = s.target("members"), s.target("non_members")
    rows = [int(i) for i in ctx.mia_members] + [int(i) for i in ctx.mia_non_members]
    texts = [t["members"][i] for i in ctx.mia_members] + [t["non_members"][i] for i in ctx.mia_non_members]
    return texts, [m] * len(ctx.mia_members) + [h] * len(ctx.mia_non_members), rows


def _prefixed(target: ModelHandle, ctx: AttackContext, which: Input[list[str]]) -> Prefixed:
    """The target's likelihoods of the evaluated records under one prefix, once per stage (ReCaLL's non-member
    pass is Con-ReCall's too)."""
    return ctx.memo(f"prefixed {which.name}", lambda: prefixed_likelihoods(target, ctx[which], *_evaluated(ctx)))


def recall(target: ModelHandle, ctx: AttackContext) -> MembershipResult:
    p = _prefixed(target, ctx, NON_MEMBER_PREFIX)
    return _placed(ctx, recall_scores(p.ll_prefixed, p.ll), shots=len(ctx[NON_MEMBER_PREFIX]),
                   prefix_tokens=p.prefix_tokens)


def con_recall(target: ModelHandle, ctx: AttackContext) -> MembershipResult:
    non, mem = _prefixed(target, ctx, NON_MEMBER_PREFIX), _prefixed(target, ctx, MEMBER_PREFIX)
    return _placed(ctx, con_recall_scores(non.ll_prefixed, mem.ll_prefixed, non.ll), gamma=GAMMA,
                   shots=len(ctx[NON_MEMBER_PREFIX]), prefix_tokens=non.prefix_tokens)


def dc_pdd(target: ModelHandle, ctx: AttackContext) -> MembershipResult:
    from ...models.batching import encode

    corpus = ctx[REFERENCE_CORPUS]
    shared = ctx.get(TOKEN_FREQUENCIES)  # the base tokenizer's table, made once per process
    freq = shared[1] if shared is not None and shared[0] == _fingerprint(target, corpus) else \
        frequencies_for(target, corpus)
    texts, passes, rows = _evaluated(ctx)
    # The tokens the scoring pass predicted for each evaluated record: its encoding after the first token.
    enc = encode(target.tokenizer, texts, target.max_length, target.text_format).ids
    lp = [p.logprob[p.tokens(r)] for p, r in zip(passes, rows)]
    offsets = np.concatenate([[0], np.cumsum([len(x) for x in lp])]).astype(np.int64)
    ids = np.asarray([t for e in enc for t in e[1:]], dtype=np.int64)
    scores = dc_pdd_scores(np.concatenate(lp) if lp else np.zeros(0), offsets, ids, freq)
    return _placed(ctx, scores, a=DC_PDD_A)


def neighbourhood(target: ModelHandle, ctx: AttackContext) -> MembershipResult:
    from ..scoring import score_texts

    texts, passes, rows = _evaluated(ctx)
    hood = ctx[NEIGHBOURS]
    if len(hood) != len(texts):
        raise ValueError(f"neighbourhood: {len(hood)} neighbour sets for {len(texts)} evaluated records")
    n = len(hood[0]) if hood else 0
    flat = score_texts(target, [x for h in hood for x in h], desc=f"score {target.name} neighbours", moments=False)
    nll = {id(p): p.nll() for p in passes}
    nll_x = np.array([nll[id(p)][r] for p, r in zip(passes, rows)])
    return _placed(ctx, neighbourhood_scores(nll_x, flat.nll().reshape(len(texts), n)), neighbours=n,
                   top_k=NEIGHBOUR_TOP_K, fraction=NEIGHBOUR_FRACTION)
