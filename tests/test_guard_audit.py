"""The audit's guard arm on a tiny model: shape, baseline equality, masking, false-positive accounting."""

from __future__ import annotations

import json
import math

import pytest

from privleak.attacks.extraction import canary_extraction
from privleak.core.masking import PiiMasker
from privleak.core.verbatim_index import VerbatimIndex
from privleak.data.canaries import derive_seed, make_canaries
from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus
from privleak.defenses.guard import Guard, ScanSettings, Verdict
from privleak.defenses.guard.audit_arm import (
    _benign,
    _canary_leaks,
    _ReplayModel,
    evaluate_guard,
    guard_rows,
)
from privleak.defenses.guard.verdict import Finding
from privleak.models.generation import GenerationSettings, generate
from privleak.models.handle import ModelHandle

SIZES = dict(n_samples=6, phi_records=2, n_benign=8)


@pytest.fixture(scope="module")
def corpus():
    return generate_corpus(ClinicalCorpusConfig(n_public=30, n_members=30, n_non_members=30, n_population=10,
                                                phi_fraction=0.5, seed=2))


@pytest.fixture(scope="module")
def result(tiny_handle, corpus):
    return evaluate_guard(tiny_handle, corpus.splits, corpus.canaries[:2], seed=0, scan=ScanSettings(ner=False), **SIZES)


def test_result_shape_and_json(result):
    res = result["results"]
    assert set(res["attacks"]) == {"canaries", "phi_prompts", "sampling"}
    for a in res["attacks"].values():
        assert a["with_guard"] <= a["without_guard"]
        assert a["fraction_stopped"] is None or 0.0 <= a["fraction_stopped"] <= 1.0
        assert a["outputs_checked"] > 0
    fp = res["false_positives"]
    assert fp["n_generated"] == SIZES["n_benign"] and set(fp["by_reason"]) == {"pii", "verbatim", "canary"}
    for cell in [fp["overall"], fp["blocked"], *fp["by_reason"].values()]:
        if cell["n"]:
            lo, hi = cell["ci95"]
            assert 0.0 <= lo <= cell["rate"] <= hi <= 1.0
    json.dumps(result, allow_nan=False)
    rows = guard_rows(result)
    assert [r["measure"] for r in rows[:3]] == ["canary extraction", "PHI prompt extraction", "sampling extraction"]
    assert any(r["measure"] == "false positives (pii)" for r in rows)


def test_no_raw_pii_in_result(result, corpus):
    dumped = json.dumps(result)
    for c in corpus.canaries:
        assert c.secret not in dumped
    for r in corpus.splits["members"] + corpus.splits["non_members"]:
        for s in r.pii or []:
            v = s.value(r.text)
            if len(v) >= 6 and s.label in ("NAME", "SSN", "PHONE", "EMAIL", "MRN", "ADDRESS"):
                assert v not in dumped, s.label


def test_unguarded_run_equals_baseline(tiny_handle, corpus, result):
    controls = make_canaries(repeats=(1,), per_repeat=5, seed=derive_seed(0, "control-canaries"))
    planted = {c.text() for c in corpus.canaries[:2]}
    base = canary_extraction(tiny_handle, corpus.canaries[:2], seed=0, controls=[c for c in controls if c.text() not in planted])
    assert result["results"]["attacks"]["canaries"]["without_guard"] == _canary_leaks(base)


def test_replay_model_is_transparent(tiny_handle):
    replay = ModelHandle(_ReplayModel(tiny_handle.model), tiny_handle.tokenizer, tiny_handle.max_length)
    s = GenerationSettings(max_new_tokens=8, greedy=False, num_return_sequences=2, seed=5)
    prompts = ["Patient Ann", "General"]
    want = generate(tiny_handle, prompts, s)
    assert generate(replay, prompts, s) == want and generate(replay, prompts, s) == want
    assert len(replay.model._cache) >= 1


class _RedactEverything(Guard):
    """A useless guard: the false-positive rate must expose it."""

    def check_batch(self, texts, contexts=None):
        return [Verdict(True, "<X>", (Finding("pii", "X", 0, len(t), "redact"),)) for t in texts]


def test_redact_everything_guard_scores_full_false_positives(tiny_handle, corpus):
    members = corpus.splits["members"]
    g = Guard.build([r.text for r in members], scan=ScanSettings(ner=False))
    useless = _RedactEverything(g.index, g.tripwire, g.policy, g.scan)
    idx = VerbatimIndex.build([r.text for r in members])
    fp, examples = _benign(tiny_handle, useless, members, corpus.splits["non_members"], corpus.splits["public"], idx,
                           None, None, 0, 10, PiiMasker({}), 2)
    assert fp["n_benign"] > 0 and math.isclose(fp["overall"]["rate"], 1.0) and fp["by_reason"]["pii"]["rate"] == 1.0
    assert fp["blocked"]["rate"] == 0.0 and len(examples) == 2


def test_reaching_counts_only_windows_into_the_output():
    from privleak.defenses.guard.audit_arm import _reaching

    text = "member text that is long enough to make at least a few windows of fifty characters"
    idx = VerbatimIndex.build([text])
    assert _reaching(idx, text + " tail", len(text) + 1).sum() == 0  # every window ends in the prompt part
    assert _reaching(idx, text, len(text) - 1).sum() == 1  # only the last window reaches the output
