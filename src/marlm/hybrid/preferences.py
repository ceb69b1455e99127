"""Executor scores: every robot's preference for each of the 5 actions, for the PIBT rule layer.

The rule layer (:class:`marlm.hybrid.shield.PibtShield`) needs each robot's whole ranking, not
only its best action: when the best cell is taken it falls back to the next. This module gives
every executor that ranking as ``float[n_robots, 5]`` (higher first, argmax = the action the
executor's ``act`` takes without noise):

- the Q-table executor: its Q-values ``q[state]``, scaled per robot to [0, 1) and added to the
  greedy scores below (a learned preference on top of the distance heuristic, as Veerapaneni et
  al., "Improving Learnt Local MAPF Policies with Heuristic Search", ICAPS 2024, combine a learnt
  policy with PIBT). Q-values alone, from a table trained without this rule layer, rank waiting
  above pushing: behind a robot in a lane they keep every robot still (case 1 delivers 0 of 2);
  see ``docs/movement.md``. ``q_only=True`` gives the raw Q-values;
- the greedy executor: minus the shortest-path distance-to-go after each action, relative to the
  robot's current distance (on a grid every move changes it by exactly one: +1 closer, 0 stay,
  -1 farther; a move into a wall, shelf or the edge is ``-inf``); without a task, STAY first;
- the random executor: uniform random scores;
- anything else: the one action its ``act`` returns first, the rest tied.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from marlm.envs.warehouse.dynamics import STAY
from marlm.envs.warehouse.env import OBS_BLOCKED, OBS_CLOSER, OBS_HAS_TASK


def greedy_scores(obs: np.ndarray) -> np.ndarray:
    """``float64[n, 5]`` minus the distance-to-go after each action, from observations.

    Args:
        obs: ``float32[n, 16]`` warehouse observations (see ``WarehouseEnv``'s Observation Space).
    """
    obs = np.atleast_2d(np.asarray(obs))
    n = len(obs)
    scores = np.zeros((n, 5))
    downhill = obs[:, OBS_CLOSER] > 0.5
    has_task = obs[:, OBS_HAS_TASK] > 0.5
    scores[:, 1:] = np.where(downhill, 1.0, -1.0)
    scores[~has_task, 1:] = -1.0
    scores[:, 1:][obs[:, OBS_BLOCKED] > 0.5] = -np.inf
    return scores


def executor_scores(
    executor,
    observations: Mapping[str, np.ndarray],
    agents: list[str],
    rng: np.random.Generator,
    q_only: bool = False,
) -> np.ndarray:
    """``float64[len(agents), 5]`` action scores of ``executor`` for ``agents`` (see module doc).

    An executor may define its own ``scores(observations, agents, rng)``; that is used first.
    """
    own = getattr(executor, "scores", None)
    if callable(own):
        return np.asarray(own(observations, agents, rng), dtype=np.float64)
    from marlm.hybrid.executor import GreedyExecutor, QExecutor, RandomExecutor, discretise

    obs = np.stack([observations[a] for a in agents])
    if isinstance(executor, QExecutor):
        q = executor.q[discretise(obs)].astype(np.float64)
        if q_only:
            return q
        lo, hi = q.min(axis=1, keepdims=True), q.max(axis=1, keepdims=True)
        scaled = (q - lo) / np.where(hi > lo, hi - lo, 1.0) * 0.999
        return greedy_scores(obs) + scaled
    if isinstance(executor, GreedyExecutor):
        return greedy_scores(obs)
    if isinstance(executor, RandomExecutor):
        return rng.random((len(agents), 5))
    actions = np.asarray(executor.act(observations, agents, rng), dtype=np.int64)
    scores = np.zeros((len(agents), 5))
    scores[np.arange(len(agents)), np.where((actions >= 0) & (actions < 5), actions, STAY)] = 1.0
    return scores
