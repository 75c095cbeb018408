"""The committed results schema is the generated one, and the layer contract holds and can fail."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from privleak.report.schema import json_schema
from privleak.results import SCHEMA_FILE

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "privleak"


def test_committed_schema_is_the_generated_one():
    committed = json.loads((SRC / SCHEMA_FILE).read_text(encoding="utf-8"))
    assert committed == json_schema(), "results.schema.json is stale: run `python -m privleak.report.schema` and commit it"


def _lint(src_root: Path) -> subprocess.CompletedProcess[str]:
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    if lint is None:
        pytest.skip("import-linter is not installed (pip install -e '.[test]')")
    env = {"PYTHONPATH": str(src_root), "PATH": str(Path(sys.executable).parent), "HOME": str(src_root)}
    return subprocess.run([lint, "--config", str(ROOT / "pyproject.toml"), "--no-cache"], cwd=src_root, env=env,
                          capture_output=True, text=True, timeout=300)


def test_layers_hold_and_an_upward_import_breaks_them(tmp_path):
    assert _lint(ROOT / "src").returncode == 0
    # A copy of the package with one import from a layer above: the contract must catch it.
    shutil.copytree(SRC, tmp_path / "privleak", ignore=shutil.ignore_patterns("__pycache__"))
    core = tmp_path / "privleak" / "core" / "io.py"
    core.write_text(core.read_text() + "\n\ndef _upward():\n    from ..report import html  # noqa: F401\n")
    broken = _lint(tmp_path)
    assert broken.returncode != 0 and "privleak.core.io -> privleak.report.html" in broken.stdout


def test_corpus_defaults_agree_between_the_config_and_the_generator():
    # One default per size: the generator's (data layer) and the audit config's (config layer)
    # cannot import each other's constant without breaking the layers, so this test holds them equal.
    from dataclasses import fields

    from privleak.config import SyntheticConfig
    from privleak.data.clinical import ClinicalCorpusConfig

    gen = {f.name: f.default for f in fields(ClinicalCorpusConfig)}
    for name, field in SyntheticConfig.model_fields.items():
        if name in gen:
            assert tuple(field.default) == gen[name] if isinstance(gen[name], tuple) else field.default == gen[name], name
