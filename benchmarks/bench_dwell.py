"""Dwell points and the urgent reserve: order latency by priority, on-time rate, throughput.

Runs the hybrid warehouse (``--sync``, RL executor, PIBT rule layer, layout ``small``) with idle
robots staying where they finished (``none``), driving to dwell points (``points``) or to dwell
points with one robot kept for urgent work (``reserve``), under the rule planner and the default
planner (``triage``), on the shipped order file and on order streams generated from seeds
(:func:`marlm.envs.warehouse.orders.generate_orders`: shelves uniform, priorities
urgent/normal/low 0.2/0.6/0.2, arrivals uniform over the first 80% of the steps).

    MARLM_CACHE=... python benchmarks/bench_dwell.py --seeds 1 2 3 4 5 --orders-per-run 24 48
"""

from __future__ import annotations

import argparse
import json
import tempfile
import warnings
from pathlib import Path

from marlm.envs.warehouse import sample_orders_path
from marlm.hybrid.build import cache_dir, cached_policy
from marlm.hybrid.controller import run, run_config
from marlm.hybrid.planning.planner import RulePlanner

DWELLS = ("none", "points", "reserve")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    ap.add_argument("--orders-per-run", type=int, nargs="+", default=[24])
    ap.add_argument("--planners", nargs="+", default=["rule", "triage"])
    ap.add_argument("--dwell", nargs="+", default=list(DWELLS), choices=DWELLS)
    ap.add_argument(
        "--sample-seeds", type=int, nargs="*", default=[0], help="seeds of the shipped order file"
    )
    ap.add_argument("--out", default=None, help="run folders go here (default: a temp folder)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    out = Path(args.out or tempfile.mkdtemp(prefix="marlm-dwell-"))
    policy, _ = cached_policy()
    triage = None
    if "triage" in args.planners:
        from marlm.llm.backends import EmbeddedModel
        from marlm.llm.triage import Triage

        triage = Triage(EmbeddedModel(), mode="probe", cache_dir=cache_dir())
        triage.warm_up()
    streams: list[tuple[str, dict]] = []
    for s in args.sample_seeds:
        streams.append((f"sample-s{s}", {"orders": str(sample_orders_path()), "seed": s}))
    for n in args.orders_per_run:
        streams += [
            (f"gen{n}-s{s}", {"orders": None, "n_orders": n, "seed": s}) for s in args.seeds
        ]
    for name, settings in streams:
        for planner_name in args.planners:
            for dwell in args.dwell:
                if planner_name == "rule":
                    planner = RulePlanner()
                else:
                    from marlm.hybrid.planning.triage import TriagePlanner

                    planner = TriagePlanner(triage)
                config = run_config(
                    planner=planner_name,
                    sync_planner=True,
                    tick_ms=0,
                    gif=False,
                    dwell=dwell,
                    **settings,
                )
                folder = out / f"{name}-{planner_name}-{dwell}"
                m = run(config, folder, planner=planner, policy=policy).metrics
                lat = m["order_latency_mean_steps"]
                row = {
                    "stream": name,
                    "planner": planner_name,
                    "dwell": dwell,
                    "delivered": m["delivered"],
                    "orders": m.get("orders_total"),
                    "on_time": m["on_time_rate"],
                    "throughput": m["throughput_per_1000_steps"],
                    "urgent": lat.get("urgent"),
                    "normal": lat.get("normal"),
                    "low": lat.get("low"),
                    "collisions": m.get("collisions"),
                }
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
