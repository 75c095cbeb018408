"""The frozen prefix (issue 47): training the top layers over kept bottom-layer outputs is the same training.

Each trainer — plain (``train``), record-level DP-SGD (``train_dp``, book-keeping and Opacus hooks) and
user-level DP-SGD (``train_user_dp``) — runs with LoRA on the top layer of a tiny random Llama twice: with
the frozen prefix, and with it switched off (``layers_of`` answering None, the path every other model takes).
The trained weights must agree to float tolerance, and the prefix must really have been read.
"""

from __future__ import annotations

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

from privleak.models import frozen_prefix as fp_mod
from privleak.models.batching import Encoded, pad_batch, position_ids_for
from privleak.models.decoders import decoder_and_head
from privleak.models.dp_train import DPSettings, train_dp
from privleak.models.lora import add_lora, merge_lora
from privleak.models.train import TrainSettings, train
from privleak.models.user_dp import UserDPSettings, train_user_dp

V, D = 64, 32


def _llama(seed: int = 0, layers: int = 3):
    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(vocab_size=V, hidden_size=D, num_hidden_layers=layers, num_attention_heads=4,
                                        num_key_value_heads=2, intermediate_size=2 * D, max_position_embeddings=64,
                                        tie_word_embeddings=True)).eval()


def _data(n: int = 24) -> Encoded:
    g = torch.Generator().manual_seed(1)
    return Encoded([[0] + torch.randint(1, V, (int(torch.randint(3, 14, (1,), generator=g)),), generator=g).tolist()
                    + [0] for _ in range(n)])


@pytest.fixture(autouse=True)
def fresh_stores():
    """Each test starts with no kept states (they are process-wide by design)."""
    fp_mod._STORES.clear()
    yield
    fp_mod._STORES.clear()


@pytest.fixture
def counting(monkeypatch):
    """Record every FrozenPrefix made, so a test can check it was read."""
    made = []
    real = fp_mod.FrozenPrefix.__init__

    def init(self, *a, **kw):
        real(self, *a, **kw)
        made.append(self)

    monkeypatch.setattr(fp_mod.FrozenPrefix, "__init__", init)
    return made


def _off(monkeypatch):
    monkeypatch.setattr(fp_mod, "layers_of", lambda decoder: None)


def _close(a, b, rtol=1e-4, atol=1e-6):
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        torch.testing.assert_close(sa[k], sb[k], rtol=rtol, atol=atol, msg=k)


def test_the_top_layers_from_kept_hidden_states_equal_the_full_forward():
    m = add_lora(_llama(), 4, 8.0, layers=1)
    decoder, _ = decoder_and_head(m)
    ids, mask = pad_batch(_data(5).ids, 0)
    pos = position_ids_for(mask)
    with fp_mod.frozen_prefix(m) as fp, torch.no_grad():
        assert fp is not None and fp.k == 2
        first = fp.top(fp.hidden(ids, mask, pos), mask, pos)
        again = fp.top(fp.hidden(ids, mask, pos), mask, pos)  # from the store
        assert fp.hits == 5 and fp.misses == 5
    full = decoder(input_ids=ids, attention_mask=mask, position_ids=pos).last_hidden_state
    real = mask.bool()
    torch.testing.assert_close(first[real], full[real], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(again[real], full[real], rtol=1e-5, atol=1e-6)


def test_no_prefix_where_a_bottom_weight_or_the_embeddings_train():
    with fp_mod.frozen_prefix(_llama()) as fp:  # full fine-tuning: the embeddings train
        assert fp is None
    with fp_mod.frozen_prefix(add_lora(_llama(), 4, 8.0)) as fp:  # adapters in layer 0
        assert fp is None
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=V, n_positions=64, n_embd=D, n_layer=2, n_head=2))
    with fp_mod.frozen_prefix(add_lora(gpt2, 4, 8.0, layers=1)) as fp:  # GPT-2 adds position embeddings inside
        assert fp is None


def test_plain_lora_training_is_the_same_with_the_frozen_prefix(monkeypatch, counting):
    data, s = _data(), TrainSettings(epochs=3, batch_size=6, lr=5e-3)
    fast = merge_lora(_train(data, s))
    assert counting and counting[0].hits > 0
    _off(monkeypatch)
    slow = merge_lora(_train(data, s))
    _close(fast, slow)


def _train(data, s):
    m = add_lora(_llama(), 4, 8.0, layers=1)
    train(m, data, s, pad_id=0)
    return m


def test_the_comparison_can_fail(monkeypatch):
    # Not vacuous: another learning rate trains other weights, by more than the tolerance above.
    data = _data()
    a = merge_lora(_train(data, TrainSettings(epochs=3, batch_size=6, lr=5e-3)))
    b = merge_lora(_train(data, TrainSettings(epochs=3, batch_size=6, lr=4e-3)))
    with pytest.raises(AssertionError):
        _close(a, b)


