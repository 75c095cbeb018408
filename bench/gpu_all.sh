#!/usr/bin/env bash
# Issue 14's GPU benchmarks in one go, each printing its ratios from one run:
#   bench/gpu_all.sh                       # --device cuda: the figures (GPT-2 small arch; the gpu profile's audit)
#   bench/gpu_all.sh --device cpu --tiny   # the smoke check on a machine without a GPU
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
if [ $# -eq 0 ]; then set -- --device cuda; fi
echo "== DP step ÷ non-private step (book-keeping, ghost, hooks, LoRA)"
$PY bench/bench_dp_step.py "$@"
echo "== scoring: batched pass ÷ per-record loop"
$PY bench/bench_scoring.py "$@"
echo "== the gpu profile's whole audit"
$PY bench/bench_gpu_audit.py "$@"
