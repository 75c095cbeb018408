"""``privleak guard``: build an index, check outputs, serve the guard over HTTP (thin: parse, call, print)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from ..core import limits as L
from ..core.errors import UserError
from ..core.terminal import escape_control
from .common import is_text_format, refuse_unused

guard_app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                        help="Output guard: block verbatim training text, canaries and PII in model outputs.")

_TYPES_HELP = "Comma-separated PII types to scan for (default: every identifier, see docs/guide/scrubbing.md; Presidio names accepted)."
_POLICY_HELP = "REASON=ACTION list, reasons pii/verbatim/canary, actions block/redact/log/off (default pii=redact,verbatim=block,canary=block)."


def _err(msg: str) -> None:
    print(escape_control(msg), file=sys.stderr)  # paths and hosts the user typed: shown, never obeyed


def _scan(types: str | None, score_threshold: float, no_ner: bool):
    """The PII scan settings, checked without loading Presidio or spaCy."""
    from ..defenses.guard.guard import ScanSettings
    from ..defenses.pii import DEFAULT_SCRUB_LABELS, parse_labels

    try:
        labels = parse_labels(types) if types else DEFAULT_SCRUB_LABELS
    except UserError as exc:
        raise UserError(f"--types {types}: {exc}") from None
    if not 0.0 <= score_threshold <= 1.0:
        raise UserError(f"--score-threshold {score_threshold}: must be in [0, 1]; try 0.4")
    return ScanSettings(pii_labels=labels, score_threshold=score_threshold, ner=not no_ner)


def check_index_dir(path: Path) -> None:
    """The index is written into ``path``: a new directory, an empty one or an index to replace — never a link,
    a file or a directory holding something else (its files would sit beside the user's)."""
    import stat

    from ..defenses.guard.index_store import META_FILE

    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise UserError(f"--out {path}: is a symbolic link; privleak never writes through a link — give a directory path")
    if not stat.S_ISDIR(st.st_mode):
        raise UserError(f"--out {path}: is a file; choose a directory for the index")
    if any(path.iterdir()) and not (path / META_FILE).is_file():
        raise UserError(f"--out {path}: is a directory that holds other files, not a guard index; choose a new or "
                        "empty directory")


def _load(ctx: typer.Context, index: Path, policy: str | None, types: str | None, score_threshold: float,
          no_ner: bool):
    from ..defenses.guard.guard import Guard
    from ..defenses.guard.verdict import GuardPolicy

    parsed = GuardPolicy.parse(policy)
    scan = _scan(types, score_threshold, no_ner)
    if parsed.pii == "off":
        refuse_unused(ctx, ("types", "score_threshold", "no_ner"), "set the PII scan, which --policy pii=off turns off")
    return Guard.load(index, policy=parsed, scan=scan)


@guard_app.command("build")
def build(
    ctx: typer.Context,
    train: Path = typer.Option(..., "--train", help="Training corpus: JSONL, CSV, text (one record per line) or a saved HF dataset dir."),
    out_path: Path = typer.Option(..., "--out", "-o", help="Index directory to write."),
    text_field: str = typer.Option("text", "--text-field", help="Field/column holding the text in JSONL/CSV."),
    fmt: str | None = typer.Option(None, "--format", help="jsonl, csv or text (default: from the extension)."),
    canaries: Path | None = typer.Option(None, "--canaries", help="canaries.json (from `privleak data generate` or a run): secrets that must never leave."),
    pii_inventory: bool = typer.Option(False, "--pii-inventory", help="Also never release the members' own PII values (needs privleak JSONL with 'pii' spans, e.g. splits/members.jsonl)."),
    allow: Path | None = typer.Option(None, "--allow", help="Public text (same formats as --train) whose spans are never blocked, e.g. what the base model was trained on."),
    threshold: int = typer.Option(50, "--threshold", help="Block verbatim training spans of at least this many characters."),
    casefold: bool = typer.Option(False, "--casefold", help="Match verbatim text ignoring case."),
    exact_ws: bool = typer.Option(False, "--exact-whitespace", help="Do not normalise whitespace before matching."),
) -> None:
    """Build a guard index from the training corpus (hashed windows + canary tripwire; no pickle)."""
    import time

    # What needs no work first (before the guard's modules load): nothing is read or built for a bad option.
    if threshold < 8:
        raise UserError(f"--threshold {threshold}: must be at least 8 characters (default 50); shorter spans match "
                        "ordinary phrases")
    if threshold > L.MAX_GUARD_WINDOW:
        raise UserError(f"--threshold {threshold}: at most {L.MAX_GUARD_WINDOW:,} characters (default 50); a window "
                        "that long matches only whole books")
    if is_text_format(train, fmt) and (allow is None or is_text_format(allow, fmt)):
        refuse_unused(ctx, ("text_field",), f"{train} is read as plain text (one record per line, no fields)")
    check_index_dir(out_path)
    for flag, path in (("--train", train), ("--canaries", canaries), ("--allow", allow)):
        if path is not None and not path.exists():
            raise UserError(f"{flag} {path}: no such file or directory; check the path")
    from ..data.loaders import load_corpus
    from ..defenses.guard.guard import Guard, inventory_from_records

    t0 = time.perf_counter()
    records = load_corpus(train, text_field=text_field, fmt=fmt)
    secrets = []
    if canaries is not None:
        from ..data.canaries import load_canaries

        secrets = load_canaries(canaries)
    inventory: list[tuple[str, str]] = []
    if pii_inventory:
        from ..data.records import read_jsonl

        try:
            tagged = read_jsonl(train)
        except (UserError, ValueError, KeyError, TypeError, OSError):  # not privleak JSONL: no spans to use
            tagged = []
        inventory = inventory_from_records(tagged)
        if not inventory:
            raise UserError(f"--pii-inventory: {train} has no ground-truth 'pii' spans; pass privleak JSONL "
                            "(e.g. a run's splits/members.jsonl) or drop --pii-inventory")
    allow_texts = [r.text for r in load_corpus(allow, text_field=text_field, fmt=fmt)] if allow is not None else []
    guard = Guard.build([r.text for r in records], canaries=secrets, inventory=inventory, threshold=threshold,
                        normalise_ws=not exact_ws, casefold=casefold, allow_texts=allow_texts)
    if guard.meta["n_windows"] == 0:  # verbatim blocking would be silently off
        longest = max(len(" ".join(t.split()) if not exact_ws else t) for t in (r.text for r in records))
        raise UserError(f"--threshold {threshold}: no training text is that long (the longest has {longest:,} "
                        f"characters), so the index would block no verbatim text; use at most {longest:,}")
    path = guard.save(out_path)
    m = guard.meta
    _err(f"wrote {path}: {m['n_texts']} texts, {m['n_windows']} windows of {m['threshold']} chars, "
         f"{m['n_tripwire_keys']} tripwire keys, {time.perf_counter() - t0:.1f} s")


@guard_app.command("check")
def check(
    ctx: typer.Context,
    in_path: str = typer.Argument("-", metavar="[FILE|-]", help="Model output to check (default: stdin)."),
    index: Path = typer.Option(..., "--index", help="Index directory from `privleak guard build`."),
    policy: str | None = typer.Option(None, "--policy", help=_POLICY_HELP),
    types: str | None = typer.Option(None, "--types", "-t", help=_TYPES_HELP),
    score_threshold: float = typer.Option(0.4, "--score-threshold", help="Drop PII detections below this Presidio confidence."),
    no_ner: bool = typer.Option(False, "--no-ner", help="Regex recognizers only (faster; names only by cue)."),
    as_json: bool = typer.Option(False, "--json", help="Print the verdict as one JSON object."),
) -> None:
    """Check one output: print it redacted (or the verdict as JSON); exit code 1 when blocked."""
    from ..data.loaders import decode_text, read_text_file

    guard = _load(ctx, index, policy, types, score_threshold, no_ner)
    # The same reader as every corpus command: BOM-marked UTF-16/32 decoded,
    # NUL bytes and other encodings refused with the fix.
    if in_path == "-":
        stdin = getattr(sys.stdin, "buffer", None)  # a test harness may put a text stream there
        text = decode_text(stdin.read(), "-", allow_empty=True).text if stdin is not None else sys.stdin.read()
    else:
        if not Path(in_path).is_file():
            raise UserError(f"{in_path}: no such file; pass a text file or - for stdin")
        text = read_text_file(in_path, allow_empty=True).text
    v = guard.check(text)
    if as_json:
        print(json.dumps(v.to_json(), ensure_ascii=False))
    else:
        # The checked text goes to a pipe as it is; on a terminal its control characters are shown, not obeyed.
        sys.stdout.write(escape_control(v.text, keep_newlines=True) if sys.stdout.isatty() else v.text)
        if v.text and not v.text.endswith("\n"):
            sys.stdout.write("\n")
    counts: dict[str, int] = {}
    for f in v.findings:
        key = f"{f.reason}/{f.action}"
        counts[key] = counts.get(key, 0) + 1
    summary = ", ".join(f"{k} {n}" for k, n in sorted(counts.items())) or "no findings"
    _err(("BLOCKED: " if not v.allowed else "allowed: ") + summary)
    if not v.allowed:
        sys.exit(1)


@guard_app.command("serve")
def serve(
    ctx: typer.Context,
    index: Path = typer.Option(..., "--index", help="Index directory from `privleak guard build`."),
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to bind (default loopback only)."),
    port: int = typer.Option(8080, "--port", help="TCP port (1-65535)."),
    max_bytes: int = typer.Option(65536, "--max-bytes", help="Largest request body accepted (64 to 67108864); larger ones get 413."),
    policy: str | None = typer.Option(None, "--policy", help=_POLICY_HELP),
    types: str | None = typer.Option(None, "--types", "-t", help=_TYPES_HELP),
    score_threshold: float = typer.Option(0.4, "--score-threshold", help="Drop PII detections below this Presidio confidence."),
    no_ner: bool = typer.Option(False, "--no-ner", help="Regex recognizers only (faster; names only by cue)."),
    workers: int | None = typer.Option(None, "--workers", help=f"Checks at once, one worker process each (1 to {L.MAX_GUARD_WORKERS}; default: the CPUs, at most 4)."),
    queue: int | None = typer.Option(None, "--queue", help=f"Requests that may wait for a worker (0 to {L.MAX_GUARD_QUEUE:,}; default 256); one more, or one whose predicted wait and check would not end within --timeout, gets 503 with Retry-After."),
    timeout: float = typer.Option(30.0, "--timeout", help=f"Seconds a request may take, queue wait included (at most {L.MAX_GUARD_TIMEOUT_S:g}); past it: 504, and its check is stopped."),
) -> None:
    """Serve POST /v1/check and GET /healthz over HTTP (FastAPI + uvicorn), on a bounded pool of worker processes."""
    import functools

    from ..defenses.guard.guard import Guard
    from ..defenses.guard.pool import PoolLimits, default_workers
    from ..defenses.guard.service import open_socket
    from ..defenses.guard.service import serve as run_service

    limits = PoolLimits(workers=default_workers() if workers is None else workers, queue=queue, timeout_s=timeout)
    if not 0 < port < 65536:
        raise UserError(f"--port {port}: must be 1-65535; e.g. 8080")
    if max_bytes < 64:
        raise UserError(f"--max-bytes {max_bytes}: too small for any request; try 65536")
    if max_bytes > L.MAX_BODY_BYTES:
        raise UserError(f"--max-bytes {max_bytes}: at most {L.MAX_BODY_BYTES} (each request is held and scanned in "
                        "memory); try 65536")
    guard = _load(ctx, index, policy, types, score_threshold, no_ner)  # the index only: the PII models load later
    # Start-up errors (a bad host, the port in use): one line, before the PII models load (seconds).
    sock = open_socket(host, port)
    where = f"[{host}]" if ":" in host else host
    _err(f"serving the guard on http://{where}:{port} (POST /v1/check, GET /healthz): {limits.workers} workers, "
         f"{limits.queue_limit} more requests may wait, {limits.timeout_s:g} s per request; starting the workers")
    # Each worker opens the index itself (memory-mapped: one copy in the page cache for all of them).
    source = functools.partial(Guard.load, index, policy=guard.policy, scan=guard.scan)
    run_service(guard, host=host, port=port, max_body_bytes=max_bytes, sock=sock, limits=limits, source=source)
