"""Compare two results.json files leaf by leaf, after moving the fields a restructuring moved.

    python bench/compare_results.py runs/before/results.json runs/after/results.json [--moves 25]

Prints every leaf that differs (durations, package versions and the cache path aside) and exits 1 if any
does. ``--moves 25`` maps the issue-25 layout (arm kinds as plug-ins) back to the one before it:
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--moves", choices=["none", "25"], default="25")
    args = ap.parse_args(argv)
    before, after = (json.load(open(p, encoding="utf-8")) for p in (args.before, args.after))
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
