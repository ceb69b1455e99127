"""Whole-process start-up and training time of the ``marlm`` command, each against a same-run baseline.

Three figures, each the median of ``--repeat`` runs (default 5) measured in this run:

1. ``marlm --help`` against ``python -c "import typer"`` (the least any typer CLI costs); target:
   within 2x.
2. ``marlm train race`` at its defaults (the note's settings: IQL, shared reward, 30000
   episodes, seed 0; diagnostics and plot on), and with ``--no-plot`` and ``--no-plot
   --no-diagnose``, against the note's own loop run as a whole process the way the note ran it
   (``../shared/ref/seed_iql.py``, ``--ref`` to point elsewhere; the same 30000 episodes of a
   race with 4 actions instead of 5); target: >= 3x. Also the first run after install, with
   empty caches (``NUMBA_CACHE_DIR`` and ``MARLM_CACHE``, where the loop built ahead of time
   goes, new empty folders each time, median of ``--cold-repeat``). The converged result is
   checked, not assumed: a plain loop of marlm's own task (``benchmarks/bench_rl.py
   --seed-loop``, timed beside them) must give the Q-tables of ``tables.npz``.
3. The compiled loops alone against the note's own loops, in updates per second
   (``benchmarks/bench_rl.py``'s ``bench_note_loops``), and the compiled GridRace loop against the
   plain loops of the same task (``bench_race``, ``bench_race_baselines``); target: >= 100x the
   note's loop.
4. The floor of ``marlm train race`` (``--floor``): whole processes that do only the parts no run
   can skip: Python with numpy (imported as the train commands import it, OpenBLAS on one
   thread) and typer; the same plus the race loop loaded as a run loads it
   (the ahead-of-time compiled module of :mod:`marlm.rl.aot`, else numba's JIT and its cache)
   and one episode run; and matplotlib's ``Figure`` and Agg canvas imported as the plot process
   imports them (``marlm.eval.plots._import_matplotlib``, with the garbage collector off), then
   the same as a plain ``import``. Each ends as ``marlm`` does, with the objects alive at exit
   frozen (``gc.freeze``), out of the interpreter's last garbage collection.

    python benchmarks/bench_cli.py [--repeat 5] [--floor] [--busy]

``marlm train race`` draws ``curves.png`` in a plot process forked at its start (it imports
matplotlib while the command trains), so with the plot its CPU time exceeds its
wall-clock time on an idle machine with two cores. ``--busy`` runs one CPU-bound process beside
figure 2 (``python -c "while True: pass"``), the case where that overlap must still pay.

Timings are wall-clock of whole processes on whatever else the machine runs: compare the ratios,
not the seconds, and read them with the machine's load in mind.
"""

from __future__ import annotations

import argparse
import os
import resource
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


