"""DP-Weights (θ + N(0, σ²I) after training): the noise itself, the arm name, and an audited arm that
shows no accountant ε anywhere — only the attacks, the empirical bound and the utility."""

from __future__ import annotations

import contextlib
import io
import math

import pytest
import torch

from privleak.arms import arm_names, parse_arm, resolve
from privleak.config import build_config
from privleak.core.errors import UserError
from privleak.defenses.weight_noise import NO_FORMAL_EPSILON, add_weight_noise
from privleak.models.handle import clone_model


def test_noise_has_the_stated_scale_and_is_seeded(tiny_handle):
    model = clone_model(tiny_handle.model)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    report = add_weight_noise(model, 0.05, seed=3, start=tiny_handle.model)
    diffs = torch.cat([(p.detach() - before[n]).flatten() for n, p in model.named_parameters()])
    n = diffs.numel()
    assert report.n_parameters == n
    # sample std of n N(0, σ²) draws: relative standard error ≈ 1/√(2n)
    assert abs(float(diffs.std()) / 0.05 - 1) < 6 / math.sqrt(2 * n)
    assert abs(float(diffs.mean())) < 6 * 0.05 / math.sqrt(n)
    assert report.update_rms == 0.0  # the clone equals its start
    assert report.guarantee == NO_FORMAL_EPSILON
    again = clone_model(tiny_handle.model)
    add_weight_noise(again, 0.05, seed=3)
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), again.parameters()))
    other = clone_model(tiny_handle.model)
    add_weight_noise(other, 0.05, seed=4)
    assert not all(torch.equal(p, q) for p, q in zip(model.parameters(), other.parameters()))


def test_tied_weights_get_one_draw(tiny_handle):
    model = clone_model(tiny_handle.model)
    if model.get_output_embeddings() is None or \
            model.get_output_embeddings().weight is not model.get_input_embeddings().weight:
        pytest.skip("model does not tie its embeddings")
    add_weight_noise(model, 0.1, seed=0)
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight


@pytest.mark.parametrize("sigma", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_sigma_refused(tiny_handle, sigma):
    with pytest.raises(ValueError):
        add_weight_noise(clone_model(tiny_handle.model), sigma, seed=0)


def test_arm_names():
    spec = parse_arm("DPW-0.010")
    assert spec.kind == "dpw" and spec.param == 0.01 and spec.name == "dpw-0.01"
    assert spec.kind_obj.model == "derived" and spec.kind_obj.source == "baseline"
    for bad, needle in (("dpw-0", "σ"), ("dpw-x", "dpw-<σ>"), ("dpw-0.01+scrub", "stands alone"), ("dpw--1", "σ")):
        with pytest.raises(ValueError, match=needle):
            parse_arm(bad)


def test_config_needs_the_baseline_and_full_profile_sweeps():
    with pytest.raises(UserError, match="baseline"):
        resolve(build_config({"arms": ["dpw-0.01"]}))
    full = build_config({"profile": "full"})
    assert [n for n in arm_names(full) if n.startswith("dpw-")] == [f"dpw-{s:g}" for s in full.dp_weights.sigmas]
    assert full.dp_weights.sigmas
    assert not [n for n in arm_names(build_config({})) if n.startswith("dpw-")]


@pytest.fixture(scope="module")
def dpw_run(extras_run):
    return extras_run


def test_dpw_arm_is_audited_without_an_accountant_epsilon(dpw_run):
    out, console, results = dpw_run
    arm = results.arms["dpw-0.02"]
    assert arm.kind == "dpw"
    assert arm.privacy is None and arm.epsilon is None
    assert arm.details is not None and arm.details.kind == "dpw" and arm.details.sigma == 0.02
    assert arm.details.guarantee == NO_FORMAL_EPSILON
    assert arm.details.update_rms and arm.details.update_rms > 0
    # every selected attack ran, LiRA on shadows made the same way (trained, then noised)
    assert {"loss", "zlib", "min_k", "reference", "exposure", "lira_offline"} <= set(arm.attacks)
    assert arm.empirical_epsilon is not None
    assert arm.utility.ppl_non_members is not None
    assert NO_FORMAL_EPSILON in console
    html = (out / "report.html").read_text(encoding="utf-8")
    assert NO_FORMAL_EPSILON in html
    # the noisy model differs from the baseline's, and the baseline was not retrained for it
    b = results.arms["baseline"]
    assert arm.utility.ppl_members != b.utility.ppl_members
    assert arm.training is not None and arm.training.steps == b.training.steps


def test_results_json_has_no_epsilon_field_for_dpw(dpw_run):
    import json

    out, _, _ = dpw_run
    raw = json.loads((out / "results.json").read_text())["arms"]["dpw-0.02"]
    assert raw["privacy"] is None
    assert not any("epsilon" in k for k in raw["details"])
