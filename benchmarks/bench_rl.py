"""Updates per second: the plain-Python loop vs the compiled loop, same task, same result.

Runs both engines of :mod:`marlm.rl.train` in this process on GridWorld (tabular Q-learning, the
issue's settings) and GridRace (IQL, shared reward, the issue's settings) and prints the ratio of
updates per second (one update = one TD update of one table for GridWorld; one joint step of both
agents for GridRace). The compiled loop is warmed up first so compilation is not timed. It also
prints the converged result of each engine: with one seed both engines give the same tables, so
the "same converged result" is checked, not assumed.

    python benchmarks/bench_rl.py
"""

from __future__ import annotations

import time

import numpy as np

from marlm.rl.train import GridWorldConfig, RaceConfig, train_gridworld, train_race


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def bench_gridworld() -> float:
    train_gridworld(GridWorldConfig(episodes=10))  # warm-up (load compiled code)
    ref, t_ref = _timed(lambda: train_gridworld(GridWorldConfig(episodes=300), engine="reference"))
    fast, t_fast = _timed(
        lambda: train_gridworld(GridWorldConfig(episodes=300_000, epsilon_floor=0.02))
    )
    ups_ref = ref.lengths.sum() / t_ref
    ups_fast = fast.lengths.sum() / t_fast
    same = train_gridworld(GridWorldConfig(episodes=3000))
    same_ref = train_gridworld(GridWorldConfig(episodes=3000), engine="reference")
    print(f"GridWorld  plain loop  {ups_ref:12,.0f} updates/s   ({ref.lengths.sum():,} updates)")
    print(f"GridWorld  compiled    {ups_fast:12,.0f} updates/s   ({fast.lengths.sum():,} updates)")
    print(
        f"GridWorld  3000 episodes: V(start) plain {same_ref.value_start:.4f}, compiled "
        f"{same.value_start:.4f}; identical Q-table: {np.array_equal(same.q, same_ref.q)}"
    )
    ratio = ups_fast / ups_ref
    print(f"GridWorld  ratio {ratio:.0f}x")
    return ratio


def bench_race() -> float:
    train_race(RaceConfig(episodes=10))  # warm-up
    ref, t_ref = _timed(lambda: train_race(RaceConfig(episodes=1500), engine="reference"))
    fast, t_fast = _timed(lambda: train_race(RaceConfig(episodes=30_000)))
    ups_ref = ref.log.length.sum() / t_ref
    ups_fast = fast.log.length.sum() / t_fast
    same = train_race(RaceConfig(episodes=1500))
    print(f"GridRace   plain loop  {ups_ref:12,.0f} joint updates/s   ({ref.log.length.sum():,})")
    print(f"GridRace   compiled    {ups_fast:12,.0f} joint updates/s   ({fast.log.length.sum():,})")
    print(
        f"GridRace   1500 episodes: identical Q-tables: {np.array_equal(same.tables['q'], ref.tables['q'])}"
    )
    ratio = ups_fast / ups_ref
    print(f"GridRace   ratio {ratio:.0f}x")
    return ratio


if __name__ == "__main__":
    r1 = bench_gridworld()
    r2 = bench_race()
    print(f"ratios: gridworld {r1:.0f}x, gridrace {r2:.0f}x (target >= 100x)")
