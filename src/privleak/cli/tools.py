"""The single-purpose commands: synthetic data, scrub, dedup, report, compare, accountant, local DP."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Optional

import typer

from ..config import MAX_SEED
from ..core import limits as L
from ..core.errors import UserError
from ..core.terminal import escape_control
from .common import (
    check_out_dir,
    end_cleanly_on_signals,
    err,
    interrupted_without_output,
    is_text_format,
    out,
    parse_epsilons,
    refuse_unused,
    shown,
)


def data_generate(
    out_dir: Path = typer.Option(..., "--out", "-o", help="Directory for public/members/non_members/population .jsonl and canaries.json."),
    seed: int = typer.Option(0, "--seed", min=0, max=MAX_SEED, help="Seed for the people, notes and canaries."),
    n_public: int = typer.Option(3000, "--n-public", min=L.MIN_SYNTHETIC_RECORDS, max=L.MAX_SYNTHETIC_RECORDS, help="Public records (other institutions' notes and generic text: what a base model may learn)."),
    n_members: int = typer.Option(1200, "--n-members", min=L.MIN_SYNTHETIC_RECORDS, max=L.MAX_SYNTHETIC_RECORDS, help="Member records (the training data), canaries planted in them."),
    n_non_members: int = typer.Option(1200, "--n-non-members", min=L.MIN_SYNTHETIC_RECORDS, max=L.MAX_SYNTHETIC_RECORDS, help="Non-member records from the same institution, never trained on."),
    n_population: int = typer.Option(1200, "--n-population", min=L.MIN_SYNTHETIC_RECORDS, max=L.MAX_SYNTHETIC_RECORDS, help="Population records, never trained on (reference and shadow models, exposure candidates)."),
    phi_fraction: float = typer.Option(0.15, "--phi-fraction", min=0.0, max=1.0, help="Fraction of records that are notes about a patient (0-1)."),
) -> None:
    """Write the synthetic clinical corpus (with exact PII spans and canaries) as JSONL."""
    from ..data.clinical import ClinicalCorpusConfig, generate_corpus, write_corpus

    check_out_dir(out_dir)
    # Generated in memory, every split at once (core.limits: ~2.6 KB per record measured).
    L.check_fits("--n-public + --n-members + --n-non-members + --n-population",
                 n_public + n_members + n_non_members + n_population, L.BYTES_PER_RECORD)
    cfg = ClinicalCorpusConfig(n_public=n_public, n_members=n_members, n_non_members=n_non_members,
                               n_population=n_population, phi_fraction=phi_fraction, seed=seed)
    corpus = generate_corpus(cfg)
    try:
        write_corpus(corpus, out_dir)
    except OSError as exc:
        raise UserError(f"--out {out_dir}: cannot write there ({exc.strerror or exc}); choose a writable directory") from None
    sizes = ", ".join(f"{k}={len(v)}" for k, v in corpus.splits.items())
    err.print(f"wrote {shown(out_dir)}: {sizes}, canaries={len(corpus.canaries)}")


def scrub(
    ctx: typer.Context,
    in_path: Path = typer.Argument(..., metavar="IN", help="Corpus file: JSONL/JSON, CSV/TSV or text (one record per line)."),
    out_path: Path = typer.Argument(..., metavar="OUT", help="Scrubbed copy, same format (written atomically with mode 0600; a new name or a regular file, not IN)."),
    mode: str = typer.Option("mask", "--mode", "-m", help="mask (<NAME>), tag (<NAME_1>, consistent per value) or pseudonym (consistent fake values)."),
    types: Optional[str] = typer.Option(None, "--types", "-t", help="Comma-separated PII types to scrub (default: every identifier, see docs/guide/scrubbing.md; Presidio names accepted). Opt-in: ORGANIZATION, BLOOD_PRESSURE, HEIGHT, WEIGHT. Nothing else is replaced."),
    text_field: str = typer.Option("text", "--text-field", help="JSON field / CSV column holding the text."),
    fmt: Optional[str] = typer.Option(None, "--format", help="jsonl, csv or text (default: from the file extension)."),
    seed: Optional[str] = typer.Option(None, "--seed", metavar="KEY", help="Key of the pseudonyms: 32 hexadecimal digits (128 bits), to get the same fakes again; keep it secret (default: a random key, not kept)."),
    no_ner: bool = typer.Option(False, "--no-ner", help="No spaCy NER: faster; names only next to cue words or from the given-name list."),
    score_threshold: float = typer.Option(0.4, "--score-threshold", min=0.0, max=1.0, help="Drop detections below this Presidio confidence (0-1)."),
    max_record_chars: int = typer.Option(L.MAX_SCRUB_RECORD_CHARS, "--max-record-chars", min=1, help="Refuse, before any work, a record longer than this many characters (scrubbing reads about 14 KB a second on one core)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as one JSON object."),
) -> None:
    """Scrub PII from a corpus file (Presidio + spaCy NER + regex recognizers; offline).

    Only the PII types of --types are replaced (default: the identifiers in docs/guide/scrubbing.md): a secret
    that is no PII type (a passphrase, a password, a security answer) stays in the text."""
    from ..defenses.commands import scrub_file

    if str(mode).strip().lower() in ("mask", "tag"):  # an unknown mode gets its own message from scrub_file
        refuse_unused(ctx, ("seed",), f"seeds the pseudonyms, and --mode {str(mode).strip().lower()} makes none")
    if is_text_format(in_path, fmt):
        refuse_unused(ctx, ("text_field",), f"{in_path} is read as plain text (one record per line, no fields)")
    try:
        with end_cleanly_on_signals():
            report = scrub_file(in_path, out_path, mode=mode, labels=types, text_field=text_field, fmt=fmt,
                                seed=seed, ner=not no_ner, score_threshold=score_threshold,
                                max_record_chars=max_record_chars)
    except KeyboardInterrupt as exc:
        interrupted_without_output(exc, out_path)
    if as_json:
        out.print_json(json.dumps(report.to_dict()))
    else:
        err.print(escape_control(report.summary()), markup=False, highlight=False, soft_wrap=True)


def dedup(
    ctx: typer.Context,
    in_path: Path = typer.Argument(..., metavar="IN", help="Corpus file: JSONL/JSON, CSV/TSV or text (one record per line)."),
    out_path: Path = typer.Argument(..., metavar="OUT", help="Deduplicated copy, same format (first occurrence kept; written atomically with mode 0600; not IN)."),
    method: str = typer.Option("both", "--method", help="exact (normalised hash), near (MinHash LSH) or both (exact, then near)."),
    threshold: float = typer.Option(0.8, "--threshold", max=1.0, help="Jaccard similarity (0-1] at or above which a record is a near duplicate."),
    num_perm: int = typer.Option(128, "--num-perm", min=16, max=L.MAX_NUM_PERM, help=f"MinHash permutations (16 to {L.MAX_NUM_PERM})."),
    shingle: str = typer.Option("char", "--shingle", help="char (character n-grams) or word (word n-grams)."),
    ngram: Optional[int] = typer.Option(None, "--ngram", min=1, max=L.MAX_NGRAM, help="Shingle size (default 5 for char, 3 for word)."),
    ignore_punctuation: bool = typer.Option(False, "--ignore-punctuation", help="Treat texts differing only in punctuation as duplicates."),
    seed: int = typer.Option(0, "--seed", min=0, max=MAX_SEED, help="MinHash seed."),
    text_field: str = typer.Option("text", "--text-field", help="JSON field / CSV column holding the text."),
    fmt: Optional[str] = typer.Option(None, "--format", help="jsonl, csv or text (default: from the file extension)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as one JSON object."),
) -> None:
    """Remove exact and near-duplicate records (canary repeats are exactly such duplicates)."""
    from ..defenses.commands import dedup_file

    if not threshold > 0.0:
        raise UserError(f"dedup --threshold {threshold:g}: must be in (0, 1]; try 0.8")
    # Enum values are matched in any case and used in lower case (the project's rule: docs/guide/commands.md).
    method, shingle = str(method).strip().lower(), str(shingle).strip().lower()
    if method == "exact":
        refuse_unused(ctx, ("threshold", "num_perm", "shingle", "ngram", "seed"),
                      "set the near-duplicate (MinHash) pass, which --method exact does not run")
    if is_text_format(in_path, fmt):
        refuse_unused(ctx, ("text_field",), f"{in_path} is read as plain text (one record per line, no fields)")
    report = dedup_file(in_path, out_path, method=method, threshold=threshold, num_perm=num_perm,
                        shingle=shingle, ngram=ngram, seed=seed, ignore_punctuation=ignore_punctuation,
                        text_field=text_field, fmt=fmt)
    if as_json:
        out.print_json(json.dumps(report.to_dict()))
    else:
        err.print(escape_control(report.summary()), markup=False, highlight=False, soft_wrap=True)


def report(
    run_dir: Path = typer.Argument(..., metavar="RUN_DIR", help="Run directory (or its results.json) written by `privleak run`."),
    out_path: Optional[Path] = typer.Option(None, "--out", "-o", help="HTML file to write (default: RUN_DIR/report.html)."),
    show_pii: bool = typer.Option(False, "--show-pii", help="Show leaked PII unmasked; the page then carries a warning banner. Do not share it."),
) -> None:
    """Re-render a run's self-contained HTML report from its results.json."""
    from ..core.io import check_output_file
    from ..pipeline.rundir import RunDir
    from ..report.schema import read_results_json

    rd = Path(run_dir).expanduser()
    base, source = (rd, rd / "results.json") if rd.is_dir() else (rd.parent, rd)
    # A missing, malformed or over-limit results.json: its own one line, before the output is looked at and
    # before the results model (and torch with it) is imported.
    read_results_json(source)
    check_output_file(out_path if out_path is not None else base / "report.html", [source], option="--out")
    # Not while a run writes that directory; a folder no run holds (results.json copied there) gets no lock file.
    with RunDir.locked(base, create=False):
        from ..report.html import write_report

        path = write_report(run_dir, show_pii=show_pii, out=out_path)
    if show_pii:
        err.print("[red]warning:[/red] the report shows PII unmasked; do not share or publish it")
    err.print(f"report: {shown(path)}")


