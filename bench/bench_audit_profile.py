"""The audit profiled: where the default audit's time goes, stage by stage, in one run.

Runs an audit's task graph in this process, one task after another at
``--threads`` torch threads (the process executor's workers run one thread
each), and times every task: wall seconds and CPU seconds (user + system of
this process, which on a shared machine counts the work done rather than the
neighbours' load). Then prints, from that one run:

* every stage's wall and CPU seconds;
* every trained arm's training tokens per CPU second (tokens from its
  ``train.json``: records × epochs run, as the issue's table counts them)
  beside the non-private ``baseline``'s, and the ratio — the in-situ DP
  overhead;
* every evaluated model's seconds per evaluation family (utility,
  membership, canaries, extraction, PII, the kind's own stages) and, from
  the stages' own timers, per attack.

Defaults: the ``quick`` profile's default audit (what ``make run`` runs) from a
fresh model cache under ``--out``. ``--scale`` shrinks the synthetic corpus
(every split × the factor) for a quicker look; ratios hold, absolute seconds
do not. ``--cprofile NAME`` runs the tasks whose name starts with NAME under
cProfile and writes ``<out>/cprofile-<task>.txt`` (top functions by own and
cumulative time)::

    python bench/bench_audit_profile.py                          # the default audit (≈ 15-20 CPU-min)
    python bench/bench_audit_profile.py --scale 0.25 --arms baseline,dp-8
    python bench/bench_audit_profile.py --profile smoke          # the smoke profile
    python bench/bench_audit_profile.py --scale 0.25 --cprofile train/dp-8 --cprofile canaries/

Nothing is asserted: it prints the table the issue asks for (issue 29).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import resource
import shutil
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

os.environ.setdefault("PRIVLEAK_PROGRESS", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class TimedSequential:
    """The sequential executor, timing every task it runs (wall and CPU) and profiling those asked for."""

    name = "sequential"

    def __init__(self, cprofile: list[str], out: Path) -> None:
        self.times: dict[str, tuple[float, float]] = {}
        self.cprofile, self.out = cprofile, out

    def run(self, graph, audit) -> None:
        for task in graph.tasks:
            body = partial(task.run, audit)
            prof = cProfile.Profile() if any(task.name.startswith(p) for p in self.cprofile) else None
            w0, c0 = time.perf_counter(), cpu_seconds()
            if prof is not None:
                prof.enable()
            audit.stage(task.name, task.key, body)
            if prof is not None:
                prof.disable()
                buf = io.StringIO()
                for order in ("tottime", "cumulative"):
                    pstats.Stats(prof, stream=buf).sort_stats(order).print_stats(40)
                (self.out / f"cprofile-{task.name.replace('/', '_')}.txt").write_text(buf.getvalue())
            self.times[task.name] = (time.perf_counter() - w0, cpu_seconds() - c0)

    def close(self) -> None:
        pass


def scaled(n: int, scale: float) -> int:
    return max(10, int(round(n * scale)))


def build(args: argparse.Namespace):
    from privleak.config import SyntheticConfig, build_config

    over: dict = {"profile": args.profile, "seed": args.seed, "device": "cpu"}
    if args.arms:
        over["arms"] = [a.strip() for a in args.arms.split(",") if a.strip()]
    file_data: dict = {}
    if args.config:
        from privleak.config import read_config_file

        file_data = read_config_file(args.config)
    if args.scale != 1.0:
        prof = build_config(file_data, over).data.synthetic
        fields = [f for f in SyntheticConfig.model_fields if f.startswith("n_")]
        over.setdefault("data", {})["synthetic"] = {f: scaled(getattr(prof, f), args.scale) for f in fields}
    return build_config(file_data, over)


def table(title: str, header: list[str], rows: list[list]) -> str:
    cells = [[str(c) for c in r] for r in [header, *rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = [title, "  ".join(h.ljust(w) for h, w in zip(cells[0], widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in cells[1:]]
    return "\n".join(lines)


def report(out: Path, times: dict[str, tuple[float, float]], threads: int) -> str:
    from privleak.attacks.base import FAMILIES

    parts = []
    total_w = sum(w for w, _ in times.values())
    total_c = sum(c for _, c in times.values())
    parts.append(table(f"Stages ({threads} torch thread(s); wall and CPU = user+sys seconds)", ["stage", "wall s", "CPU s"],
                       [[n, f"{w:.1f}", f"{c:.1f}"] for n, (w, c) in times.items()]
                       + [["total", f"{total_w:.1f}", f"{total_c:.1f}"]]))
    # training throughput
    rows, ref = [], None
    arms_dir = out / "run" / "arms"
    train = {}
    for name in times:
        if name.startswith("train/"):
            arm = name.split("/", 1)[1]
            rec = json.loads((arms_dir / arm / "train.json").read_text())
            train[arm] = (rec.get("tokens", 0), *times[name], rec)
    if "baseline" in train:
        ref = train["baseline"][0] / max(train["baseline"][2], 1e-9)
    for arm, (tokens, w, c, rec) in train.items():
        tps = tokens / max(c, 1e-9)
        priv = rec.get("privacy") or {}
        rows.append([arm, f"{tokens:,}", f"{w:.1f}", f"{c:.1f}", f"{tokens / max(w, 1e-9):,.0f}", f"{tps:,.0f}",
                     f"{tps / ref:.2f}" if ref else "-", rec.get("steps", "-"),
                     f"q={priv['sample_rate']:.3f}" if priv else ""])
    parts.append(table("Training: tokens per second (tokens = records × epochs run); ratio = tokens/CPU-s ÷ baseline's",
                       ["arm", "tokens", "wall s", "CPU s", "tok/wall-s", "tok/CPU-s", "÷ baseline", "steps", ""], rows))
    # evaluation per model
    models: dict[str, dict[str, float]] = {}
    extra_names = set()
    for name, (_, c) in times.items():
        stage, _, model = name.partition("/")
        if stage == "utility" or stage in FAMILIES or (model and (arms_dir / model).exists() and stage not in
                                                          ("train", "derive", "shadow", "defend")):
            models.setdefault(model, {})[stage] = c
            if stage != "utility" and stage not in FAMILIES:
                extra_names.add(stage)
    cols = ["utility", *FAMILIES, *sorted(extra_names)]
    rows = [[m, *[f"{v[c]:.1f}" if c in v else "-" for c in cols], f"{sum(v.values()):.1f}"] for m, v in models.items()]
    parts.append(table("Evaluation: CPU seconds per model and family", ["model", *cols, "total"], rows))
    # per attack, from the stages' own timers (wall)
    attack_rows = []
    for m in models:
        for fam in FAMILIES:
            p = arms_dir / m / "attacks" / f"{fam}.json"
            if p.exists():
                secs = json.loads(p.read_text()).get("seconds", {})
                attack_rows.append([m, fam, "  ".join(f"{k} {v:.1f}" for k, v in secs.items())])
    parts.append(table("Per attack (wall seconds, the runner's own timers)", ["model", "family", "attacks"], attack_rows))
    return "\n\n".join(parts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="quick", help="quick (default), smoke, full")
    ap.add_argument("--config", help="a YAML/TOML audit config layered over the profile")
    ap.add_argument("--arms", help="comma-separated arms (default: the profile's)")
    ap.add_argument("--scale", type=float, default=1.0, help="synthetic corpus × this factor (default 1)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1, as a process-executor worker)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="run directory (default: a temporary one, removed after)")
    ap.add_argument("--cache", help="model cache (default: a fresh one under --out, so the base model is trained)")
    ap.add_argument("--cprofile", action="append", default=[], help="profile tasks whose name starts with this")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="privleak-profile-"))
    out.mkdir(parents=True, exist_ok=True)
    os.environ["PRIVLEAK_CACHE"] = args.cache or str(out / "cache")
    from privleak.pipeline import run_audit

    cfg = build(args)
    ex = TimedSequential(args.cprofile, out)
    w0, c0 = time.perf_counter(), cpu_seconds()
    run_audit(cfg, out / "run", executor=ex)
    wall, cpu = time.perf_counter() - w0, cpu_seconds() - c0
    text = report(out, ex.times, args.threads)
    text += f"\n\nwhole run: {wall:.1f} s wall, {cpu:.1f} s CPU (user+sys), profile {args.profile}, scale {args.scale:g}"
    print(text)
    (out / "profile.txt").write_text(text + "\n")
    if not args.out:
        shutil.rmtree(out, ignore_errors=True)
    else:
        print(f"run directory and profile.txt: {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
