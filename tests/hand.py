"""Reference computations for tests: a plain, unbatched forward pass."""

import torch

from privleak.models.batching import encode


def token_stats_by_hand(handle, text):
    """Per-token log p(x_t | x_<t), μ_t and σ_t² of one text, in float64, without batching or padding."""
    ids = encode(handle.tokenizer, [text], handle.max_length).ids[0]
    with torch.no_grad():
        logits = handle.model(input_ids=torch.tensor([ids])).logits[0, :-1].double()
    logp = torch.log_softmax(logits, -1)
    tok = logp[torch.arange(len(ids) - 1), torch.tensor(ids[1:])]
    p = logp.exp()
    mu = (p * logp).sum(-1)
    var = (p * logp**2).sum(-1) - mu**2
    return tok.numpy(), mu.numpy(), var.numpy()


def make_context(members, non_members, population=(), public=(), canaries=(), settings=None, reference=None,
                 seed=0, shared=None, masker=None, max_mia_records=2000, target=None):
    """An AttackContext over hand-made splits, scoring ``target`` (and ``reference``) directly (no run directory)."""
    import numpy as np

    from privleak.attacks.base import AttackContext, ScoringPasses
    from privleak.attacks.scoring import score_texts
    from privleak.attacks.settings import AttackSettings
    from privleak.attacks.membership.selection import mia_subsets
    from privleak.core.masking import PiiMasker
    from privleak.data.canaries import known_pii

    members, non_members, population = list(members), list(non_members), list(population)
    texts = {"members": [r.text for r in members if r.kind != "canary"], "non_members": [r.text for r in non_members],
             "population": [r.text for r in population]}
    def target_pass(split):
        return score_texts(target, texts[split])

    def reference_pass(split):
        return score_texts(reference, texts[split])

    mi, ni = mia_subsets([r for r in members if r.kind != "canary"], non_members, max_mia_records, seed)
    ctx = AttackContext(
        members=members, non_members=non_members, population=population, public=list(public), canaries=list(canaries),
        settings=settings or AttackSettings(), seed=seed,
        masker=masker or PiiMasker(known_pii([members, non_members, population, list(public)], canaries)),
        scoring=ScoringPasses(texts=texts, target_pass=target_pass,
                              reference_pass=reference_pass if reference is not None else None),
        mia_members=np.asarray(mi), mia_non_members=np.asarray(ni), reference=reference, shared=dict(shared or {}))
    return ctx
