#!/usr/bin/env bash
# Train the learned guidance for a POGEMA map (CMA-ES, seeds 128 and up; see train.py --help):
#   benchmarks/pogema/train.sh --map wfi_warehouse --agents 32,96,192 --seeds 128-130
# Uses POGEMA's own virtual environment, as run.sh ($MARLM_POGEMA_VENV, created on first use).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${MARLM_POGEMA_VENV:-$HOME/.cache/marlm-pogema-venv}"
PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import pogema, numba, matplotlib, cmaes" 2>/dev/null; then
  echo "creating POGEMA's environment in $VENV" >&2
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q "pogema==1.4.0" "numpy<=1.26.4" numba matplotlib "cmaes>=0.10"
fi
"$VENV/bin/python" "$HERE/train.py" "$@"
