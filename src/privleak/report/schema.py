"""Reading ``results.json`` back: the typed results, or one line naming what is wrong.

A file of an older schema version is refused with one line that says so,
before anything else is checked. Then: no NaN or ∞ anywhere; the types —
:class:`privleak.results.AuditResults` itself (pydantic, ``extra="forbid"``
everywhere, each figure's range in its type); and the rules across fields
(:mod:`.validation`). A truncated or hand-edited file is rejected naming the
first bad field. ``privleak report``, ``compare`` and ``budget`` all read
results through :func:`load_results`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ..core.errors import UserError
from ..core.jsonlimits import JSONLimitError, loads

if TYPE_CHECKING:
    from ..results import AuditResults


def _path(loc: tuple[Any, ...]) -> str:
    out = ""
    for p in loc:
        out += f"[{p}]" if isinstance(p, int) else (("." if out else "") + str(p))
    return out or "(top level)"


def _loc_in_file(loc: tuple[Any, ...], data: Any) -> tuple[Any, ...]:
    """The error location as a path in the file: pydantic adds the union tag (e.g. ``membership``) as a step."""
    out, node = [], data
    for p in loc:
        if isinstance(node, dict) and p in node:
            out.append(p)
            node = node[p]
        elif isinstance(node, list) and isinstance(p, int) and p < len(node):
            out.append(p)
            node = node[p]
        elif isinstance(node, dict) and node.get("kind") == p:
            continue  # the discriminator step
        else:
            out.append(p)
            node = None
    return tuple(out)


def validate_results(data: Any, source: str = "results.json") -> AuditResults:
    """The typed results of ``data`` (a parsed results.json), or a one-line UserError."""
    from .. import arms  # noqa: F401  (the built-in arm kinds, whose blocks results.json holds: only now, torch comes with them)
    from ..results import SCHEMA_VERSION, AuditResults
    from .validation import check, finite

    if not isinstance(data, dict):
        raise UserError(f"{source}: not a privleak results file (the top level is not an object); rerun `privleak run`")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise UserError(f"{source}: schema version {version!r}, but this privleak reads version {SCHEMA_VERSION}; "
                        "rerun `privleak run` with this version to regenerate it")
    found = finite(data)
    if found is None:
        try:
            results = AuditResults.model_validate(data)
        except ValidationError as exc:
            raise _refusal(exc, data, source) from None
        found = check(results)
        if found is None:
            return results
    where, msg = found
    raise UserError(f"{source}: field {where}: {msg} — not a privleak results file as privleak writes it; rerun "
                    "`privleak run` to regenerate it")


def _refusal(exc: ValidationError, data: Any, source: str) -> UserError:
    """One line naming the first field pydantic refused."""
    from ..results import SCHEMA_VERSION

    e = exc.errors()[0]
    where = _path(_loc_in_file(tuple(e["loc"]), data))
    msg = e["msg"].removeprefix("Value error, ")
    if e["type"] == "extra_forbidden":
        msg = "unexpected field"
    elif e["type"] == "missing":
        msg = "required field is missing"
    return UserError(f"{source}: field {where}: {msg} — not a privleak results file of schema version "
                     f"{SCHEMA_VERSION}; rerun `privleak run` to regenerate it")


def read_results_json(path: str | Path) -> tuple[Path, Any]:
    """``(file, parsed JSON)`` of a ``results.json`` (or the one inside a run directory), or a one-line UserError
    for a missing, unreadable, empty, malformed or over-limit file — without importing the results model."""
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
        return p, loads(text)
    except JSONLimitError as exc:
        raise UserError(f"{p}: {exc}, which no privleak results file is; rerun `privleak run` to regenerate it") from None
    except json.JSONDecodeError as exc:
        at_end = exc.pos >= len(text.rstrip()) or not text.rstrip().endswith(("}", "]"))
        what = "truncated (it ends in the middle of the JSON)" if at_end else "not valid JSON"
        raise UserError(f"{p}: {what} at line {exc.lineno} column {exc.colno}: {exc.msg}; rerun `privleak run` to "
                        "regenerate it") from None


def load_results(path: str | Path) -> AuditResults:
    """Read and validate a ``results.json`` (or the one inside a run directory)."""
    p, obj = read_results_json(path)
    return validate_results(obj, source=str(p))


def json_schema() -> dict[str, Any]:
    """The JSON Schema of ``results.json`` for the attacks and arm kinds registered now (the built-in ones, and
    any plug-in imported before the call)."""
    from .. import arms  # noqa: F401  (the built-in kinds register themselves)
    from ..results import json_schema as schema

    return schema()


def write_schema(path: Path | None = None) -> Path:
    """Write the schema of the built-in attacks and kinds: ``python -m privleak.report.schema``."""
    from ..results import SCHEMA_FILE

    target = path or Path(__file__).resolve().parent.parent / SCHEMA_FILE
    target.write_text(json.dumps(json_schema(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return target


if __name__ == "__main__":
    print(write_schema())
