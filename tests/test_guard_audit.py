"""The guard arm: the attack runner over a model behind the guard, and the guard's cost on benign output.

The model here has memorised its training notes and two repeated canaries,
so the attacks find leaks without the guard, and the guard has something to
stop (on an untrained model "with ≤ without" would read 0 ≤ 0).
"""

from __future__ import annotations

import math

import pytest
from hand import make_context

from privleak.attacks.registry import ATTACKS
from privleak.arms.guard_costs import Tally, _benign, _reaching, guard_target
from privleak.audit.runner import run_family
from privleak.core.masking import PiiMasker
from privleak.core.verbatim_index import VerbatimIndex
from privleak.data.canaries import make_canaries, plant_canaries
from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus
from privleak.defenses.guard import Guard, ScanSettings, Verdict
from privleak.defenses.guard.guard import inventory_from_records
from privleak.defenses.guard.verdict import Finding
from privleak.models.batching import encode
from privleak.models.handle import ModelHandle, clone_model
from privleak.models.train import TrainSettings, train

TEXT_ONLY = [s for s in ATTACKS.values() if s.text_only and s.name in ("canary_extraction", "sampling_extraction",
                                                                         "phi_extraction")]


@pytest.fixture(scope="module")
def corpus():
    c = generate_corpus(ClinicalCorpusConfig(n_public=30, n_members=12, n_non_members=12, n_population=10,
                                             phi_fraction=1.0, canary_repeats=(), seed=2))
    canaries = make_canaries(repeats=(24,), per_repeat=2, seed=5)
    members = plant_canaries(c.splits["members"], canaries, seed=5)
    return {**c.splits, "members": members}, canaries


@pytest.fixture(scope="module")
def memorised(tiny_handle, corpus):
    splits, _ = corpus
    model = clone_model(tiny_handle.model)
    data = encode(tiny_handle.tokenizer, [r.text for r in splits["members"]], tiny_handle.max_length)
    train(model, data, TrainSettings(epochs=40, batch_size=8, lr=1e-2), pad_id=tiny_handle.pad_id)
    model.eval()
    return ModelHandle(model=model, tokenizer=tiny_handle.tokenizer, max_length=tiny_handle.max_length, name="memorised")


@pytest.fixture(scope="module")
def runs(memorised, tiny_handle, corpus):
    from privleak.arms.inputs import GUARD
    from privleak.attacks.settings import AttackSettings

    splits, canaries = corpus
    settings = AttackSettings(extraction_samples=24, phi_records=6)
    # NER off: the regex recognizers are enough here, and the guard is built in a second instead of ten.
    guard = Guard.build([r.text for r in splits["members"]], canaries=canaries,
                        inventory=inventory_from_records(splits["members"]), scan=ScanSettings(ner=False),
                        allow_texts=[r.text for r in splits["public"]])

    def ctx():
        return make_context(splits["members"], splits["non_members"], splits["population"], splits["public"], canaries,
                            settings=settings, reference=tiny_handle, given={GUARD: guard}, target=memorised)

    plain = run_family(TEXT_ONLY, memorised, ctx())
    c, tally = ctx(), Tally()
    guarded = run_family(TEXT_ONLY, guard_target(memorised, c, tally), c, on_start=tally.start)
    return plain, guarded, tally


def test_guard_stops_what_the_attacks_extract(runs):
    plain, guarded, _ = runs
    assert set(plain.results) == set(guarded.results) == {s.name for s in TEXT_ONLY}
    before = {k: r.leaked().k for k, r in plain.results.items()}
    after = {k: r.leaked().k for k, r in guarded.results.items()}
    assert before["canary_extraction"] >= 1  # the memorised canaries come out without the guard ...
    assert after["canary_extraction"] == 0  # ... and never through the tripwire
    assert all(after[k] <= before[k] for k in before)
    assert sum(before.values()) > sum(after.values())


def test_interventions_are_counted_per_attack(runs):
    _, guarded, tally = runs
    assert set(tally.counts) == set(guarded.results)
    for iv in tally.counts.values():
        assert 0 <= iv.outputs_blocked <= iv.outputs_intervened <= iv.outputs_checked and iv.outputs_checked > 0
    assert tally.counts["canary_extraction"].outputs_intervened >= 1


def test_no_raw_pii_in_the_guarded_results(runs, corpus):
    splits, canaries = corpus
    dumped = " ".join(r.model_dump_json() for run in runs[:2] for r in run.results.values())
    for c in canaries:
        assert c.secret not in dumped
    for r in splits["members"] + splits["non_members"]:
        for s in r.pii or []:
            v = s.value(r.text)
            if len(v) >= 6 and s.label in ("NAME", "SSN", "PHONE", "EMAIL", "MRN", "ADDRESS"):
                assert v not in dumped, s.label


class _RedactEverything(Guard):
    """A useless guard: the false-positive rate must expose it."""

    def check_batch(self, texts, contexts=None):
        return [Verdict(True, "<X>", (Finding("pii", "X", 0, len(t), "redact"),)) for t in texts]


def test_redact_everything_guard_scores_full_false_positives(tiny_handle, corpus):
    splits, _ = corpus
    members = splits["members"]
    g = Guard.build([r.text for r in members], scan=ScanSettings(ner=False))
    useless = _RedactEverything(g.index, g.tripwire, g.policy, g.scan)
    idx = VerbatimIndex.build([r.text for r in members])
    fp, examples = _benign(tiny_handle, useless, members, splits["non_members"], splits["public"], idx,
                           None, None, 0, 10, PiiMasker({}), 2)
    assert fp.n_benign > 0 and math.isclose(fp.overall.rate, 1.0) and fp.by_reason["pii"].rate == 1.0
    assert fp.blocked.rate == 0.0 and len(examples) == 2


def test_reaching_counts_only_windows_into_the_output():
    text = "member text that is long enough to make at least a few windows of fifty characters"
    idx = VerbatimIndex.build([text])
    assert _reaching(idx, text + " tail", len(text) + 1).sum() == 0  # every window ends in the prompt part
    assert _reaching(idx, text, len(text) - 1).sum() == 1  # only the last window reaches the output