def compare(
    run_dirs: list[Path] = typer.Argument(..., metavar="RUN_DIR...", help="Two or more run directories (or results.json files)."),
    out_path: Path = typer.Option(Path("compare.html"), "--out", "-o", help="HTML file to write."),
) -> None:
    """Compare runs side by side in one self-contained HTML page."""
    from ..core.io import check_output_file
    from ..report.schema import read_results_json

    if len(run_dirs) < 2:
        raise UserError("compare: give at least two run directories, e.g. privleak compare runs/a runs/b")
    sources = [p / "results.json" if p.is_dir() else p for p in (Path(r).expanduser() for r in run_dirs)]
    seen: dict[str, Path] = {}
    for given, source in zip(run_dirs, sources):
        key = os.path.realpath(source)
        if key in seen:
            raise UserError(f"compare: {seen[key]} and {given} are the same run ({key}); compare two different runs")
        seen[key] = Path(given)
    check_output_file(out_path, sources, option="--out")
    for source in sources:  # malformed or over-limit files: one line before torch loads with the results model
        read_results_json(source)
    from contextlib import ExitStack

    from ..pipeline.rundir import RunDir
    from ..report.compare import write_compare

    # Not while a run writes one of them (as `report`): a folder no run holds gets no lock file.
    with ExitStack() as stack:
        for folder in dict.fromkeys(os.path.realpath(source.parent) for source in sources):
            stack.enter_context(RunDir.locked(folder, create=False))
        path = write_compare(run_dirs, out_path)
    err.print(f"comparison: {shown(path)}")


