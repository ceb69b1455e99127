"""Scores in: the executor protocol, and the distance-to-go scores every executor builds on.

An executor turns the step view (:class:`marlm.hybrid.core.view.StepView`) into
``float64[n_robots, 5]`` action scores; the rule layer chooses the joint move from them.

- :class:`Executor`: what the controller, the evaluation and the benchmarks call;
- :func:`downhill_scores`: the distance-to-go score (+1 a move that shortens the shortest path
  to the goal, -1 one that lengthens it, 0 staying, ``-inf`` into a wall, a shelf or off the
  map), from observation bits (:func:`greedy_scores`) or from distance tables
  (:func:`distance_scores`).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from marlm.envs.warehouse.env import OBS_BLOCKED, OBS_CLOSER, OBS_HAS_TASK
from marlm.hybrid.core.view import N_ACTIONS, StepView


class Executor(Protocol):
    """Scores in: an executor scores all five actions of every robot, every step.

    ``scores(view, rng, explore)`` returns ``float64[len(view.agents), 5]`` (action order of
    :data:`marlm.envs.warehouse.MOVES`; higher first; ``-inf`` never to be chosen). With
    ``explore=True`` the scores carry the executor's execution noise (its random actions, as
    :func:`marlm.hybrid.core.view.one_hot` rows), for rule layers that filter one proposed action
    per robot instead of ranking them; ``rng`` is the run's executor generator.

    ``warm_up()`` does the executor's load-time work (compiling kernels, reading weights) before
    the control clock starts; the controller calls it once. ``name`` is what traces and tables
    call the executor.

    A learner's own side (``QExecutor.act`` during training on the raw environment) is not part
    of the contract: no caller of an executor uses it.
    """

    name: str

    def scores(
        self, view: StepView, rng: np.random.Generator, explore: bool = False
    ) -> np.ndarray: ...

    def warm_up(self) -> None: ...


def downhill_scores(closer: np.ndarray, blocked: np.ndarray, has_goal: np.ndarray) -> np.ndarray:
    """The distance-to-go score: ``float64[n, 5]`` for STAY and the four moves.

    Args:
        closer: ``bool[n, 4]`` the move (up, down, left, right) shortens the shortest-path
            distance to the robot's goal; blocked: ``bool[n, 4]`` it hits a wall, a shelf or the
            map edge; has_goal: ``bool[n]``.

    Returns:
        STAY 0; a move +1 if closer, else -1 (on a grid every move changes the distance by
        exactly one); every move -1 without a goal; ``-inf`` where blocked.
    """
    n = len(closer)
    scores = np.zeros((n, N_ACTIONS))
    scores[:, 1:] = np.where(np.asarray(closer, dtype=bool), 1.0, -1.0)
    scores[~np.asarray(has_goal, dtype=bool), 1:] = -1.0
    scores[:, 1:][np.asarray(blocked, dtype=bool)] = -np.inf
    return scores


def greedy_scores(obs: np.ndarray) -> np.ndarray:
    """:func:`downhill_scores` from observations: ``float32[n, 16]`` -> ``float64[n, 5]``."""
    obs = np.atleast_2d(np.asarray(obs))
    return downhill_scores(
        obs[:, OBS_CLOSER] > 0.5, obs[:, OBS_BLOCKED] > 0.5, obs[:, OBS_HAS_TASK] > 0.5
    )


def distance_scores(
    positions: np.ndarray,
    goal_dist: np.ndarray,
    nbr: np.ndarray,
    width: int,
    table_of: np.ndarray | None = None,
) -> np.ndarray:
    """:func:`downhill_scores` from distance tables: ``float64[n, 5]``.

    Args:
        positions: ``int[n, 2]``; goal_dist: ``int[k, V]`` distances to each goal (BFS,
            :func:`marlm.hybrid.core.graph.bfs_distance`; cell id ``row * width + col``; negative or
            :data:`marlm.hybrid.core.graph.UNREACHABLE` where the goal cannot be reached);
            nbr: :func:`marlm.hybrid.core.graph.neighbour_table`; width: map columns.
        table_of: ``int[n]`` row of ``goal_dist`` for each robot (default: row ``i`` for robot
            ``i``); robots sharing a goal share a row.
    """
    pos = np.asarray(positions, dtype=np.int64).reshape(-1, 2)
    cells = pos[:, 0] * width + pos[:, 1]
    rows = np.arange(len(cells)) if table_of is None else np.asarray(table_of, dtype=np.int64)
    nxt = nbr[cells, 1:]
    here = goal_dist[rows, cells][:, None]
    there = goal_dist[rows[:, None], np.maximum(nxt, 0)]
    closer = (nxt >= 0) & (there >= 0) & (there < here)
    return downhill_scores(closer, nxt < 0, np.ones(len(cells), dtype=bool))
