"""Independent Q-learning (IQL): one Q-table per agent over the joint state.

Each agent treats the others as part of the environment and runs tabular Q-learning on its own
reward (Tan 1993, "Multi-agent reinforcement learning: independent vs. cooperative agents", ICML).
The classic baseline: simple and decentralised, but every agent's target moves as the others learn
(non-stationarity), and with a shared team reward an agent cannot tell its own contribution (the
lazy agent). This is the readable, step-at-a-time implementation (the plain-Python reference);
:func:`marlm.rl.fast.race_episodes` (``kind=IQL``) is its compiled twin, draw for draw.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from marlm.rl.qlearning import check_step, epsilon_greedy_joint_action, td_update


class AgentQTables:
    """One table per agent: ``q float64[n_agents, n_observations, n_actions]``, zeros at start.

    Agents are named (``agents``, e.g. PettingZoo's ``possible_agents``); observations are integer
    indices of the agent's own view of the joint state. Acting is decentralised: each agent
    epsilon-greedy on its own table. The learners (IQL here, VDN in :mod:`marlm.rl.ctde`) differ
    only in their ``update``.
    """

    def __init__(self, agents: Sequence[str], n_observations: int, n_actions: int) -> None:
        self.agents = list(agents)
        self.q = np.zeros((len(self.agents), n_observations, n_actions))

    def act(
        self, obs: Mapping[str, int], epsilon: Sequence[float], rng: np.random.Generator
    ) -> dict[str, int]:
        """Epsilon-greedy action of every agent in ``obs``, drawn in ``self.agents`` order."""
        return epsilon_greedy_joint_action(self.agents, obs, self._q_row, epsilon, rng)

    def _q_row(self, i: int, o: int) -> np.ndarray:
        return self.q[i, o]

    def tables(self) -> dict[str, np.ndarray]:
        """The learned tables by name, for saving: ``{"q": float64[n_agents, O, A]}``."""
        return {"q": self.q}


class IndependentQLearners(AgentQTables):
    """IQL: each agent's own Q-learning update on its own reward (tables as :class:`AgentQTables`)."""

    def update(
        self,
        obs: Mapping[str, int],
        actions: Mapping[str, int],
        rewards: Mapping[str, float],
        next_obs: Mapping[str, int],
        terminated: Mapping[str, bool],
        *,
        alpha: float,
        gamma: float,
        learn: Sequence[bool] | None = None,
    ) -> None:
        """One Q-learning update per acting agent on its own reward (truncation bootstraps).

        Raises:
            StepError: an agent in ``actions`` has no value in ``obs``, ``rewards``,
                ``next_obs`` or ``terminated`` (:func:`marlm.rl.qlearning.check_step`).
        """
        check_step(
            actions, type(self).__name__, obs=obs, rewards=rewards, next_obs=next_obs,
            terminated=terminated,
        )  # fmt: skip
        for i, name in enumerate(self.agents):
            if name in actions and (learn is None or learn[i]):
                td_update(
                    self.q[i], obs[name], actions[name], rewards[name], next_obs[name],
                    terminated[name], alpha=alpha, gamma=gamma,
                )  # fmt: skip
