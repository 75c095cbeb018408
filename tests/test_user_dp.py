"""User-level DP-SGD: the person is the unit of sampling, clipping and accounting (issue 27)."""

import math

import dp_accounting
import pytest
import torch
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from scipy.stats import binom

from privleak.core.errors import UserError
from privleak.models import public_grad
from privleak.accountants import (calibrate_group_sigma, calibrate_sigma, epsilon_pld, epsilon_prv,
    group_epsilon_direct, record_epsilon)
from privleak.models.base import BaseModelSpec, build_model
from privleak.models.batching import encode, pad_batch, per_sequence_nll, position_ids_for
from privleak.models.book_keeping import BookKeeping
from privleak.models.dp_train import DPSettings, freeze_embeddings, train_dp, untie_output_embedding
from privleak.models.handle import clone_model
from privleak.models.person_clip import PersonBookKeeping, group_slots
from privleak.models.user_dp import (
    UserDPSettings,
    clipped_person_sum,
    group_records,
    pack_people,
    person_labels,
    records_per_person,
    train_els,
    train_user_dp,
)

# Three records through 24-wide layers (T = 14 after padding): c_attn (24×72) and the MLP take the
# ghost norm, attn.c_proj (24×24) the explicit one; stacked per person the widths change, both still run.
SEQS = [[0, 5, 7, 9, 3, 0], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0], [0, 4, 4, 0]]
PERSON_A, PERSON_B = [0, 1], [2]  # two people, three records: A wrote two of them


def _tiny(train_output: bool = False):
    torch.manual_seed(3)
    model = build_model(BaseModelSpec(vocab_size=50, n_layer=2, n_embd=24, n_head=2, max_length=16), eos_id=0).train()
    if train_output:
        assert untie_output_embedding(model)
    freeze_embeddings(model)
    return model


def _record_grad(model, seq: list[int]) -> torch.Tensor:
    """∇ℓ of one record alone (no padding, no batch): the hand computation's building block."""
    params = [p for p in model.parameters() if p.requires_grad]
    ids = torch.tensor([seq])
    mask = torch.ones_like(ids)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=position_ids_for(mask)).logits
    grads = torch.autograd.grad(per_sequence_nll(logits, ids, mask).sum(), params)
    return torch.cat([g.reshape(-1) for g in grads])


def _clip(v: torch.Tensor, c: float) -> torch.Tensor:
    return v * min(1.0, c / (float(v.norm()) + 1e-6))


@pytest.mark.parametrize("reduction", ["sum", "mean"])
@pytest.mark.parametrize("train_output", [False, True], ids=["tied-head-frozen", "untied-head-trained"])
def test_per_person_clipping_equals_hand_computation(reduction, train_output):
    """(a) Noise off (``clipped_person_sum`` is the trainer's private sum before noise): the update is
    Σ_person clip_C(Σ_records ∇ℓ) (mean: ½ Σ for the two-record person) — each gradient by autograd on
    its record alone. C lies between person A's norm and their larger record's, so clipping A's records
    one by one would give another sum; B's one record is over C."""
    model = _tiny(train_output)
    g = [_record_grad(model, s) for s in SEQS]
    scale = 0.5 if reduction == "mean" else 1.0
    person_a, person_b = scale * (g[0] + g[1]), g[2]
    largest = max(float(g[0].norm()), float(g[1].norm()))
    c = (float(person_a.norm()) + largest) / 2
    assert abs(float(person_a.norm()) - largest) > 0.2 and float(person_b.norm()) > c
    expected = _clip(person_a, c) + _clip(person_b, c)
    per_record = scale * (_clip(g[0], c) + _clip(g[1], c)) + _clip(g[2], c)
    assert not torch.allclose(expected, per_record, rtol=1e-3)

    params = [p for p in model.parameters() if p.requires_grad]
    for budget in (4096, 1):  # one micro-batch, or one person per micro-batch: the same sum
        pbk = PersonBookKeeping(model, c)
        sums, _ = clipped_person_sum(model, pbk, SEQS, [PERSON_A, PERSON_B], 0, reduction, budget, params)
        pbk.remove()
        got = torch.cat([sums[p].reshape(-1) for p in params])
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-6)
        assert all(p.grad is None for p in params)


