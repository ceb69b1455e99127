"""Whole-process start-up and training time of the ``marlm`` command, each against a same-run baseline.

Three figures, each the median of ``--repeat`` runs (default 5) measured in this run:

1. ``marlm --help`` against ``python -c "import typer"`` (the least any typer CLI costs); target:
   within 2x.
2. ``marlm train race`` at its defaults (the seed note's settings: IQL, shared reward, 30000
   episodes, seed 0; diagnostics on) against the plain-Python loop of the same run,
   ``marlm train race --engine reference --no-diagnose``, which stands in for the seed's own plain
   loop; target: >= 3x. Also ``--no-diagnose`` on both sides, and the first (cold) compiled run
   with an empty numba cache. The converged result is checked, not assumed: both engines must write
   the same ``tables.npz``.
3. The compiled GridRace loop alone against the plain loops, in joint updates per second, in this
   process: the reference engine, a seed-style loop and a bare plain-Python IQL loop
   (``benchmarks/bench_rl.py``'s ``bench_race`` and ``bench_race_baselines``); target: >= 100x.

    python benchmarks/bench_cli.py [--repeat 5]

Timings are wall-clock of whole processes on whatever else the machine runs: compare the ratios,
not the seconds, and read them with the machine's load in mind.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _marlm() -> list[str]:
    """The installed console script if there is one next to this Python, else ``python -m``."""
    script = Path(sys.executable).with_name("marlm")
    return [str(script)] if script.exists() else [sys.executable, "-m", "marlm.cli"]


def _run(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def bench_help(repeat: int, env: dict[str, str]) -> float:
    marlm = _marlm()
    _run([*marlm, "--help"], env)  # warm the file cache for both
    _run([sys.executable, "-c", "import typer"], env)
    pairs = [  # alternated, so both see the same load
        (_run([*marlm, "--help"], env), _run([sys.executable, "-c", "import typer"], env))
        for _ in range(repeat)
    ]
    t_help = statistics.median(h for h, _ in pairs)
    t_typer = statistics.median(t for _, t in pairs)
    ratio = t_help / t_typer
    print(f"marlm --help                 {t_help:7.3f} s  (median of {repeat})")
    print(f"python -c 'import typer'     {t_typer:7.3f} s  (baseline)")
    print(f"help / typer import          {ratio:7.2f}x  (target <= 2x)")
    return ratio


def bench_train_race(repeat: int, env: dict[str, str], scratch: Path) -> float:
    race = [*_marlm(), "train", "race"]
    runs = iter(range(10**6))

    def timed(*options: str, run_env: dict[str, str]) -> tuple[float, Path]:
        out = scratch / f"run-{next(runs)}"  # a new run folder each time
        return _run([*race, *options, "--out", str(out)], run_env), out

    cache_env = {**env, "NUMBA_CACHE_DIR": str(scratch / "numba-cache")}  # empty: compiles
    t_cold, _ = timed(run_env=cache_env)
    variants = {  # alternated run by run, so all see the same load
        "reference": ("--engine", "reference", "--no-diagnose"),
        "fast": (),
        "fast, no diagnose": ("--no-diagnose",),
    }
    times: dict[str, list[float]] = {name: [] for name in variants}
    outs: dict[str, Path] = {}
    for _ in range(repeat):
        for name, options in variants.items():
            t, outs[name] = timed(*options, run_env=cache_env)
            times[name].append(t)
    t_ref, t_fast, t_fast_nodiag = (statistics.median(times[name]) for name in variants)
    ref_dir, fast_dir = outs["reference"], outs["fast"]
    ref_tables, fast_tables = np.load(ref_dir / "tables.npz"), np.load(fast_dir / "tables.npz")
    same = all(np.array_equal(ref_tables[k], fast_tables[k]) for k in ref_tables.files)
    ratio = t_ref / t_fast
    print(f"train race --engine reference --no-diagnose  {t_ref:7.2f} s  (baseline, plain loop)")
    print(f"train race (compiled, diagnostics on)        {t_fast:7.2f} s  -> {ratio:5.1f}x")
    print(
        f"train race --no-diagnose (compiled)          {t_fast_nodiag:7.2f} s  "
        f"-> {t_ref / t_fast_nodiag:5.1f}x"
    )
    print(
        f"train race, first run, empty numba cache     {t_cold:7.2f} s  -> {t_ref / t_cold:5.1f}x"
    )
    print(f"same tables.npz from both engines: {same}")
    print(f"train race whole process / plain loop: {ratio:.1f}x (target >= 3x, median of {repeat})")
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per figure (median)")
    parser.add_argument("--skip-loop", action="store_true", help="skip the in-process loop figure")
    args = parser.parse_args()
    env = dict(os.environ)
    scratch = Path(tempfile.mkdtemp(prefix="marlm-bench-cli-"))
    try:
        r_help = bench_help(args.repeat, env)
        r_train = bench_train_race(args.repeat, env, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    r_loop = r_bare = None
    if not args.skip_loop:
        sys.path.insert(0, str(Path(__file__).parent))
        from bench_rl import bench_race, bench_race_baselines

        r_loop = bench_race()
        r_bare = bench_race_baselines(args.repeat)["bare"]
    print(
        f"ratios: help {r_help:.2f}x typer import (<= 2), train race {r_train:.1f}x (>= 3)"
        + (
            f", compiled loop {r_loop:.0f}x the reference engine, {r_bare:.0f}x the bare loop "
            "(>= 100)"
            if r_loop is not None
            else ""
        )
    )


if __name__ == "__main__":
    main()
