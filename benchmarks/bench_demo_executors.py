"""The demo's executors side by side under PIBT, on held-out seeds: which one should be the default.

Settings (the demo's own, run as ``marlm demo --planner rule --tick-ms 0 --sync --no-gif`` runs
them: the rule planner, so no model cost or model noise enters; dwell points, PIBT):

- ``default``: the ``small`` layout, 4 robots, the shipped sample orders, 600 steps;
- ``congested``: the same layout and robots, ``--scenario congested`` (70 orders, one every 3
  steps, generated from the seed), 600 steps.

``--layout medium`` (or another shipped layout) runs both on that layout with its own robots,
the ``default`` setting's orders then generated from the seed (the demo's own choice there).

Executors: ``greedy`` (distance-to-go), ``rl`` (the cached default Q-table, trained on the small
layout with seed 0: trained now, once, in a temporary cache unless ``--cache`` is given) and
``learned`` (``--executor learned``: the layout's own learned weights, else the hand guidance;
the small layout has no weights of its own). Seeds: held out of every training seed (the Q-table's
seed 0, the dense weights' seeds 0-3): 100-115 by default.

Per executor and setting: orders delivered, throughput per 1000 steps and mean order latency
(steps, arrival to delivery, over the delivered orders), mean +- sample sd over the seeds, and the ratio of each mean to greedy's. The CPU seconds
(``time.process_time``) of the Q-table's training (what a cold first demo with ``--executor rl``
spends before its first step) and of building the learned executor are printed too.

Usage::

    nice -n 10 python benchmarks/bench_demo_executors.py --seeds 100-115
    nice -n 10 python benchmarks/bench_demo_executors.py --seeds 100-107 --layout medium
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from marlm.envs.warehouse.layout import load_layout
from marlm.eval.metrics import order_table
from marlm.eval.trace import read_trace
from marlm.experiments.congested import DEFAULT_EVERY, DEFAULT_ORDERS, congested_orders
from marlm.hybrid.build import default_orders
from marlm.hybrid.controller import RunConfig, run
from marlm.hybrid.planning.planner import RulePlanner

FIGURES = ("delivered", "throughput_per_1000_steps", "latency")


def _seeds(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def one_run(
    layout: str, setting: str, executor: str, seed: int, steps: int, policy, tmp: Path
) -> dict:
    """The figures of one run of ``setting`` on ``layout`` under ``executor`` with ``seed``."""
    orders = default_orders(
        layout
    )  # the shipped sample on small; generated from the seed elsewhere
    if setting == "congested":
        stream = congested_orders(load_layout(layout), seed, n=DEFAULT_ORDERS, every=DEFAULT_EVERY)
        orders = str(stream.write(tmp / f"orders-{seed}"))
    config = RunConfig(
        layout=layout, orders=orders, steps=steps, seed=seed, planner="rule",
        executor=executor, sync_planner=True, tick_ms=0.0, gif=False,
    )  # fmt: skip
    out = tmp / f"{setting}-{executor}-{seed}"
    res = run(config, out, planner=RulePlanner(), policy=policy)
    m = res.metrics
    orders = order_table(read_trace(res.files["trace"]).events).values()
    lat = [o["delivered"] - o["arrived"] for o in orders if o["delivered"] is not None]
    return {
        "delivered": m["delivered"],
        "throughput_per_1000_steps": m["throughput_per_1000_steps"],
        "latency": statistics.fmean(lat) if lat else float("nan"),
        "executor_name": m.get("executor"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="100-115", help="held-out seeds, e.g. 100-115")
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--settings", default="default,congested")
    ap.add_argument("--layout", default="small", help="a shipped layout (default: the demo's)")
    ap.add_argument("--executors", default="greedy,rl,learned")
    ap.add_argument("--cache", default=None, help="marlm cache folder (default: a temporary one)")
    args = ap.parse_args()
    seeds, executors = _seeds(args.seeds), args.executors.split(",")
    with tempfile.TemporaryDirectory(prefix="bench-demo-exec-") as tmp_name:
        tmp = Path(tmp_name)
        os.environ["MARLM_CACHE"] = args.cache or str(tmp / "cache")
        from marlm.hybrid.acting.guided_executor import learned_executor
        from marlm.hybrid.build import cached_policy

        policy = None
        if "rl" in executors:
            t0 = time.process_time()
            policy, trained = cached_policy()
            what = "trained now" if trained else "loaded from the cache"
            print(f"rl Q-table: {what}, {time.process_time() - t0:.1f} CPU s")
        t0 = time.process_time()
        learned_executor(load_layout(args.layout), 4).warm_up()
        print(f"learned executor on {args.layout}: built in {time.process_time() - t0:.2f} CPU s")
        print(
            f"{args.layout}, seeds {seeds[0]}-{seeds[-1]} ({len(seeds)}), {args.steps} steps, "
            "rule planner"
        )
        print(
            "| setting | executor | delivered | throughput /1000 steps | mean latency (steps) "
            "| x greedy (throughput) | CPU s |"
        )
        print("|---|---|---|---|---|---|---|")
        for setting in args.settings.split(","):
            base = None
            for ex in executors:
                t0 = time.process_time()
                rows = [
                    one_run(args.layout, setting, ex, s, args.steps, policy, tmp) for s in seeds
                ]
                cpu = time.process_time() - t0
                cells = []
                for f in FIGURES:
                    vals = [r[f] for r in rows]
                    sd = statistics.stdev(vals) if len(vals) > 1 else 0.0
                    cells.append(f"{statistics.fmean(vals):.2f} ± {sd:.2f}")
                thr = statistics.fmean(r["throughput_per_1000_steps"] for r in rows)
                base = thr if base is None else base
                name = rows[0]["executor_name"]
                print(
                    f"| {setting} | {name} | {' | '.join(cells)} | {thr / base:.3f} | {cpu:.0f} |",
                    flush=True,
                )
                per_seed = {f: [round(r[f], 2) for r in rows] for f in FIGURES}
                print(f"<!-- {setting} {ex} per seed: {per_seed} -->", flush=True)


if __name__ == "__main__":
    main()
