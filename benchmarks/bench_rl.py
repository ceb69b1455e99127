"""Updates per second: the engineer's note's own loops and plain-Python loops vs the compiled loop.

The baseline of every speed ratio is the note's own code (``seed_qlearning.py``: GridWorld,
tabular Q-learning; ``seed_iql.py``: two agents racing to the corner, IQL, shared reward), kept
outside the repository in ``../shared/ref/`` (``--ref DIR`` or ``$MARLM_NOTE_REF`` to point
elsewhere). :func:`bench_note_loops` runs each as a whole process, as the note ran it, and reads
its own updates-per-second line, beside the compiled loop of :mod:`marlm.rl.train` timed in this
process on the same number of episodes, in the same round so both see the same load. It prints
the wall-clock ratio (what each loop prints) and the CPU-time ratio (which load disturbs less).
The note's race has 4 actions and a slightly different collision rule than marlm's GridRace (5
actions, RWARE's rule), so the tasks are alike, not equal: the unit is one joint update (one TD
update of each agent's table), and the note's loop is the faster per update of the two.

The other figures check the result, not only the speed: the reference engine
(``engine="reference"``, the PettingZoo env and :mod:`marlm.rl.credit` one step at a time),
:func:`seed_style_iql_race` (one small env object, numpy tables, plain Python) and
:func:`bare_iql_race` (lists, no env object) solve marlm's own GridRace with the compiled loop's
random draws, so all give the same Q-tables, update for update (``tests/rl/test_bench_baselines.py``).

Every figure is the median of ``--repeat`` rounds (default 5); the load average is printed.

    python benchmarks/bench_rl.py [--repeat 5] [--ref ../shared/ref]
    python benchmarks/bench_rl.py --seed-loop   # the same-task plain loop alone, a whole process
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

# marlm is imported inside the functions that use it, so that ``--seed-loop`` runs the same-task
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
    """IQL on marlm's GridRace, shared team reward, in plain Python over ONE environment object
    (:class:`SeedRace`), numpy Q-tables ``float64[2, size**4, 5]``, one update at a time, epsilon
    ``max(floor, start * decay**episode)``.

    Not the note's own loop (that is ``../shared/ref/seed_iql.py``, the speed baseline of
    :func:`bench_note_loops`), but marlm's task written the note's way: its random draws are those
    of the compiled loop (``marlm.rl.qlearning.epsilon_greedy``'s pattern), so its tables come out
    equal to ``marlm train race``'s at the same settings, which checks that the compiled loop
    computes the same thing. Needs only numpy (``python benchmarks/bench_rl.py --seed-loop`` runs
    it alone, as a whole process). Returns ``(q, joint updates)``.
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
    """The compiled GridRace loop against the one-env and the bare plain loop of the same task, 30000 episodes.

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
        "seed": "one-env plain loop (numpy tables)",
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
    print(
        f"  load average before {load_before[0]:.2f}, after {load_after[0]:.2f} "
        f"({os.cpu_count()} CPUs)"
    )
    return ratios


NOTE_REF = Path(__file__).resolve().parents[2] / "shared" / "ref"
"""Where the note's own loops are kept: ``../shared/ref`` beside the repository."""

# Runs one of the note's scripts unchanged and adds one line: the CPU time of its own code.
_NOTE_RUNNER = (
    "import runpy, sys, time\n"
    "c = time.process_time()\n"
    "runpy.run_path(sys.argv[1], run_name='__main__')\n"
    "print('cpu %.6f' % (time.process_time() - c))\n"
)


def run_note_loop(script: Path) -> tuple[int, float, float]:
    """Run one of the note's loops as a whole process; return ``(updates, wall s, CPU s)``.

    ``updates`` and the wall time are what the script prints itself (``steps N`` and its
    ``time X s``, around its training loop only); the CPU time is that of the script's code
    (numpy's import included, the interpreter's start not).

    Raises:
        FileNotFoundError: the script does not exist (``--ref`` names where the loops are).
        RuntimeError: the script failed or printed no ``time ... steps ...`` line.
    """
    if not script.is_file():
        raise FileNotFoundError(f"{script}: the note's loop is not there; pass --ref DIR")
    done = subprocess.run(
        [sys.executable, "-c", _NOTE_RUNNER, str(script)], capture_output=True, text=True
    )
    found = re.search(r"time ([0-9.]+)s steps (\d+)", done.stdout)
    cpu = re.search(r"^cpu ([0-9.]+)$", done.stdout, re.M)
    if done.returncode or not found or not cpu:
        raise RuntimeError(f"{script} failed: {done.stderr.strip() or done.stdout.strip()}")
    return int(found.group(2)), float(found.group(1)), float(cpu.group(1))


def bench_note_loops(ref: Path, repeat: int = 5) -> dict[str, tuple[float, float]]:
    """The compiled loops against the note's own loops, each round the two side by side.

    GridWorld: ``seed_qlearning.py`` (3000 episodes) against ``train_gridworld`` on 300000
    episodes (3000 compiled episodes take about a millisecond, too short to time). GridRace:
    ``seed_iql.py`` (30000 episodes) against ``train_race`` at its defaults (30000 episodes).
    Returns ``{"gridworld": (wall ratio, CPU ratio), "gridrace": (...)}``: medians over the
    rounds of the compiled loop's updates per second over the note's.
    """
    from marlm.rl.train import GridWorldConfig, RaceConfig, train_gridworld, train_race

    train_gridworld(GridWorldConfig(episodes=10))  # warm-up (load the compiled code)
    train_race(RaceConfig(episodes=10))
    tasks = {
        "gridworld": (
            ref / "seed_qlearning.py",
            lambda: int(train_gridworld(GridWorldConfig(episodes=300_000)).lengths.sum()),
        ),
        "gridrace": (ref / "seed_iql.py", lambda: int(train_race(RaceConfig()).log.length.sum())),
    }
    load_before = os.getloadavg()[0]
    rows: dict[str, list[tuple[float, float, float, float]]] = {k: [] for k in tasks}
    for _ in range(repeat):
        for name, (script, compiled) in tasks.items():
            n_note, wall_note, cpu_note = run_note_loop(script)
            n, wall, cpu = _cpu_timed(compiled)
            rows[name].append((n_note / wall_note, n_note / cpu_note, n / wall, n / cpu))
    load_after = os.getloadavg()[0]
    print(f"the note's own loops ({ref}), whole processes, against the compiled loops;")
    print(f"updates/s, median of {repeat} rounds (wall as each loop prints it, CPU time)")
    ratios = {}
    for name, r in rows.items():
        med = [statistics.median(x[i] for x in r) for i in range(4)]
        wall_ratio = statistics.median(x[2] / x[0] for x in r)
        cpu_ratio = statistics.median(x[3] / x[1] for x in r)
        ratios[name] = (wall_ratio, cpu_ratio)
        print(f"  {name:9s} note's loop  {med[0]:12,.0f} wall {med[1]:12,.0f} CPU")
        print(f"  {name:9s} compiled     {med[2]:12,.0f} wall {med[3]:12,.0f} CPU")
        print(f"  {name:9s} ratio        {wall_ratio:11.0f}x wall {cpu_ratio:11.0f}x CPU")
    print(
        f"  load average before {load_before:.2f}, after {load_after:.2f} ({os.cpu_count()} CPUs)"
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
    parser.add_argument("--repeat", type=int, default=5, help="rounds of each comparison")
    parser.add_argument(
        "--ref",
        type=Path,
        default=Path(os.environ.get("MARLM_NOTE_REF", NOTE_REF)),
        help="folder of the note's own loops (seed_qlearning.py, seed_iql.py)",
    )
    parser.add_argument(
        "--seed-loop",
        action="store_true",
        help="run only the same-task plain loop (30000 episodes)",
    )
    parser.add_argument("--save", help="with --seed-loop: write its Q-tables to this .npy file")
    args = parser.parse_args()
    if args.seed_loop:
        q, updates = seed_style_iql_race()
        if args.save:
            np.save(args.save, q)
        print(f"same-task plain loop: {updates} joint updates")
        return
    note = bench_note_loops(args.ref, args.repeat)
    r1 = bench_gridworld()
    r2 = bench_race()
    r3 = bench_race_baselines(args.repeat)
    print(
        f"ratios against the note's own loops: gridworld {note['gridworld'][0]:.0f}x wall "
        f"({note['gridworld'][1]:.0f}x CPU), gridrace {note['gridrace'][0]:.0f}x wall "
        f"({note['gridrace'][1]:.0f}x CPU); same task, same tables: gridworld {r1:.0f}x and "
        f"gridrace {r2:.0f}x the reference engine, {r3['seed']:.0f}x the one-env plain loop, "
        f"{r3['bare']:.0f}x the bare loop"
    )


if __name__ == "__main__":
    main()
