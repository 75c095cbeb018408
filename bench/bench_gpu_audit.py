"""The GPU profile's whole audit: wall time against the 30-minute target, stage by stage.

Runs ``privleak run --profile gpu`` (GPT-2-small-sized base pre-trained on the
larger public split, every kind of arm, LiRA / RMIA with 8 shadows per trained
arm) in a fresh run directory and model cache, so nothing is reused, then
prints the time of each stage group (data, base model, arms, shadows, attacks,
…) from the run's stage markers, the total, and the total ÷ 30 min.

    python bench/bench_gpu_audit.py --device cuda          # the figure (H100/H200: target ≤ 30 min)
    python bench/bench_gpu_audit.py --device cpu --tiny    # smoke check here: the same profile on tiny sizes

``--tiny`` keeps the profile's structure (every arm, shadows on every trained
arm) but shrinks the corpus, the model (1 layer, 32 wide) and the shadows (2)
and leaves out the PII attacks (run at the paper's sizes by this profile), so
it checks that the profile runs end to end, not how long it takes.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("PRIVLEAK_PROGRESS", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

TARGET_S = 30 * 60

TINY = {
    "data": {"synthetic": {"n_public": 240, "n_members": 120, "n_non_members": 120, "n_population": 20,
                           "n_public_heldout": 40, "phi_fraction": 0.5}},
    "canaries": {"repeats": [1, 8], "per_repeat": 1, "candidates": 200},
    "model": {"max_length": 160, "embedded": {"n_layer": 1, "n_embd": 32, "n_head": 2, "epochs": 1, "vocab_size": 400}},
    "train": {"epochs": 2, "batch_size": 16},
    "dp": {"epsilons": [8], "epochs": 1, "batch_size": 24},
    # The profile runs the PII attacks at the paper's sizes (1,000 samples, |C| = 64), minutes per model on a
    # CPU: the smoke check leaves them out (they run on the device through the same generation and scoring).
    "attacks": {"bootstrap": 10, "extraction_samples": 20, "prefix_records": 10, "phi_records": 5, "pii": False},
    "one_run": {"canaries": 40, "prefix_words": 2, "secret_words": 3},
    "shadows": {"n_shadows": 2},
}


def _group(stage: str) -> str:
    """Stage marker name → a coarse group for the summary."""
    name = stage.replace("_", "/")
    if "shadow" in name:
        return "shadows"
    for prefix, group in (("train", "arms"), ("arm", "arms"), ("base", "base model"), ("data", "data"),
                          ("attack", "attacks"), ("utility", "utility"), ("guard", "guard"), ("blind", "blind baseline"),
                          ("scrub", "data defences"), ("dedup", "data defences"),
                          ("defend", "data defences"), ("noise", "arms")):
        if name.startswith(prefix):
            return group
    return name.split("/")[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu")
    ap.add_argument("--tiny", action="store_true", help="smoke check: the gpu profile on tiny sizes")
    ap.add_argument("--out", help="run directory (default: a fresh temporary one)")
    ap.add_argument("--keep-cache", action="store_true", help="reuse ~/.cache/privleak (base model) instead of a fresh one")
    args = ap.parse_args()
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("bench_gpu_audit: --device cuda but no CUDA device is available; skipped.")
        return
    import yaml

    from privleak.cli import main as cli

    with tempfile.TemporaryDirectory(prefix="privleak-gpu-audit-") as tmp:
        if not args.keep_cache:
            os.environ["PRIVLEAK_CACHE"] = str(Path(tmp) / "cache")
        out = Path(args.out) if args.out else Path(tmp) / "run"
        argv = ["run", "--profile", "gpu", "--device", args.device, "--out", str(out)]
        if args.tiny:
            cfg = Path(tmp) / "tiny.yaml"
            cfg.write_text(yaml.safe_dump(TINY))
            argv += ["--config", str(cfg)]
        t0 = time.perf_counter()
        try:
            cli(argv)
        except SystemExit as exc:
            if exc.code not in (0, None):
                raise
        total = time.perf_counter() - t0
        groups: dict[str, float] = collections.defaultdict(float)
        counts: collections.Counter[str] = collections.Counter()
        for marker in sorted((out / "stages").glob("*.json")):
            g = _group(marker.stem)
            groups[g] += float(json.loads(marker.read_text()).get("duration_s", 0.0))
            counts[g] += 1
        results = json.loads((out / "results.json").read_text())
        cfg = results["config"]
    arms = list(results["arms"])
    n_shadow = cfg["shadows"]["n_shadows"] if cfg["shadows"]["enabled"] else 0
    print(f"gpu profile{' (tiny sizes)' if args.tiny else ''} on {args.device}"
          f"{f' ({torch.cuda.get_device_name(0)})' if args.device.startswith('cuda') else ''}: "
          f"{len(arms)} arms ({', '.join(arms)}), {n_shadow} shadows per trained arm, "
          f"base {cfg['model']['embedded']['n_layer']} layers × {cfg['model']['embedded']['n_embd']} wide")
    for g, s in sorted(groups.items(), key=lambda kv: -kv[1]):
        print(f"  {g:<16} {counts[g]:>4} stages {s:>9.1f} s  {s / total:>6.1%}")
    print(f"whole audit: {total:.1f} s = {total / 60:.1f} min; ÷ 30-min target: {total / TARGET_S:.2f}x")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
