"""A lower bound on the urgent orders' mean latency of an order file, valid for any dispatch policy.

An order's latency (arrival to delivery, in steps, as ``marlm demo`` reports it) is at least the
shortest path from its shelf's pick cell to the station it is dropped at, plus, for an order that
arrives before any robot can have reached its pick cell, the steps still missing from the nearest
start cell. The bound holds even for a clairvoyant planner that parks a robot on every pick cell
just in time, so it is what any policy can reach at best. Comparing it with the normal orders'
measured mean latency tells whether "urgent orders faster than normal ones" is reachable on the
file without making normal orders slower.

    python benchmarks/urgent_latency_bound.py                 # the shipped sample orders, small
    python benchmarks/urgent_latency_bound.py --orders my.jsonl --layout medium
    python benchmarks/urgent_latency_bound.py --runs runs/demo-*    # beside measured demo runs
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from marlm.envs.warehouse import load_orders, sample_orders_path
from marlm.envs.warehouse.layout import load_layout


def bounds(layout_name: str, orders_path: str) -> list[tuple[str, str, int, int, int]]:
    """``(order id, listed priority, arrival, drive, approach)`` per order: ``drive`` is the
    shortest pick-cell-to-drop path, ``approach`` the steps no robot can have saved before the
    arrival (``max(0, min over start cells of the path to the pick cell - arrival)``)."""
    layout = load_layout(layout_name)
    rows = []
    for o in load_orders(orders_path, layout):
        pick, drop = layout.access[o.shelf], layout.drop[o.shelf]
        drive = int(layout.distance_from(drop)[pick])
        to_pick = layout.distance_from(pick)
        nearest = min(int(to_pick[tuple(s)]) for s in layout.starts)
        rows.append((o.id, o.priority, o.arrival, drive, max(0, nearest - o.arrival)))
    return rows


def measured(run: Path) -> dict[str, float]:
    """Mean latency by listed priority of a demo run folder (its ``trace.jsonl``)."""
    arrived, done, prio = {}, {}, {}
    for line in (run / "trace.jsonl").read_text(encoding="utf-8").splitlines():
        ev = json.loads(line)
        if ev.get("type") == "order" and ev.get("event") in ("arrived", "delivered"):
            (arrived if ev["event"] == "arrived" else done)[ev["order"]] = ev["step"]
            prio[ev["order"]] = ev["priority"]
    by: dict[str, list[int]] = {}
    for oid, step in done.items():
        by.setdefault(prio[oid], []).append(step - arrived[oid])
    return {p: float(np.mean(v)) for p, v in by.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layout", default="small")
    ap.add_argument("--orders", default=str(sample_orders_path()))
    ap.add_argument("--runs", nargs="*", default=[], help="demo run folders to set beside it")
    args = ap.parse_args()
    rows = bounds(args.layout, args.orders)
    print("order  priority  arrival  drive  approach  bound")
    for oid, prio, arrival, drive, approach in rows:
        print(f"{oid:<6} {prio:<9} {arrival:>7} {drive:>6} {approach:>9} {drive + approach:>6}")
    for prio in ("urgent", "normal", "low"):
        b = [d + a for _, p, _, d, a in rows if p == prio]
        if b:
            print(
                f"lower bound of the mean latency, {prio}: {np.mean(b):.2f} steps ({len(b)} orders)"
            )
    for run in args.runs:
        m = measured(Path(run))
        print(
            f"{run}: measured mean latency "
            + ", ".join(f"{p} {v:.2f}" for p, v in sorted(m.items()))
        )


if __name__ == "__main__":
    main()
