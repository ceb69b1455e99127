"""Batched warehouse vs RWARE 2.0.0: robot-steps per second on the same map and robot count.

Run: `python benchmarks/bench_env.py [--quick]` (or `marlm bench --only env`). Prints the figure,
its baseline measured in the same run, and the ratio. Logic: :mod:`marlm.scale.benchmarks`.
"""

from __future__ import annotations

import sys

from marlm.scale.benchmarks import bench_env

if __name__ == "__main__":
    print("\n".join(bench_env(quick="--quick" in sys.argv[1:]).lines()))
