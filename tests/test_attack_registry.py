"""The attack registry and runner: one line per attack, selection by name or family, and a new
attack that reaches the results and the tables with nothing but its run function and a registry line."""

from __future__ import annotations

import numpy as np
import pytest
from hand import make_context

from privleak.attacks import registry
from privleak.attacks.base import FAMILIES, AttackSpec
from privleak.attacks.membership.attacks import MembershipResult, membership_result
from privleak.attacks.registry import result_types
from privleak.attacks.settings import AttackSettings
from privleak.audit.runner import run_family
from privleak.data.records import Record
from privleak.results import ArmResult, Utility


def test_every_entry_is_well_formed():
    settings = set(AttackSettings.model_fields)
    for name, spec in registry.ATTACKS.items():
        assert spec.name == name and spec.family in FAMILIES
        assert spec.result in result_types()
        assert set(spec.uses) <= settings, name  # its cache key names real settings
        assert spec.title and spec.cite


def test_selection_by_name_and_family():
    assert [s.name for s in registry.select(["loss", "canaries"])] == ["loss", "exposure", "one_run_canaries",
                                                                       "canary_extraction"]
    assert {s.family for s in registry.select(["pii"])} == {"pii"}
    assert len(registry.select(None)) == len(registry.ATTACKS)
    with pytest.raises(ValueError, match="unknown attack or family 'lossy'"):
        registry.select(["lossy"])


def test_config_selects_attacks_and_rejects_unknown_ones():
    from privleak.config import build_config
    from privleak.core.errors import UserError

    cfg = build_config({}, {"attacks": {"select": ["membership", "exposure"], "pii": False}})
    names = cfg.selected_attacks()
    assert "exposure" in names and "loss" in names and "pii_extraction" not in names and "prefix_extraction" not in names
    assert "canary_extraction" not in build_config({}, {"attacks": {"extraction": False}}).selected_attacks()
    with pytest.raises(UserError, match="attacks.select"):
        build_config({}, {"attacks": {"select": ["nope"]}})


RECORDS = [Record(f"Patient {n} was seen on day {d} for {c}.", None, {"kind": "generic"})
           for d, (n, c) in enumerate([("Ann Lee", "asthma"), ("Bo Kim", "gout"), ("Cy Ray", "flu"), ("Di Fox", "acne")] * 3)]


def _token_count(target, ctx) -> MembershipResult:
    """A made-up attack: longer texts are "members" (a stand-in for any new score-based attack)."""
    s = ctx.scoring
    n = lambda split: np.diff(s.target(split).offsets).astype(float)  # noqa: E731
    return membership_result(ctx, n("members"), n("non_members"))


def test_a_new_attack_is_a_function_and_one_registry_line(monkeypatch, tiny_handle):
    spec = AttackSpec("token_count", "membership", _token_count, MembershipResult, "tokens", "a test")
    monkeypatch.setitem(registry.ATTACKS, spec.name, spec)
    ctx = make_context(RECORDS[:6], RECORDS[6:], settings=AttackSettings(bootstrap=5), target=tiny_handle)
    out = run_family(registry.family("membership"), tiny_handle, ctx, delta=1e-5)
    assert "token_count" in out.results and "token_count" in out.empirical_epsilon.by_attack
    # ... and the tables show it with no change to the report.
    from privleak.report.console import attack_tables

    arm = ArmResult(kind="baseline", utility=Utility(ppl_members=2.0, ppl_non_members=2.1), attacks=out.results)
    from privleak.results import AuditResults, DataSummary, ToolInfo

    results = AuditResults(tool=ToolInfo(name="privleak", version="t"), config={}, base_model=arm,
                           data=DataSummary(source="t", n_public=0, n_members=6, n_canary_records=0, n_non_members=6,
                                            n_population=0, mia_records_per_side=6, n_canaries=0,
                                            canary_chance_exposure=None), arms={"a": arm})
    table = attack_tables(results, "membership")[0]
    assert "tokens" in [c.header for c in table.columns]


def test_attacks_whose_inputs_are_missing_are_skipped(tiny_handle):
    ctx = make_context(RECORDS[:6], RECORDS[6:], settings=AttackSettings(bootstrap=0), target=tiny_handle)
    out = run_family(registry.family("membership"), tiny_handle, ctx)
    # no reference model, no shadows, no clients (no partition is made up for a corpus without them)
    assert set(out.results) == {"loss", "loss_group", "zlib", "min_k", "min_k_pp"}
    from privleak.attacks.inputs import CLIENTS

    # with clients, the client-level attack runs (on LOSS scores: there is no reference)
    ctx = make_context(RECORDS[:6], RECORDS[6:], settings=AttackSettings(bootstrap=0), target=tiny_handle,
                       given={CLIENTS: True})
    with_clients = run_family(registry.family("membership"), tiny_handle, ctx)
    assert with_clients.results["client_membership"].score == "loss"
    assert run_family(registry.family("canaries"), tiny_handle, ctx).results == {}  # no canaries (of either kind)
