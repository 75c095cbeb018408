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

from .core.errors import UserError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Audit language models for privacy leakage.")
data_app = typer.Typer(add_completion=False, no_args_is_help=True, help="Synthetic data.")
app.add_typer(data_app, name="data")
from .cli_guard import guard_app  # noqa: E402  (the output guard's sub-commands)

app.add_typer(guard_app, name="guard")

# Tables are wide: when output is a file or pipe, do not squeeze them into 80 columns.
out = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 160)


def _quiet_libraries() -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    logging.getLogger("opacus").setLevel(logging.ERROR)
    logging.getLogger("huggingface_hub").setLevel(logging.ERROR)
    # Presidio's debug lines quote the words around each detection: raw PII.
    logging.getLogger("presidio-analyzer").setLevel(logging.WARNING)
    logging.getLogger("presidio-anonymizer").setLevel(logging.WARNING)


def _parse_epsilons(text: str) -> list[float]:
    vals = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            v = float(part)
        except ValueError:
            raise UserError(f"--epsilons {text}: '{part}' is not a number; give a comma-separated list like 1,4,8") from None
        if not (v > 0 and math.isfinite(v)):
            raise UserError(f"--epsilons {text}: ε must be > 0 and finite, got {part}; give values like 1,4,8")
        vals.append(v)
    return vals