def test_one_record_per_person_is_per_sample_book_keeping():
    model = _tiny(train_output=True)
    ids, mask = pad_batch(SEQS, 0)
    norms = {}
    for cls in (BookKeeping, PersonBookKeeping):
        bk = cls(model, 0.7)
        with bk.capture():
            logits = model(input_ids=ids, attention_mask=mask, position_ids=position_ids_for(mask)).logits
            per_sequence_nll(logits, ids, mask).sum().backward()
        norms[cls] = (bk.write_clipped_sum() if cls is BookKeeping else bk.write_clipped_sum(torch.arange(3), 3),
                      [p.grad.clone() for p in bk.params])
        bk.remove()
    torch.testing.assert_close(norms[BookKeeping][0], norms[PersonBookKeeping][0])
    for a, b in zip(norms[BookKeeping][1], norms[PersonBookKeeping][1]):
        torch.testing.assert_close(a, b)


def test_group_slots_and_packing_keep_people_whole():
    slots = group_slots(torch.tensor([1, 0, 1, 2, 1]), 3)
    assert slots.tolist() == [[1, 5, 5], [0, 2, 4], [3, 5, 5]]
    people = [[0, 1], [2], [3, 4, 5]]
    lengths = [5, 9, 3, 4, 4, 8]
    parts = pack_people(people, lengths, max_tokens=20)
    assert sorted(p for part in parts for p in part) == [0, 1, 2]
    for part in parts:  # within budget unless a person alone exceeds it
        width = max(lengths[r] for p in part for r in people[p])
        assert width * sum(len(people[p]) for p in part) <= 20 or len(part) == 1


# ---------------------------------------------------------------- accounting

def _dpa_pld(q, sigma, steps, delta):
    """dp_accounting's PLD (grid 1e-3: ≤ 5e-4 relative excess on this grid), written here without our wrappers."""
    acc = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-3)
    acc.compose(dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps))
    return acc.get_epsilon(delta)


GRID = [(q, sigma, steps) for q in (0.05, 0.2) for sigma in (0.9, 2.0) for steps in (50, 150)]


@pytest.mark.parametrize("q,sigma,steps", GRID)
def test_person_level_epsilon_agrees_with_dp_accounting(q, sigma, steps):
    """(b) ULS's person-level ε (PRV, the arms' accountant, at the person-level q) is within 1 % of
    dp_accounting's PLD; the ELS mixture accountant at k = 1 is the same number."""
    reference = _dpa_pld(q, sigma, steps, 1e-5)
    run = dict(sample_rate=q, noise_multiplier=sigma, steps=steps, delta=1e-5)
    assert epsilon_prv(**run) == pytest.approx(reference, rel=0.01)
    assert group_epsilon_direct(**run, group_size=1) == pytest.approx(reference, rel=0.01)


@pytest.mark.parametrize("q,steps", [(0.2, 150), (0.05, 100)])
def test_calibrated_person_sigma_meets_target_by_dp_accounting(q, steps):
    sigma = calibrate_sigma(target_epsilon=8.0, delta=1e-5, sample_rate=q, steps=steps, accountant="prv")
    eps = _dpa_pld(q, sigma, steps, 1e-5)
    assert eps == pytest.approx(8.0, rel=0.01)


def test_els_sigma_meets_the_mixture_of_gaussians_target():
    """ELS, k = 3: σ calibrated for the person-level ε; dp_accounting's mixture PLD, built here, agrees."""
    q, steps, k = 0.2, 60, 3
    sigma = calibrate_group_sigma(target_epsilon=4.0, delta=1e-5, sample_rate=q, steps=steps, group_size=k)
    j = list(range(k + 1))
    pld = pld_lib.from_mixture_gaussian_mechanism(sigma, [float(x) for x in j], binom.pmf(j, k, q).tolist(),
                                                  value_discretization_interval=1e-4)
    assert pld.self_compose(steps).get_epsilon_for_delta(1e-5) == pytest.approx(4.0, rel=0.01)
    run = dict(sample_rate=q, noise_multiplier=sigma, steps=steps, delta=1e-5)
    assert group_epsilon_direct(**run, group_size=k) <= 4.0
    assert group_epsilon_direct(**run, group_size=k) > 4.0 * (1 - 5e-3)  # the smallest σ: a hair less noise misses
    # More records per person cost more ε at the same σ; a replaced record costs more than an added one.
    assert group_epsilon_direct(**run, group_size=2) < group_epsilon_direct(**run, group_size=3)
    assert record_epsilon(sample_rate=q, noise_multiplier=sigma, rounds=steps, delta=1e-5) > epsilon_pld(**run)


