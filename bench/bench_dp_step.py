"""DP-SGD step time ÷ non-private step time, same model, same logical batch.

Model: the embedded base architecture (random init). Data: a batch of the
synthetic clinical corpus at its natural mix of lengths. Variants:

* non-private: AdamW on one padded batch;
* DP hooks, all weights: Opacus per-sample gradients through hooks, one
  physical batch;
* DP hooks, micro-batched: the same step split into length-sorted micro-batches
  (what the audit runs);
* DP hooks, micro-batched, frozen embeddings (the audit's default DP arm).

Noise is on (σ = 1); Poisson sampling is replaced by a fixed batch so every
variant processes the same records. Prints ms/step and, last, the ratio of the
audit's default DP step to the non-private step.
"""

from __future__ import annotations

import os
import time
import warnings

os.environ.setdefault("PRIVLEAK_PROGRESS", "0")
warnings.filterwarnings("ignore")

import torch
from opacus import PrivacyEngine
from torch.utils.data import DataLoader, TensorDataset

from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus
from privleak.models.base import BaseModelSpec, build_model
from privleak.models.batching import encode, pad_batch, per_sequence_nll, position_ids_for
from privleak.models.dp_train import _logical_step, freeze_embeddings
from privleak.models.tokenizer import train_tokenizer

BATCH, STEPS = 128, 6


def timed(fn, steps: int = STEPS) -> float:
    fn()  # warm-up
    t0 = time.perf_counter()
    for _ in range(steps):
        fn()
    return (time.perf_counter() - t0) / steps


def main() -> None:
    torch.manual_seed(0)
    corpus = generate_corpus(ClinicalCorpusConfig(n_public=800, n_members=BATCH, n_non_members=10, n_population=10, canary_repeats=()))
    spec = BaseModelSpec()
    tok = train_tokenizer([r.text for r in corpus.splits["public"]], spec.vocab_size)
    data = encode(tok, [r.text for r in corpus.splits["members"]][:BATCH], spec.max_length)
    ids, mask = pad_batch(data.ids, tok.pad_token_id)
    width = int(mask.sum(1).max())
    ids, mask = ids[:, :width], mask[:, :width]

    model = build_model(spec, tok.eos_token_id).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def plain() -> None:
        opt.zero_grad(set_to_none=True)
        out = model(input_ids=ids, attention_mask=mask, position_ids=position_ids_for(mask)).logits
        per_sequence_nll(out, ids, mask).mean().backward()
        opt.step()

    from privleak.models.dp_train import micro_batches

    def make_plain_micro(freeze: bool):
        m = build_model(spec, tok.eos_token_id).train()
        if freeze:
            freeze_embeddings(m)
        o = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=1e-4)
        lengths = mask.sum(1).tolist()
        parts = micro_batches(lengths, 4096)

        def step() -> None:
            o.zero_grad(set_to_none=True)
            for rows in parts:
                w = max(lengths[r] for r in rows)
                i, mk = ids[rows, :w], mask[rows, :w]
                out = m(input_ids=i, attention_mask=mk, position_ids=position_ids_for(mk)).logits
                (per_sequence_nll(out, i, mk).sum() / BATCH).backward()
            o.step()
        return step

    def make_dp(freeze: bool):
        m = build_model(spec, tok.eos_token_id).train()
        if freeze:
            freeze_embeddings(m)
        o = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=1e-4)
        loader = DataLoader(TensorDataset(ids, mask), batch_size=BATCH)
        private, o, _ = PrivacyEngine().make_private(module=m, optimizer=o, data_loader=loader, noise_multiplier=1.0,
                                                     max_grad_norm=1.0, poisson_sampling=False)
        return private, o

    def dp_step(private, o, max_tokens: int):
        def step() -> None:
            o.zero_grad(set_to_none=True)
            _logical_step(private, o, ids, mask, max_tokens)
        return step

    t_plain = timed(plain)
    t_plain_micro = timed(make_plain_micro(False))
    t_plain_frozen = timed(make_plain_micro(True))
    p_all, o_all = make_dp(False)
    t_one = timed(dp_step(p_all, o_all, 10**9))
    t_micro = timed(dp_step(p_all, o_all, 4096))
    p_fr, o_fr = make_dp(True)
    t_frozen = timed(dp_step(p_fr, o_fr, 4096))
    print(f"batch {BATCH}, max length {width}, {sum(p.numel() for p in model.parameters()) / 1e6:.2f} M parameters, CPU threads {torch.get_num_threads()}")
    print(f"one padded batch:  non-private {t_plain * 1e3:.0f} ms, DP hooks {t_one * 1e3:.0f} ms -> {t_one / t_plain:.2f}x")
    print(f"micro-batched:     non-private {t_plain_micro * 1e3:.0f} ms, DP hooks {t_micro * 1e3:.0f} ms -> {t_micro / t_plain_micro:.2f}x")
    print(f"micro, frozen emb: non-private {t_plain_frozen * 1e3:.0f} ms, DP hooks {t_frozen * 1e3:.0f} ms -> {t_frozen / t_plain_frozen:.2f}x")
    print(f"audit's DP step vs the one-padded-batch non-private step: {t_frozen / t_plain:.2f}x")
    print(f"DP step / non-private step (audit default: micro-batched, frozen embeddings, same processing): {t_frozen / t_plain_frozen:.2f}x")


if __name__ == "__main__":
    main()
