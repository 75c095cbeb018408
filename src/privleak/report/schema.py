"""Validate ``results.json`` against the JSON Schema shipped with the package.

The schema (``privleak/results.schema.json``, draft 2020-12) is the contract
between ``privleak run`` and the readers (``report``, ``compare``, other
tools). It is checked here by a small validator covering the keywords the
schema uses (type, enum, required, properties, additionalProperties,
items, min/maxItems, minProperties, minimum/maximum, $ref into $defs), so
no extra dependency is needed; any file it rejects is named with the path of
the first bad field, on one line, as a :class:`~privleak.errors.UserError`.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from ..core.errors import UserError

SCHEMA_FILE = "results.schema.json"


@lru_cache(maxsize=1)
def results_schema() -> dict[str, Any]:
    """The JSON Schema of ``results.json`` (a dict; do not modify)."""
    return json.loads(resources.files("privleak").joinpath(SCHEMA_FILE).read_text(encoding="utf-8"))


def _type_name(x: Any) -> str:
    if x is None:
        return "null"
    if isinstance(x, bool):
        return "boolean"
    if isinstance(x, int):
        return "integer"
    if isinstance(x, float):
        return "number"
    if isinstance(x, str):
        return "string"
    if isinstance(x, list):
        return "array"
    if isinstance(x, dict):
        return "object"
    return type(x).__name__


def _is_type(x: Any, t: str) -> bool:
    name = _type_name(x)
    if t == "number":
        return name in ("integer", "number")
    if t == "integer":
        return name == "integer" or (name == "number" and math.isfinite(x) and float(x).is_integer())
    return name == t


def _show(x: Any) -> str:
    s = json.dumps(x, ensure_ascii=False) if not isinstance(x, float) or math.isfinite(x) else str(x)
    return s if len(s) <= 40 else s[:37] + "..."


def _path(parts: list[str | int]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (("." if out else "") + p)
    return out or "(top level)"


class SchemaError(Exception):
    def __init__(self, path: list[str | int], message: str) -> None:
        self.path = list(path)
        self.message = message
        super().__init__(f"{_path(path)}: {message}")


def _resolve(ref: str, root: dict[str, Any]) -> dict[str, Any]:
    if not ref.startswith("#/"):
        raise ValueError(f"unsupported $ref {ref}")
    node: Any = root
    for part in ref[2:].split("/"):
        node = node[part]
    return node


def _check(x: Any, schema: dict[str, Any], root: dict[str, Any], path: list[str | int]) -> None:
    if "$ref" in schema:
        _check(x, _resolve(schema["$ref"], root), root, path)
    types = schema.get("type")
    if types is not None:
        tl = [types] if isinstance(types, str) else list(types)
        if not any(_is_type(x, t) for t in tl):
            raise SchemaError(path, f"expected {' or '.join(tl)}, got {_type_name(x)} {_show(x)}")
    if "enum" in schema and x not in schema["enum"]:
        allowed = ", ".join(_show(v) for v in schema["enum"])
        raise SchemaError(path, f"got {_show(x)}, expected one of {allowed}")
    if _type_name(x) in ("integer", "number"):
        if "minimum" in schema and x < schema["minimum"]:
            raise SchemaError(path, f"{_show(x)} is below the minimum {schema['minimum']}")
        if "maximum" in schema and x > schema["maximum"]:
            raise SchemaError(path, f"{_show(x)} is above the maximum {schema['maximum']}")
    if isinstance(x, dict):
        for key in schema.get("required", ()):
            if key not in x:
                raise SchemaError(path + [key], "required field is missing")
        if "minProperties" in schema and len(x) < schema["minProperties"]:
            raise SchemaError(path, f"needs at least {schema['minProperties']} entr{'y' if schema['minProperties'] == 1 else 'ies'}, got {len(x)}")
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, val in x.items():
            if key in props:
                _check(val, props[key], root, path + [key])
            elif extra is False:
                raise SchemaError(path + [key], "unexpected field")
            elif isinstance(extra, dict):
                _check(val, extra, root, path + [key])
    if isinstance(x, list):
        if "minItems" in schema and len(x) < schema["minItems"]:
            raise SchemaError(path, f"needs at least {schema['minItems']} items, got {len(x)}")
        if "maxItems" in schema and len(x) > schema["maxItems"]:
            raise SchemaError(path, f"needs at most {schema['maxItems']} items, got {len(x)}")
        if "items" in schema:
            for i, val in enumerate(x):
                _check(val, schema["items"], root, path + [i])


def _semantic_checks(results: dict[str, Any]) -> None:
    """What a schema cannot say: ROC arrays of equal length."""
    for arm_name, arm in [("base_model", results["base_model"])] + [(f"arms.{k}", v) for k, v in results["arms"].items()]:
        for att, entry in arm.get("attacks", {}).items():
            roc = entry.get("roc") if isinstance(entry, dict) else None
            if isinstance(roc, dict) and len(roc.get("fpr", [])) != len(roc.get("tpr", [])):
                raise SchemaError(arm_name.split(".") + ["attacks", att, "roc"],
                                  f"fpr has {len(roc['fpr'])} points but tpr has {len(roc['tpr'])}")


def validate_results(results: Any, source: str = "results.json") -> dict[str, Any]:
    """``results`` itself if it matches the schema; else a one-line UserError naming the field."""
    try:
        _check(results, results_schema(), results_schema(), [])
        _semantic_checks(results)
    except SchemaError as exc:
        raise UserError(
            f"{source}: field {_path(exc.path)}: {exc.message} — not a privleak results file of schema "
            f"version 1; rerun `privleak run` to regenerate it"
        ) from None
    return results


def load_results(path: str | Path) -> dict[str, Any]:
    """Read and validate a ``results.json`` (or the one inside a run directory)."""
    p = Path(path).expanduser()
    if p.is_dir():
        p = p / "results.json"
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        hint = "run `privleak run --out DIR` first" if p.name == "results.json" else "give a run directory or its results.json"
        raise UserError(f"{p}: no such file; {hint}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{p}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
    if not text.strip():
        raise UserError(f"{p}: the file is empty; rerun `privleak run` to regenerate it")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        at_end = exc.pos >= len(text.rstrip()) or not text.rstrip().endswith(("}", "]"))
        what = "truncated (it ends in the middle of the JSON)" if at_end else "not valid JSON"
        raise UserError(f"{p}: {what} at line {exc.lineno} column {exc.colno}: {exc.msg}; rerun `privleak run` to regenerate it") from None
    return validate_results(obj, source=str(p))
