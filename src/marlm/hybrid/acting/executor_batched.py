"""Training the warehouse executor on many warehouses at once (:class:`BatchedWarehouseEnv`).

Same learner as :func:`marlm.hybrid.acting.executor.train_executor`: one Q-table shared by all robots
(parameter sharing), each robot updated from its own reward with the sequential Q-learning update
(:func:`marlm.rl.qlearning.td_update_batch`; Watkins & Dayan 1992). What changes is where the
transitions come from: ``n_envs`` warehouses advance together, and every step feeds
``n_envs x n_robots`` transitions to the table in one compiled call.

Episode ``e`` is seeded ``seed + e`` exactly as in the serial loop, and its epsilon is
``epsilon.value(e)``; episodes are handed to warehouses in order as they free up. The policy acts
on a whole batch with one table snapshot per step, so within a step no robot sees another
robot's update of that step (in the serial loop this already holds for the robots of one
warehouse; here it extends to all warehouses of the batch). The learned table therefore differs
from the serial one in its numbers, not in the algorithm; ``benchmarks/bench_train.py`` compares
updates per second and the delivery rate of both.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from marlm.envs.warehouse.batched import BatchedWarehouseEnv
from marlm.errors import InputError
from marlm.hybrid.acting.executor import QExecutor, TrainStats, discretise
from marlm.rl.qlearning import EpsilonSchedule, epsilon_greedy, td_update_batch


def train_executor_batched(
    *,
    layout: str = "small",
    episodes: int = 60,
    max_steps: int = 400,
    seed: int = 0,
    alpha: float = 0.2,
    gamma: float = 0.9,
    epsilon: EpsilonSchedule | None = None,
    n_orders: int = 40,
    n_envs: int = 16,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[QExecutor, TrainStats]:
    """Train the shared Q-table on ``n_envs`` warehouses stepped together.

    Args:
        layout, episodes, max_steps, seed, alpha, gamma, epsilon, n_orders, progress: as in
            :func:`marlm.hybrid.acting.executor.train_executor`.
        n_envs: warehouses stepped together (capped at ``episodes``).

    Returns:
        The trained :class:`QExecutor` and :class:`TrainStats` (per-episode arrays indexed by
        episode number; ``updates`` counts TD updates, one per robot per step).

    Raises:
        InputError: ``episodes``, ``max_steps`` or ``n_envs`` not positive, or a bad layout.
    """
    if episodes <= 0:
        raise InputError(f"must be > 0, got {episodes}", field="episodes")
    if max_steps <= 0:
        raise InputError(f"must be > 0, got {max_steps}", field="max_steps")
    if n_envs <= 0:
        raise InputError(f"must be > 0, got {n_envs}", field="n_envs")
    epsilon = epsilon or EpsilonSchedule(0.5, 0.95, 0.02)
    eps_of = epsilon.values(episodes)
    n_envs = min(n_envs, episodes)
    rng = np.random.default_rng(seed)
    env = BatchedWarehouseEnv(
        n_envs, layout=layout, n_orders=n_orders, max_steps=max_steps, autoreset=False
    )
    n = env.n_robots
    policy = QExecutor(info={"layout": str(layout), "episodes": episodes, "seed": seed})
    returns = np.zeros(episodes)
    agent_returns = np.zeros((episodes, n))
    deliveries = np.zeros(episodes, dtype=np.int64)
    episode_of = np.arange(n_envs)  # episode number each warehouse is playing, -1 when idle
    obs = env.reset(seed=[seed + e for e in range(n_envs)])
    next_episode, finished, updates = n_envs, 0, 0
    t0 = time.perf_counter()
    while finished < episodes:
        live = episode_of >= 0
        states = discretise(obs.reshape(-1, obs.shape[-1]))
        eps = np.repeat(np.where(live, eps_of[np.maximum(episode_of, 0)], 0.0), n)
        actions = np.asarray(epsilon_greedy(policy.q[states], eps, rng)).reshape(n_envs, n)
        out = env.step(actions)
        next_states = discretise(out.final_observations.reshape(-1, obs.shape[-1]))
        done = np.repeat(out.terminated, n)
        rows = np.repeat(live, n)
        # Q-learning target per robot: r + gamma * (1 - terminated) * max_a Q(s', a); a time
        # limit (truncated) still bootstraps (Sutton & Barto 2018, 6.5; Pardo et al. 2018).
        td_update_batch(
            policy.q,
            states[rows],
            actions.reshape(-1)[rows],
            out.rewards.reshape(-1)[rows],
            next_states[rows],
            done[rows],
            alpha=alpha,
            gamma=gamma,
        )
        updates += int(rows.sum())
        ep = episode_of[live]
        returns[ep] += out.rewards[live].sum(axis=1)
        agent_returns[ep] += out.rewards[live]
        deliveries[ep] += out.delivered[live]
        ended = np.flatnonzero(live & (out.terminated | out.truncated))
        if ended.size:
            seeds: list[int | None] = [None] * n_envs
            restart = []
            for b in ended:
                finished += 1
                if progress is not None:
                    progress(finished, episodes)
                if next_episode < episodes:
                    episode_of[b] = next_episode
                    seeds[b] = seed + next_episode
                    restart.append(int(b))
                    next_episode += 1
                else:
                    episode_of[b] = -1
            if restart:
                env.reset(seed=seeds, envs=restart)
        obs = env.observations()
    policy.info.update(
        {"updates": updates, "alpha": alpha, "gamma": gamma, "n_envs": n_envs, "engine": "batched"}
    )
    agents = {f"robot_{i}": agent_returns[:, i].copy() for i in range(n)}
    stats = TrainStats(returns, agents, deliveries, updates, time.perf_counter() - t0)
    return policy, stats


__all__ = ["train_executor_batched"]