@pytest.mark.parametrize("bad,match", [({"group_size": 0}, "group_size"), ({"target_epsilon": -1.0}, "target_epsilon"),
                                       ({"delta": 1.5}, "delta"), ({"sample_rate": 2.0}, "sample_rate")])
def test_calibrate_group_sigma_checks_its_inputs(bad, match):
    kw = dict(target_epsilon=4.0, delta=1e-5, sample_rate=0.2, steps=60, group_size=3) | bad
    with pytest.raises(UserError, match=match):
        calibrate_group_sigma(**kw)
    with pytest.raises(TypeError):
        calibrate_group_sigma(4.0, 1e-5, 0.2, 60, 3)  # keyword-only, like the rest of the accountants


# ---------------------------------------------------------------- training

def _corpus(tiny_handle, n_people=12, extra=None):
    texts, persons = [], []
    for p in range(n_people):
        for v in range(1 + (p % 3 == 0) * 2):  # every third person has three notes
            texts.append(f"Patient {p} visit {v}: phone 555-01{p:02d}, seen for review.")
            persons.append(f"P{p}")
    for text, person in extra or []:
        texts.append(text)
        persons.append(person)
    return encode(tiny_handle.tokenizer, texts, tiny_handle.max_length), persons


def _settings(**over):
    kw = dict(target_epsilon=8.0, delta=1e-3, max_grad_norm=1.0, epochs=2, expected_batch_size=4, lr=1e-3,
              records_per_person=2, seed=5)
    kw.update(over)
    return UserDPSettings(**kw)


def test_the_person_is_the_unit(tiny_handle):
    """(c) A second record of an existing person changes neither the number of units nor q, σ, the
    sampled people per step, nor the bound on that person's contribution."""
    data, persons = _corpus(tiny_handle)
    more, persons_more = _corpus(tiny_handle, extra=[("Patient 1 visit 9: another note, phone 555-0101.", "P1")])
    assert len(more) == len(data) + 1
    _, log = train_user_dp(clone_model(tiny_handle.model), data, _settings(), tiny_handle.pad_id,
                           tiny_handle.max_length, persons)
    _, log2 = train_user_dp(clone_model(tiny_handle.model), more, _settings(), tiny_handle.pad_id,
                            tiny_handle.max_length, persons_more)
    assert log.people == log2.people == 12
    assert (log.sample_rate, log.sigma, log.steps, log.epsilon) == (log2.sample_rate, log2.sigma, log2.steps, log2.epsilon)
    assert log.people_per_step == log2.people_per_step
    assert log.max_grad_norm == log2.max_grad_norm
    assert records_per_person(persons_more) == {1: 7, 2: 1, 3: 4}
    # P1's contribution with both records is one clipped vector: norm ≤ C, not 2C.
    model = clone_model(tiny_handle.model).train()
    freeze_embeddings(model)
    params = [p for p in model.parameters() if p.requires_grad]
    rows = [i for i, p in enumerate(persons_more) if p == "P1"]
    pbk = PersonBookKeeping(model, 0.01)
    sums, _ = clipped_person_sum(model, pbk, more.ids, [rows], tiny_handle.pad_id, "sum", 4096, params)
    assert float(torch.cat([s.reshape(-1) for s in sums.values()]).norm()) == pytest.approx(0.01, rel=1e-3)


