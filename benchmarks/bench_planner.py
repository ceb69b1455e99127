"""Control-step rate with a 2 s planner backend vs an instant one; robots with orders keep moving.

Run: `python benchmarks/bench_planner.py [--quick]` (or `marlm bench --only planner`). Prints the figure,
its baseline measured in the same run, and the ratio. Logic: :mod:`marlm.scale.benchmarks`.
"""

from __future__ import annotations

import sys

from marlm.scale.benchmarks import bench_planner

if __name__ == "__main__":
    print("\n".join(bench_planner(quick="--quick" in sys.argv[1:]).lines()))
