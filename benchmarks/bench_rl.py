"""Updates per second: the plain-Python loop vs the compiled loop, same task, same result.

Runs both engines of :mod:`marlm.rl.train` in this process on GridWorld (tabular Q-learning, the
seed note's settings) and GridRace (IQL, shared reward, the seed note's settings) and prints the
ratio of updates per second (one update = one TD update of one table for GridWorld; one joint step
of both agents for GridRace). The compiled loop is warmed up first so compilation is not timed. It
also prints the converged result of each engine: with one seed both engines give the same tables,
so the "same converged result" is checked, not assumed.

The reference engine steps a PettingZoo env and assigns credit through :mod:`marlm.rl.credit`, so
it is slower than a bare loop would be. :func:`bare_iql_race` is such a bare loop, the way one
writes IQL on GridRace in a few lines of plain Python (lists, no env object): the GridRace figure
is also given against it, the more demanding baseline, and its Q-tables are checked equal to the
compiled loop's.

    python benchmarks/bench_rl.py
"""

from __future__ import annotations

import time

import numpy as np

from marlm.envs.grid import COLLISION_REWARD, GOAL_REWARD, STAY, STEP_REWARD, move_table
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


def _eps_greedy(row: list[float], epsilon: float, rng: np.random.Generator) -> int:
    """Epsilon-greedy with random tie-breaking, the draws of ``marlm.rl.qlearning.epsilon_greedy``."""
    if rng.random() < epsilon:
        return int(rng.random() * len(row))
    best = max(row)
    ties = [a for a, v in enumerate(row) if v == best]
    return ties[0] if len(ties) == 1 else ties[int(rng.random() * len(ties))]


def bare_iql_race(cfg: RaceConfig) -> tuple[np.ndarray, int]:
    """IQL on GridRace (shared team reward, episode ends when either agent arrives), plain Python.

    Returns ``(q float64[2, O, 5], joint steps)``. Same rule as ``marlm.envs.grid.race_transition``
    and the same random draws as the compiled loop, so the tables come out equal.
    """
    if cfg.learner != "iql" or cfg.reward != "shared" or cfg.end != "any":
        raise ValueError("the bare loop is IQL, shared reward, end=any")
    n_cells = cfg.size * cfg.size
    goal = n_cells - 1
    moves = move_table(cfg.size).tolist()
    q = [[[0.0] * 5 for _ in range(n_cells * n_cells)] for _ in range(2)]
    eps = cfg.epsilon().values(cfg.episodes).tolist()
    alpha, gamma = cfg.alpha, cfg.gamma
    rng = np.random.default_rng(cfg.seed)
    steps = 0
    for ep in range(cfg.episodes):
        p0 = p1 = 0
        for _ in range(cfg.max_steps):
            o0, o1 = p0 * n_cells + p1, p1 * n_cells + p0
            a0 = _eps_greedy(q[0][o0], eps[ep], rng)
            a1 = _eps_greedy(q[1][o1], eps[ep], rng)
            t0, t1 = moves[p0][a0], moves[p1][a1]
            moved0, moved1 = t0 != p0, t1 != p1
            if (t0 == t1 and t0 != goal and (moved0 or moved1)) or (t0 == p1 and t1 == p0 != p1):
                r0 = COLLISION_REWARD if moved0 else STEP_REWARD
                r1 = COLLISION_REWARD if moved1 else STEP_REWARD
                t0, t1 = p0, p1
            else:
                r0 = GOAL_REWARD if t0 == goal else STEP_REWARD
                r1 = GOAL_REWARD if t1 == goal else STEP_REWARD
            team = r0 + r1
            done = t0 == goal or t1 == goal
            for i, o, a, x in ((0, o0, a0, t0 * n_cells + t1), (1, o1, a1, t1 * n_cells + t0)):
                td_target = team + gamma * (1.0 - done) * max(q[i][x])
                q[i][o][a] += alpha * (td_target - q[i][o][a])
            steps += 1
            p0, p1 = t0, t1
            if done:
                break
    assert STAY == 4  # the bare loop's agents never sit out: end=any stops both at once
    return np.array(q), steps


def bench_race_bare() -> float:
    """The compiled GridRace loop against :func:`bare_iql_race`, 30000 episodes each."""
    cfg = RaceConfig()
    train_race(RaceConfig(episodes=10))  # warm-up
    (q_bare, steps), t_bare = _timed(lambda: bare_iql_race(cfg))
    fast, t_fast = _timed(lambda: train_race(cfg))
    ups_bare = steps / t_bare
    ups_fast = fast.log.length.sum() / t_fast
    same = np.array_equal(q_bare, fast.tables["q"]) and steps == fast.log.length.sum()
    print(f"GridRace   bare plain loop {ups_bare:10,.0f} joint updates/s   ({steps:,})")
    print(
        f"GridRace   compiled        {ups_fast:10,.0f} joint updates/s   ({fast.log.length.sum():,})"
    )
    print(f"GridRace   30000 episodes: identical Q-tables, bare loop and compiled: {same}")
    ratio = ups_fast / ups_bare
    print(f"GridRace   ratio to the bare loop {ratio:.0f}x")
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
    r3 = bench_race_bare()
    print(
        f"ratios: gridworld {r1:.0f}x, gridrace {r2:.0f}x, gridrace vs the bare loop {r3:.0f}x "
        "(target >= 100x)"
    )
