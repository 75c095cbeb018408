"""Bodies of the standalone ``privleak scrub IN OUT`` and ``privleak dedup IN OUT``.

Both read a JSONL, JSON-array, CSV/TSV or plain-text file (one record per
line) and write the same format back:

* JSONL / JSON keep every other field of each object (and a PrivLeak split's
  ``pii`` spans are re-positioned, keeping only the PII still in the text);
* CSV keeps every other column, the header, the delimiter and the line ending;
* text stays one record per line.

Rows without text (blank lines, empty cells) pass through untouched and are
not counted. Bad input (missing file, directory, empty file, binary or
non-UTF-8 data, malformed JSON, missing field or column) is a one-line
:class:`UserError`. Output is written to a temporary file in the output's
directory and moved into place with ``os.replace`` only when everything
succeeded, so a failure never leaves a partial output and never touches an
existing one; the output path must be a regular file or a new name, never the
input, a link, a device or a FIFO, and the output gets mode 0600 (or the
input's, if stricter): it can hold PII (:mod:`privleak.core.io`).
"""

from __future__ import annotations

import contextlib
import csv
import io
import itertools
import json
import os
import secrets
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from privleak.core import limits as L
from privleak.core.errors import UserError
from privleak.core.io import atomic_open, check_output_file, private_mode
from privleak.core.progress import progress_bar
from privleak.data.loaders import (  # one reader and parser, the same messages as the corpus loader
    TextFile,
    csv_rows,
    json_rows,
    read_text_file,
)

_FORMATS = {"jsonl": "jsonl", "json": "jsonl", "ndjson": "jsonl", "csv": "csv", "tsv": "csv",
            "text": "text", "txt": "text"}


# --------------------------------------------------------------------------
# reading and writing a table of rows, keeping everything but the text


@dataclass
class _Table:
    path: Path
    fmt: str  # "jsonl", "json" (one array), "csv", "text"
    rows: list[Any]  # jsonl/json: dicts; csv: lists of cells; text: lines
    texts: list[str | None]  # per row; None = no text, passed through
    text_field: str
    lines: list[int] = field(default_factory=list)  # 1-based source line of each row
    col: int = -1  # csv: index of the text column
    header: list[str] = field(default_factory=list)
    delimiter: str = ","
    newline: str = "\n"
    encoding: str = "utf-8"  # written back as read: a UTF-16 file stays UTF-16 (with its BOM)
    bom: bool = False

    def record_indices(self) -> list[int]:
        return [i for i, t in enumerate(self.texts) if t is not None and t.strip()]


def _resolve_format(p: Path, fmt: str | None) -> str:
    if fmt is not None:
        kind = _FORMATS.get(fmt.strip().lower())
        if kind is None:
            raise UserError(f"--format {fmt}: unknown format; use one of: jsonl, csv, text")
        return kind
    suffix = p.suffix.lower()
    if suffix in (".jsonl", ".json", ".ndjson"):
        return "jsonl"
    if suffix in (".csv", ".tsv"):
        return "csv"
    return "text"


def _read_text(p: Path) -> TextFile:
    if p.is_dir():
        raise UserError(
            f"{p}: is a directory; pass a JSONL, CSV or text file (export a saved dataset with "
            f"Dataset.to_json first)"
        )
    return read_text_file(p)  # the loader every command shares: same encodings, same refusals


def _read_table(path: str | os.PathLike[str], text_field: str, fmt: str | None) -> _Table:
    p = Path(path)
    kind = _resolve_format(p, fmt)
    decoded = _read_text(p)
    content = decoded.text
    newline = "\r\n" if "\r\n" in content[:65536] else "\n"
    if kind == "jsonl":
        table = _read_json(p, content, text_field)
    elif kind == "csv":
        table = _read_csv(p, content, text_field, "\t" if p.suffix.lower() == ".tsv" else ",")
    else:
        lines = content.split("\n")
        if lines and lines[-1] == "":
            lines.pop()  # the final newline ends the last line; it is no empty record
        lines = [ln[:-1] if ln.endswith("\r") else ln for ln in lines]
        table = _Table(p, "text", lines, list(lines), text_field, lines=list(range(1, len(lines) + 1)))
    table.newline = newline
    table.encoding, table.bom = decoded.encoding, decoded.bom
    if not table.record_indices():
        where = "" if kind == "text" else f" in field '{text_field}'"
        raise UserError(f"{p}: no non-empty records{where}; the file needs at least one text")
    return table


