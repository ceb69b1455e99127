"""Shield.filter ms per step at 10..200 robots on a 64x64 map, vs the reference shield.

Run: `python benchmarks/bench_shield.py [--quick]` (or `marlm bench --only shield`). Prints the figure,
its baseline measured in the same run, and the ratio. Logic: :mod:`marlm.scale.benchmarks`.
"""

from __future__ import annotations

import sys

from marlm.scale.benchmarks import bench_shield

if __name__ == "__main__":
    print("\n".join(bench_shield(quick="--quick" in sys.argv[1:]).lines()))
