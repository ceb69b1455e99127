"""Scores in: the per-step view, the executor protocol, and the scores every executor builds on.

Each control step the controller builds one :class:`StepView` of the warehouse; every executor
turns it into ``float64[n_robots, 5]`` action scores (higher first, argmax = the executor's own
choice), and the rule layer (:mod:`marlm.hybrid.rules.shield`) chooses the joint move from them. This
module is the low end of that seam: it imports only the environment, so executors, rule layers
and the controller all import it, and it imports none of them.

Defined here, once:

- :func:`robot_priority`: which robot wins a contested cell (carrying, then a task, then idle);
- :func:`downhill_scores`: the distance-to-go score (+1 a move that shortens the shortest path
  to the goal, -1 one that lengthens it, 0 staying, ``-inf`` into a wall, a shelf or off the
  map), from observation bits (:func:`greedy_scores`) or from distance tables
  (:func:`distance_scores`);
- :func:`one_hot`: scores that name one action per robot (an executor that only acts).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

from marlm.envs.warehouse.dynamics import MOVES, STAY
from marlm.envs.warehouse.env import OBS_BLOCKED, OBS_CLOSER, OBS_HAS_TASK

if TYPE_CHECKING:
    from marlm.envs.warehouse import WarehouseEnv

N_ACTIONS = len(MOVES)
Cell = tuple[int, int]


@dataclass(frozen=True)
class StepView:
    """What executors and the rule layer see of one control step; row ``i`` is ``agents[i]``.

    Attributes:
        agents: robot names, ``env.possible_agents`` order.
        positions: ``int64[n, 2]`` (row, col) of every robot.
        goals: ``int64[n, 2]`` each robot's goal cell: its task's target, else its dwell cell
            (``idle_goals``), else ``(-1, -1)``.
        priority: ``float64[n]`` :func:`robot_priority`.
        observations: each robot's observation (``float32[16]`` by name), or None where no
            executor reads them (the PettingZoo wrapper, benchmarks).
        idle_goals: ``{robot: (row, col)}`` dwell cells of robots without a task.
    """

    agents: list[str]
    positions: np.ndarray
    goals: np.ndarray
    priority: np.ndarray
    observations: Mapping[str, np.ndarray] | None = None
    idle_goals: Mapping[str, Cell] = field(default_factory=dict)

    def stacked(self) -> np.ndarray:
        """``float32[n, 16]`` the observations in ``agents`` order.

        Raises:
            ValueError: the view has no observations.
        """
        if self.observations is None:
            raise ValueError("this step view has no observations (build it with observations=)")
        return np.stack([self.observations[a] for a in self.agents])


def robot_priority(env: WarehouseEnv, agents: list[str]) -> np.ndarray:
    """``float64[len(agents)]`` class of each robot for contested cells: 2 carrying an order
    (it holds a shelf), 1 with a task, 0 idle. The local shield lets the higher class move first;
    PIBT uses it to order robots that waited equally long (:class:`marlm.hybrid.rules.shield.PibtShield`).
    """
    return np.array(
        [2.0 * env.carrying(a) + (env.task_of(a) is not None) for a in agents], dtype=float
    )


def step_view(
    env: WarehouseEnv,
    observations: Mapping[str, np.ndarray] | None = None,
    idle_goals: Mapping[str, Cell] | None = None,
) -> StepView:
    """The :class:`StepView` of ``env`` (unwrapped) now, every robot in ``possible_agents`` order."""
    agents = list(env.possible_agents)
    extra = dict(idle_goals or {})
    goals = np.array(
        [env.target_of(a) or extra.get(a) or (-1, -1) for a in agents], dtype=np.int64
    ).reshape(len(agents), 2)
    return StepView(
        agents, env.robot_positions, goals, robot_priority(env, agents), observations, extra
    )


class Executor(Protocol):
    """Scores in: an executor scores all five actions of every robot, every step.

    ``scores(view, rng, explore)`` returns ``float64[len(view.agents), 5]`` (action order of
    :data:`marlm.envs.warehouse.MOVES`; higher first; ``-inf`` never to be chosen). With
    ``explore=True`` the scores carry the executor's execution noise (its random actions: each
    row names the action its ``act`` takes, see :func:`one_hot`), for rule layers that filter one
    proposed action per robot instead of ranking them; ``rng`` is the run's executor generator.

    ``act(observations, agents, rng, epsilon)`` is the learner's side (training on the raw
    environment): ``int64[len(agents)]`` action ids. ``name`` is what traces and tables call it.
    """

    name: str

    def scores(
        self, view: StepView, rng: np.random.Generator, explore: bool = False
    ) -> np.ndarray: ...

    def act(
        self,
        observations: Mapping[str, np.ndarray],
        agents: list[str],
        rng: np.random.Generator,
        epsilon: float | None = None,
    ) -> np.ndarray: ...


def one_hot(actions: np.ndarray) -> np.ndarray:
    """``float64[n, 5]``: 1 for each robot's action, 0 elsewhere (ids outside 0..4 count as STAY)."""
    actions = np.asarray(actions, dtype=np.int64).reshape(-1)
    scores = np.zeros((len(actions), N_ACTIONS))
    ok = (actions >= 0) & (actions < N_ACTIONS)
    scores[np.arange(len(actions)), np.where(ok, actions, STAY)] = 1.0
    return scores


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
            :func:`marlm.hybrid.rules.pibt.bfs_distance`; cell id ``row * width + col``; negative or
            :data:`marlm.hybrid.rules.pibt.UNREACHABLE` where the goal cannot be reached);
            nbr: :func:`marlm.hybrid.rules.pibt.neighbour_table`; width: map columns.
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
