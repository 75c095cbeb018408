"""Only the shared-audit store starts an audit (``tests/shared_audits.py``; the ``audits`` fixture).

An audit a test module starts for itself runs again in every session and on every worker that reads it, where
``audits.get(cfg)`` runs each configuration once: a fixture that writes a config and calls ``privleak run`` (or
``run_audit``) is the store's job. The modules below start their own because the start itself is what they test
(an interruption, a resume, an executor, a lock, a crash, a refusal before any work, a device's arithmetic) —
each says so. A new module that needs a finished audit asks the store.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tiers import STARTS_ITS_OWN

TESTS = Path(__file__).resolve().parent


def _words(node: ast.AST) -> list[object]:
    return [e.value if isinstance(e, ast.Constant) else None for e in getattr(node, "elts", [])]


def _starts_an_audit(tree: ast.AST) -> list[int]:
    """Lines that call ``run_audit(…)`` or ``privleak.audit(…)``, or spell a ``privleak run`` command line (``["run", …]`` or
    ``[…, "privleak", "run", …]``, however the test invokes it: ``main``, a harness, a subprocess) that is not a
    request for help."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            library = (isinstance(node.func, ast.Attribute) and name == "audit"
                       and getattr(node.func.value, "id", None) == "privleak")  # privleak.audit(config, …)
            if name == "run_audit" or library:
                out.append(node.lineno)
        elif isinstance(node, (ast.List, ast.Tuple)):
            words = _words(node)
            if "--help" in words:
                continue
            if (words[:1] == ["run"] and len(words) > 1) or any(
                    a == "privleak" and b == "run" for a, b in zip(words, words[1:])):
                out.append(node.lineno)
    return sorted(set(out))


def test_only_the_shared_store_starts_an_audit():
    offenders = {}
    for path in sorted(TESTS.glob("*.py")):
        lines = _starts_an_audit(ast.parse(path.read_text(encoding="utf-8")))
        if lines and path.name not in STARTS_ITS_OWN:
            offenders[path.name] = lines
    assert not offenders, (f"these modules start audits themselves: {offenders}; ask the shared store instead "
                           "(the `audits` fixture: audits.get(cfg), via='cli' for the command line), or say in "
                           "tiers.STARTS_ITS_OWN why the start itself is what the test is about")


def test_the_exemptions_still_start_one():
    """An exemption whose module no longer starts an audit is dropped, so the list stays the list of reasons."""
    stale = [name for name in STARTS_ITS_OWN if name not in ("conftest.py",)
             and not _starts_an_audit(ast.parse((TESTS / name).read_text(encoding="utf-8")))]
    assert not stale, stale


def test_the_tier_lists_name_modules_that_exist():
    """A module renamed or removed leaves no name behind in tests/tiers.py (its tier would silently change)."""
    import tiers

    named = set(tiers.CONTRACT) | set(tiers.HEAVY) | {n.removesuffix(".py") for n in tiers.STARTS_ITS_OWN}
    missing = sorted(n for n in named if not (TESTS / f"{n}.py").is_file())
    assert not missing, missing
    # A single test named in HEAVY_TESTS exists under that name (renamed, it would move to the fast tier unseen).
    gone = sorted(t for t in tiers.HEAVY_TESTS if f"def {t.partition('::')[2]}(" not in
                  (TESTS / f"{t.partition('::')[0]}.py").read_text(encoding="utf-8"))
    assert not gone, gone