def _read_json(p: Path, content: str, text_field: str) -> _Table:
    is_array, rows = json_rows(p, content, text_field)
    return _Table(p, "json" if is_array else "jsonl", [obj for _, obj in rows], [obj[text_field] for _, obj in rows],
                  text_field, lines=[line for line, _ in rows])


def _read_csv(p: Path, content: str, text_field: str, delimiter: str) -> _Table:
    header, col, rows = csv_rows(p, content, text_field, delimiter)
    return _Table(p, "csv", [row for _, row in rows], [row[col] if len(row) > col else None for _, row in rows],
                  text_field, lines=[line for line, _ in rows], col=col, header=header, delimiter=delimiter)


def _with_text(table: _Table, i: int, text: str) -> Any:
    row = table.rows[i]
    if table.fmt in ("jsonl", "json"):
        new = dict(row)
        new[table.text_field] = text
        return new
    if table.fmt == "csv":
        new = list(row)
        new[table.col] = text
        return new
    return text


def _render(table: _Table, rows: Iterable[Any]) -> Iterator[str]:
    nl = table.newline
    if table.bom:
        yield "\ufeff"
    if table.fmt == "jsonl":
        for obj in rows:
            yield json.dumps(obj, ensure_ascii=False) + nl
    elif table.fmt == "json":
        yield json.dumps(list(rows), ensure_ascii=False, indent=1) + nl
    elif table.fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, delimiter=table.delimiter, lineterminator=nl)
        writer.writerow(table.header)
        yield buf.getvalue()
        for row in rows:
            buf.seek(0)
            buf.truncate()
            writer.writerow(row)
            yield buf.getvalue()
    else:
        for line in rows:
            yield line + nl


def _atomic_write(out_path: str | os.PathLike[str], chunks: Iterable[str], encoding: str = "utf-8",
                  inputs: Iterable[str | os.PathLike[str]] = ()) -> None:
    """Write ``chunks`` to ``out_path`` atomically (:func:`privleak.core.io.atomic_path`),
    synced to disk, with mode 0600 or the input's if stricter (the output can hold PII:
    :func:`~privleak.core.io.private_mode`); on any failure ``out_path`` is left exactly as it was."""
    out = check_output_file(out_path, inputs)  # again: the file may have changed while the records were read
    mode = private_mode(inputs)
    try:
        with atomic_open(out, "w", encoding=encoding, newline="", fsync=True) as fh:
            for chunk in chunks:
                fh.write(chunk)
            os.chmod(fh.name, mode)
    except OSError as exc:
        raise UserError(f"{out}: cannot write ({exc.strerror or exc}); check space and permissions") from None


# --------------------------------------------------------------------------
# scrub


@dataclass
class ScrubFileReport:
    in_path: str
    out_path: str
    format: str
    mode: str
    labels: list[str]
    n_rows: int
    n_records: int
    n_changed: int
    counts: dict[str, int]
    seconds: float  # reading, scrubbing and writing
    setup_seconds: float  # building the analyser (loading Presidio and spaCy)
    key: str = ""  # pseudonym mode: "seed" (given) or "random" (drawn for this run, not kept); else ""

    def to_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        found = ", ".join(f"{k}={v}" for k, v in sorted(self.counts.items())) or "none"
        rate = self.n_records / self.seconds if self.seconds > 0 else float("inf")
        return (f"scrubbed {self.n_records} records ({self.n_changed} changed; {self.mode}) → "
                f"{self.out_path} in {self.seconds:.1f}s ({rate:.0f} records/s; analyser setup "
                f"{self.setup_seconds:.1f}s); replaced: {found}; a secret of no PII type scrubbed (a passphrase, a "
                f"password) stays in the text"
                + ("; pseudonyms from a random key, not kept (pass --seed with 32 hexadecimal digits to repeat "
                   "them, and keep it secret)" if self.key == "random" else ""))


