"""Executor training: Q-learning updates per second, batched warehouses vs the single-env loop.

Run: `python benchmarks/bench_train.py [--quick]` (or `marlm bench --only train`). Prints the figure,
its baseline measured in the same run, and the ratio. Logic: :mod:`marlm.scale.benchmarks`.
"""

from __future__ import annotations

import sys

from marlm.scale.benchmarks import bench_train

if __name__ == "__main__":
    print("\n".join(bench_train(quick="--quick" in sys.argv[1:]).lines()))
