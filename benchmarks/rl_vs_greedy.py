"""RL vs greedy executor under each rule layer, held-out seeds, no random actions at execution.

Runs the warehouse env directly (orders auto-assigned to idle robots, as the rule planner does)
for ``--steps`` steps per seed and prints delivered orders per (layer, executor). Layers: the PIBT
rule layer (``PibtShield``) with executor scores, and the local shield with the executor's action.
Executors: ``greedy`` (shortest path), ``rl`` (Q-table + distance heuristic, the default RL
scores), ``rl-q`` (raw Q-values). The Q-table is the cached default one (trained on seeds 0..).

Usage: ``python benchmarks/rl_vs_greedy.py --layout small --seeds 100-109 --steps 500``

Every executor delivers all 40 orders under PIBT here (the setting saturates); the dense lifelong
setting where it does not, with the learned guidance beside, is ``bench_dense_warehouse.py``.
"""

from __future__ import annotations

import argparse

import numpy as np

from marlm.envs.warehouse import WarehouseEnv
from marlm.hybrid.acting.executor import GreedyExecutor, QExecutor, discretise
from marlm.hybrid.build import cached_policy
from marlm.hybrid.core.view import step_view
from marlm.hybrid.rules.factory import make_shield
from marlm.hybrid.rules.layer import shielded_step


class QOnly:
    """The Q-table's raw values as scores (no distance heuristic)."""

    name = "rl-q"

    def __init__(self, q: QExecutor) -> None:
        self.q = q

    def scores(self, view, rng, explore=False):
        return self.q.q[discretise(view.stacked())].astype(np.float64)


def run(layout: str, seed: int, steps: int, layer: str, executor) -> tuple[int, int]:
    env = WarehouseEnv(layout, max_steps=steps, seed=seed, n_orders=40)
    obs, _ = env.reset(seed=seed)
    agents = list(env.possible_agents)
    n = len(agents)
    shield = make_shield(layer, env.layout.free, n, seed=seed)
    rng = np.random.default_rng(seed)
    longest_wait, still = 0, np.zeros(n, dtype=int)
    for _ in range(steps):
        view = step_view(env, obs)
        res = shielded_step(shield, view, executor.scores(view, rng))
        before = env.robot_positions.copy()
        obs, _, _, truncs, _ = env.step({a: int(res.actions[i]) for i, a in enumerate(agents)})
        has_task = np.array([env.task_of(a) is not None for a in agents])
        moved = (env.robot_positions != before).any(axis=1)
        still = np.where(has_task & ~moved, still + 1, 0)
        longest_wait = max(longest_wait, int(still.max()))
        if all(truncs.values()):
            break
    return len(env.delivered), longest_wait


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layout", default="small")
    ap.add_argument("--seeds", default="100-109")
    ap.add_argument("--steps", type=int, default=500)
    args = ap.parse_args()
    lo, _, hi = args.seeds.partition("-")
    seeds = list(range(int(lo), int(hi or lo) + 1))
    q, _ = cached_policy()
    q.noise = 0.0
    rows = [
        ("pibt", "greedy", GreedyExecutor()),
        ("pibt", "rl", q),
        ("pibt", "rl-q", QOnly(q)),
        ("local", "greedy", GreedyExecutor()),
        ("local", "rl-q", QOnly(q)),
    ]
    print(f"| layer | executor | delivered per seed ({args.seeds}) | total | longest wait |")
    print("|---|---|---|---|---|")
    for layer, name, ex in rows:
        res = [run(args.layout, s, args.steps, layer, ex) for s in seeds]
        per = ", ".join(str(d) for d, _ in res)
        print(f"| {layer} | {name} | {per} | {sum(d for d, _ in res)} | {max(w for _, w in res)} |")


if __name__ == "__main__":
    main()
