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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from privleak.core.errors import UserError
from privleak.core.jsonlimits import JSONLimitError, loads
from privleak.data.records import Record

FORMATS: tuple[str, ...] = ("jsonl", "csv", "text", "hf")
_ALIASES = {"jsonl": "jsonl", "json": "jsonl", "ndjson": "jsonl", "csv": "csv", "tsv": "csv",
            "text": "text", "txt": "text", "hf": "hf", "datasets": "hf", "arrow": "hf"}
_HF_MARKERS = ("dataset_info.json", "state.json", "dataset_dict.json")


def load_corpus(path: str | Path, text_field: str = "text", fmt: str | None = None,
                group_field: str | None = None, client_field: str | None = None) -> list[Record]:
    """Records of the corpus at ``path``; ``fmt`` overrides the auto-detection.

    ``group_field`` names the field / column holding the person (or other
    group) each record belongs to; its value goes to ``meta["group"]``, the
    split keeps a group inside one split and the membership evaluation takes
    one record per group (see :mod:`privleak.audit.summaries`).
    ``client_field`` likewise names each record's federated client (clinic,
    site): ``meta["client"]``, every record must have one.
    """
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
        content = read_text_file(p).text
        if kind == "jsonl":
            pairs = _json_texts(p, content, text_field)
        elif kind == "csv":
            delimiter = "\t" if p.suffix.lower() == ".tsv" else ","
            pairs = _csv_texts(p, content, text_field, delimiter)
        else:
            pairs = _text_lines(content)
    groups = _groups(p, kind, text_field, group_field) if group_field else {}
    clients = _groups(p, kind, text_field, client_field, "--client-field", "client") if client_field else {}
    records = [
        Record(text=text.strip(), pii=None,
               meta={"kind": "user", "source_line": line, **({"group": groups[line]} if group_field else {}),
                     **({"client": clients[line]} if client_field else {})})
        for line, text in pairs
        if text.strip()
    ]
    if not records:
        where = "" if kind == "text" else f" in field '{text_field}'"
        raise UserError(f"{p}: no non-empty records{where}; the corpus needs at least one text")
    return records


def _groups(p: Path, kind: str, text_field: str, group_field: str, flag: str = "--group-field",
            what: str = "person or group") -> dict[int, str]:
    """Line (or row) → the record's group value, for ``--group-field`` (or the client value, for
    ``--client-field``); every record must have one."""
    def check(where: str, value: Any) -> str:
        if value is None or (isinstance(value, str) and not value.strip()):
            raise UserError(f"{p}: {where} has no value in field '{group_field}'; give every record its "
                            f"{what}, or drop {flag}")
        # An id is a string or a number: a list, an object or true/false names no one (as text they would
        # merge unrelated records into a few "people" and leave no independent units to evaluate).
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            shown = "true/false" if isinstance(value, bool) else ("a list" if isinstance(value, (list, tuple))
                                                                   else "an object" if isinstance(value, dict)
                                                                   else type(value).__name__)
            raise UserError(f"{p}: {where} has {shown} in field '{group_field}', not a {what} id; give every "
                            f"record a string or number id there, or drop {flag}")
        return str(value)

    if kind == "text":
        raise UserError(f"{p}: {flag} needs JSONL, CSV or a saved dataset (plain text has no fields); "
                        f"convert the corpus or drop {flag}")
    if kind == "jsonl":
        rows = json_rows(p, read_text_file(p).text, text_field)[1]
        out = {}
        for i, obj in rows:
            if group_field not in obj:
                raise UserError(f"{p}: line {i} has no field '{group_field}' (fields present: {', '.join(map(str, obj))}); "
                                f"pass the {what} field with {flag} NAME")
            out[i] = check(f"line {i}", obj[group_field])
        return out
    if kind == "csv":
        header, _, rows = csv_rows(p, read_text_file(p).text, text_field, "\t" if p.suffix.lower() == ".tsv" else ",")
        columns = [h.strip() for h in header]
        if group_field not in columns:
            raise UserError(f"{p}: CSV has no column '{group_field}' (columns: {', '.join(columns)}); "
                            f"pass the {what} column with {flag} NAME")
        col = columns.index(group_field)
        return {line: check(f"line {line}", row[col] if col < len(row) else None) for line, row in rows if _has_cells(row)}
    import datasets

    ds = datasets.load_from_disk(str(p))
    if isinstance(ds, datasets.DatasetDict):
        ds = _pick_split(p, ds)
    if group_field not in ds.column_names:
        raise UserError(f"{p}: dataset has no column '{group_field}' (columns: {', '.join(ds.column_names)}); "
                        f"pass the {what} column with {flag} NAME")
    return {k: check(f"row {k}", v) for k, v in enumerate(ds[group_field], start=1)}


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


