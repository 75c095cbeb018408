"""Load a user's corpus (JSONL, CSV, plain text, or a saved HF dataset).

Every record becomes a :class:`Record` with ``pii=None`` (nothing is known
about its PII until it is tagged) and ``meta = {"kind": "user",
"source_line": n}``, where n is the 1-based line of the file the record
starts on (for a JSON array or a saved dataset: its 1-based position).

Anything wrong with the input is a :class:`UserError` whose one-line
message names the file, the line where it applies, and the fix; a user
feeding in their own data should never see a traceback.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any, Iterator

from privleak.core.errors import UserError
from privleak.data.records import Record

FORMATS: tuple[str, ...] = ("jsonl", "csv", "text", "hf")
_ALIASES = {"jsonl": "jsonl", "json": "jsonl", "ndjson": "jsonl", "csv": "csv", "tsv": "csv",
            "text": "text", "txt": "text", "hf": "hf", "datasets": "hf", "arrow": "hf"}
_HF_MARKERS = ("dataset_info.json", "state.json", "dataset_dict.json")


def load_corpus(path: str | Path, text_field: str = "text", fmt: str | None = None) -> list[Record]:
    """Records of the corpus at ``path``; ``fmt`` overrides the auto-detection."""
    p = Path(path)
    if not p.exists():
        raise UserError(f"{p}: no such file or directory; check the corpus path")
    kind = _resolve_format(p, fmt)
    if kind == "hf":
        pairs = _hf_texts(p, text_field)
    else:
        if p.is_dir():
            raise UserError(
                f"{p}: is a directory, not a {kind} file; pass the file itself"
            )
        content = _read_utf8(p)
        if kind == "jsonl":
            pairs = _json_texts(p, content, text_field)
        elif kind == "csv":
            delimiter = "\t" if p.suffix.lower() == ".tsv" else ","
            pairs = _csv_texts(p, content, text_field, delimiter)
        else:
            pairs = _text_lines(content)
    records = [
        Record(text=text.strip(), pii=None, meta={"kind": "user", "source_line": line})
        for line, text in pairs
        if text.strip()
    ]
    if not records:
        where = "" if kind == "text" else f" in field '{text_field}'"
        raise UserError(f"{p}: no non-empty records{where}; the corpus needs at least one text")
    return records


def _resolve_format(p: Path, fmt: str | None) -> str:
    if fmt is not None:
        kind = _ALIASES.get(fmt.strip().lower())
        if kind is None:
            raise UserError(f"unknown corpus format {fmt!r}; use one of: {', '.join(FORMATS)}")
        return kind
    if p.is_dir():
        if any((p / m).is_file() for m in _HF_MARKERS):
            return "hf"
        raise UserError(
            f"{p}: is a directory but not a Hugging Face dataset saved with save_to_disk "
            f"(no {' / '.join(_HF_MARKERS)}); pass a .jsonl, .csv or .txt file or a saved dataset"
        )
    suffix = p.suffix.lower()
    if suffix in (".jsonl", ".json", ".ndjson"):
        return "jsonl"
    if suffix in (".csv", ".tsv"):
        return "csv"
    return "text"


def _read_utf8(p: Path) -> str:
    data = p.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):  # BOM written by some Windows editors
        data = data[3:]
    if not data.strip():
        raise UserError(f"{p}: the file is empty; point to a corpus with at least one record")
    if data.startswith(b"\x1f\x8b"):
        # Otherwise this surfaces as a baffling "not UTF-8 on line 1".
        raise UserError(f"{p}: the file is gzip-compressed; decompress it first (gunzip)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise UserError(
            f"{p}: line {line} is not valid UTF-8 (byte 0x{data[exc.start]:02x}); "
            f"re-encode the file as UTF-8, e.g. iconv -f latin1 -t utf-8"
        ) from None


def _lines(content: str) -> Iterator[tuple[int, str]]:
    # Split on '\n' only: str.splitlines() also breaks at U+2028 and friends,
    # which JSON strings may legally contain raw.
    for i, line in enumerate(content.split("\n"), start=1):
        yield i, line.rstrip("\r")


def _text_lines(content: str) -> list[tuple[int, str]]:
    return [(i, line) for i, line in _lines(content)]


def json_rows(p: Path, content: str, text_field: str) -> tuple[bool, list[tuple[int, dict[str, Any]]]]:
    """``(is_array, [(line, object), …])`` of JSON lines (or one JSON array in a
    ``.json`` file), every object checked to hold a string ``text_field``.
    Blank lines are skipped; for an array, "line" is the 1-based position."""
    if p.suffix.lower() == ".json" and content.lstrip().startswith("["):
        try:
            items = json.loads(content)
        except json.JSONDecodeError as exc:
            raise UserError(
                f"{p}: line {exc.lineno}: malformed JSON ({exc.msg} at column {exc.colno}); "
                f"fix the file or convert it to JSON lines"
            ) from None
        if not isinstance(items, list):
            raise UserError(f"{p}: expected JSON lines or a JSON array of objects; convert it to JSON lines")
        for k, obj in enumerate(items, start=1):
            _field(p, f"record {k}", obj, text_field)
        return True, list(enumerate(items, start=1))
    out = []
    for i, line in _lines(content):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(
                f"{p}: line {i}: malformed JSON ({exc.msg} at column {exc.colno}); "
                f"each line must be one JSON object such as {{\"{text_field}\": \"...\"}}"
            ) from None
        _field(p, f"line {i}", obj, text_field)
        out.append((i, obj))
    return False, out


def _json_texts(p: Path, content: str, text_field: str) -> list[tuple[int, str]]:
    return [(i, obj[text_field]) for i, obj in json_rows(p, content, text_field)[1]]


def _field(p: Path, where: str, obj: Any, text_field: str) -> str:
    if not isinstance(obj, dict):
        raise UserError(
            f"{p}: {where} is a JSON {_json_type(obj)}, not an object; "
            f"write one object per line such as {{\"{text_field}\": \"...\"}}"
        )
    if text_field not in obj:
        present = ", ".join(map(str, obj)) or "none"
        raise UserError(
            f"{p}: {where} has no field '{text_field}' (fields present: {present}); "
            f"pass --text-field NAME to choose the text field"
        )
    value = obj[text_field]
    if not isinstance(value, str):
        raise UserError(
            f"{p}: {where}: field '{text_field}' is a JSON {_json_type(value)}, not a string; "
            f"store the text as a string or choose another field with --text-field"
        )
    return value


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "string" if isinstance(value, str) else type(value).__name__


def csv_rows(p: Path, content: str, text_field: str, delimiter: str) -> tuple[list[str], int, list[tuple[int, list[str]]]]:
    """``(header, text column index, [(line, row), …])``; every row is kept
    (blank ones too), and a non-blank row too short to hold the text column
    is an error."""
    # Long documents overflow csv's default 128 KiB field limit.
    csv.field_size_limit(max(csv.field_size_limit(), 2**31 - 1))
    reader = csv.reader(io.StringIO(content, newline=""), delimiter=delimiter)
    try:
        header = next(reader)
    except (csv.Error, StopIteration) as exc:
        raise UserError(f"{p}: line 1: unreadable CSV header ({exc}); fix the header row") from None
    columns = [h.strip() for h in header]
    if text_field not in columns:
        raise UserError(
            f"{p}: CSV has no column '{text_field}' (columns: {', '.join(columns) or 'none'}); "
            f"pass --text-field NAME to choose the text column"
        )
    col = columns.index(text_field)
    out = []
    start = reader.line_num + 1
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise UserError(
                f"{p}: line {start}: malformed CSV ({exc}); check the quoting on that line"
            ) from None
        if _has_cells(row) and len(row) <= col:
            raise UserError(
                f"{p}: line {start} has {len(row)} fields but column '{text_field}' is field "
                f"{col + 1}; quote fields that contain '{delimiter}'"
            )
        out.append((start, row))
        start = reader.line_num + 1
    return header, col, out


def _has_cells(row: list[str]) -> bool:
    return bool(row) and any(cell.strip() for cell in row)


def _csv_texts(p: Path, content: str, text_field: str, delimiter: str) -> list[tuple[int, str]]:
    _, col, rows = csv_rows(p, content, text_field, delimiter)
    return [(line, row[col]) for line, row in rows if _has_cells(row)]


def _hf_texts(p: Path, text_field: str) -> list[tuple[int, str]]:
    try:
        import datasets
    except ImportError:  # pragma: no cover - datasets is a hard dependency
        raise UserError("loading a saved dataset needs the 'datasets' package; pip install datasets") from None
    if not p.is_dir():
        raise UserError(f"{p}: a saved Hugging Face dataset is a directory; pass the directory")
    try:
        ds = datasets.load_from_disk(str(p))
    except Exception as exc:  # datasets raises many types for a damaged directory
        msg = " ".join(str(exc).split())[:200]
        raise UserError(
            f"{p}: could not load the saved dataset ({type(exc).__name__}: {msg}); "
            f"save it again with Dataset.save_to_disk"
        ) from None
    if isinstance(ds, datasets.DatasetDict):
        ds = _pick_split(p, ds)
    if text_field not in ds.column_names:
        raise UserError(
            f"{p}: dataset has no column '{text_field}' (columns: {', '.join(ds.column_names)}); "
            f"pass --text-field NAME to choose the text column"
        )
    out = []
    for k, value in enumerate(ds[text_field], start=1):
        if not isinstance(value, str):
            held = "null" if value is None else type(value).__name__
            raise UserError(
                f"{p}: row {k}: column '{text_field}' holds {held}, not a string; "
                f"choose a string column with --text-field"
            )
        out.append((k, value))
    return out


def _pick_split(p: Path, dd: Any) -> Any:
    names = list(dd.keys())
    if "train" in dd:
        return dd["train"]
    if len(names) == 1:
        return dd[names[0]]
    raise UserError(
        f"{p}: saved DatasetDict has splits {', '.join(names)} and none is 'train'; "
        f"save the split to audit on its own with Dataset.save_to_disk"
    )