@pytest.mark.parametrize("mode", ["bk", "hooks"])
def test_dp_lora_training_is_the_same_with_the_frozen_prefix(monkeypatch, counting, mode):
    data = _data()
    s = DPSettings(target_epsilon=8.0, delta=1e-3, max_grad_norm=0.1, epochs=3, expected_batch_size=8, lr=5e-3,
                   lora_rank=4, lora_alpha=8.0, lora_layers=1, grad_sample_mode=mode, data_size=len(data))
    fast, log_fast = train_dp(_llama(), data, s, pad_id=0, max_length=32)
    assert counting and counting[0].hits > 0
    _off(monkeypatch)
    slow, log_slow = train_dp(_llama(), data, s, pad_id=0, max_length=32)
    assert log_fast.sigma == log_slow.sigma and log_fast.steps == log_slow.steps
    _close(fast, slow)


def test_user_dp_lora_training_is_the_same_with_the_frozen_prefix(monkeypatch, counting):
    data = _data()
    persons = [i // 2 for i in range(len(data))]  # two records a person
    s = UserDPSettings(target_epsilon=8.0, delta=1e-3, max_grad_norm=0.1, epochs=3, expected_batch_size=4, lr=5e-3,
                       records_per_person=2, lora_rank=4, lora_alpha=8.0, lora_layers=1)
    fast, _ = train_user_dp(_llama(), data, s, pad_id=0, max_length=32, persons=persons)
    assert counting and counting[0].hits > 0
    _off(monkeypatch)
    slow, _ = train_user_dp(_llama(), data, s, pad_id=0, max_length=32, persons=persons)
    _close(fast, slow)


def test_lora_layers_beyond_the_model_is_one_line():
    from privleak.core.errors import UserError

    with pytest.raises(UserError, match="3 decoder layers"):
        add_lora(_llama(), 4, 8.0, layers=4)


def test_kept_states_are_shared_by_trainings_of_one_base_and_not_by_another(counting):
    # Two adapters on the same base in one process read one store; a base with other bottom weights another.
    data = _data(8)
    s = TrainSettings(epochs=1, batch_size=4, lr=5e-3)
    for seed in (0, 0, 1):
        train(add_lora(_llama(seed), 4, 8.0, layers=1), data, s, pad_id=0)
    a, b, c = counting
    assert a.store is b.store and a.store is not c.store
    assert a.misses == 8 and b.misses == 0 and b.hits == 8 and c.misses == 8


def test_top_layer_fine_tuning_is_the_same_with_the_frozen_prefix(monkeypatch, counting):
    # train.layers: every weight of the top layer trains (not adapters), the rest frozen, the head tied.
    from privleak.models.frozen_prefix import train_top_layers

    data, s = _data(), TrainSettings(epochs=2, batch_size=6, lr=1e-3)
    runs = []
    for on in (True, False):
        if not on:
            _off(monkeypatch)
        m = _llama()
        n = train_top_layers(m, 1)
        assert n == sum(p.numel() for p in m.model.layers[2].parameters()) + m.model.norm.weight.numel()
        train(m, data, s, pad_id=0)
        runs.append(m)
    assert counting[0].hits > 0 and counting[0].k == 2
    _close(*runs)
    frozen = _llama()
    torch.testing.assert_close(runs[0].model.layers[0].mlp.up_proj.weight, frozen.model.layers[0].mlp.up_proj.weight)
    torch.testing.assert_close(runs[0].lm_head.weight, frozen.lm_head.weight)  # the tied head did not move
    assert not torch.allclose(runs[0].model.layers[2].mlp.up_proj.weight, frozen.model.layers[2].mlp.up_proj.weight)


def test_top_layers_only_gives_every_weight_back_even_on_error():
    from privleak.models.frozen_prefix import top_layers_only

    m = GPT2LMHeadModel(GPT2Config(vocab_size=V, n_embd=D, n_layer=3, n_head=4, n_positions=64))
    with top_layers_only(m, 2):
        trainable = {n for n, p in m.named_parameters() if p.requires_grad}
        assert trainable and all(n.startswith(("transformer.h.1.", "transformer.h.2.", "transformer.ln_f."))
                                 for n in trainable)
    with pytest.raises(RuntimeError), top_layers_only(m, 1):
        raise RuntimeError
    assert all(p.requires_grad for p in m.parameters())


def test_train_layers_is_in_the_baseline_recipe_key_only_when_set():
    from conftest import SMALL

    from privleak.arms import get, parse_arm
    from privleak.config import build_config

    plain, top = build_config({**SMALL, "arms": ["baseline"]}), \
        build_config({**SMALL, "arms": ["baseline"], "train": {**SMALL.get("train", {}), "layers": 2}})
    for arm in ("baseline", "best", "scrub", "retrain", "unlearn-sisa"):
        kind, spec = get(parse_arm(arm).kind), parse_arm(arm)
        assert "layers" not in kind.settings(plain, spec, 100).key(), arm  # every run without it keeps its key
        assert kind.settings(top, spec, 100).key()["layers"] == 2, arm


def test_train_layers_beyond_the_model_is_one_line():
    from privleak.core.errors import UserError
    from privleak.models.frozen_prefix import train_top_layers

    with pytest.raises(UserError, match="3 decoder layers"):
        train_top_layers(_llama(), 5)