@dataclass(frozen=True)
class TextFile:
    """A text file's content and how it was stored (so a rewrite can keep it)."""

    text: str
    encoding: str = "utf-8"  # a Python codec without BOM handling: utf-8, utf-16-le, utf-16-be, utf-32-le, utf-32-be
    bom: bool = False  # the file started with a byte-order mark


# Byte-order marks (Unicode §23.8), longest first: UTF-32 LE's starts with UTF-16 LE's.
_BOMS = ((b"\x00\x00\xfe\xff", "utf-32-be"), (b"\xff\xfe\x00\x00", "utf-32-le"), (b"\xef\xbb\xbf", "utf-8"),
         (b"\xfe\xff", "utf-16-be"), (b"\xff\xfe", "utf-16-le"))
# Files that are not text, by their first bytes: gzip, zip (xlsx, docx), PDF, PNG, SQLite, Parquet.
_MAGIC = ((b"\x1f\x8b", "gzip-compressed; decompress it first (gunzip)"),
          (b"PK\x03\x04", "a zip archive (or an .xlsx / .docx); export or extract the text as CSV, JSONL or text"),
          (b"%PDF", "a PDF; extract its text first (e.g. pdftotext)"),
          (b"\x89PNG", "an image, not text"),
          (b"SQLite format 3\x00", "an SQLite database; export the table as CSV or JSONL"),
          (b"PAR1", "a Parquet file; convert it to JSONL or CSV (e.g. with pandas)"))


def read_text_file(path: str | Path, *, allow_empty: bool = False) -> TextFile:
    """The decoded content of a text file — the one place PrivLeak decides
    what is text: ``run --data``, ``scrub``, ``dedup``, ``guard build`` and
    ``guard check`` all read through here, so one file is accepted or refused
    (with the same message) by all of them.

    * A byte-order mark decides the encoding: UTF-8, UTF-16 and UTF-32 in
      either byte order are decoded (and :class:`TextFile` says which, so a
      rewritten file keeps it).
    * Without one the file must be UTF-8. A NUL byte is refused everywhere
      (no text format has one; in an otherwise readable file it is
      corruption): as UTF-16 without a BOM when every other byte is NUL,
      otherwise with its line and a ``tr`` line that removes it. Invalid UTF-8
      gets its line, its byte and an ``iconv`` line.
    * Compressed or binary formats (gzip, zip, PDF, …) are named.
    """
    p = Path(path)
    if not p.exists():
        raise UserError(f"{p}: no such file; check the path")
    if p.is_dir():
        raise UserError(f"{p}: is a directory, not a file; pass the file itself")
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise UserError(f"{p}: cannot read the file ({exc.strerror or exc}); check its permissions") from None
    return decode_text(data, str(p), allow_empty=allow_empty)


