"""Decision time of PIBT under the learned guidance: CPU ms per step at 192 and 10,000 robots.

Two settings, each timed with ``time.process_time`` around ``GuidedMover.act`` only (the whole
decision: distance tables of the targets in use, scores, PIBT, the online update), on a lifelong
episode (``random_instance``: each robot gets its next target as soon as it reaches one):

- ``wfi``: POGEMA's ``wfi_warehouse`` (33 x 46, ``benchmarks/pogema/data``), 192 robots, 256
  steps (a whole episode of the benchmark, so the table builds are amortised as there);
- ``big``: a 500 x 140 warehouse in the same pattern (1 x 10 shelves between target rows, aisles
  every 4 rows and 11 columns), 10,000 robots, ``--big-steps`` steps after a first step timed
  apart (it builds a table for every target in use).

The learned side is what ships (the learned weights from ``SHIPPED_MIN_DENSITY`` up, the passage
priority, the hindrance tie-break); the hand guidance runs in the same process as the baseline,
and the script prints the ratio.
Targets: at most 2 ms at 192 robots, at most 50 ms at 10,000.

Each setting also prints where the CPU goes after the first step (the guidance's distance
tables, PIBT's swap tables, PIBT's decision, the rest: scores, priorities, the online update) and
the process's peak resident memory.

The guidance's tables are rebuilt after a change of the online costs within the table store's
refresh budget (``--refresh-cells``, cells of rebuilding per change; ``all``: every stale table,
the scheme before the budget); each setting prints the tables built, rebuilt and served stale.

Usage: ``python benchmarks/bench_guidance_decision.py [--big-steps 32] [--big-robots N]
[--only wfi|big] [--without-online] [--refresh-cells N|all]``.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

import numpy as np

import marlm.hybrid.acting.learned_guidance as lg
from marlm.envs.warehouse.dynamics import MOVES
from marlm.hybrid.acting.learned_guidance import (
    ONLINE_PARAMS,
    SHIPPED_HINDRANCE,
    SHIPPED_MIN_DENSITY,
    SHIPPED_NARROW_PRIORITY,
    params_from,
)
from marlm.hybrid.core.graph import REFRESH_CELLS
from marlm.hybrid.simulator import Guidance, LifelongInstance, random_instance

HERE = Path(__file__).resolve().parent
WFI = HERE / "pogema" / "data" / "wfi_warehouse.txt"
LEARNED = HERE / "pogema" / "data" / "guidance-wfi_warehouse.json"


def wfi_map() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(free, start_cells, target_cells)``, ``bool[33, 46]`` each, of POGEMA's warehouse."""
    rows = [list(r) for r in WFI.read_text().split()]
    grid = np.array(rows)
    return grid != "#", grid == "@", grid == "$"


def big_map(height: int = 140, width: int = 500) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(free, start_cells, target_cells)`` of a ``height x width`` warehouse like ``wfi``:
    aisle rows every 4 rows, shelf rows (1 x 10) between two target rows, an aisle column every
    11 columns; every free cell may be a start."""
    free = np.ones((height, width), dtype=bool)
    target = np.zeros_like(free)
    for r in range(height):
        if r % 4 == 0 or r == height - 1:
            continue
        for c in range(1, width - 1):
            if c % 11 == 0:
                continue
            if r % 4 == 2:
                free[r, c] = False
            else:
                target[r, c] = True
    return free, free.copy(), target & free


class Clock:
    """CPU ms spent in wrapped calls (``time.process_time``), by name."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = {}

    def wrap(self, name: str, f):
        def timed(*args, **kwargs):
            c0 = time.process_time()
            try:
                return f(*args, **kwargs)
            finally:
                self.ms[name] = self.ms.get(name, 0.0) + 1000.0 * (time.process_time() - c0)

        return timed


TOP_PARTS = ("guidance tables", "swap tables", "PIBT", "scores", "hindrance", "online")
"""The parts of a step :func:`time_episode` times apart (``rest``: the others)."""


