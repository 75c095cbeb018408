"""Audit your own DP fine-tune from inside the ``transformers`` Trainer (issue 48): PrivLeakCallback with Opacus.

A tiny GPT-2 (built from a config, its BPE tokenizer trained here) is fine-tuned on support-chat transcripts
(tests/corpora/chat.py: a domain PrivLeak's generator never makes) by the ``transformers`` Trainer with an Opacus
``PrivacyEngine`` — the user's own code, nothing of PrivLeak's training: Poisson batches, per-sample clipping,
noise calibrated by Opacus for ε = 1. The callback inserts 200 audit canaries (each with probability ½) and, when
training ends, attacks the model with the one-run audit of the ε the engine's accountant claims.

* trained correctly: no alarm (the audit-wide false-alarm rate is ≤ 5 %, tests/test_alarms.py);
* the noise removed from the user's DP step (the accountant still claims ε ≈ 1, as a silently broken DP
  library would): DP GUARANTEE VIOLATED, raised as :class:`DPGuaranteeViolated`, results.json written.

The recipe that makes noise-free clipped SGD memorise its canaries in seconds follows test_dp_audit.py's TINY_DP
(200 short canaries, δ = 1e-4, many steps at a high learning rate), with every weight trained (the tied
embedding too: the canaries' rare tokens are learnt there) and the canaries' words ranked by public transcripts
of the domain. Measured on this recipe with the noise removed: one-run ε ≥ 1.65 at 16 epochs against the claimed
0.99 (0.86 at 10 epochs, not enough; 20 epochs with frozen embeddings reached only 1.01).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from corpora.chat import build_domain_corpus
from test_attack_cmd import _tokenizer

import privleak.models.conv1d_grad  # noqa: F401  (an Opacus grad sampler for GPT-2's Conv1D: fast per-sample grads)
from privleak.integrations import DPGuaranteeViolated, PrivLeakCallback
from privleak.integrations.hook import headline

DELTA = 1e-4
EPOCHS, BATCH, LR, CLIP = 16, 16, 1e-2, 1.0
MAX_LENGTH = 32
ONE_RUN = {"canaries": 200, "prefix_words": 2, "secret_words": 3}
ATTACKS = {"model": {"max_length": MAX_LENGTH},
           "attacks": {"bootstrap": 10, "select": ["membership", "one_run_canaries"]}}


@pytest.fixture(scope="module")
def chats():
    private, public = build_domain_corpus(n=160, n_public=200, seed=4)
    texts = [r["text"] for r in private]
    # trained on / held out / public transcripts of the domain (other staff, other customers) that rank the
    # tokenizer's words by how rarely the domain uses them: the canaries' words
    return texts[:80], texts[80:], [r["text"] for r in public]


def _fine_tune(tmp_path: Path, train: list[str], heldout: list[str], public: list[str], break_noise: bool,
               epsilon: float = 1.0):
    """The user's script: Trainer + Opacus, with PrivLeak's callback."""
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    tok = _tokenizer(train + heldout + public)
    torch.manual_seed(0)
    # n_positions above the training length: the one-run reconstruction game decodes past a canary's tokens.
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_positions=4 * MAX_LENGTH, n_embd=64, n_layer=2,
                                       n_head=2,
                                       bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id))

    audit = PrivLeakCallback(tok, non_members=heldout, delta=DELTA, seed=1, config=ATTACKS, public=public,
                             **ONE_RUN, out=tmp_path / "audit")
    texts = audit.insert(train)  # the canaries go in before tokenising, as the user's records do
    enc = tok(texts, truncation=True, max_length=MAX_LENGTH, padding="max_length", return_tensors="pt")
    data = TensorDataset(enc["input_ids"], enc["attention_mask"])

    def collate(rows):
        ids, mask = (torch.stack(x) for x in zip(*rows))
        return {"input_ids": ids, "attention_mask": mask}

    engine = PrivacyEngine(accountant="prv", secure_mode=False)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=LR)
    private, optimizer, loader = engine.make_private_with_epsilon(
        module=model, optimizer=optimizer, data_loader=DataLoader(data, batch_size=BATCH, collate_fn=collate),
        target_epsilon=epsilon, target_delta=DELTA, epochs=EPOCHS, max_grad_norm=CLIP,
        noise_generator=torch.Generator().manual_seed(2))
    if break_noise:  # the bug: the clipped sum goes out without its noise; the accountant never knows
        def add_no_noise():
            for p in optimizer.params:
                p.grad = p.summed_grad.view_as(p).clone()
        optimizer.add_noise = add_no_noise
    audit.privacy_engine = engine

    class DPTrainer(Trainer):
        """Opacus's Poisson loader, its optimizer cleared each step, and a per-sequence mean loss (a record's
        gradient is its own: clipping bounds what one record adds, as DP-SGD's guarantee needs); position ids of
        the batch's shape (GPT-2's own are (1, T), which Opacus's per-sample embedding gradient cannot split by
        record)."""

        def get_train_dataloader(self):
            return loader

        def training_step(self, model, inputs, num_items_in_batch=None):
            # The Trainer clears the model's gradients, not the DP optimizer's clipped sum: cleared here, or each
            # step would add the last one's again.
            self.optimizer.zero_grad()
            return super().training_step(model, inputs, num_items_in_batch)

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            ids, mask = inputs["input_ids"], inputs["attention_mask"]
            positions = torch.arange(ids.shape[1], device=ids.device).repeat(ids.shape[0], 1)
            out = model(input_ids=ids, attention_mask=mask, position_ids=positions)
            nll = F.cross_entropy(out.logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
            keep = mask[:, 1:].float()
            loss = ((nll * keep).sum(1) / keep.sum(1).clamp(min=1)).mean()
            return (loss, out) if return_outputs else loss

    args = TrainingArguments(output_dir=str(tmp_path / "train"), num_train_epochs=EPOCHS, learning_rate=LR,
                             max_grad_norm=0.0, lr_scheduler_type="constant", report_to=[], save_strategy="no",
                             logging_strategy="no", use_cpu=True, disable_tqdm=True, seed=0)
    trainer = DPTrainer(model=private, args=args, optimizers=(optimizer, None), callbacks=[audit])
    return audit, trainer, engine


def test_correct_dp_fine_tune_raises_no_alarm(chats, tmp_path, caplog):
    audit, trainer, engine = _fine_tune(tmp_path, *chats, break_noise=False)
    with caplog.at_level(logging.INFO, logger="privleak"):
        trainer.train()
    res = audit.results
    arm = res.arms["target"]
    assert arm.kind == "external"
    assert arm.privacy.epsilon == pytest.approx(engine.get_epsilon(DELTA)) and arm.privacy.epsilon <= 1.05
    assert arm.privacy.accountant.startswith("opacus") and arm.privacy.steps == trainer.state.global_step
    one = arm.one_run_epsilon
    assert one.available and one.m == 200 and one.epsilon_steinke <= arm.privacy.epsilon
    assert res.alarms is not None and not res.alarms.violated
    assert arm.verdict.label != "DP GUARANTEE VIOLATED"
    # the white-box gradient canaries rode the user's own optimizer through every step
    wb = arm.privacy.gradient_canaries
    assert wb is not None and wb.steps == trainer.state.global_step and wb.canaries == 1000
    white = next(o for o in res.alarms.outcomes if o.route == "whitebox")
    assert white.alarm and not white.rejected
    assert res.alarms.power["target"].verified and "white-box" in res.alarms.power["target"].text
    # results.json and the report in the run directory; the headline figures in the Trainer's log.
    assert json.loads((tmp_path / "audit" / "results.json").read_text())["arms"]["target"]["privacy"]["epsilon"] \
        == arm.privacy.epsilon
    assert (tmp_path / "audit" / "report.html").exists()
    logged = trainer.state.log_history[-1]
    assert logged["privleak/dp_violated"] is False and logged["privleak/claimed_epsilon"] == arm.privacy.epsilon
    assert any("PrivLeak audit" in r.getMessage() for r in caplog.records)


def test_noise_removed_is_dp_guarantee_violated(chats, tmp_path):
    audit, trainer, engine = _fine_tune(tmp_path, *chats, break_noise=True)
    try:
        trainer.train()
    except DPGuaranteeViolated as error:
        exc = error
    else:
        pytest.fail(f"no alarm: {headline(audit.results)}")
    assert str(exc).startswith("DP GUARANTEE VIOLATED") and "\n" not in str(exc)
    res = exc.results
    arm = res.arms["target"]
    assert arm.privacy.epsilon <= 1.05  # the claim the broken loop's accountant makes
    assert res.alarms.violated == ["target"] and arm.verdict.label == "DP GUARANTEE VIOLATED"
    assert arm.one_run_epsilon.epsilon_steinke > arm.privacy.epsilon
    assert next(o for o in res.alarms.outcomes if o.route == "whitebox").rejected
    written = json.loads((tmp_path / "audit" / "results.json").read_text())
    assert written["alarms"]["violated"] == ["target"]
    assert trainer.state.log_history[-1]["privleak/dp_violated"] is True


def test_noise_removed_at_epsilon_8_is_caught_by_the_white_box_check(chats, tmp_path):
    """ε = 8 claimed, the noise removed: 200 audit canaries cannot refute ε = 8 however well they are guessed (the
    black-box routes stop near ε ≈ 5 at this m), but the gradient canaries in the user's own optimizer read a step
    with no noise at all."""
    audit, trainer, engine = _fine_tune(tmp_path, *chats, break_noise=True, epsilon=8.0)
    with pytest.raises(DPGuaranteeViolated) as caught:
        trainer.train()
    res = caught.value.results
    arm = res.arms["target"]
    assert 7.0 < arm.privacy.epsilon <= 8.05
    rejected = {o.route for o in res.alarms.outcomes if o.arm == "target" and o.alarm and o.rejected}
    assert "whitebox" in rejected and not {"one_run", "one_run_fdp"} & rejected
    assert "white-box" in str(caught.value) or "whitebox" in str(caught.value)
