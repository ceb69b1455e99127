"""QMIX on GridRace 3x3: plain QMIX with a longer budget, learn-to-threshold over seeds.

Trains ``marlm.rl.deep`` QMIX (shared reward, gamma 0.95, the tests' race settings) for
``--steps`` joint steps on 4 copies (lr 0.001, epsilon 1 -> 0.05 over half the steps, learning
after 1000 steps, copies restarted every 10,000 steps, the mixer and network at ``DeepConfig``'s
defaults) and prints, per seed, the training CPU seconds, the training team return per eighth of
the episodes and what the trained greedy joint action does (``marlm.rl.deep.run.evaluate``: the
team return and whether both agents reach the goal; "solved" = both do). The budget is too large for a unit test (about a
minute of CPU a seed at 30,000 steps); docs/deep-rl.md holds the figures.

Usage::

    PYTHONPATH=src nice -n 10 .venv/bin/python benchmarks/bench_deep_qmix_race.py --seeds 0,1,2 --steps 30000
"""

from __future__ import annotations

import argparse
import functools
import time

from marlm.envs.grid import GridRace
from marlm.rl.deep.common import DeepConfig
from marlm.rl.deep.run import evaluate, train_deep

RACE3 = functools.partial(GridRace, size=3)


def reached_goal(agent: str, terminated: bool, info: dict) -> bool:
    return terminated and info["cell"] == 8


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--steps", type=int, default=30_000)
    ap.add_argument("--reward-norm", action=argparse.BooleanOptionalAction, default=True)
    args = ap.parse_args()
    print(
        "| seed | steps | CPU s | training team return per eighth | greedy team return | solved |"
    )
    print("|---|---|---|---|---|---|")
    for seed in (int(s) for s in args.seeds.split(",")):
        config = DeepConfig(
            learner="qmix", steps=args.steps, seed=seed, gamma=0.95, lr=0.001,
            shared_reward=True, num_envs=4, eps_fraction=0.5, learning_starts=1000,
            reward_norm=args.reward_norm, chunk=10_000,
        )  # fmt: skip
        cpu = time.process_time()
        res = train_deep(RACE3, config)
        cpu = time.process_time() - cpu
        ev = evaluate(res, RACE3, 1, reached_fn=reached_goal)
        team = res.episodes["team_return"]
        k = max(1, len(team) // 8)
        curve = ", ".join(f"{team[i : i + k].mean():.2f}" for i in range(0, k * 8, k))
        solved = "yes" if ev["reached"][0].all() else "no"
        print(
            f"| {seed} | {args.steps} | {cpu:.0f} | {curve} | {ev['team_return'][0]:.2f} | "
            f"{solved} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