def accountant(
    sample_rate: float = typer.Option(..., "--sample-rate", "-q", max=1.0, help="Poisson sampling rate q = expected batch / n, 0 < q ≤ 1."),
    steps: int = typer.Option(..., "--steps", "-T", min=1, help="Number of DP-SGD steps."),
    delta: float = typer.Option(..., "--delta", help="Target δ, 0 < δ < 1."),
    sigma: Optional[float] = typer.Option(None, "--sigma", help="Noise multiplier (> 0): report ε."),
    epsilon: Optional[float] = typer.Option(None, "--epsilon", help="Target ε (> 0): report the σ each accountant needs."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """ε for (q, σ, T, δ) — or σ for a target ε — by RDP, PLD and PRV side by side."""
    from ..accountants import epsilons, sigmas

    if (sigma is None) == (epsilon is None):
        raise UserError("accountant: give exactly one of --sigma (to get ε) or --epsilon (to get σ)")
    if not 0.0 < sample_rate <= 1.0:
        raise UserError(f"accountant --sample-rate {sample_rate:g}: q must satisfy 0 < q ≤ 1 (expected batch / n); try 0.01")
    if not 0.0 < delta < 1.0:
        raise UserError(f"accountant --delta {delta:g}: δ must satisfy 0 < δ < 1; try 1e-5")
    for flag, value in (("--sigma", sigma), ("--epsilon", epsilon)):
        if value is not None and not (value > 0 and math.isfinite(value)):
            raise UserError(f"accountant {flag} {value:g}: must be a finite number > 0; try 1.0")
    flags = {"noise_multiplier": "--sigma", "sample_rate": "--sample-rate", "steps": "--steps", "delta": "--delta",
             "target_epsilon": "--epsilon"}
    try:
        r = (epsilons(sample_rate=sample_rate, noise_multiplier=sigma, steps=steps, delta=delta) if sigma is not None
             else sigmas(target_epsilon=epsilon, delta=delta, sample_rate=sample_rate, steps=steps))
    except UserError as exc:  # the library names its keywords; the user typed flags
        msg = str(exc)
        for kw, flag in flags.items():
            msg = msg.replace(f"{kw}=", f"{flag} ").replace(f"{kw} ", f"{flag} ")
        raise UserError(f"accountant: {msg}") from None
    if sigma is not None:
        payload = {"sample_rate": sample_rate, "sigma": sigma, "steps": steps, "delta": delta,
                   "epsilon_rdp": r.epsilon_rdp, "epsilon_pld": r.epsilon_pld, "epsilon_prv": r.epsilon_prv}
        label = "ε"
    else:
        payload = {"sample_rate": sample_rate, "epsilon": epsilon, "steps": steps, "delta": delta,
                   "sigma_rdp": r.noise_multiplier_rdp, "sigma_pld": r.noise_multiplier_pld,
                   "sigma_prv": r.noise_multiplier_prv}
        label = "σ"
    if as_json:
        out.print_json(json.dumps(payload))
        return
    out.print(f"q={sample_rate:g} T={steps} δ={delta:g} " + (f"σ={sigma:g}" if sigma is not None else f"target ε={epsilon:g}"))
    for k, v in payload.items():
        if k.startswith(("epsilon_", "sigma_")):
            out.print(f"  {label} {k.split('_', 1)[1].upper():4s} {v:.4f}")


def ldp(
    ctx: typer.Context,
    in_path: Path = typer.Argument(..., metavar="FILE", help="Corpus file: JSONL, CSV/TSV or text (one record = one user)."),
    epsilons: str = typer.Option("1,2,4,8", "--epsilons", help="Comma-separated ε per user report, e.g. 1,2,4,8."),
    methods: str = typer.Option("cms,hcms", "--methods", help="cms (Count Mean Sketch), hcms (Hadamard CMS), or both."),
    top_k: int = typer.Option(50, "--top", min=1, max=L.MAX_RECORDS, help="K of the top-K terms scored (precision / recall vs exact counts)."),
    rows: int = typer.Option(128, "--k", min=1, max=L.MAX_SKETCH_ROWS, help="Sketch rows k (hash functions)."),
    cols: int = typer.Option(1024, "--m", min=2, max=L.MAX_SKETCH_COLS, help="Sketch columns m (a power of two for hcms)."),
    ngram: int = typer.Option(1, "--ngram", min=1, max=5, help="Word n-grams (1 = terms)."),
    dictionary: Optional[Path] = typer.Option(None, "--dictionary", help="Candidate terms the server scores, one per line (default: every term of FILE)."),
    text_field: str = typer.Option("text", "--text-field", help="JSON field / CSV column holding the text."),
    fmt: Optional[str] = typer.Option(None, "--format", help="jsonl, csv or text (default: from the file extension)."),
    seed: int = typer.Option(0, "--seed", min=0, max=MAX_SEED, help="Seed for the sketches' hashes and the users' randomised reports."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Term frequencies under local DP (CMS / Hadamard CMS, Apple 2017): top-K precision/recall at several ε."""
    eps = parse_epsilons(epsilons, "--epsilons")
    if is_text_format(in_path, fmt):
        refuse_unused(ctx, ("text_field",), f"{in_path} is read as plain text (one record per line, no fields)")
    if not eps:
        raise UserError(f"ldp --epsilons {epsilons!r}: give at least one ε, e.g. 1,2,4,8")
    names = [x.strip().lower() for x in methods.split(",") if x.strip()]
    bad = [x for x in names if x not in ("cms", "hcms")]
    if bad or not names:
        raise UserError(f"ldp --methods {methods}: unknown method {bad[0] if bad else '(none)'}; use cms, hcms or cms,hcms")
    if "hcms" in names and cols & (cols - 1):
        raise UserError(f"ldp --m {cols}: HCMS needs a power of two (the Hadamard size); try 1024")
    if fmt is not None and fmt not in ("jsonl", "csv", "text"):
        raise UserError(f"ldp --format {fmt}: use jsonl, csv or text")
    words = None
    if dictionary is not None:
        from ..data.loaders import read_text_file

        if not dictionary.is_file():
            raise UserError(f"ldp --dictionary {dictionary}: no such file; give a text file with one term per line")
        words = [w.strip().lower() for w in read_text_file(dictionary).text.splitlines() if w.strip()]
        if not words:
            raise UserError(f"ldp --dictionary {dictionary}: no terms in it; give one term per line")
    from ..data.loaders import load_corpus
    from ..defenses.ldp_terms import evaluate

    records = load_corpus(in_path, text_field=text_field, fmt=fmt)
    # The server's k × m sketch, and k hash positions per user report and per candidate term (8 B each).
    L.check_fits("--k × (--m + records + dictionary terms)",
                 rows * (cols + len(records) + (len(words) if words is not None else 4 * len(records))), 8)
    ev = evaluate([r.text for r in records], eps, methods=names, top_k=top_k, k=rows, m=cols, seed=seed, ngram=ngram,
                  dictionary=words)
    if as_json:
        out.print_json(json.dumps(ev.to_dict()))
        return
    from rich.table import Table

    t = Table(title=f"Top-{top_k} {'terms' if ngram == 1 else f'{ngram}-grams'} under local DP: {ev.n_users_reporting:,} "
                    f"users reporting of {ev.n_records:,} records, {ev.dictionary_size:,} candidates ({ev.dictionary}), "
                    f"k={rows}, m={cols}")
    for col in ("method", "ε per user", "precision", "recall", "noise sd (users)", "bits sent / user"):
        t.add_column(col, justify="left" if col == "method" else "right")
    for s in ev.scores:
        t.add_row(s.method.upper(), f"{s.epsilon:g}", f"{s.precision:.2f}", f"{s.recall:.2f}", f"{s.noise_sd:.1f}",
                  f"{s.total_bits:g} ({s.payload_bits:g} + {s.index_bits:g} index)")
    t.add_row("none (counting the samples exactly)", "∞", f"{ev.sampling_only_precision:.2f}",
              f"{ev.sampling_only_recall:.2f}", "0", "—")
    out.print(t)
    err.print(f"rule: {ev.rule}", markup=False, highlight=False, soft_wrap=True)


def budget(
    run_dirs: list[Path] = typer.Argument(..., metavar="RUN_DIR...", help="Run directories (the --out of privleak run) whose DP trainings to compose: their budget/ledger.jsonl."),
    release: Optional[str] = typer.Option(None, "--release", help="Comma-separated arm names you release together, e.g. dp-1,dp-8: their composed ε."),
    cache: bool = typer.Option(True, "--cache/--no-cache", help="Also count every other DP training on the same members recorded in this machine's model cache (tuning runs, earlier audits)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON array (one object per group of trainings sharing people)."),
) -> None:
    """The privacy budget spent on the same people across runs: each DP training alone, the arms you release
    together, and everything trained, composed per record and per person (PLD), whatever unit each training's
    own accountant states."""
    # Everything here is checked and read without torch (the ledger, its people files and the accountants do
    # not import it), so a refusal is one line in well under a second; the arguments, and a ledger that breaks
    # before its first line's ε is checked, are refused before the accountants (dp_accounting and scipy, over a
    # second) are even imported.
    for rd in run_dirs:
        if not Path(rd).expanduser().is_dir():
            raise UserError(f"{rd}: not a run directory; give the --out directory of a privleak run")
    wanted = [a.strip() for a in release.split(",") if a.strip()] if release is not None else None
    if wanted is not None and not wanted:
        raise UserError("--release: name at least one arm, e.g. --release dp-1,dp-8")
    from ..pipeline.budget import budget as compose, budget_tables
    from ..pipeline.ledger import LedgerReader, ledger_entries

    reader = LedgerReader()
    entries = ledger_entries(run_dirs, cache=cache, reader=reader)
    if not entries:
        raise UserError("no DP training is recorded in these run directories (budget/ledger.jsonl); "
                        "run an audit with a DP arm first")
    # A run's results.json is its record too: one that was edited is refused as `report` refuses it (the ledger's
    # own problems first, without torch; the results model brings it).
    results = [p for p in (Path(rd).expanduser() / "results.json" for rd in run_dirs) if p.is_file()]
    if results:
        from ..report.schema import load_results

        for p in results:
            load_results(p)
    groups = compose(entries, release=wanted, reader=reader)
    if as_json:
        out.print_json(json.dumps([g.model_dump(mode="json") for g in groups]))
        return
    from rich.markup import escape as markup_escape
    from rich.table import Table as RichTable

    for t in budget_tables(groups):
        rt = RichTable(title=markup_escape(escape_control(t.console_title or t.caption or "")))
        for i, col in enumerate(t.columns):
            rt.add_column(col, justify="left" if i < 3 else "right")
        for row in t.rows:  # arm and run names come from files: shown, never obeyed
            rt.add_row(*[markup_escape(escape_control(str(getattr(c, "text", c)))) for c in row])
        out.print(rt)
    for g in groups:
        for note in g.notes:
            err.print(f"note: {escape_control(note)}", markup=False, highlight=False, soft_wrap=True)
