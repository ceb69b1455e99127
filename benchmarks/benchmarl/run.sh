#!/usr/bin/env bash
# marlm's learners beside BenchMARL's on the tasks of tasks.py: same task, steps, seeds and
# evaluation schedule. Usage:
#   benchmarks/benchmarl/run.sh simple_spread|rware_tiny_2ag [SEEDS, default 0,1,2] [OUT] [ALGORITHMS]
# ALGORITHMS is a comma-separated list of mappo and qmix (default mappo; QMIX runs on simple_spread).
# BenchMARL 1.5.2 (TorchRL 0.11, tensordict 0.11) gets its own virtual environment, created on
# first use outside the repository: $MARLM_BENCHMARL_VENV, default /tmp/benchmarl-venv, with the
# machine's CPU build of torch 2.13.0 pinned so that pip takes no CUDA build. The two sides run
# one after the other per seed and algorithm, under nice, so both meet the same machine load;
# then report.py prints the tables. OUT (default /tmp/benchmarl-results.jsonl) is appended to,
# never replaced.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
TASK="${1:?usage: run.sh simple_spread|rware_tiny_2ag [SEEDS] [OUT] [ALGORITHMS]}"
SEEDS="${2:-0,1,2}"
OUT="${3:-/tmp/benchmarl-results.jsonl}"
ALGORITHMS="${4:-mappo}"
VENV="${MARLM_BENCHMARL_VENV:-/tmp/benchmarl-venv}"
PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import benchmarl, mpe2, rware" 2>/dev/null; then
  echo "creating BenchMARL's environment in $VENV" >&2
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q "torch==2.13.0" "benchmarl==1.5.2" "mpe2==1.1.1" "rware==2.0.0"
fi
MARLM_PY="${MARLM_PYTHON:-$ROOT/.venv/bin/python}"
export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}"
# One CPU thread on both sides (each script sets these too, before importing torch).
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
IFS=',' read -ra SEED_LIST <<< "$SEEDS"
IFS=',' read -ra ALGORITHM_LIST <<< "$ALGORITHMS"
for s in "${SEED_LIST[@]}"; do
  for a in "${ALGORITHM_LIST[@]}"; do
    nice -n 10 "$MARLM_PY" "$HERE/marlm_side.py" --task "$TASK" --algorithm "$a" --seeds "$s" --out "$OUT"
    nice -n 10 "$VENV/bin/python" "$HERE/benchmarl_side.py" --task "$TASK" --algorithm "$a" --seeds "$s" --out "$OUT"
  done
done
"$MARLM_PY" "$HERE/report.py" "$OUT"