def scrub_file(
    in_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    *,
    mode: str = "mask",
    labels: Iterable[str] | str | None = None,
    text_field: str = "text",
    fmt: str | None = None,
    seed: str | int | None = None,
    ner: bool = True,
    score_threshold: float | None = None,
    analyzer: Any = None,
    max_record_chars: int | None = L.MAX_SCRUB_RECORD_CHARS,
) -> ScrubFileReport:
    """``privleak scrub IN OUT``: scrub the text of every record, keep the rest.

    Pseudonyms are keyed by ``seed``: a key of 32 hexadecimal digits (128 bits, :func:`~privleak.defenses.
    pseudonyms.parse_key`), or an int used as is (Python callers: give 128 random bits); without one, by 128
    random bits drawn for this call and kept nowhere. Whoever knows the key can test a guess against a fake (is
    this the fake that SSN would get?), and scrubbed files leave the user's hands, so a reproducible key is
    opt-in, and a short one (searchable exhaustively) is refused.

    ``max_record_chars``: a record longer than this is refused, naming its line, its size and the option that
    raises the bound, before the analyser is built (None: no bound). Scrubbing time grows linearly with a
    record's length (it is analysed in overlapping windows), but at ~14 KB/s a 10 MB line is ~12 minutes."""
    from privleak.defenses.pii import DEFAULT_SCORE_THRESHOLD, PiiAnalyzer, parse_labels
    from privleak.defenses.pseudonyms import parse_key
    from privleak.defenses.scrub import MODES, Scrubber

    # Everything that needs no work is checked first: building the analyser
    # takes seconds, reading a large file too.
    if str(mode).strip().lower() not in MODES:
        raise UserError(f"--mode {mode}: unknown scrub mode; use one of: {', '.join(MODES)}")
    if isinstance(seed, str):
        seed = parse_key(seed, option="--seed")
    elif seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**128):
        raise UserError(f"seed {seed!r}: must be a key of 32 hexadecimal digits or an int from 0 to 2^128 - 1")
    if max_record_chars is not None and (isinstance(max_record_chars, bool) or not isinstance(max_record_chars, int)
                                         or max_record_chars < 1):
        raise UserError(f"--max-record-chars {max_record_chars}: must be a whole number of at least 1; "
                        f"e.g. {L.MAX_SCRUB_RECORD_CHARS}")
    if analyzer is None:
        try:
            parse_labels(labels)
        except UserError as exc:
            raise UserError(f"--types {labels if isinstance(labels, str) else ','.join(labels)}: {exc}") from None
    if score_threshold is not None and not 0.0 <= float(score_threshold) <= 1.0:
        raise UserError(f"--score-threshold {score_threshold}: must be in [0, 1]; try 0.4")
    _resolve_format(Path(in_path), fmt)
    check_output_file(out_path, [in_path])
    t0 = time.perf_counter()
    table = _read_table(in_path, text_field, fmt)  # bad input fails before the slow setup
    idx = table.record_indices()
    if max_record_chars is not None:
        _check_record_sizes(table, idx, max_record_chars)
    t_read = time.perf_counter() - t0
    if analyzer is None:
        analyzer = PiiAnalyzer(
            labels, ner=ner,
            score_threshold=DEFAULT_SCORE_THRESHOLD if score_threshold is None else score_threshold,
        )
    key = "" if str(mode).strip().lower() != "pseudonym" else "random" if seed is None else "seed"
    scrubber = Scrubber(analyzer, mode=mode, labels=labels, seed=secrets.randbits(128) if seed is None else seed)
    t1 = time.perf_counter()
    n_changed = 0
    n_chars = sum(len(table.texts[i] or "") for i in idx)

    def rows() -> Iterator[Any]:
        nonlocal n_changed
        texts = (table.texts[i] for i in idx)
        with contextlib.ExitStack() as bars:
            # Progress in characters analysed: a file of one long record moves too (each window is reported).
            if scrubber.mode == "pseudonym":  # every value is found, and kept out of the fakes, before the first goes
                with progress_bar("finding PII (characters)", total=n_chars) as found:
                    results = scrubber.iter_scrub(texts, on_chars=found)
                    first = next(results, None)
                results = itertools.chain([] if first is None else [first], results)
                advance = bars.enter_context(progress_bar("scrubbing", total=len(idx)))
            else:
                results = scrubber.iter_scrub(
                    texts, on_chars=bars.enter_context(progress_bar("scrubbing (characters)", total=n_chars)))
                advance = None
            pos = 0
            for i in range(len(table.rows)):
                if pos < len(idx) and idx[pos] == i:
                    s = next(results)
                    pos += 1
                    n_changed += bool(s.replacements)
                    row = _with_text(table, i, s.text)
                    if table.fmt in ("jsonl", "json") and table.text_field == "text":
                        _remap_pii(row, s)
                    if advance is not None:
                        advance()
                    yield row
                else:
                    yield table.rows[i]

    _atomic_write(out_path, _render(table, rows()), table.encoding, [in_path])
    return ScrubFileReport(
        in_path=str(in_path), out_path=str(out_path), format=table.fmt, mode=scrubber.mode,
        labels=list(scrubber.labels), n_rows=len(table.rows), n_records=len(idx), n_changed=n_changed,
        counts=dict(scrubber.counts), seconds=t_read + time.perf_counter() - t1, setup_seconds=t1 - t0 - t_read,
        key=key,
    )