@app.command()
def run(
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="YAML or TOML audit config (see README)."),
    out_dir: Path = typer.Option(Path("runs/default"), "--out", "-o", help="Run directory (created; reused to resume)."),
    data: Optional[str] = typer.Option(None, "--data", help="Your corpus: JSONL, CSV, text (one record per line) or a saved HF dataset dir. Default: synthetic clinical notes."),
    text_field: Optional[str] = typer.Option(None, "--text-field", help="Field/column holding the text in JSONL/CSV/HF data (default 'text')."),
    model: Optional[str] = typer.Option(None, "--model", help="Base model: HF causal LM id or local directory. Default: the embedded model pre-trained on public synthetic text."),
    epsilons: Optional[str] = typer.Option(None, "--epsilons", help="Comma-separated ε for the DP-SGD arms, e.g. 1,4,8 (empty: no DP arms)."),
    arms: Optional[str] = typer.Option(None, "--arms", help="Comma-separated arms, e.g. baseline,dp-8,scrub,dp-8+scrub,dedup,guard (default: baseline, the dp-ε sweep, scrub, dp-<max ε>+scrub, guard)."),
    delta: Optional[float] = typer.Option(None, "--delta", help="δ for the DP arms (default 1/(10·n))."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed for data, training and attacks (default 0)."),
    profile: Optional[str] = typer.Option(None, "--profile", help="quick (default, ≤10 min on 2 cores) or full."),
    plant_canaries: bool = typer.Option(False, "--plant-canaries", help="Plant canaries into your corpus's members to measure exposure."),
) -> None:
    """Run (or resume) a privacy audit and write results.json."""
    from .config import build_config, read_config_file
    from .pipeline import run_audit
    from .report.console import all_tables, verdict_lines

    file_data = read_config_file(config) if config else {}
    over: dict[str, Any] = {}
    if profile is not None:
        over["profile"] = profile
    if seed is not None:
        over["seed"] = seed
    if data is not None:
        over.setdefault("data", {})["path"] = data
    if text_field is not None:
        over.setdefault("data", {})["text_field"] = text_field
    if plant_canaries:
        over.setdefault("data", {})["plant_canaries"] = True
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
    cfg = build_config(file_data, over)
    if cfg.data.path is not None and not Path(cfg.data.path).expanduser().exists():
        raise UserError(f"--data {cfg.data.path}: file does not exist; pass a JSONL, CSV, text file or saved dataset directory")
    results = run_audit(cfg, out_dir, notify=err.print)
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
    seed: int = typer.Option(0, "--seed"),
    n_public: int = typer.Option(3000, "--n-public"),
    n_members: int = typer.Option(1200, "--n-members"),
    n_non_members: int = typer.Option(1200, "--n-non-members"),
    n_population: int = typer.Option(1200, "--n-population"),
    phi_fraction: float = typer.Option(0.15, "--phi-fraction", help="Fraction of records that are notes about a patient."),
) -> None:
    """Write the synthetic clinical corpus (with exact PII spans and canaries) as JSONL."""
    from .data.clinical import ClinicalCorpusConfig, generate_corpus, write_corpus

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
    types: Optional[str] = typer.Option(None, "--types", "-t", help="Comma-separated PII types to scrub. Default NAME,EMAIL,SSN,PHONE,ADDRESS,DOB,MRN; also BLOOD_PRESSURE, HEIGHT, WEIGHT, CREDIT_CARD, IBAN, IP_ADDRESS, URL."),
    text_field: str = typer.Option("text", "--text-field", help="JSON field / CSV column holding the text."),
    fmt: Optional[str] = typer.Option(None, "--format", help="jsonl, csv or text (default: from the file extension)."),
    seed: int = typer.Option(0, "--seed", help="Seed for pseudonyms."),
    no_ner: bool = typer.Option(False, "--no-ner", help="Regex recognizers only: ~4x faster, finds names only next to cue words."),
    score_threshold: float = typer.Option(0.4, "--score-threshold", help="Drop detections below this Presidio confidence (0-1)."),
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
    threshold: float = typer.Option(0.8, "--threshold", help="Jaccard similarity at or above which a record is a near duplicate."),
    num_perm: int = typer.Option(128, "--num-perm", help="MinHash permutations."),
    shingle: str = typer.Option("char", "--shingle", help="char (character n-grams) or word (word n-grams)."),
    ngram: Optional[int] = typer.Option(None, "--ngram", help="Shingle size (default 5 for char, 3 for word)."),
    ignore_punctuation: bool = typer.Option(False, "--ignore-punctuation", help="Treat texts differing only in punctuation as duplicates."),
    seed: int = typer.Option(0, "--seed", help="MinHash seed."),
    text_field: str = typer.Option("text", "--text-field", help="JSON field / CSV column holding the text."),
    fmt: Optional[str] = typer.Option(None, "--format", help="jsonl, csv or text (default: from the file extension)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as one JSON object."),
) -> None:
    """Remove exact and near-duplicate records (canary repeats are exactly such duplicates)."""
    from .defenses.commands import dedup_file

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
    sample_rate: float = typer.Option(..., "--sample-rate", "-q", help="Poisson sampling rate q = expected batch / n."),
    steps: int = typer.Option(..., "--steps", "-T", help="Number of DP-SGD steps."),
    delta: float = typer.Option(..., "--delta", help="Target δ."),
    sigma: Optional[float] = typer.Option(None, "--sigma", help="Noise multiplier: report ε."),
    epsilon: Optional[float] = typer.Option(None, "--epsilon", help="Target ε: report the σ each accountant needs."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """ε for (q, σ, T, δ) — or σ for a target ε — by RDP, PLD and PRV side by side."""
    from .models import accounting as acc

    if (sigma is None) == (epsilon is None):
        raise UserError("accountant: give exactly one of --sigma (to get ε) or --epsilon (to get σ)")
    if sigma is not None:
        r = acc.epsilons(sample_rate, sigma, steps, delta)
        payload = {"sample_rate": sample_rate, "sigma": sigma, "steps": steps, "delta": delta,
                   "epsilon_rdp": r.epsilon_rdp, "epsilon_pld": r.epsilon_pld, "epsilon_prv": r.epsilon_prv}
        label = "ε"
    else:
        r = acc.sigmas(epsilon, delta, sample_rate, steps)
        payload = {"sample_rate": sample_rate, "epsilon": epsilon, "steps": steps, "delta": delta,
                   "sigma_rdp": r.sigma_rdp, "sigma_pld": r.sigma_pld, "sigma_prv": r.sigma_prv}
        label = "σ"
    if as_json:
        out.print_json(json.dumps(payload))
        return
    out.print(f"q={sample_rate:g} T={steps} δ={delta:g} " + (f"σ={sigma:g}" if sigma is not None else f"target ε={epsilon:g}"))
    for k, v in payload.items():
        if k.startswith(("epsilon_", "sigma_")):
            out.print(f"  {label} {k.split('_', 1)[1].upper():4s} {v:.4f}")


def main(argv: list[str] | None = None) -> None:
    _quiet_libraries()
    try:
        app(args=argv, standalone_mode=False)
    except UserError as exc:
        err.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err.print("interrupted: rerun the same command to resume where it stopped", soft_wrap=True)
        sys.exit(130)
    except SystemExit:
        raise
    except Exception as exc:  # click usage errors arrive here in non-standalone mode
        import click

        if isinstance(exc, click.exceptions.ClickException):
            err.print(f"error: {exc.format_message()}", markup=False, highlight=False, soft_wrap=True)
            sys.exit(2)
        if isinstance(exc, click.exceptions.Abort):
            sys.exit(130)
        raise


if __name__ == "__main__":
    main()
