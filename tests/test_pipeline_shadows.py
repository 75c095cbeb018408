"""LiRA / RMIA with shadow models inside a real (tiny) audit: wired, cached, resumable."""

from __future__ import annotations

from conftest import SMALL

from privleak import pipeline
from privleak.config import build_config


def test_shadow_attacks_run_per_arm_and_resume(tmp_path):
    cfg = build_config({**SMALL, "arms": ["baseline", "scrub"],
                        "attacks": {"bootstrap": 0, "extraction": False},
                        "shadows": {"enabled": True, "n_shadows": 2, "arms": ["baseline"]}})
    out = tmp_path / "run"
    results = pipeline.run_audit(cfg, out)
    base = results.arms["baseline"]
    for attack in ("lira_online", "lira_offline", "rmia_shadows"):
        assert 0.0 <= base.attacks[attack].auc <= 1.0
        assert base.attacks[attack].n_members == results.data.mia_records_per_side
        assert base.attacks[attack].parameters["n_shadows"] == 2
    assert not base.attacks["rmia_shadows"].parameters["a_tuned"]  # 2 shadows: a not tunable
    assert "lira_online" not in results.arms["scrub"].attacks  # shadows only where asked

    assert (out / "arms" / "baseline" / "shadows" / "1.npz").exists()
    # A second run reuses every shadow.
    msgs: list[str] = []
    again = pipeline.run_audit(cfg, out, notify=msgs.append)
    assert any("shadow/baseline/2 (cached)" in m for m in msgs), msgs
    assert again.arms["baseline"].attacks["lira_online"] == base.attacks["lira_online"]

