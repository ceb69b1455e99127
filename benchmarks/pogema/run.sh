#!/usr/bin/env bash
# POGEMA lifelong warehouse yardstick: marlm's movement layer vs POGEMA's a_star_policy, beside
# the published per-seed means. Usage:
#   benchmarks/pogema/run.sh --agents 32,64,96,128,160,192 --seeds 0-15 --out results.jsonl
# (--agents / --seeds also take one value; extra options go to harness.py, see --help).
# A first argument naming another script of this folder runs that one instead, in the same
# environment, e.g.:
#   benchmarks/pogema/run.sh evaluate.py --agents 128 --seeds 0-127 --out eval.jsonl
# --out's folder is created when it does not exist.
# POGEMA 1.4.0 pins gymnasium 0.28.1, pydantic<2 and numpy<=1.26.4, so it gets its own virtual
# environment, created on first use outside the repository: $MARLM_POGEMA_VENV, default
# ~/.cache/marlm-pogema-venv. Writes results.jsonl, then results.md (table) and results.png (plot).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${MARLM_POGEMA_VENV:-$HOME/.cache/marlm-pogema-venv}"
PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import pogema, numba, matplotlib" 2>/dev/null; then
  echo "creating POGEMA's environment in $VENV" >&2
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q "pogema==1.4.0" "numpy<=1.26.4" numba matplotlib
fi
SCRIPT="harness.py"
if [ $# -gt 0 ] && [[ "$1" == *.py ]]; then
  SCRIPT="$(basename "$1")"
  shift
  if [ ! -f "$HERE/$SCRIPT" ]; then
    echo "run.sh: error: no script $SCRIPT in $HERE (e.g. harness.py, evaluate.py, families.py)" >&2
    exit 2
  fi
fi
OUT=""
ARGS=("$@")
for ((i = 0; i < ${#ARGS[@]}; i++)); do
  if [ "${ARGS[$i]}" = "--out" ] && [ $((i + 1)) -lt ${#ARGS[@]} ]; then OUT="${ARGS[$((i + 1))]}"; fi
  if [[ "${ARGS[$i]}" == --out=* ]]; then OUT="${ARGS[$i]#--out=}"; fi
done
if [ -n "$OUT" ]; then
  mkdir -p "$(dirname "$OUT")"
fi
"$VENV/bin/python" "$HERE/$SCRIPT" "$@"
if [ -n "$OUT" ] && { [ "$SCRIPT" = harness.py ] || [ "$SCRIPT" = evaluate.py ]; }; then
  "$VENV/bin/python" "$HERE/report.py" "$OUT"  # the table and plot of their rows
fi
