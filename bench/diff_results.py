"""Compare a schema-1 results.json (before the typed results) with a schema-2 one, field by field.

Maps every moved or renamed field of schema 2 back to where schema 1 kept it
and prints each leaf that differs, so "the default audit's figures are
unchanged by the redesign" can be checked rather than asserted:

    python bench/diff_results.py runs/before/results.json runs/after/results.json

Moves (schema 1 → schema 2): ``arms.X.canaries`` → ``arms.X.attacks.exposure.canaries``;
``arms.X.extraction.{prefix,canaries,sampling,phi_prompts}`` →
``arms.X.attacks.{prefix_extraction,canary_extraction,sampling_extraction,phi_extraction}``;
``arms.X.pii_attacks.{extraction,reconstruction,inference}`` → ``arms.X.attacks.pii_{…}``;
``arms.X.attacks.Y.empirical_epsilon`` → ``arms.X.empirical_epsilon.by_attack.Y``;
``arms.X.shadows`` → ``arms.X.attacks.{lira_*,rmia_shadows}.parameters``;
``arms.X.pii`` (a copy of the PHI-prompt counts) → dropped; ``arms.guard.guard.attacks`` →
``arms.guard.attacks`` (counts with the guard) and ``arms.guard.guard.interventions``;
``base_model.{kind,path,spec}`` → ``base_model.source``; non-DP ``privacy`` (all null) → null.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

MOVES = {"prefix": "prefix_extraction", "canaries": "canary_extraction", "sampling": "sampling_extraction",
         "phi_prompts": "phi_extraction"}
PII = {"extraction": "pii_extraction", "reconstruction": "pii_reconstruction", "inference": "pii_inference"}
# Fields schema 2 adds (new information, not a change of a figure).
NEW = {"kind", "parameters", "chance_exposure", "verdict", "recommendation", "interventions", "n_train_records", "title",
       "source", "by_attack"}


def to_v1(arm: dict[str, Any]) -> dict[str, Any]:
    """A schema-2 arm in schema-1 layout (the parts both have)."""
    a = dict(arm)
    attacks = dict(a.pop("attacks", {}) or {})
    out: dict[str, Any] = {k: v for k, v in a.items() if k not in NEW}
    emp = dict(a.get("empirical_epsilon") or {})
    by_attack = emp.pop("by_attack", {})
    if emp:
        out["empirical_epsilon"] = emp
    out["attacks"] = {}
    for name, r in attacks.items():
        if r.get("kind") == "membership":
            m = {k: v for k, v in r.items() if k not in ("kind", "parameters")}
            if name in by_attack:
                m["empirical_epsilon"] = by_attack[name]
            out["attacks"][name] = m
    if "exposure" in attacks:
        out["canaries"] = attacks["exposure"]["canaries"]
    ext = {old: {k: v for k, v in attacks[new].items() if k != "kind"} for old, new in MOVES.items() if new in attacks}
    if ext:
        out["extraction"] = ext
    pii = {old: {k: v for k, v in attacks[new].items() if k != "kind"} for old, new in PII.items() if new in attacks}
    if pii:
        out["pii_attacks"] = pii
    return out


def leaves(x: Any, path: str = "") -> dict[str, Any]:
    if isinstance(x, dict):
        out: dict[str, Any] = {}
        for k, v in x.items():
            out.update(leaves(v, f"{path}.{k}" if path else str(k)))
        return out
    if isinstance(x, list):
        out = {}
        for i, v in enumerate(x):
            out.update(leaves(v, f"{path}[{i}]"))
        return out
    return {path: x}


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def main(before_path: str, after_path: str) -> int:
    before, after = json.load(open(before_path)), json.load(open(after_path))
    b_arms = {"base_model": before["base_model"], **before["arms"]}
    a_arms = {"base_model": after["base_model"], **after["arms"]}
    diffs, missing, extra = [], [], []
    common = 0
    for name in b_arms:
        b = dict(b_arms[name])
        a = to_v1(a_arms[name])
        if name == "base_model":
            for k in ("kind", "path", "spec"):
                b.pop(k, None)
        if name == "guard":
            b_guard = b.pop("guard")
            g = a_arms["guard"]
            a.pop("attacks", None)
            a.pop("guard", None)
            served = a_arms[g["serves"]]
            # The unguarded counts are the served arm's own extraction results now.
            counts = {"canaries": ("canary_extraction", lambda r: sum(c["planted"] and (c["greedy_extracted"] or c["sample_hits"] > 0) for c in r["canaries"])),
                      "phi_prompts": ("phi_extraction", lambda r: r["total"]["member_leaked"]),
                      "sampling": ("sampling_extraction", lambda r: r["all_member_only_hits"]),
                      "pii_extraction": ("pii_extraction", lambda r: r["total"]["member_extracted"])}
            for old, (new, count) in counts.items():
                if old in b_guard["attacks"]:
                    for side, res in (("without_guard", served["attacks"][new]), ("with_guard", g["attacks"][new])):
                        if not same(b_guard["attacks"][old][side], count(res)):
                            diffs.append((f"guard.{old}.{side}", b_guard["attacks"][old][side], count(res)))
            for k in ("false_positives", "false_positive_examples"):
                lb, la = leaves(b_guard[k], k), leaves(g["guard"][k], k)
                diffs += [(p, lb[p], la.get(p)) for p in lb if p in la and not same(lb[p], la[p])]
                missing += [f"guard.{p}" for p in lb if p not in la]
        b.pop("pii", None)  # a copy of the PHI-prompt counts in schema 1
        b.pop("shadows", None)
        if b.get("privacy") and all(v is None for k, v in b["privacy"].items() if k != "steps"):
            b["privacy"] = None
        lb, la = leaves(b, name), leaves(a, name)
        common += sum(p in la for p in lb)
        diffs += [(p, lb[p], la[p]) for p in lb if p in la and not same(lb[p], la[p])]
        missing += [p for p in lb if p not in la]
        extra += [p for p in la if p not in lb]
    for k in ("data", "statistical_tests"):
        lb, la = leaves(before.get(k, {}), k), leaves(after.get(k, {}), k)
        common += sum(p in la for p in lb)
        diffs += [(p, lb[p], la.get(p)) for p in lb if p in la and not same(lb[p], la[p])]
        missing += [p for p in lb if p not in la]
    print(f"figures compared: {common} in both, differing {len(diffs)}, only before {len(missing)}, only after {len(extra)}")
    for p, x, y in diffs:
        print(f"  DIFF {p}: {x!r} → {y!r}")
    for p in missing[:40]:
        print(f"  only before: {p}")
    for p in extra[:40]:
        print(f"  only after: {p}")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