def test_uls_log_reports_person_and_record_epsilon(tiny_handle):
    data, persons = _corpus(tiny_handle)
    _, log = train_user_dp(clone_model(tiny_handle.model), data, _settings(), tiny_handle.pad_id,
                           tiny_handle.max_length, persons)
    assert log.method == "uls" and log.people == 12 and log.sample_rate == pytest.approx(4 / 12)
    assert log.steps == 2 * int(12 / 4)
    assert log.epsilon <= 8.0 and log.epsilon_pld == pytest.approx(8.0, rel=0.01)
    assert log.epsilon_record > log.epsilon  # people with three notes: a record inside them is a replacement
    assert log.records_per_person == 2 and log.records_per_person_distribution == {1: 8, 3: 4}
    assert log.records_per_step <= 2 * log.people_per_step


def test_seeded_run_is_reproducible(tiny_handle):
    """(d)"""
    data, persons = _corpus(tiny_handle)
    runs = [train_user_dp(clone_model(tiny_handle.model), data, _settings(seed=s), tiny_handle.pad_id,
                          tiny_handle.max_length, persons) for s in (5, 5, 6)]
    w = [torch.cat([p.detach().reshape(-1) for p in m.parameters()]) for m, _ in runs]
    assert torch.equal(w[0], w[1]) and runs[0][1].losses == runs[1][1].losses
    assert not torch.equal(w[0], w[2])


def _private_parts(monkeypatch):
    """Record p.grad (the noised private mean) each time the public term is about to add to it."""
    seen: list[torch.Tensor] = []
    original = public_grad.PublicTerm.apply

    def spy(self, params):
        params = list(params)
        seen.append(torch.cat([p.grad.detach().reshape(-1).clone() for p in params]))
        original(self, params)
        seen[-1] = (seen[-1], torch.cat([p.grad.detach().reshape(-1).clone() for p in params]))

    monkeypatch.setattr(public_grad.PublicTerm, "apply", spy)
    return seen


@pytest.mark.parametrize("trainer", ["uls", "record"])
def test_public_term_leaves_the_private_noised_sum_unchanged(tiny_handle, monkeypatch, trainer):
    """(e) lr = 0 keeps the weights fixed, so with the same seed every step's private part (clipped sum
    + noise) must be identical with public weight 0 and 0.5, while the full update differs."""
    data, persons = _corpus(tiny_handle)
    public = encode(tiny_handle.tokenizer, ["General advice: drink water and sleep well."] * 6, tiny_handle.max_length)
    runs = {}
    for w in (0.0, 0.5):
        seen = _private_parts(monkeypatch)
        if trainer == "uls":
            train_user_dp(clone_model(tiny_handle.model), data, _settings(lr=0.0, public_weight=w), tiny_handle.pad_id,
                          tiny_handle.max_length, persons, public=public)
        else:
            s = DPSettings(target_epsilon=8.0, delta=1e-3, max_grad_norm=1.0, epochs=2, expected_batch_size=4, lr=0.0,
                           seed=5, grad_sample_mode="bk", public_weight=w)
            train_dp(clone_model(tiny_handle.model), data, s, tiny_handle.pad_id, tiny_handle.max_length, public=public)
        runs[w] = list(seen)
        monkeypatch.undo()
    assert len(runs[0.0]) == len(runs[0.5]) > 1
    for (priv0, full0), (priv5, full5) in zip(runs[0.0], runs[0.5]):
        assert torch.equal(priv0, priv5)
        assert torch.equal(full0, priv0)
        assert not torch.allclose(full5, priv5)


def test_uls_with_lora_returns_a_plain_merged_model(tiny_handle):
    """``+lora``: the adapters' Linear factors are clipped per person like any layer, then merged."""
    from transformers import GPT2LMHeadModel

    data, persons = _corpus(tiny_handle)
    before = clone_model(tiny_handle.model)
    model, log = train_user_dp(clone_model(tiny_handle.model), data, _settings(lora_rank=2, lr=1e-2, accountant="rdp"),
                               tiny_handle.pad_id, tiny_handle.max_length, persons)
    assert type(model) is GPT2LMHeadModel and log.epsilon <= 8.0
    changed = [n for (n, p), q in zip(model.named_parameters(), before.parameters()) if not torch.equal(p, q)]
    assert changed and all("wte" not in n and "wpe" not in n for n in changed)


