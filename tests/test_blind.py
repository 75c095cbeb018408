"""The blind (model-free) baseline: chance on a random split, far from it on a shifted one, and the rivalry rule."""

from __future__ import annotations

import random

from corpora.shifted import build_shifted_corpus

from privleak.audit.blind import CHANCE_BAND, RIVAL_MARGIN, blind_baseline, rivals


def test_a_shifted_split_is_seen_without_any_model():
    a, b = build_shifted_corpus(n_per_source=120, seed=0)
    res = blind_baseline([r["text"] for r in a], [r["text"] for r in b], seed=0, bootstrap=50)
    assert res.auc > 0.95 and res.auc_ci95[0] > CHANCE_BAND
    assert rivals(res.auc, res.auc_ci95, best_attack_auc=0.7)


def test_a_random_split_of_one_source_is_at_chance():
    a, b = build_shifted_corpus(n_per_source=160, seed=1)
    texts = [r["text"] for r in a]  # one generator, split at random
    random.Random(0).shuffle(texts)
    res = blind_baseline(texts[:80], texts[80:], seed=0, bootstrap=50)
    assert abs(res.auc - 0.5) < 0.12
    assert not rivals(res.auc, res.auc_ci95, best_attack_auc=0.95)


def test_rivalry_rule():
    assert rivals(0.62, None, 0.65)  # within the margin of the best attack
    assert not rivals(0.62, None, 0.62 + RIVAL_MARGIN + 0.01)
    assert not rivals(0.53, None, 0.54)  # both at chance: no shift to speak of
    assert rivals(0.7, (0.6, 0.8), None)  # far from chance on its own


def test_seeded():
    a, b = build_shifted_corpus(n_per_source=40, seed=2)
    x = blind_baseline([r["text"] for r in a], [r["text"] for r in b], seed=4, bootstrap=20)
    y = blind_baseline([r["text"] for r in a], [r["text"] for r in b], seed=4, bootstrap=20)
    assert x == y
