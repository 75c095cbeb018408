"""Extraction attacks on a real tiny GPT-2 that has memorised one record and one canary."""

import pytest

from privleak.attacks.base import Policy
from privleak.attacks.extraction import (
    canary_extraction,
    prefix_extraction,
    sampling_extraction,
)
from privleak.core.verbatim_index import VerbatimIndex
from privleak.data.canaries import make_canaries
from privleak.data.records import Record
from privleak.models.batching import encode
from privleak.models.handle import ModelHandle, clone_model
from privleak.models.train import TrainSettings, train

SECRET_NOTE = ("Patient Di Fox was seen on day 7 for gout and acne; phone 555-0177, "
               "follow up with Ann Lee in clinic next week.")
OTHER_NOTE = ("Patient Bo Kim was seen on day 2 for flu and asthma; phone 555-0122, "
              "follow up with Cy Ray in clinic next month.")


@pytest.fixture(scope="module")
def canaries():
    return make_canaries(repeats=(1,), per_repeat=2, seed=11)


@pytest.fixture(scope="module")
def memorised(tiny_handle, canaries):
    seen = canaries[0]
    model = clone_model(tiny_handle.model)
    texts = [SECRET_NOTE, seen.text()] * 24
    data = encode(tiny_handle.tokenizer, texts, tiny_handle.max_length)
    train(model, data, TrainSettings(epochs=20, batch_size=8, lr=1e-2), pad_id=tiny_handle.pad_id)
    model.eval()
    return ModelHandle(model=model, tokenizer=tiny_handle.tokenizer, max_length=tiny_handle.max_length)


def test_prefix_extraction_memorised_vs_fresh(memorised, tiny_handle):
    mem = [Record(SECRET_NOTE, [], {"kind": "phi"})] * 3  # duplicates count once
    non = [Record(OTHER_NOTE, [], {"kind": "phi"}), Record("too short", [], {"kind": "generic"})]
    assert len(tiny_handle.tokenizer(SECRET_NOTE)["input_ids"]) >= 8 + 16
    res = prefix_extraction(memorised, mem, non, ks=(8,), ms=(16,))
    cell = res.cell(8, 16)
    assert res.n_members_total == 1 and cell.n_members == 1
    assert cell.member_rate == 1.0 and cell.by_kind == {"phi": [1, 1]}
    assert cell.n_non_members == 1 and cell.non_members_extracted == 0  # the floor: unseen note
    fresh = prefix_extraction(tiny_handle, mem, non, ks=(8,), ms=(16,)).cell(8, 16)
    assert fresh.members_extracted == 0
    j = res.model_dump(mode="json")
    assert j["cells"][0]["excess"] == pytest.approx(1.0)
    assert type(res).model_validate(j).model_dump(mode="json") == j  # computed fields are written, and dropped again on reading
    # Judged against its floor and the control (the fresh model): a leak.
    finding = res.assess("prefix_extraction", prefix_extraction(tiny_handle, mem, non, ks=(8,), ms=(16,)), Policy())
    assert finding.leaks is False  # 1 of 1 cannot be significant at α = 0.05 ...
    assert res.leaked().k == 1 and res.leaked().n == 1


def test_canary_extraction_seen_vs_unseen(memorised, tiny_handle, canaries):
    seen, unseen = canaries
    res = canary_extraction(memorised, [seen], controls=[unseen], n_samples=8, seed=0)
    rows = {r.canary_id: r for r in res.canaries}
    assert rows[seen.canary_id].greedy_extracted
    assert rows[seen.canary_id].sample_hits >= 1
    assert not rows[unseen.canary_id].greedy_extracted and rows[unseen.canary_id].sample_hits == 0
    by = res.by_repeats
    assert by["1"].greedy_fraction == 1.0 and by["control"].greedy_fraction == 0.0
    fresh = canary_extraction(tiny_handle, [seen], n_samples=4)
    assert not fresh.canaries[0].greedy_extracted
    assert res.model_dump(mode="json")["by_repeats"]["1"]["n_canaries"] == 1
    # An exact planted secret from a 10⁹ space is a leak on its own; the never-planted control stays clean.
    assert res.assess("canary_extraction", fresh, Policy()).leaks is True
    assert fresh.assess("canary_extraction", None, Policy()).leaks is False
    assert res.leaked().k == 1 and res.leaked().floor == 0


def test_sampling_extraction_end_to_end(memorised, tiny_handle, canaries):
    mi = VerbatimIndex.build([SECRET_NOTE, canaries[0].text()])
    ni = VerbatimIndex.build([OTHER_NOTE])
    res = sampling_extraction(memorised, mi, ni, reference=tiny_handle, n_samples=16, prompts=("", "Patient"),
                              max_new_tokens=32, top_n=10, seed=1)
    assert res.n_samples == 16 and 1 <= res.n_unique <= 16
    assert [r.metric for r in res.rankings] == ["perplexity", "zlib", "reference"]
    for r in res.rankings:
        assert r.top_n == min(10, res.n_unique)
        assert 0 <= r.member_only_hits <= r.member_hits <= r.top_n
        assert 0 <= r.non_member_only_hits <= r.non_member_hits
        assert r.member_hits <= res.all_member_hits
    # The memorised note dominates what the model emits: it is found, and ranked first by perplexity.
    assert res.all_member_hits >= 1 and res.ranking("perplexity").member_hits >= 1
    assert res.ranking("reference").member_only_hits >= 1
    assert res.ranking("reference").member_only_hits > res.ranking("reference").non_member_only_hits
    assert all(len(e.match) >= 50 for e in res.examples)
    again = sampling_extraction(memorised, mi, ni, n_samples=16, max_new_tokens=32, top_n=10, seed=1)
    assert again.all_member_hits == res.all_member_hits  # seeded
    assert "reference" not in [r.metric for r in again.rankings]
    # Text that is also public (what the base model saw) never counts as member-only.
    pub = VerbatimIndex.build([SECRET_NOTE, canaries[0].text()])
    excl = sampling_extraction(memorised, mi, ni, n_samples=16, max_new_tokens=32, top_n=10, seed=1, public_index=pub)
    assert excl.all_member_only_hits == 0 and excl.all_member_hits == res.all_member_hits and not excl.examples
