"""Compare two results.json files leaf by leaf, after moving the fields a restructuring moved.

    python bench/compare_results.py runs/before/results.json runs/after/results.json [--moves 25]

Prints every leaf that differs (durations, package versions and the cache path aside) and exits 1 if any
does. ``--summary`` prints instead what a reader compares when two runs are not meant to be identical (a
changed numeric path, another seed): per arm, the verdict, ε, G (all tokens and outside PII), the strongest
membership attack's AUC, mean canary exposure, the one-run ε bound and the training seconds, before | after. ``--moves 25`` maps the issue-25 layout (arm kinds as plug-ins) back to the one before it:
``arms.X.weight_noise`` / ``federation`` / ``guard`` / ``target`` → ``arms.X.details`` (with the kind),
``one_run_epsilon.canary_auc`` (a copy of ``attacks.one_run_canaries.auc``) dropped, and the key order of
``statistical_tests`` ignored (a dict).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

IGNORED = {"durations_s", "versions"}


def issue25(doc: dict[str, Any]) -> dict[str, Any]:
    """The old layout's arm blocks moved where issue 25 put them."""
    for arm in [*(doc.get("arms") or {}).values(), doc.get("base_model") or {}]:
        for old in ("weight_noise", "federation", "guard", "target"):
            block = arm.pop(old, None)
            if block is not None:
                arm["details"] = {"kind": arm.get("kind"), **block}
        one = arm.get("one_run_epsilon") or {}
        one.pop("canary_auc", None)
        if "details" not in arm:
            arm["details"] = None
    return doc


def diff(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if not path and k in IGNORED:
                continue
            if k not in a or k not in b:
                out.append(f"{path}.{k}: only in {'after' if k not in a else 'before'}")
                continue
            out += diff(a[k], b[k], f"{path}.{k}" if path else k)
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} vs {len(b)} items"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in diff(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} vs {b!r}"]


def _headline(doc: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Per arm: the figures a reader compares, formatted."""
    def f(x: Any, spec: str = ".3f") -> str:
        return "—" if x is None else format(x, spec)

    out = {}
    arms = {"base": doc.get("base_model") or {}, **(doc.get("arms") or {})}
    for name, a in arms.items():
        u, p = a.get("utility") or {}, a.get("privacy") or {}
        mia = [(k, r.get("auc")) for k, r in (a.get("attacks") or {}).items()
               if r.get("kind") == "membership" and r.get("auc") is not None]
        strongest = max(mia, key=lambda kv: kv[1]) if mia else None
        exp = (a.get("attacks") or {}).get("exposure") or {}
        bits = [c["exposure"] for c in exp.get("canaries") or []]
        one = a.get("one_run_epsilon") or {}
        out[name] = {
            "verdict": (a.get("verdict") or {}).get("level", "—"),
            "ε": f(p.get("epsilon"), ".2f"), "ε/person": f(p.get("epsilon_person"), ".1f"),
            "G": f(u.get("gain_recovered"), ".2f"), "G outside PII": f(u.get("gain_recovered_outside_pii"), ".2f"),
            "L private": f(u.get("nll_non_members")),
            "strongest MIA AUC": f"{strongest[1]:.3f} ({strongest[0]})" if strongest else "—",
            "exposure (bits)": f(sum(bits) / len(bits) if bits else None, ".2f"),
            "one-run ε ≥": f(one.get("epsilon_steinke") if one.get("available") else None, ".2f"),
            "train s": f((doc.get("durations_s") or {}).get(f"train/{name}"), ".0f"),
        }
    return out


def summary(before: dict[str, Any], after: dict[str, Any]) -> str:
    b, a = _headline(before), _headline(after)
    cols = next(iter(a.values()), next(iter(b.values()), {})).keys()
    lines = ["| arm | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for name in dict.fromkeys([*b, *a]):
        x, y = b.get(name, {}), a.get(name, {})
        lines.append(f"| {name} | " + " | ".join(f"{x.get(c, '—')} → {y.get(c, '—')}" if x.get(c) != y.get(c)
                                                 else str(y.get(c, "—")) for c in cols) + " |")
    rec = [((d.get("recommendation") or {}).get("arm") or "none") for d in (before, after)]
    lines.append(f"\nrecommended: {rec[0]} → {rec[1]}" if rec[0] != rec[1] else f"\nrecommended: {rec[1]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--moves", choices=["none", "25"], default="25")
    ap.add_argument("--summary", action="store_true", help="the per-arm headline figures, before → after")
    args = ap.parse_args(argv)
    before, after = (json.load(open(p, encoding="utf-8")) for p in (args.before, args.after))
    if args.summary:
        print(summary(before, after))
        return 0
    if args.moves == "25":
        before = issue25(before)
    for doc in (before, after):
        src = (doc.get("base_model") or {}).get("source") or {}
        src.pop("path", None)  # the model cache's location, not a result
    found = diff(before, after)
    for line in found:
        print(line)
    print(f"{len(found)} differing leaves")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
