"""`marlm demo`'s control step at 50..1,000 robots on a 100x100 map, planning counted.

Run: `python benchmarks/bench_demo_scale.py [--robots 50,200,400,1000] [--steps 20] [--map FILE]
[--cpu]`; `--throughput 0,1,2 --orders 1200 --steps 150` counts the orders delivered instead, and
`--open-orders 1000,10000,100000` times the step with that many orders open from step 0.
Without `--map` it writes a 100x100 warehouse (shelf blocks of 2x3, stations on the top and bottom
rows) to a temporary folder. Each robot count runs the demo's loop (`marlm demo --planner rule
--executor greedy --sync --tick-ms 0`, dwell points, 24 generated orders, seed 0) through
:class:`marlm.hybrid.controller.Controller`, with the map parsed once and shared (parsing is
start-up, not a control step). It prints, per robot count, the median ms per control step
(`step.latency_ms`: planning on the control thread + executor + rule layer), the median planning
ms, the median wall ms of the whole `Controller.step` (the environment's step and the trace
line included), the median ms of the PIBT rule layer alone (`shielded_step`) in the same steps, and the ratio
of the control step to the rule layer.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from marlm.envs.warehouse import WarehouseEnv
from marlm.envs.warehouse.layout import load_layout
from marlm.eval.trace import TraceWriter
from marlm.hybrid import controller as controller_module
from marlm.hybrid.acting.executor import GreedyExecutor
from marlm.hybrid.build import build_planner
from marlm.hybrid.controller import Controller
from marlm.hybrid.planning.dwell import DwellPolicy
from marlm.hybrid.rules.factory import make_shield, warm_up


def write_map(path: Path, size: int = 100) -> Path:
    """A ``size`` x ``size`` warehouse map: walls around, shelf blocks, stations top and bottom."""
    g = [["."] * size for _ in range(size)]
    for c in range(size):
        g[0][c] = g[size - 1][c] = "#"
    for r in range(size):
        g[r][0] = g[r][size - 1] = "#"
    for r in range(4, size - 5, 3):
        for c in range(3, size - 4, 4):
            for dr in range(2):
                for dc in range(3):
                    if r + dr < size - 4 and c + dc < size - 3:
                        g[r + dr][c + dc] = "S"
    for c in range(2, size - 2, 6):
        g[1][c] = g[size - 2][c] = "P"
    path.write_text("\n".join("".join(row) for row in g) + "\n", encoding="utf-8")
    return path


def run_one(
    layout,
    n_robots: int,
    steps: int,
    out: Path,
    n_orders: int = 24,
    seed: int = 0,
    clock=time.perf_counter,
) -> dict[str, float]:
    """Median ms per control step, planning and rule layer over ``steps`` steps, and the
    orders delivered in them."""
    env = WarehouseEnv(
        layout=layout, n_orders=n_orders, n_robots=n_robots, max_steps=steps, auto_assign=False
    )
    rule_ms: list[float] = []
    inner = controller_module.shielded_step

    def timed(shield, view, scores):  # the rule layer alone, inside the same steps
        t0 = clock()
        move = inner(shield, view, scores)
        rule_ms.append((clock() - t0) * 1e3)
        return move

    controller_module.shielded_step = timed
    try:
        shield = make_shield("pibt", env.layout.free, n_robots, 0)
        with TraceWriter(out / f"trace-{n_robots}.jsonl") as trace:
            ctl = Controller(
                env, build_planner("rule"), GreedyExecutor(), shield, trace, sync_planner=True,
                seed=seed, dwell=DwellPolicy(env.layout, reserve=False), clock=clock,
            )  # fmt: skip
            obs, _ = env.reset(seed=seed)
            warm_up()
            wall_ms: list[float] = []
            while env.agents:
                t0 = clock()
                obs, *_ = ctl.step(obs)
                wall_ms.append((clock() - t0) * 1e3)
            ctl.close()
    finally:
        controller_module.shielded_step = inner
    steps_ev = [e for e in ctl.events if e["type"] == "step"]
    step_ms = statistics.median(e["latency_ms"] for e in steps_ev)
    # A tree from before step.planning_ms (for "before" figures) gives NaN here.
    plan_ms = statistics.median(e.get("planning_ms", float("nan")) for e in steps_ev)
    pibt_ms = statistics.median(rule_ms)
    return {
        "wall_ms": statistics.median(wall_ms),
        "step_ms": step_ms,
        "planning_ms": plan_ms,
        "pibt_ms": pibt_ms,
        "delivered": len(env.delivered),
    }


def open_orders(layout, n: int, horizon: int = 10**6) -> list:
    """``n`` orders that have all arrived at step 0 (the generator's shelves and priorities,
    seed 0), with deadlines beyond the run: the book stays open."""
    from marlm.envs.warehouse.orders import generate_orders

    return [
        o.model_copy(update={"arrival": 0, "deadline": horizon})
        for o in generate_orders(layout, n, seed=0, horizon=1)
    ]


def run_open(layout, n_robots: int, n_open: int, steps: int, out: Path, clock) -> dict:
    """Median ms per control step (planning counted) with ``n_open`` orders open."""
    env = WarehouseEnv(
        layout=layout,
        orders=open_orders(layout, n_open),
        n_robots=n_robots,
        max_steps=steps,
        auto_assign=False,
    )
    shield = make_shield("pibt", env.layout.free, n_robots, 0)
    with TraceWriter(out / f"trace-open-{n_open}.jsonl") as trace:
        ctl = Controller(
            env, build_planner("rule"), GreedyExecutor(), shield, trace, sync_planner=True,
            seed=0, dwell=DwellPolicy(env.layout, reserve=False), clock=clock,
        )  # fmt: skip
        obs, _ = env.reset(seed=0)
        warm_up()
        wall_ms: list[float] = []
        while env.agents:
            t0 = clock()
            obs, *_ = ctl.step(obs)
            wall_ms.append((clock() - t0) * 1e3)
        ctl.close()
    steps_ev = [e for e in ctl.events if e["type"] == "step"]
    return {
        "wall_ms": statistics.median(wall_ms),
        "step_ms": statistics.median(e["latency_ms"] for e in steps_ev),
        "planning_ms": statistics.median(e.get("planning_ms", float("nan")) for e in steps_ev),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robots", default="50,200,400,1000")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--map", type=Path, default=None)
    parser.add_argument(
        "--throughput",
        default="",
        help="seeds (e.g. 0,1,2): instead of timing, print the orders delivered at each robot "
        "count over --steps steps with --orders generated orders (arrivals over 80%% of them)",
    )
    parser.add_argument("--orders", type=int, default=24)
    parser.add_argument(
        "--open-orders",
        default="",
        help="order counts (e.g. 1000,10000,100000): instead, time the control step with that "
        "many orders open from step 0, at the first --robots count",
    )
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="time in CPU seconds of the control thread (time.thread_time) instead of wall "
        "seconds: the figure a busy shared machine disturbs least",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        path = args.map or write_map(out / "map100.txt")
        t0 = time.perf_counter()
        layout = load_layout(path)
        print(f"map {path.name}: {layout.height}x{layout.width}, parsed in "
              f"{time.perf_counter() - t0:.1f} s (start-up, not counted)")  # fmt: skip
        clock = time.thread_time if args.cpu else time.perf_counter
        if args.cpu:
            print("(CPU ms of the control thread, not wall ms)")
        if args.open_orders:
            n = int(args.robots.split(",")[0])
            print(f"robots {n}; open orders  wall p50 ms  step p50 ms  planning p50 ms")
            for k in (int(x) for x in args.open_orders.split(",")):
                r = run_open(layout, n, k, args.steps, out, clock)
                print(f"{k:18d}  {r['wall_ms']:11.2f}  {r['step_ms']:11.2f}  "
                      f"{r['planning_ms']:15.2f}", flush=True)  # fmt: skip
            return
        if args.throughput:
            print("robots  seed  orders  steps  delivered")
            for n in (int(x) for x in args.robots.split(",")):
                for seed in (int(x) for x in args.throughput.split(",")):
                    r = run_one(layout, n, args.steps, out, args.orders, seed)
                    print(f"{n:6d}  {seed:4d}  {args.orders:6d}  {args.steps:5d}  "
                          f"{r['delivered']:9d}", flush=True)  # fmt: skip
            return
        print("robots  wall p50 ms  step p50 ms  planning p50 ms  PIBT p50 ms  step / PIBT")
        for n in (int(x) for x in args.robots.split(",")):
            r = run_one(layout, n, args.steps, out, clock=clock)
            ratio = r["step_ms"] / r["pibt_ms"] if r["pibt_ms"] > 0 else float("nan")
            print(
                f"{n:6d}  {r['wall_ms']:11.2f}  {r['step_ms']:11.2f}  {r['planning_ms']:15.2f}  {r['pibt_ms']:11.2f}"
                f"  {ratio:10.1f}x",
                flush=True,
            )


if __name__ == "__main__":
    main()
