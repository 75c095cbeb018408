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
