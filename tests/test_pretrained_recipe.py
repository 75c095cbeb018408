"""The DP-LoRA recipe for pretrained checkpoints (policy.pretrained_dp_recipe) across corpus sizes, and the
measured deciding-size configuration (bench/smollm2_decide.yaml) that follows it."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from privleak.policy import PRETRAINED_DP, PROFILES, pretrained_dp_recipe

ROOT = Path(__file__).resolve().parents[1]


def test_the_profile_keeps_the_recipe_it_was_chosen_with():
    """371 records and 292 people (the smollm2 profile): q ≈ 1/12 in batches of 32, 20 epochs, as measured."""
    assert PRETRAINED_DP["batch_size"] == 32 and PRETRAINED_DP["epochs"] == 20
    assert PRETRAINED_DP["people_per_step"] == 32 and PRETRAINED_DP["people_epochs"] == 20
    prof = PROFILES["smollm2"]
    assert prof["dp"]["recipe"] == "pretrained"
    assert "epochs" not in prof["dp"] and "batch_size" not in prof["dp"]  # resolved per arm, from its size
    assert prof["arm_options"]["dp-user"] == {"records_per_person": 4}


def _dp_settings(overrides: dict, n_members: int, arm: str = "dp-8+lora"):
    from privleak.arms import parse_arm
    from privleak.arms.registry import KINDS
    from privleak.config import build_config

    cfg = build_config(overrides, {"profile": "smollm2"})
    spec = parse_arm(arm)
    return KINDS[spec.kind].settings(cfg, spec, n_members)


def test_the_profiles_dp_arm_resolves_the_recipe_from_its_size_with_the_key_it_had():
    """At the profile's 321 members (+ 50 one-run canaries) the recipe resolves to the chosen 32 and 20, and the
    arm's settings — its stage key — are those of the explicit batch and epochs the profile used to set."""
    here = _dp_settings({}, 321)
    assert (here.batch_size, here.epochs) == (32, 20)
    explicit = _dp_settings({"dp": {"recipe": "sgd", "batch_size": 32, "epochs": 20}}, 321)
    assert here.model_dump() == explicit.model_dump()
    larger = _dp_settings({}, 1_141)
    assert (larger.batch_size, larger.epochs) == (32, 6)
    assert (_dp_settings({"dp": {"epochs": 9}}, 1_141).epochs) == 9  # a set value wins


def test_the_person_level_arm_carries_the_recipe_into_its_key_only_where_it_is_not_the_default():
    user = _dp_settings({}, 321, arm="dp-user-10+lora")
    assert user.recipe == "pretrained" and user.batch_size is None and user.epochs is None
    default = _dp_settings({"dp": {"recipe": "sgd"}}, 321, arm="dp-user-10+lora")
    assert "recipe" not in default.model_dump()


@pytest.mark.parametrize("n", [400, 800, 1_191, 5_000, 50_000])
def test_a_larger_corpus_keeps_the_batch_and_the_steps(n):
    r = pretrained_dp_recipe(n, n)
    assert r["batch_size"] == 32 and r["people_per_step"] == 32
    steps = r["epochs"] * n / r["batch_size"]
    assert r["epochs"] >= 1
    if r["epochs"] > 1:  # a whole number of epochs: the steps within half an epoch of the chosen 240
        assert abs(steps - 240) <= n / 32 / 2 + 1e-9
    assert r["epochs"] == r["people_epochs"]


@pytest.mark.parametrize("n", [40, 100, 200, 371])
def test_a_smaller_corpus_keeps_q_and_the_epochs(n):
    r = pretrained_dp_recipe(n, n)
    assert r["epochs"] == 20
    assert r["batch_size"] == max(8, 8 * math.ceil(n / 96))


def test_at_fixed_steps_a_larger_corpus_needs_less_noise_per_step():
    """What the rule rests on: at the recipe's 240 steps, σ = 0.7 holds ε ≤ 8 at q = 32/1,191 but not at 32/371
    (which needs σ ≈ 1): the larger corpus's steps carry less noise at the same ε."""
    from privleak.accountants.analysis.rdp import epsilon_rdp

    def eps(n: int) -> float:
        return epsilon_rdp(sample_rate=32 / n, noise_multiplier=0.7, steps=240, delta=1e-4)

    assert eps(1_191) <= 8.0 < eps(371)


def test_the_deciding_size_config_follows_the_recipe():
    """bench/smollm2_decide.yaml's DP epochs are the recipe's at its size (members + 21 planted canary copies +
    ½ of 100 one-run canaries; the synthetic corpus's member people + 50), so the file cannot drift from it."""
    from privleak.data.clinical import ClinicalCorpusConfig, generate_corpus

    cfg = yaml.safe_load((ROOT / "bench" / "smollm2_decide.yaml").read_text())
    syn = cfg["data"]["synthetic"]
    n = syn["n_members"]
    prof = PROFILES["smollm2"]["data"]["synthetic"]
    corpus = generate_corpus(ClinicalCorpusConfig(n_public=prof["n_public"], n_members=n, n_non_members=n,
                                                  n_population=prof["n_population"],
                                                  n_public_heldout=prof["n_public_heldout"], seed=0,
                                                  canary_repeats=()))
    members = corpus.splits["members"]
    people = len({r.meta.get("person_id", ("solo", i)) for i, r in enumerate(members)}) + 50
    records = n + sum(PROFILES["smollm2"]["canaries"]["repeats"]) + 50
    r = pretrained_dp_recipe(records, people)
    assert cfg["dp"]["epochs"] == r["epochs"]
    assert cfg["arm_options"]["dp-user"]["epochs"] == r["people_epochs"]
    assert cfg["arm_options"]["dp-user"]["batch_size"] == r["people_per_step"]
