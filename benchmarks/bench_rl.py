"""Updates per second: the plain-Python loops vs the compiled loop, same task, same result.

Runs the engines of :mod:`marlm.rl.train` in this process on GridWorld (tabular Q-learning, the
seed note's settings) and GridRace (IQL, shared reward, the seed note's settings) and prints the
ratio of updates per second (one update = one TD update of one table for GridWorld; one joint step
of both agents for GridRace). The compiled loop is warmed up first so compilation is not timed. It
also prints the converged result of each engine: with one seed all give the same tables, so the
"same converged result" is checked, not assumed.

GridRace baselines, plain Python, one update at a time:

- the reference engine (``engine="reference"``): steps the PettingZoo env and assigns credit
  through :mod:`marlm.rl.credit`, so it is slower than the seed's loop;
- :func:`seed_style_iql_race`: a stand-in for the seed's own loop as the seed note describes it
  (one small env object, numpy Q-tables); the seed's exact code is not in the repository;
- :func:`bare_iql_race`: a leaner loop than the seed's (lists, no env object), the most demanding
  baseline.

The seed-style and bare figures are the median of ``--repeat`` runs (default 5), the three loops
run one after another in each run so they see the same load; the load average is printed.

    python benchmarks/bench_rl.py [--repeat 5]
    python benchmarks/bench_rl.py --seed-loop   # the seed-style loop alone, as a whole process
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

# marlm is imported inside the functions that use it, so that ``--seed-loop`` runs the seed-style
# loop as the seed ran it: a process that loads numpy only.


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def bench_gridworld() -> float:
    from marlm.rl.train import GridWorldConfig, train_gridworld

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


def bare_iql_race(cfg) -> tuple[np.ndarray, int]:
    """IQL on GridRace (shared team reward, episode ends when either agent arrives), plain Python.

    Returns ``(q float64[2, O, 5], joint steps)``. Same rule as ``marlm.envs.grid_dynamics.race_transition``
    and the same random draws as the compiled loop, so the tables come out equal.
    """
    from marlm.envs.grid_dynamics import (
        COLLISION_REWARD,
        GOAL_REWARD,
        STAY,
        STEP_REWARD,
        move_table,
    )

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


class SeedRace:
    """GridRace as a small env class of the seed note's kind: ``reset()`` and ``step(actions)``.

    Two agents start in cell 0 of a ``size x size`` grid; the goal is the last cell. Moves are
    computed from (row, column); the rule is ``marlm.envs.grid_dynamics.race_transition``'s (a collision or a
    swap: neither moves, a mover gets -0.5, a stayer -0.01; else +1 at the goal, -0.01 a step).
    ``step`` returns ``(obs, rewards, terminated, truncated)`` with ``obs`` the pair of
    observations ``own * size**2 + other``; the episode ends when either agent arrives (``end=any``)
    or after ``max_steps`` steps (truncated). Plain Python, no checks.
    """

    DELTAS = ((-1, 0), (1, 0), (0, -1), (0, 1), (0, 0))  # up, down, left, right, stay

    def __init__(self, size: int = 4, max_steps: int = 50) -> None:
        self.size = size
        self.n_cells = size * size
        self.goal = self.n_cells - 1
        self.max_steps = max_steps

    def reset(self) -> tuple[int, int]:
        self.cells = [0, 0]
        self.t = 0
        return self._obs()

    def _obs(self) -> tuple[int, int]:
        c0, c1 = self.cells
        return c0 * self.n_cells + c1, c1 * self.n_cells + c0

    def _move(self, cell: int, action: int) -> int:
        row, col = divmod(cell, self.size)
        dr, dc = self.DELTAS[action]
        r, c = row + dr, col + dc
        return r * self.size + c if 0 <= r < self.size and 0 <= c < self.size else cell

    def step(self, actions):
        p0, p1 = self.cells
        t0, t1 = self._move(p0, actions[0]), self._move(p1, actions[1])
        moved0, moved1 = t0 != p0, t1 != p1
        if (t0 == t1 and t0 != self.goal and (moved0 or moved1)) or (
            t0 == p1 and t1 == p0 and p0 != p1
        ):
            rewards = (-0.5 if moved0 else -0.01, -0.5 if moved1 else -0.01)
            t0, t1 = p0, p1
        else:
            rewards = (1.0 if t0 == self.goal else -0.01, 1.0 if t1 == self.goal else -0.01)
        self.cells = [t0, t1]
        self.t += 1
        terminated = t0 == self.goal or t1 == self.goal
        truncated = not terminated and self.t >= self.max_steps
        return self._obs(), rewards, terminated, truncated


def seed_style_iql_race(
    episodes: int = 30000,
    *,
    alpha: float = 0.05,
    gamma: float = 0.95,
    epsilon: tuple[float, float, float] = (0.6, 0.999, 0.02),
    size: int = 4,
    max_steps: int = 50,
    seed: int = 0,
) -> tuple[np.ndarray, int]:
    """IQL on GridRace, shared team reward, the way the seed note describes its reference loop:
    plain Python over ONE environment object (:class:`SeedRace`), numpy Q-tables
    ``float64[2, size**4, 5]``, one update at a time, epsilon ``max(floor, start * decay**episode)``.

    A stand-in: the seed's exact code is not in the repository. The seed note gives its loop as
    "plain Python over one environment, taking one update at a time", at about 3e4 joint updates/s
    for GridRace on these machines; this one is written the plain way from that description (numpy
    for the table rows, as the seed's tables were numpy arrays). Its random draws are those of the
    compiled loop (``marlm.rl.qlearning.epsilon_greedy``'s pattern), so its tables come out equal to
    ``marlm train race``'s at the same settings: the task and the result are the same, only the
    speed differs. Needs only numpy (``python benchmarks/bench_rl.py --seed-loop`` runs it alone,
    a whole process as the seed ran it). Returns ``(q, joint updates)``.
    """
    start, decay, floor = epsilon
    env = SeedRace(size, max_steps)
    q = np.zeros((2, env.n_cells * env.n_cells, 5))
    rng = np.random.default_rng(seed)
    returns = []
    updates = 0
    for episode in range(episodes):
        eps = max(floor, start * decay ** float(episode))
        obs = env.reset()
        total = 0.0
        while True:
            actions = []
            for i in range(2):
                row = q[i, obs[i]]
                if rng.random() < eps:
                    actions.append(int(rng.random() * 5))
                else:
                    best = np.flatnonzero(row == row.max())
                    pick = 0 if len(best) == 1 else int(rng.random() * len(best))
                    actions.append(int(best[pick]))
            next_obs, rewards, terminated, truncated = env.step(actions)
            team = rewards[0] + rewards[1]
            for i in range(2):
                target = team + gamma * (1.0 - terminated) * q[i, next_obs[i]].max()
                q[i, obs[i], actions[i]] += alpha * (target - q[i, obs[i], actions[i]])
            updates += 1
            total += team
            obs = next_obs
            if terminated or truncated:
                break
        returns.append(total)
    return q, updates


def _cpu_timed(fn):
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


def bench_race_baselines(repeat: int = 5) -> dict[str, float]:
    """The compiled GridRace loop against the seed-style and the bare plain loop, 30000 episodes.

    Each of ``repeat`` runs times the three loops one after another (same load); the figures are
    medians over the runs, wall-clock (and CPU time, which load disturbs less). Returns the median
    ratios ``{"seed": ..., "bare": ...}`` of joint updates per second, compiled / plain.
    """
    from marlm.rl.train import RaceConfig, train_race

    cfg = RaceConfig()
    train_race(RaceConfig(episodes=10))  # warm-up (load the compiled code)
    load_before = os.getloadavg()
    rows: dict[str, list[tuple[float, float]]] = {"seed": [], "bare": [], "compiled": []}
    steps: dict[str, int] = {}
    tables: dict[str, np.ndarray] = {}
    for _ in range(repeat):
        (q, n), wall, cpu = _cpu_timed(lambda: seed_style_iql_race(cfg.episodes, seed=cfg.seed))
        rows["seed"].append((n / wall, n / cpu))
        steps["seed"], tables["seed"] = n, q
        (q, n), wall, cpu = _cpu_timed(lambda: bare_iql_race(cfg))
        rows["bare"].append((n / wall, n / cpu))
        steps["bare"], tables["bare"] = n, q
        res, wall, cpu = _cpu_timed(lambda: train_race(cfg))
        n = int(res.log.length.sum())
        rows["compiled"].append((n / wall, n / cpu))
        steps["compiled"], tables["compiled"] = n, res.tables["q"]
    load_after = os.getloadavg()
    med = {
        k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
        for k, v in rows.items()
    }
    ratios = {
        k: statistics.median(rows["compiled"][r][0] / rows[k][r][0] for r in range(repeat))
        for k in ("seed", "bare")
    }
    cpu_ratios = {k: med["compiled"][1] / med[k][1] for k in ("seed", "bare")}
    names = {
        "seed": "seed-style loop (one env object, numpy tables)",
        "bare": "bare loop (lists, no env object)",
        "compiled": "compiled loop (marlm train race engine)",
    }
    print(f"GridRace, 30000 episodes, median of {repeat} runs; joint updates/s (wall, CPU time)")
    for k, (w, c) in med.items():
        print(f"  {names[k]:50s} {w:12,.0f}  {c:12,.0f}   ({steps[k]:,} updates)")
    same = all(np.array_equal(tables["compiled"], tables[k]) for k in ("seed", "bare"))
    same = same and len(set(steps.values())) == 1
    print(f"  identical Q-tables and update counts, all three loops: {same}")
    for k in ("seed", "bare"):
        print(
            f"  compiled / {k:4s}: {ratios[k]:6.0f}x wall (median of per-run ratios), "
            f"{cpu_ratios[k]:6.0f}x CPU time"
        )
    if med["seed"][1] < 3e4:
        print(
            f"  note: the seed-style loop ran at {med['seed'][1]:,.0f}/s of CPU time, below the "
            "seed note's ~3e4 joint updates/s"
        )
    print(
        f"  load average before {load_before[0]:.2f}, after {load_after[0]:.2f} "
        f"({os.cpu_count()} CPUs)"
    )
    return ratios


def bench_race() -> float:
    from marlm.rl.train import RaceConfig, train_race

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs of the GridRace baselines")
    parser.add_argument(
        "--seed-loop", action="store_true", help="run only the seed-style loop (30000 episodes)"
    )
    parser.add_argument("--save", help="with --seed-loop: write its Q-tables to this .npy file")
    args = parser.parse_args()
    if args.seed_loop:
        q, updates = seed_style_iql_race()
        if args.save:
            np.save(args.save, q)
        print(f"seed-style loop: {updates} joint updates")
        return
    r1 = bench_gridworld()
    r2 = bench_race()
    r3 = bench_race_baselines(args.repeat)
    print(
        f"ratios: gridworld {r1:.0f}x, gridrace {r2:.0f}x the reference engine, "
        f"{r3['seed']:.0f}x the seed-style loop, {r3['bare']:.0f}x the bare loop (target >= 100x "
        "the seed's loop)"
    )


if __name__ == "__main__":
    main()
