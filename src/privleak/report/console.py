"""The console tables comparing arms (the short form of ``results.json``)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from rich.table import Table

ATTACK_LABELS = {"loss": "LOSS", "zlib": "zlib", "min_k": "min-k%", "min_k_pp": "min-k%++", "reference": "ref", "rmia": "RMIA",
                 "lira_online": "LiRA", "lira_offline": "LiRA off", "rmia_shadows": "RMIA shadows"}


def _fmt(x: Any, spec: str = ".3f") -> str:
    return "—" if x is None else format(x, spec)


def exposure_by_repeats(canaries: list[dict[str, Any]]) -> dict[int, float]:
    """Mean exposure per repetition count."""
    groups: dict[int, list[float]] = defaultdict(list)
    for c in canaries:
        groups[int(c["repeats"])].append(float(c["exposure"]))
    return {r: sum(v) / len(v) for r, v in sorted(groups.items())}


def _rows(results: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [("base (control)", results["base_model"])] + list(results["arms"].items())


def privacy_table(results: dict[str, Any]) -> Table:
    t = Table(title="Privacy parameters and utility")
    for col in ("arm", "ε target", "ε spent", "ε PLD", "ε RDP", "ε empirical ≥", "σ", "q", "steps", "δ", "ppl members", "ppl held-out"):
        t.add_column(col, justify="left" if col == "arm" else "right")
    for name, arm in _rows(results):
        p = arm.get("privacy") or {}
        emp = arm.get("empirical_epsilon") or {}
        t.add_row(
            name,
            _fmt(p.get("target_epsilon"), "g"),
            _fmt(p.get("epsilon"), ".3f"),
            _fmt(p.get("epsilon_pld"), ".3f"),
            _fmt(p.get("epsilon_rdp"), ".3f"),
            _fmt(emp.get("epsilon_lb"), ".2f"),
            _fmt(p.get("sigma"), ".3f"),
            _fmt(p.get("sample_rate"), ".4f"),
            _fmt(p.get("steps"), "d") if p.get("steps") is not None else "—",
            _fmt(p.get("delta"), ".1e"),
            _fmt(arm["utility"]["ppl_members"], ".2f"),
            _fmt(arm["utility"]["ppl_non_members"], ".2f"),
        )
    return t


def attack_table(results: dict[str, Any]) -> Table:
    rows = _rows(results)
    names = [a for a in ATTACK_LABELS if any(a in arm["attacks"] for _, arm in rows)]
    data = results["data"]
    t = Table(title=f"Membership inference — AUC (TPR at 1 % FPR) on {data['mia_records_per_side']} members vs as many non-members")
    t.add_column("arm")
    for a in names:
        t.add_column(ATTACK_LABELS[a], justify="right")
    for name, arm in rows:
        cells = []
        for a in names:
            m = arm["attacks"].get(a)
            cells.append("—" if m is None else f"{m['auc']:.3f} ({m['tpr_at_1pct_fpr']:.2f})")
        t.add_row(name, *cells)
    return t


def exposure_table(results: dict[str, Any]) -> Table | None:
    rows = _rows(results)
    repeats = sorted({int(c["repeats"]) for _, arm in rows for c in arm.get("canaries", [])})
    if not repeats:
        return None
    first = next(c for _, arm in rows for c in arm.get("canaries", []))
    chance = results["data"].get("canary_chance_exposure")
    t = Table(title=f"Canary exposure in bits by repetition count (max {first['max_exposure']:.1f}, chance ≈ {_fmt(chance, '.1f')})")
    t.add_column("arm")
    for r in repeats:
        t.add_column(f"{r}×", justify="right")
    for name, arm in rows:
        exp = exposure_by_repeats(arm.get("canaries", []))
        t.add_row(name, *[_fmt(exp.get(r), ".1f") for r in repeats])
    return t


def extraction_table(results: dict[str, Any]) -> Table | None:
    rows = [(n, a) for n, a in _rows(results) if a.get("extraction")]
    if not rows:
        return None
    t = Table(title="Extraction — each figure beside its floor (never-trained values or texts)")
    for col in ("arm", "canaries extracted greedily (by repeats; control)", "PHI values leaked: members vs non-members",
                "sampling top-100 (ref. ratio): member-only vs floor", "prefix k=16→16 tokens: members vs non-members"):
        t.add_column(col, justify="left" if col == "arm" else "right")
    for name, arm in rows:
        ex = arm["extraction"]
        can = ex.get("canaries", {}).get("by_repeats", {})
        can_s = " ".join(f"{k}×:{v['greedy_fraction']:.0%}" if k != "control" else f"ctl:{v['greedy_fraction']:.0%}"
                         for k, v in can.items()) or "—"
        phi = ex.get("phi_prompts", {}).get("total")
        phi_s = "—" if not phi else (f"{phi['member_leaked']}/{phi['n_member_values']} vs "
                                     f"{phi['non_member_leaked']}/{phi['n_non_member_values']}")
        ref = next((r for r in ex.get("sampling", {}).get("rankings", []) if r.get("metric") == "reference"), None)
        ref = ref or next(iter(ex.get("sampling", {}).get("rankings", [])), None)
        samp_s = "—" if not ref else f"{ref.get('member_only_hits')} vs {ref.get('non_member_only_hits')}"
        cell = next((c for c in ex.get("prefix", {}).get("cells", []) if c.get("k") == 16 and c.get("m") == 16), None)
        pre_s = "—" if not cell else (f"{cell['members_extracted']}/{cell['n_members']} vs "
                                      f"{cell['non_members_extracted']}/{cell['n_non_members']}")
        t.add_row(name, can_s, phi_s, samp_s, pre_s)
    return t


def pii_attack_table(results: dict[str, Any]) -> Table | None:
    """Lukas et al.'s PII attacks, one row per model, each figure beside its chance level and floor."""
    from ..audit.pii_eval import PII_SUMMARY_COLUMNS, pii_summary_cells

    rows = [(n, a) for n, a in _rows(results) if a.get("pii_attacks")]
    if not rows:
        return None
    t = Table(title="PII attacks (Lukas et al.) — result (chance · non-member floor)")
    t.add_column("arm")
    for col in PII_SUMMARY_COLUMNS:
        t.add_column(col, justify="right")
    for name, arm in rows:
        cells = pii_summary_cells(arm["pii_attacks"])
        t.add_row(name, *[cells[c] for c in PII_SUMMARY_COLUMNS])
    return t


