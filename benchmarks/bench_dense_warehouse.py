"""Greedy, tabular and learned executors under PIBT on a dense lifelong setting of the demo's warehouse.

The setting (``marlm.experiments.warehouse_training.DenseSetting``): a 32 x 48 warehouse of the
project's layout generator (732 free cells, 648 shelves, 8 stations on the bottom row), 100 robots
(one per 7.3 free cells), 1,000 orders arriving in the first 240 of 300 steps (faster than they can
be served), auto-assigned to the nearest idle robot. Throughput = orders delivered in 300 steps,
per held-out seed; mean +- sd over seeds and the ratio to greedy, every executor under PIBT.

Executors: ``greedy`` (distance-to-go), ``tabular`` (the cached default Q-table + distance, no
noise; trained on the small layout, seeds 0..), ``hand`` (guidance costs with zero weights: the hand
one-way aisles), ``learned-wfi`` (the shipped weights, trained on POGEMA's ``wfi_warehouse``: a
transfer), and ``learned-dense`` (``--weights``, default the shipped ``demo-dense.json``, trained by
``--train 0-3`` on this layout's training seeds; ``learned-dense-static``: the same without its
online update, by ``--only``).

Usage::

    python benchmarks/bench_dense_warehouse.py --seeds 100-115
    python benchmarks/bench_dense_warehouse.py --train 0-3 --generations 20 --population 10 \\
        --run-dir /tmp/dense-train --copy-to src/marlm/data/guidance/demo-dense.json

CPU seconds (``time.process_time``) are printed per executor.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from marlm.experiments.guidance_training import TrainConfig, train
from marlm.experiments.warehouse_training import (
    DenseSetting,
    dense_instances,
    executor_rows,
)
from marlm.hybrid.acting.executor import GreedyExecutor, QExecutor
from marlm.hybrid.acting.guided_executor import (
    DEMO_DENSE_WEIGHTS,
    GuidedExecutor,
    demo_target_cells,
    guidance_weights_path,
    load_guidance_params,
)
from marlm.hybrid.build import cached_policy


def _seeds(text: str) -> tuple[int, ...]:
    lo, _, hi = text.partition("-")
    return tuple(range(int(lo), int(hi or lo) + 1))


def _train(args: argparse.Namespace, setting: DenseSetting) -> None:
    if args.copy_to and Path(args.copy_to).exists():
        print(f"marlm: error: --copy-to {args.copy_to} exists; name a new file", file=sys.stderr)
        sys.exit(2)
    instances = dense_instances(setting, _seeds(args.train))
    config = TrainConfig(generations=args.generations, population=args.population)

    def progress(g: int, total: int, best: float, mean: float) -> None:
        print(f"generation {g}/{total}: best {best:.4f}, search mean {mean:.4f}", flush=True)

    result = train(
        instances, args.run_dir, config, demo_target_cells(setting.layout()), progress=progress
    )
    print(f"training objective {result['score']:.4f}; CPU {result['cpu_s']:.0f} s")
    print(json.dumps(result["weights"]))
    if args.copy_to:
        shutil.copyfile(f"{args.run_dir}/result.json", args.copy_to)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="100-115", help="held-out seeds reported")
    ap.add_argument("--robots", type=int, default=DenseSetting.robots)
    ap.add_argument("--steps", type=int, default=DenseSetting.steps)
    ap.add_argument("--only", default="greedy,tabular,hand,learned-wfi,learned-dense")
    ap.add_argument("--weights", help="learned-dense's weights (a training result.json)")
    ap.add_argument("--train", help="train learned-dense on these seeds (e.g. 0-3), then stop")
    ap.add_argument("--generations", type=int, default=20)
    ap.add_argument("--population", type=int, default=10)
    ap.add_argument("--run-dir", default="/tmp/dense-train")
    ap.add_argument("--copy-to")
    args = ap.parse_args()
    setting = replace(DenseSetting(), seeds=_seeds(args.seeds), robots=args.robots,
                      steps=args.steps)  # fmt: skip
    if args.train:
        _train(args, setting)
        return
    q, _ = cached_policy()
    tabular = QExecutor(q=q.q, noise=0.0)
    wfi = load_guidance_params()
    makers = {
        "greedy": lambda env: GreedyExecutor(),
        "tabular": lambda env: tabular,
        "hand": lambda env: GuidedExecutor(env.layout, env.n_robots, None, name="hand"),
        "learned-wfi": lambda env: GuidedExecutor(env.layout, env.n_robots, wfi),
    }
    dense = load_guidance_params(args.weights or guidance_weights_path(DEMO_DENSE_WEIGHTS))
    makers["learned-dense"] = lambda env: GuidedExecutor(env.layout, env.n_robots, dense)
    static = dense.copy()
    static[-1] = 0.0  # the online gain: learned costs without the online update
    makers["learned-dense-static"] = lambda env: GuidedExecutor(env.layout, env.n_robots, static)
    wanted = [k for k in args.only.split(",") if k in makers]
    s = setting
    print(f"{s.rows}x{s.cols}, {s.robots} robots, {s.orders} orders, {s.steps} steps, "
          f"seeds {args.seeds}, PIBT")  # fmt: skip
    print("| executor | delivered per seed | mean ± sd | x first row | per seed: ratio "
          "mean ± sd, seeds won | CPU s |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    base = None
    for name in wanted:
        t0 = time.process_time()
        (row,) = executor_rows(setting, {name: makers[name]})
        cpu = time.process_time() - t0
        base = base or row
        per = ", ".join(map(str, row.delivered))
        ratio = np.array(row.delivered) / np.array(base.delivered)
        won = int((ratio > 1).sum())
        print(f"| {name} | {per} | {row.mean:.1f} ± {row.sd:.1f} | {row.mean / base.mean:.3f} | "
              f"{ratio.mean():.3f} ± {ratio.std(ddof=1) if len(ratio) > 1 else 0:.3f}, "
              f"{won}/{len(ratio)} | {cpu:.0f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