def _check_record_sizes(table: _Table, idx: list[int], limit: int) -> None:
    """Refuse the first record over ``limit`` characters, naming where it is and how to go on."""
    for i in idx:
        n = len(table.texts[i] or "")
        if n > limit:
            where = f"{'record' if table.fmt == 'json' else 'line'} {table.lines[i]}"  # a JSON array: its position
            raise UserError(f"{table.path} {where}: a record of {n:,} characters, over --max-record-chars "
                            f"{limit:,}; split it into shorter records, or pass --max-record-chars {n} to scrub it "
                            f"whole (the analyser reads about {L.SCRUB_CHARS_PER_S // 1000} KB a second on one core: about "
                            f"{max(1, round(n / L.SCRUB_CHARS_PER_S / 60))} min for this one)")


def _remap_pii(row: dict, scrubbed: Any) -> None:
    """A PrivLeak split's ``pii`` spans: keep those still in the text, re-positioned."""
    spans = row.get("pii")
    if not isinstance(spans, list):
        return
    try:
        parsed = [(int(s), int(e), str(lab)) for s, e, lab in spans]
    except (TypeError, ValueError):
        return
    kept = []
    for s, e, lab in parsed:
        moved = scrubbed.map_span(s, e)
        if moved is not None:
            kept.append([moved[0], moved[1], lab])
    row["pii"] = kept


# --------------------------------------------------------------------------
# dedup


@dataclass
class DedupFileReport:
    in_path: str
    out_path: str
    format: str
    n_rows: int
    n_records: int
    n_kept: int
    n_removed: int
    stages: list[dict]
    removed_lines: list[int]  # 1-based input line of each removed record (JSON array: its position)
    seconds: float

    def to_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        parts = "; ".join(f"{s['method']}: -{s['n_removed']}" for s in self.stages)
        return (f"dedup: {self.n_records} records in, {self.n_removed} removed ({parts}), "
                f"{self.n_kept} kept → {self.out_path} in {self.seconds:.1f}s")


def dedup_file(
    in_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    *,
    method: str = "both",
    threshold: float = 0.8,
    num_perm: int = 128,
    shingle: str = "char",
    ngram: int | None = None,
    seed: int = 0,
    ignore_punctuation: bool = False,
    text_field: str = "text",
    fmt: str | None = None,
) -> DedupFileReport:
    """``privleak dedup IN OUT``: drop exact and/or near-duplicate records (first kept)."""
    from privleak.data.records import Record
    from privleak.defenses.dedup import dedup

    t0 = time.perf_counter()
    if method not in ("exact", "near", "both"):
        raise UserError(f"--method {method}: unknown dedup method; use exact, near or both")
    if method != "exact":  # the MinHash settings, before reading anything
        from privleak.defenses.dedup import _check_near_params

        _check_near_params(threshold, num_perm, shingle, ngram if ngram is not None else 5)
    _resolve_format(Path(in_path), fmt)
    check_output_file(out_path, [in_path])
    table = _read_table(in_path, text_field, fmt)
    idx = table.record_indices()
    items = [Record(text=table.texts[i] or "", meta={"row": i}) for i in idx]
    with progress_bar("deduplicating", total=len(idx)) as advance:
        kept, reports = dedup(items, method=method, threshold=threshold, num_perm=num_perm, shingle=shingle,
                              ngram=ngram, seed=seed, ignore_punctuation=ignore_punctuation,
                              on_progress=advance)
    kept_rows = {r.meta["row"] for r in kept}
    removed = sorted(set(idx) - kept_rows)
    removed_set = set(removed)
    out_rows = [row for i, row in enumerate(table.rows) if i not in removed_set]
    _atomic_write(out_path, _render(table, out_rows), table.encoding, [in_path])
    return DedupFileReport(
        in_path=str(in_path), out_path=str(out_path), format=table.fmt, n_rows=len(table.rows),
        n_records=len(idx), n_kept=len(idx) - len(removed), n_removed=len(removed),
        stages=[r.counts() for r in reports],
        removed_lines=[table.lines[i] for i in removed], seconds=time.perf_counter() - t0,
    )


__all__ = ["DedupFileReport", "ScrubFileReport", "dedup_file", "scrub_file"]
