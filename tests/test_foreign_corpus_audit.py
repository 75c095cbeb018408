"""The whole default audit on a corpus nobody on the project's clinical generator wrote (issue 37 item 1).

A hobby forum (``tests/corpora/forum.py``): people with 1 to 60 posts at this size (up to 200 at the
generator's default), near-duplicate weekly diaries, cross-posts and bumps, long free text, no canaries of
ours, read with ``--group-field author`` — the heavy repetition per person that stopped the default audit
with ``internal error (OverflowError)`` in ``membership/dp-8`` (``roc_band_check`` formed ``e^ε`` for a
person's group ε in the thousands). Small sizes (``conftest.SMALL``'s model, 400 posts), the default arm set.
"""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest
from conftest import SMALL
from corpora.forum import build_forum_corpus, write_forum_corpus

from privleak import pipeline
from privleak.config import build_config

N_POSTS = 400
# The most active member writes 15 % of the posts (60), the heavy posters 45 % together, the rest 1-3 each:
# enough people for ≥ 20 evaluated units a side at 400 posts.
SHAPE = {"top_share": 0.15, "regular_share": 0.45}
# The corpus seed whose split (the audit's seed 7) puts the 60-post member among the members and a 37-post
# one among the non-members: the membership design then evaluates units of up to 64 records (stratum 33-64).
CORPUS_SEED = 2
DEFAULT_ARMS = {"baseline", "best", "dp-1", "dp-8", "dp-user-10", "scrub", "dp-8+scrub", "guard"}


def forum_config(path) -> dict:
    cfg = {k: v for k, v in SMALL.items() if k not in ("arms", "canaries")}  # the profile's default arms
    cfg["data"] = {"path": str(path), "group_field": "author", "synthetic": SMALL["data"]["synthetic"]}
    cfg["dp"] = {"epsilons": [1, 8], "epochs": 1, "batch_size": 24}
    cfg["one_run"] = {"canaries": 100, "prefix_words": 2, "secret_words": 3}
    return cfg


def test_the_forum_corpus_has_what_the_clinical_one_lacks():
    records = build_forum_corpus(N_POSTS, seed=CORPUS_SEED, **SHAPE)
    posts = Counter(r["meta"]["author"] for r in records)
    assert min(posts.values()) == 1 and max(posts.values()) == 60  # 1 to 60 posts a person at this size
    assert sum(v >= 17 for v in posts.values()) >= 5  # several heavy posters, not one
    default = Counter(r["meta"]["author"] for r in build_forum_corpus(1500, seed=0)).values()
    assert min(default) == 1 and max(default) == 200 and sum(v >= 30 for v in default) >= 10
    kinds = Counter(r["meta"]["kind"] for r in records)
    assert kinds["diary"] >= 30 and kinds["crosspost"] >= 5  # near duplicates
    assert max(len(r["text"]) for r in records) > 2000  # long free text
    assert not any("canary" in json.dumps(r["meta"]) for r in records)
    assert records == build_forum_corpus(N_POSTS, seed=CORPUS_SEED, **SHAPE)  # deterministic
    for r in records:
        for s, e, label in r["pii"]:
            assert r["text"][s:e].strip() == r["text"][s:e] and label


def test_the_forum_file_loads_with_its_group_field(tmp_path):
    """`python -m tests.corpora forum` writes what `privleak run --data … --group-field author` reads."""
    from corpora import PRESIDIO_LABELS
    from corpora.__main__ import main as corpora_main

    from privleak.data.loaders import load_corpus

    out = tmp_path / "forum.jsonl"
    assert corpora_main(["forum", "--out", str(out), "--n", "60", "--seed", "2"]) == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    loaded = load_corpus(out, group_field="author")
    assert len(loaded) == len(rows) == 60
    assert [r.meta["group"] for r in loaded] == [row["author"] for row in rows]
    assert all(lab in PRESIDIO_LABELS for row in rows for _, _, lab in row["pii"])


@pytest.fixture(scope="module")
def forum_run(tmp_path_factory):
    data = write_forum_corpus(tmp_path_factory.mktemp("forum") / "forum.jsonl", n=N_POSTS, seed=CORPUS_SEED,
                              **SHAPE)
    out = tmp_path_factory.mktemp("forum-run")
    results = pipeline.run_audit(build_config(forum_config(data)), out)
    return out, results


def test_the_default_audit_runs_to_the_end(forum_run):
    out, results = forum_run
    assert set(results.arms) == DEFAULT_ARMS
    assert json.loads((out / "results.json").read_text()) == results.to_json()
    assert results.recommendation is not None
    for name, arm in results.arms.items():
        assert arm.verdict is not None, name


def test_people_with_many_posts_get_a_finite_or_stated_group_epsilon(forum_run):
    """The person with the most posts is a group of dozens: record-level DP guarantees them a group ε in the
    hundreds or thousands, which every formula must carry without overflowing; it is printed with its δ."""
    _, results = forum_run
    for name in ("dp-1", "dp-8", "dp-8+scrub"):
        p = results.arms[name].privacy
        assert p.person_records == 60, (name, p.person_records)  # the heaviest poster is a member
        assert p.epsilon_person > 50 * p.epsilon and not math.isnan(p.epsilon_person)
        # Nothing planted in the corpus; the one-run audit canaries (one record each) are reported apart.
        assert p.canary_records in (None, 1)
    text = results.recommendation.text
    if "person" in text:
        assert "at δ = " in text


def test_the_roc_band_is_tested_at_a_unit_epsilon_past_exp_range(forum_run):
    """The diagnostic that overflowed: dp-8's held-out ROC against the (ε, δ) of units of up to 64 records,
    ε far past 709 (where e^ε leaves a double) — now a p-value, not an OverflowError."""
    _, results = forum_run
    band = results.arms["dp-8"].empirical_epsilon.roc_band
    assert band is not None and band.unit_records == 64
    assert band.epsilon > 709 and 0.0 <= band.p_value <= 1.0


def test_scrubbing_does_not_change_who_a_person_is(forum_run):
    """dp-8+scrub trains on the scrubbed posts of the same people: its ε per person is dp-8's (issue 37 item 2)."""
    _, results = forum_run
    a, b = results.arms["dp-8"].privacy, results.arms["dp-8+scrub"].privacy
    assert (a.sigma, a.sample_rate, a.steps) == (b.sigma, b.sample_rate, b.steps)
    assert b.person_records == a.person_records and b.records_per_person == a.records_per_person
    assert b.epsilon_person == pytest.approx(a.epsilon_person, rel=1e-9)
