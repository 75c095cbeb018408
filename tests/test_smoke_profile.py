"""The ``smoke`` profile: every stage, every attack family and the report, on a small corpus and a tiny model.

Its wall time is measured in ``bench/bench_audit_profile.py --profile smoke`` (no timing asserts here); this test
holds that the profile stays a whole audit — a first look that skips a family or the report is not one.
"""

from __future__ import annotations

import json

from privleak.attacks.base import FAMILIES
from privleak.attacks.registry import select
from privleak.config import build_config
from privleak.policy import PROFILES


def test_smoke_is_a_profile_with_smaller_attack_sizes():
    cfg = build_config({}, {"profile": "smoke", "device": "cpu"})
    quick = build_config({}, {"profile": "quick", "device": "cpu"})
    assert "smoke" in PROFILES and cfg.profile == "smoke"
    s, q = cfg.attack_settings().pii_sizes, quick.attack_settings().pii_sizes
    assert s.extraction_samples < q.extraction_samples and s.reconstruction_slots < q.reconstruction_slots
    assert cfg.model.embedded.n_layer < quick.model.embedded.n_layer
    assert cfg.data.synthetic.n_members < quick.data.synthetic.n_members


def test_smoke_profile_runs_every_stage_family_and_the_report(tmp_path):
    from privleak.pipeline import run_audit
    from privleak.report.html import write_report

    cfg = build_config({}, {"profile": "smoke", "device": "cpu"})
    out = tmp_path / "run"
    results = run_audit(cfg, out)
    report = write_report(out)
    assert report.exists() and report.stat().st_size > 0
    saved = json.loads((out / "results.json").read_text())
    arms = saved["arms"]
    # the profile's default arms: no defence, the deployable recipe, DP, a data defence, both, the guard
    assert {"baseline", "best", "dp-8", "scrub", "dp-8+scrub", "guard"} <= set(arms)
    families = {s.family for s in select(cfg.selected_attacks())}
    assert families == set(FAMILIES)
    by_family = {f: {s.name for s in select(cfg.selected_attacks()) if s.family == f} for f in FAMILIES}
    for arm in ("baseline", "dp-8"):
        ran = set(arms[arm]["attacks"])
        for fam, names in by_family.items():
            assert ran & names, f"{arm}: no {fam} attack ran"
    stages = {p.stem for p in (out / "stages").glob("*.json")}
    for must in ("data", "base-model", "audit-canaries", "blind-baseline", "defend_scrub", "train_dp-8",
                 "utility_base", "membership_dp-8", "canaries_dp-8", "extraction_guard", "pii_scrub"):
        assert must in stages, must
    assert results.arms["dp-8"].privacy is not None
