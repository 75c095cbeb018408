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
                 seed=0, given=None, masker=None, max_mia_records=2000, target=None):
    """An AttackContext over hand-made splits (:class:`~privleak.core.inputs.FakeInputs`), scoring ``target`` (and
    ``reference``) directly (no run directory). ``given``: more inputs by key (a prebuilt analyser or guard)."""
    from privleak.attacks.base import AttackContext
    from privleak.attacks.inputs import (
        ATTACK_SPECS, BASE, CANARIES, MASKER, REFERENCE, SCORES, SEED, SELECTION, SETTINGS, SPLITS, USER_SPLIT,
        ModelScores,
    )
    from privleak.attacks.membership.selection import mia_selection
    from privleak.attacks.registry import ATTACKS
    from privleak.attacks.scoring import score_texts
    from privleak.attacks.settings import AttackSettings
    from privleak.core.inputs import FakeInputs

    members, non_members, population = list(members), list(non_members), list(population)
    texts = {"members": [r.text for r in members if r.kind != "canary"], "non_members": [r.text for r in non_members],
             "population": [r.text for r in population]}
    values = {SPLITS: {"members": members, "non_members": non_members, "population": population, "public": list(public),
                       "public_heldout": []},
              CANARIES: list(canaries), SETTINGS: settings or AttackSettings(), SEED: seed, USER_SPLIT: False,
              SELECTION: mia_selection([r for r in members if r.kind != "canary"], non_members, max_mia_records, seed),
              SCORES: {"target": ModelScores(lambda split: score_texts(target, texts[split]))},
              ATTACK_SPECS: dict(ATTACKS), **(given or {})}
    models = {"target": _Info({})}
    if masker is not None:
        values[MASKER] = masker
    if reference is not None:
        values[SCORES]["base"] = ModelScores(lambda split: score_texts(reference, texts[split]))
        values[REFERENCE] = {"target": reference}
        values[BASE] = reference
        models = {"target": _Info({"reference": "base"}), "base": _Info({})}
    return AttackContext(FakeInputs(values, models=models, model="target"), "target")


class _Info:
    def __init__(self, roles):
        self.roles = roles