def decode_text(data: bytes, name: str, *, allow_empty: bool = False) -> TextFile:
    """:func:`read_text_file` for bytes already read (``name`` is for messages; stdin is "-")."""
    converted = f"{name}.utf8" if name != "-" else "output.txt"
    for bom, codec in _BOMS:
        if data.startswith(bom):
            try:
                text = data[len(bom):].decode(codec)
            except UnicodeDecodeError as exc:
                raise UserError(
                    f"{name}: starts with a {codec.upper()} byte-order mark but byte {exc.start + len(bom)} is not "
                    f"valid {codec.upper()}; re-encode it: iconv -f {codec.upper()} -t UTF-8 {name} > {converted}"
                ) from None
            if not text.strip() and not allow_empty:
                raise UserError(f"{name}: the file is empty; point to a file with at least one record")
            return TextFile(text, codec, bom=True)
    if not data.strip():
        if allow_empty:
            return TextFile(data.decode("utf-8", errors="strict") if data else "")
        raise UserError(f"{name}: the file is empty; point to a file with at least one record")
    for magic, what in _MAGIC:
        if data.startswith(magic):
            raise UserError(f"{name}: the file is {what}")
    nul = data.find(b"\x00")
    if nul >= 0:
        head = data[:4096]
        even, odd = head[0::2].count(0), head[1::2].count(0)
        half = len(head) // 2
        if odd > 0.4 * half and even < 0.05 * half:
            raise UserError(f"{name}: looks like UTF-16 (little-endian) without a byte-order mark; re-encode it: "
                            f"iconv -f UTF-16LE -t UTF-8 {name} > {converted}")
        if even > 0.4 * half and odd < 0.05 * half:
            raise UserError(f"{name}: looks like UTF-16 (big-endian) without a byte-order mark; re-encode it: "
                            f"iconv -f UTF-16BE -t UTF-8 {name} > {converted}")
        line = data.count(b"\n", 0, nul) + 1
        raise UserError(f"{name}: line {line} contains a NUL byte, which no text format allows (binary or "
                        f"corrupted data); remove NUL bytes with: tr -d '\\000' < {name} > {converted}")
    try:
        return TextFile(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise UserError(
            f"{name}: line {line} is not valid UTF-8 (byte 0x{data[exc.start]:02x}); re-encode the file as UTF-8, "
            f"e.g. for Windows/Latin-1 text: iconv -f WINDOWS-1252 -t UTF-8 {name} > {converted}"
        ) from None


def _lines(content: str) -> Iterator[tuple[int, str]]:
    # Split on '\n' only: str.splitlines() also breaks at U+2028 and friends,
    # which JSON strings may legally contain raw.
    for i, line in enumerate(content.split("\n"), start=1):
        yield i, line.rstrip("\r")


def _text_lines(content: str) -> list[tuple[int, str]]:
    return [(i, line) for i, line in _lines(content)]


def _parsed(p: Path, text: str, where: str, limit_fix: str, at: Callable[[json.JSONDecodeError], str],
            fix: str) -> Any:
    """``loads(text)``, or one line naming the file, the place and the fix (past the JSON limits, or malformed)."""
    try:
        return loads(text)
    except JSONLimitError as exc:
        raise UserError(f"{p}: {where}{exc}; no corpus record needs that — {limit_fix}") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{p}: {at(exc)}malformed JSON ({exc.msg} at column {exc.colno}); {fix}") from None


def json_rows(p: Path, content: str, text_field: str) -> tuple[bool, list[tuple[int, dict[str, Any]]]]:
    """``(is_array, [(line, object), …])`` of JSON lines (or one JSON array in a
    ``.json`` file), every object checked to hold a string ``text_field``.
    Blank lines are skipped; for an array, "line" is the 1-based position."""
    if p.suffix.lower() == ".json" and content.lstrip().startswith("["):
        items = _parsed(p, content, "", "check the file", lambda exc: f"line {exc.lineno}: ",
                        "fix the file or convert it to JSON lines")
        if not isinstance(items, list):
            raise UserError(f"{p}: expected JSON lines or a JSON array of objects; convert it to JSON lines")
        for k, obj in enumerate(items, start=1):
            _field(p, f"record {k}", obj, text_field)
        return True, list(enumerate(items, start=1))
    out = []
    for i, line in _lines(content):
        if not line.strip():
            continue
        obj = _parsed(p, line, f"line {i}: ", "fix or remove that line", lambda exc, i=i: f"line {i}: ",
                      f"each line must be one JSON object such as {{\"{text_field}\": \"...\"}}")
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
    _check_quotes_close(p, content, delimiter)
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


def _check_quotes_close(p: Path, content: str, delimiter: str) -> None:
    """Refuse a quoted field that is never closed: the lenient reader would swallow the rest of the file into
    that one field (a whole corpus scrubbed as one record). Only this error of the strict reader is refused;
    its other complaints (text after a closing quote) stay the lenient reader's to accept."""
    reader = csv.reader(io.StringIO(content, newline=""), delimiter=delimiter, strict=True)
    start = 1
    while True:
        try:
            next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            if "unexpected end of data" in str(exc):
                raise UserError(f"{p}: line {start}: a quoted field opened on this line is never closed, so the rest "
                                "of the file would be one record; close the quote (a quote inside a field is "
                                'written "")') from None
            return
        start = reader.line_num + 1


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