def time_episode(
    instance: LifelongInstance,
    guidance: Guidance,
    target_cells: np.ndarray,
    steps: int,
    refresh_cells: int | None = REFRESH_CELLS,
) -> tuple[float, list[float], dict[str, float], str, int]:
    """``(first step CPU ms, CPU ms of each later step, CPU ms by part after the first step,
    the guidance tables' counts, targets reached)`` of ``guidance`` on ``instance``; parts
    (:data:`TOP_PARTS`): the guidance's tables (of which new tables and stale ones rebuilt
    within the refresh budget; the rest is the slot lookup), PIBT's swap tables, PIBT's decision
    (compiled), the scores (the guided distances read out of the pool, plus the move's cost),
    the hindrance tie-break, the online update (the waits counted, the new costs, their
    filler, the tables marked stale), and the rest (PIBT's ranking, priorities and checks).
    ``refresh_cells``: the guidance tables' refresh budget (None: every stale table rebuilt)."""
    n = len(instance.starts)
    mover = guidance.mover(instance.free, n, instance.seed, target_cells)
    mover.tables.refresh_cells = refresh_cells  # read at each change of the costs
    clock = Clock()
    t = mover.tables
    t.slots = clock.wrap("guidance tables", t.slots)
    t._build = clock.wrap("new", t._build)  # within t.slots: new tables
    t._refresh = clock.wrap("stale rebuilt", t._refresh)  # within t.slots: the refresh budget
    mover.layer.tables.slots = clock.wrap("swap tables", mover.layer.tables.slots)
    mover.layer.decide = clock.wrap("PIBT", mover.layer.decide)
    saved = {k: getattr(lg, k) for k in ("table_scores", "hindrance_into", "guided_filler")}
    lg.table_scores = clock.wrap("scores", lg.table_scores)  # the pool's distances read
    lg.hindrance_into = clock.wrap("hindrance", lg.hindrance_into)
    lg.guided_filler = clock.wrap("online", lg.guided_filler)  # the filler of the new costs
    if mover.online is not None:
        mover.online.observe = clock.wrap("online", mover.online.observe)
        mover.online.costs = clock.wrap("online", mover.online.costs)
        t.restale = clock.wrap("online", t.restale)
    pos = instance.starts.copy()
    idx = np.zeros(n, dtype=np.int64)
    rows = np.arange(n)
    times = []
    for k in range(steps):
        goals = instance.targets[rows, idx]
        c0 = time.process_time()
        actions = mover.act(pos, goals)
        times.append(1000.0 * (time.process_time() - c0))
        if k == 0:
            clock.ms.clear()
        pos = pos + MOVES[actions]
        idx += (pos == goals).all(axis=1)
    for k, f in saved.items():
        setattr(lg, k, f)
    parts = {k: clock.ms.get(k, 0.0) for k in TOP_PARTS}
    parts["rest"] = sum(times[1:]) - sum(parts.values())
    for k in ("new", "stale rebuilt"):  # parts of the guidance tables' time
        parts[f"(of the guidance tables: {k})"] = clock.ms.get(k, 0.0)
    del t.slots, t._build, t._refresh, mover.layer.tables.slots, mover.layer.decide
    if mover.online is not None:  # cycles: free now
        del mover.online.observe, mover.online.costs, t.restale
    counts = (f"guidance tables built {t.builds:,} (stale ones rebuilt {t.refreshed:,}, "
              f"served stale {t.deferred:,})")  # fmt: skip
    return times[0], times[1:], parts, counts, int(idx.sum())


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, MB (Linux ``ru_maxrss`` is in KB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def refresh_budget(text: str) -> int | None:
    """``--refresh-cells``: a count of cells >= 0, or ``all`` (None)."""
    if text == "all":
        return None
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a count of cells >= 0 or 'all', got {text!r}")
    return int(text)


def throughput(
    params: np.ndarray, n: int, steps: int, seeds: list[int], refresh: int | None
) -> int:
    """Print targets reached per step of ``Guidance(params)`` on the 500 x 140 map with the
    refresh budget ``refresh`` and with every stale table rebuilt, seed by seed; returns 0."""
    free, starts, targets = big_map()
    ratios = []
    for seed in seeds:
        inst = random_instance(free, n, steps, seed=seed, start_cells=starts, target_cells=targets)
        row = {}
        for label, budget in (("budget", refresh), ("all", None)):
            first, rest, _, counts, reached = time_episode(inst, Guidance(params), targets, steps,
                                                           budget)  # fmt: skip
            row[label] = reached / steps
            print(f"  seed {seed} {label}: {reached / steps:.4f} targets/step, CPU ms/step "
                  f"{(first + sum(rest)) / steps:.1f} (first step {first:.0f}); {counts}",
                  flush=True)  # fmt: skip
        ratios.append(row["budget"] / row["all"])
    print(f"{n:,} robots, {steps} steps, seeds {seeds}: budget / all throughput "
          f"{', '.join(f'{r:.4f}' for r in ratios)} (mean {np.mean(ratios):.4f})", flush=True)  # fmt: skip
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--big-steps", type=int, default=32)
    ap.add_argument("--big-robots", type=int, default=10_000, help="robots on the 500 x 140 map")
    ap.add_argument("--only", choices=("wfi", "big"), default=None)
    ap.add_argument(
        "--without-online",
        action="store_true",
        help="learned weights with online_gain 0 (tables never go stale): the decision's cost "
        "without the online update; not the shipped scheme",
    )
    ap.add_argument(
        "--refresh-cells",
        type=refresh_budget,
        default=REFRESH_CELLS,
        help="cells of stale guidance tables rebuilt per change of the online costs "
        f"(default {REFRESH_CELLS:,}); 'all': every stale table, the scheme before the budget",
    )
    ap.add_argument(
        "--throughput",
        type=lambda t: [int(x) for x in t.split(",")],
        default=None,
        metavar="SEEDS",
        help="instead of timing: targets reached per step of the learned guidance on the "
        "500 x 140 map (--big-robots, --big-steps) on these seeds (e.g. 0,1,2), with the "
        "refresh budget and with every stale table rebuilt ('all')",
    )
    args = ap.parse_args(argv)
    refresh = args.refresh_cells
    params = params_from(json.loads(LEARNED.read_text()))
    if args.without_online:
        params[-len(ONLINE_PARAMS) :] = 0.0  # ONLINE_PARAMS come last
    if args.throughput is not None:
        return throughput(params, args.big_robots, args.big_steps, args.throughput, refresh)
    settings = []
    if args.only in (None, "wfi"):
        settings.append(("wfi 192 robots", wfi_map(), 192, 256, 2.0))
    if args.only in (None, "big"):
        name = f"500x140 {args.big_robots:,} robots"
        settings.append((name, big_map(), args.big_robots, args.big_steps + 1, 50.0))
    # warm the compiled kernels outside the timed runs
    free, starts, targets = wfi_map()
    warm = random_instance(free, 8, 8, 0, starts, targets)
    # what ships: the learned weights from the switch density up, the passage priority and the
    # hindrance tie-break (both settings are above the switch, so the learned part acts)
    shipped = Guidance(params, min_density=SHIPPED_MIN_DENSITY,
                       narrow_priority=SHIPPED_NARROW_PRIORITY, hindrance=SHIPPED_HINDRANCE)  # fmt: skip
    for g in (Guidance(None), shipped):
        time_episode(warm, g, targets, 8, refresh)
    for name, (free, starts, targets), n, steps, limit in settings:
        instance = random_instance(free, n, steps, seed=1, start_cells=starts, target_cells=targets)
        out = {}
        for label, g in (("hand", Guidance(None)), ("learned", shipped)):
            first, rest, parts, counts, _ = time_episode(instance, g, targets, steps, refresh)
            out[label] = (first, float(np.mean(rest)), float(np.percentile(rest, 99)))
            per = ", ".join(f"{k} {v / len(rest):.2f}" for k, v in parts.items())
            print(f"  {label}: mean CPU ms per step by part: {per}; {counts}; peak RSS "
                  f"{peak_rss_mb():,.0f} MB", flush=True)  # fmt: skip
        h, lrn = out["hand"], out["learned"]
        print(
            f"{name}: learned {lrn[1]:.2f} ms CPU/step (p99 {lrn[2]:.2f}, first step "
            f"{lrn[0]:.1f}), hand {h[1]:.2f} (p99 {h[2]:.2f}, first {h[0]:.1f}); "
            f"learned/hand {lrn[1] / h[1]:.2f}x; target <= {limit:g} ms: "
            f"{'holds' if lrn[1] <= limit else 'MISSED'}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