def test_public_weight_without_public_records_is_refused(tiny_handle):
    data, persons = _corpus(tiny_handle)
    with pytest.raises(UserError, match="public"):
        train_user_dp(clone_model(tiny_handle.model), data, _settings(public_weight=0.3), tiny_handle.pad_id,
                      tiny_handle.max_length, persons)


def test_els_caps_records_and_accounts_per_person(tiny_handle):
    data, persons = _corpus(tiny_handle)
    _, log = train_els(clone_model(tiny_handle.model), data, _settings(method="els", expected_batch_size=4),
                       tiny_handle.pad_id, tiny_handle.max_length, persons)
    assert log.method == "els" and log.records_per_person == 2
    assert log.records_used == 8 + 4 * 2
    assert log.epsilon <= 8.0 and log.epsilon == pytest.approx(8.0, rel=0.01)
    assert log.epsilon_record < log.epsilon  # a record is protected better than a person with two of them
    assert log.epsilon == pytest.approx(group_epsilon_direct(sample_rate=log.sample_rate, noise_multiplier=log.sigma,
                                                             steps=log.steps, delta=1e-3, group_size=2))


def test_person_labels_one_definition():
    from privleak.data.records import Record

    records = [Record("note a", meta={"kind": "phi", "person_id": "P1"}),
               Record("note b", meta={"kind": "phi", "person_id": "P1"}),
               Record("SSN 1", meta={"kind": "canary", "canary_id": "canary-000", "copy": 0}),
               Record("SSN 1", meta={"kind": "canary", "canary_id": "canary-000", "copy": 1}),
               Record("zq vx", meta={"kind": "audit_canary", "canary_id": "audit-0001"}),
               Record("mail 1", meta={"kind": "user", "group": "alice"}),
               Record("Generic  text.", meta={"kind": "generic"}),
               Record("Generic text. ", meta={"kind": "generic"})]
    labels = person_labels(records)
    assert labels[0] == labels[1] and labels[2] == labels[3] and labels[6] == labels[7]
    assert len(set(labels)) == 5
    assert records_per_person(labels) == {1: 2, 2: 3}


def test_bad_person_labels_are_refused():
    with pytest.raises(UserError, match="one person label per record"):
        group_records(["a", "b"], 3)
    with pytest.raises(UserError, match="no person label"):
        group_records(["a", None, "b"], 3)
    assert group_records(["b", "a", "b"], 3) == [[0, 2], [1]]


def test_bad_settings_are_refused(tiny_handle):
    data, persons = _corpus(tiny_handle)
    for over, match in [({"records_per_person": 0}, "records_per_person"), ({"method": "xls"}, "method"),
                        ({"expected_batch_size": 13}, "between 1 and the 12 people"),
                        ({"public_weight": -1.0}, "public_weight")]:
        with pytest.raises(UserError, match=match):
            train_user_dp(clone_model(tiny_handle.model), data, _settings(**over), tiny_handle.pad_id,
                          tiny_handle.max_length, persons)


@pytest.mark.parametrize("over", [{}, {"lora_rank": 2}])
def test_the_person_level_step_is_adamw_on_the_noised_sum(tiny_handle, monkeypatch, over):
    """The person-level loop steps its own AdamW (fused where torch has the kernel): the same run on a per-tensor
    AdamW is the reference (the fused kernel under Opacus's optimizer did not learn: tests/test_dp_fast.py)."""
    from privleak.models import user_dp

    data, persons = _corpus(tiny_handle)
    s = _settings(lr=1e-2, accountant="rdp", **over)
    model, log = train_user_dp(clone_model(tiny_handle.model), data, s, tiny_handle.pad_id, tiny_handle.max_length,
                               persons)

    def per_tensor(m, lr, wd, fused=True):
        return torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=lr, weight_decay=wd,
                                 foreach=False)

    monkeypatch.setattr(user_dp, "make_optimizer", per_tensor)
    ref, ref_log = train_user_dp(clone_model(tiny_handle.model), data, s, tiny_handle.pad_id, tiny_handle.max_length,
                                 persons)
    assert log.losses == pytest.approx(ref_log.losses, rel=1e-5)
    for (name, a), (_, b) in zip(ref.named_parameters(), model.named_parameters()):
        torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-4, msg=name)
