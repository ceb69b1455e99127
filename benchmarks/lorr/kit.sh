#!/usr/bin/env bash
# Fetch (copy) the League of Robot Runners start-kit and the 2024 main-round instances into a cache
# folder outside the repository, and build the kit three ways: the default entry (C++ only), and
# with the Python interface for the combined and the scheduler tracks. Nothing of theirs is committed.
#
#   benchmarks/lorr/kit.sh            # idempotent: skips what is already there
#
# Sources (read-only git repositories or URLs), overridable:
#   LORR_KIT_GIT    the Start-Kit repository   (default: the local mirror, else the public one)
#   LORR_BENCH_GIT  the Benchmark-Archive repo (same)
#   LORR_KIT_REF    the kit version: v2.1.1, the release the 2024 main round ran on (Nov 2024)
#   MARLM_CACHE     cache root (default ~/.cache/marlm); everything goes under $MARLM_CACHE/lorr
#   LORR_FETCH_ONLY set: copy the sources and instances, build nothing
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cache="${MARLM_CACHE:-$HOME/.cache/marlm}/lorr"
ref="${LORR_KIT_REF:-v2.1.1}"
mirror=/work/.mirror/MAPF-Competition+
kit_git="${LORR_KIT_GIT:-}"
bench_git="${LORR_BENCH_GIT:-}"
[[ -z "$kit_git" && -d "${mirror}Start-Kit/repo" ]] && kit_git="${mirror}Start-Kit/repo"
[[ -z "$bench_git" && -d "${mirror}Benchmark-Archive/repo" ]] && bench_git="${mirror}Benchmark-Archive/repo"
kit_git="${kit_git:-https://github.com/MAPF-Competition/Start-Kit.git}"
bench_git="${bench_git:-https://github.com/MAPF-Competition/Benchmark-Archive.git}"
mkdir -p "$cache"

clone_bare() {  # url_or_dir dest
  if [[ ! -d "$2" ]]; then
    if [[ -d "$1" ]]; then git clone -q --bare --shared "$1" "$2" 2>/dev/null || cp -r "$1" "$2"
    else git clone -q --bare --filter=blob:none "$1" "$2"; fi
  fi
}

# --- instances: 2024 main round (maps, agents, tasks), read blob by blob (paths hold spaces) ---
if [[ ! -f "$cache/instances/simulation_time.json" ]]; then
  clone_bare "$bench_git" "$cache/bench.git"
  prefix="2024 Competition/Main Round Evaluation Instances/"
  git --git-dir="$cache/bench.git" ls-tree -r HEAD "$prefix" | while IFS=$'\t' read -r meta path; do
    sha="${meta##* }"; rel="${path#"$prefix"}"
    [[ "$rel" == best_solutions/* ]] && continue
    mkdir -p "$cache/instances/$(dirname "$rel")"
    git --git-dir="$cache/bench.git" cat-file -p "$sha" > "$cache/instances/$rel"
  done
fi

# --- kit source at $ref ---
if [[ ! -f "$cache/kit-$ref/CMakeLists.txt" ]]; then
  clone_bare "$kit_git" "$cache/kit.git"
  mkdir -p "$cache/kit-$ref"
  git --git-dir="$cache/kit.git" archive "$ref" | tar -x -C "$cache/kit-$ref"
fi

[[ -n "${LORR_FETCH_ONLY:-}" ]] && { echo "$cache"; exit 0; }

# --- build deps: Boost from Debian, pybind11 from PyPI in a build venv of its own ---
if ! [[ -f /usr/include/boost/log/core.hpp && -f /usr/include/boost/program_options.hpp ]]; then
  apt-get install -y -qq libboost-program-options-dev libboost-system-dev \
    libboost-filesystem-dev libboost-log-dev >/dev/null
fi
py="${LORR_PYTHON:-$repo/.venv/bin/python}"   # the interpreter the kit embeds (numba, numpy, marlm)
if [[ ! -x "$cache/buildenv/bin/python" ]]; then
  python3 -m venv "$cache/buildenv"
  "$cache/buildenv/bin/pip" install -q "pybind11>=2.10"
fi
pybind_dir="$("$cache/buildenv/bin/python" -m pybind11 --cmakedir)"

build() {  # name python_flag track
  local src="$cache/build-$1"
  [[ -x "$src/build/lifelong" ]] && return 0
  rm -rf "$src"; cp -r "$cache/kit-$ref" "$src"
  if [[ "$2" == true ]]; then bash "$src/python/set_track.bash" "$3" >/dev/null; fi
  cmake -S "$src" -B "$src/build" -DCMAKE_BUILD_TYPE=Release -DPYTHON="$2" \
    -Dpybind11_DIR="$pybind_dir" -DPYTHON_EXECUTABLE="$py" -DPython_EXECUTABLE="$py" >"$src/cmake.log" 2>&1
  local targets=lifelong
  [[ "$2" == true ]] && targets="lifelong MAPF"  # MAPF: the module that registers the kit's types
  make -C "$src/build" -j"${LORR_JOBS:-2}" $targets >"$src/make.log" 2>&1
}
build default false ""
build combined true combined
build scheduler true scheduler
echo "$cache"