def _run_cpu(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall-clock and CPU time (user + system) of one whole process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = _run(cmd, env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


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


def bench_train_race(
    repeat: int, env: dict[str, str], scratch: Path, cold_repeat: int, ref: Path
) -> float:
    race = [*_marlm(), "train", "race"]
    runs = iter(range(10**6))

    def timed(*options: str, run_env: dict[str, str]) -> tuple[tuple[float, float], Path]:
        out = scratch / f"run-{next(runs)}"  # a new run folder each time
        return _run_cpu([*race, *options, "--out", str(out)], run_env), out

    seed_tables = scratch / "seed-q.npy"
    seed_loop = [sys.executable, str(Path(__file__).with_name("bench_rl.py")), "--seed-loop"]
    cold = []
    for k in range(cold_repeat):  # the first run after install: nothing compiled yet
        cold_env = {  # nor the loops built ahead of time (marlm.rl.aot, in $MARLM_CACHE/aot)
            **env, "NUMBA_CACHE_DIR": str(scratch / f"numba-cold-{k}"),
            "MARLM_CACHE": str(scratch / f"marlm-cold-{k}"),
        }  # fmt: skip
        cold.append(timed(run_env=cold_env)[0])
    cache_env = {
        **env, "NUMBA_CACHE_DIR": str(scratch / "numba-cache"),
        "MARLM_CACHE": str(scratch / "marlm-cache"),
    }  # fmt: skip
    timed(run_env=cache_env)  # fills the caches (numba's, and the loop built ahead of time)
    note_loop = [sys.executable, str(ref / "seed_iql.py")]
    if not Path(note_loop[1]).is_file():
        raise SystemExit(f"{note_loop[1]}: the note's loop is not there; pass --ref DIR")
    variants = {  # alternated run by run, so all see the same load
        "note": None,
        "seed": None,
        "fast": (),
        "fast, no plot": ("--no-plot",),
        "fast, no plot, no diagnose": ("--no-plot", "--no-diagnose"),
    }
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    outs: dict[str, Path] = {}
    load_before = os.getloadavg()[0]
    for _ in range(repeat):
        for name, options in variants.items():
            if name == "note":
                t = _run_cpu(note_loop, env)
            elif name == "seed":
                t = _run_cpu([*seed_loop, "--save", str(seed_tables)], env)
            else:
                t, outs[name] = timed(*options, run_env=cache_env)
            times[name].append(t)
    load_after = os.getloadavg()[0]

    def median(pairs: list[tuple[float, float]]) -> tuple[float, float]:
        return statistics.median(w for w, _ in pairs), statistics.median(c for _, c in pairs)

    med = {name: median(ts) for name, ts in times.items()}
    note_wall, note_cpu = med["note"]
    with np.load(outs["fast"] / "tables.npz") as fast_tables:
        same = np.array_equal(np.load(seed_tables), fast_tables["q"])
    print(f"median of {repeat}; wall-clock s, CPU s, ratio to the note's own loop (wall, CPU)")
    print(f"note's loop (seed_iql.py), whole process  {note_wall:7.2f} {note_cpu:7.2f}  (baseline)")
    rows = [("same-task plain loop, whole process", med["seed"])]
    rows += [
        (f"train race {' '.join(variants[n]) or '(defaults)'}", med[n])
        for n in variants
        if n not in ("note", "seed")
    ]
    rows.append((f"first run, empty caches (of {cold_repeat})", median(cold)))
    for label, (wall, cpu) in rows:
        print(
            f"{label:41s} {wall:7.2f} {cpu:7.2f}  -> {note_wall / wall:5.1f}x {note_cpu / cpu:5.1f}x"
        )
    print(f"same Q-tables, same-task plain loop and train race: {same}")
    print(f"load average {load_before:.2f} before, {load_after:.2f} after ({os.cpu_count()} CPUs)")
    ratio = note_wall / med["fast"][0]
    print(f"train race whole process / the note's loop: {ratio:.1f}x wall (target >= 3x)")
    return ratio


_EXIT = "import atexit, gc\natexit.register(gc.freeze)\n"  # as marlm.cli.main ends a process
_NUMPY = (  # as the train commands import it: OpenBLAS on one thread (marlm.cli.train)
    "import os\nos.environ.setdefault('OPENBLAS_NUM_THREADS', '1')\nimport numpy, typer\n"
)
FLOOR = {
    "python + numpy + typer": _EXIT + _NUMPY,
    "  + the race loop, 1 episode": (
        _EXIT + _NUMPY + "from marlm.rl.train import RaceConfig, train_race\n"
        "train_race(RaceConfig(episodes=1))"
    ),
    "python + matplotlib as the plot process": (
        _EXIT + _NUMPY + "gc.disable()\n"
        "from marlm.eval.plots import _import_matplotlib\n_import_matplotlib()"
    ),
    "python + matplotlib Figure and Agg, plain": (
        _EXIT + "import numpy\nimport matplotlib.figure, matplotlib.backends.backend_agg"
    ),
}


def bench_floor(repeat: int, env: dict[str, str], scratch: Path) -> None:
    """Whole-process times of the parts of ``marlm train race`` that no run can skip."""
    cache_env = {  # the caches bench_train_race filled
        **env, "NUMBA_CACHE_DIR": str(scratch / "numba-cache"),
        "MARLM_CACHE": str(scratch / "marlm-cache"),
    }  # fmt: skip
    cmds = {label: [sys.executable, "-c", code] for label, code in FLOOR.items()}
    for cmd in cmds.values():  # warm the file and numba caches
        _run(cmd, cache_env)
    times: dict[str, list[tuple[float, float]]] = {label: [] for label in cmds}
    for _ in range(repeat):
        for label, cmd in cmds.items():
            times[label].append(_run_cpu(cmd, cache_env))
    print(f"floor, whole processes, median of {repeat}: wall-clock s, CPU s")
    for label, ts in times.items():
        wall = statistics.median(w for w, _ in ts)
        cpu = statistics.median(c for _, c in ts)
        print(f"{label:41s} {wall:7.2f} {cpu:7.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per figure (median)")
    parser.add_argument(
        "--ref", type=Path, help="folder of the note's own loops (default ../shared/ref)"
    )
    parser.add_argument("--cold-repeat", type=int, default=3, help="first runs (empty cache)")
    parser.add_argument("--skip-loop", action="store_true", help="skip the in-process loop figure")
    parser.add_argument("--floor", action="store_true", help="also time the floor's parts")
    parser.add_argument(
        "--busy", action="store_true", help="one CPU-bound process beside the train race figure"
    )
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_rl import NOTE_REF, bench_note_loops, bench_race, bench_race_baselines

    ref = args.ref or Path(os.environ.get("MARLM_NOTE_REF", NOTE_REF))
    env = dict(os.environ)
    scratch = Path(tempfile.mkdtemp(prefix="marlm-bench-cli-"))
    try:
        r_help = bench_help(args.repeat, env)
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.busy else None
        try:
            r_train = bench_train_race(args.repeat, env, scratch, args.cold_repeat, ref)
        finally:
            if busy is not None:
                busy.kill()
                busy.wait()
        if args.floor:
            bench_floor(args.repeat, env, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    r_loop = r_note = r_bare = None
    if not args.skip_loop:
        r_note = bench_note_loops(ref, args.repeat)["gridrace"][0]
        r_loop = bench_race()
        r_bare = bench_race_baselines(args.repeat)["bare"]
    print(
        f"ratios: help {r_help:.2f}x typer import (<= 2), train race {r_train:.1f}x (>= 3)"
        + (
            f", compiled loop {r_note:.0f}x the note's loop (>= 100), {r_loop:.0f}x the "
            f"reference engine, {r_bare:.0f}x the bare loop"
            if r_loop is not None
            else ""
        )
    )


if __name__ == "__main__":
    main()
