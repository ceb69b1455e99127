"""The step view: what the three layers share of one control step.

Each control step the controller builds one :class:`StepView` of the warehouse; every executor
(:mod:`marlm.hybrid.acting`) turns it into ``float64[n_robots, 5]`` action scores (higher first,
argmax = the executor's own choice), and the rule layer (:mod:`marlm.hybrid.rules`) chooses the
joint move from them. This module is the floor under that seam: it imports only the environment
and the map's tables (:mod:`marlm.hybrid.core.graph`), and no layer.

Defined here, once:

- :data:`N_ACTIONS`, :data:`Cell`: the five actions (:data:`marlm.envs.warehouse.dynamics.MOVES`
  order) and a (row, col) cell;
- :func:`robot_priority`: which robot wins a contested cell (carrying, then a task, then idle);
- :func:`one_hot`: scores that name one action per robot (an executor that only acts, a policy
  wrapped by the rule layer).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from marlm.envs.warehouse.dynamics import STAY
from marlm.hybrid.core.graph import N_ACTIONS

if TYPE_CHECKING:
    from marlm.envs.warehouse import WarehouseEnv

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

    def observed(self) -> Mapping[str, np.ndarray]:
        """Each robot's observation (``float32[16]``) by name.

        Raises:
            ValueError: the view has no observations.
        """
        if self.observations is None:
            raise ValueError("this step view has no observations (build it with observations=)")
        return self.observations

    def stacked(self) -> np.ndarray:
        """``float32[n, 16]`` the observations in ``agents`` order.

        Raises:
            ValueError: the view has no observations.
        """
        observations = self.observed()
        return np.stack([observations[a] for a in self.agents])


def robot_priority(env: WarehouseEnv, agents: list[str]) -> np.ndarray:
    """``float64[len(agents)]`` class of each robot for contested cells: 2 carrying an order
    (it holds a shelf), 1 with a task, 0 idle. The local shield lets the higher class move first;
    PIBT uses it to order robots that waited equally long (:class:`marlm.hybrid.rules.pibt_layer.PibtShield`).
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


def one_hot(actions: np.ndarray) -> np.ndarray:
    """``float64[n, 5]``: 1 for each robot's action, 0 elsewhere (ids outside 0..4 count as STAY)."""
    actions = np.asarray(actions, dtype=np.int64).reshape(-1)
    scores = np.zeros((len(actions), N_ACTIONS))
    ok = (actions >= 0) & (actions < N_ACTIONS)
    scores[np.arange(len(actions)), np.where(ok, actions, STAY)] = 1.0
    return scores