def defence_table(results: dict[str, Any]) -> Table | None:
    """What the data defences did: scrubber recall/precision, PII left in training, records removed."""
    rows = [(n, a["defences"]) for n, a in results["arms"].items() if a.get("defences")]
    if not rows:
        return None
    t = Table(title="Data defences — measured against the ground truth")
    for col in ("arm", "scrubber recall / precision", "identifying PII left in training", "records removed by dedup",
                "canary copies after dedup"):
        t.add_column(col, justify="left" if col == "arm" else "right")
    for name, d in rows:
        scrub, dd = d.get("scrub") or {}, d.get("dedup") or {}
        q = (scrub.get("quality") or {}).get("overall")
        rec = "—" if not q else f"{q['recall']:.3f} / {q['precision']:.3f}"
        # Only the types the scrubber targets; the others (vitals, conditions) are in results.json.
        left = {k: v for k, v in (scrub.get("pii_in_training") or {}).items() if k in scrub.get("labels", ())}
        left_s = "—" if not left else (f"{sum(v['values_left'] for v in left.values())} of "
                                       f"{sum(v['ground_truth_spans'] for v in left.values())}")
        removed = "—" if not dd else f"{dd['n_removed']} of {dd['n_in']}"
        copies = dd.get("canary_copies") or {}
        cop = "—" if not copies else (f"{sum(v['after'] for v in copies.values())} of "
                                      f"{sum(v['before'] for v in copies.values())}")
        t.add_row(name, rec, left_s, removed, cop)
    return t


def guard_table(results: dict[str, Any]) -> Table | None:
    """The guard arm: leaks without/with the guard, and what it costs on benign output."""
    from ..defenses.guard.audit_arm import guard_rows

    guard = (results["arms"].get("guard") or {}).get("guard")
    if not guard:
        return None
    t = Table(title="Output guard (baseline model behind the guard) — leaks stopped, and false positives on benign output")
    for col in ("measure", "without guard", "with guard", "stopped / rate [95% CI]"):
        t.add_column(col, justify="left" if col == "measure" else "right")
    for row in guard_rows(guard):
        if "without_guard" in row:
            stopped = row["stopped"]
            t.add_row(row["measure"], str(row["without_guard"]),
                      str(row["with_guard"]), "—" if stopped is None else f"{stopped:.0%}")
        else:
            lo, hi = row["ci95"]
            t.add_row(row["measure"], "", f"{row['k']}/{row['n']}", f"{row['rate']:.1%} [{lo:.1%}, {hi:.1%}]")
    return t
