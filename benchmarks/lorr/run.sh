#!/usr/bin/env bash
# marlm on the League of Robot Runners 2024 main round, in the official start-kit.
#
#   benchmarks/lorr/run.sh --instances RANDOM-01,WAREHOUSE --track combined --out F [--steps N]
#
#   --instances  comma list of RANDOM-01..05, CITY-01, CITY-02, GAME, SORTATION, WAREHOUSE, or all
#   --track      combined  (marlm's scheduler and planner, Python interface)
#                scheduler (marlm's scheduler, the kit's default planner)
#                default   (the kit's default entry: its scheduler and planner, C++ only)
#   --out        JSON lines file, one line per instance (appended)
#   --steps      simulation steps (default: the main round's, simulation_time.json)
#
# The kit and instances are fetched and built by kit.sh into $MARLM_CACHE/lorr (never committed).
# Each run writes the kit's own output JSON under $MARLM_CACHE/lorr/runs/.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
instances="" track="" out="" steps=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --instances) instances="$2"; shift 2 ;;
    --track) track="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    *) echo "marlm: error: unknown option $1 (use --instances, --track, --out, --steps)" >&2; exit 2 ;;
  esac
done
case "$track" in combined|scheduler|default) ;; *)
  echo "marlm: error: --track must be combined, scheduler or default, got '${track}'" >&2; exit 2 ;;
esac
[[ -n "$instances" ]] || { echo "marlm: error: --instances is required (e.g. RANDOM-01,WAREHOUSE or all)" >&2; exit 2; }
[[ -n "$out" ]] || { echo "marlm: error: --out is required (a JSON lines file)" >&2; exit 2; }
[[ -z "$steps" || "$steps" =~ ^[1-9][0-9]*$ ]] || { echo "marlm: error: --steps must be a positive integer, got '$steps'" >&2; exit 2; }
all="RANDOM-01,RANDOM-02,RANDOM-03,RANDOM-04,RANDOM-05,CITY-01,CITY-02,GAME,SORTATION,WAREHOUSE"
[[ "$instances" == all ]] && instances="$all"

cache="$("$here/kit.sh" | tail -1)"
py="${LORR_PYTHON:-$repo/.venv/bin/python}"
site="$("$py" -c 'import site; print(":".join(site.getsitepackages()))')"
out="$(realpath -m "$out")"
mkdir -p "$(dirname "$out")" "$cache/runs"

for inst in ${instances//,/ }; do
  json="$(ls "$cache"/instances/*.domain/"$inst".json 2>/dev/null | head -1 || true)"
  [[ -n "$json" ]] || { echo "marlm: error: unknown instance '$inst' (one of $all)" >&2; exit 2; }
  n="${steps:-$("$py" -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$cache/instances/simulation_time.json" "$inst")}"
  run="$cache/runs/$inst-$track-$n-$(date -u +%Y%m%dT%H%M%S)"
  mkdir -p "$run"
  echo "{\"python_path\": \"$here/python\"}" > "$run/config.json"
  load0="$(cut -d' ' -f1-3 /proc/loadavg)"
  start=$(date +%s.%N)
  (cd "$run" && PYTHONPATH="$here/python:$cache/build-$track/build:$repo/src:$site" NUMBA_CACHE_DIR="$cache/numba" \
     "$cache/build-$track/build/lifelong" --inputFile "$json" -o "$run/out.json" \
     --simulationTime "$n" --outputScreen 2 --planTimeLimit 1000 --preprocessTimeLimit 30000 \
     --logFile "$run/kit.log" >"$run/stdout.log" 2>"$run/stderr.log")
  end=$(date +%s.%N)
  load1="$(cut -d' ' -f1-3 /proc/loadavg)"
  "$py" "$here/report.py" line --kit-output "$run/out.json" --instance "$inst" --track "$track" \
    --steps "$n" --wall "$(echo "$end - $start" | bc)" --load "$load0" --load-end "$load1" >> "$out"
  tail -1 "$out"
done
"$py" "$here/report.py" table --results "$out"
