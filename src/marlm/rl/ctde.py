"""Centralised training, decentralised execution (CTDE) for tabular learners.

Two learners, both trained with information an agent does not have when it acts, and both acting
on their own tables alone:

- :class:`VDNLearner`, value decomposition (Sunehag et al. 2018, "Value-Decomposition Networks for
  Cooperative Multi-Agent Learning", AAMAS, eq. 1): ``Q_tot(s, u) = sum_i Q_i(o_i, u_i)``, trained
  on the team reward with one joint TD target; each agent acts greedily on its own ``Q_i``.
- :class:`JointActionLearners` (Claus & Boutilier 1998, "The Dynamics of Reinforcement Learning in
  Cooperative Multiagent Systems", AAAI, section 4): training uses the partner's action, each agent
  learns ``Q_i(o_i, u_i, u_j)`` and counts the partner's actions per state; acting maximises the
  expected value under those counts, which the agent keeps itself.

These are the readable, step-at-a-time versions; :mod:`marlm.rl.fast` holds the compiled twins.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from marlm.rl import fast
from marlm.rl.independent import AgentQTables
from marlm.rl.qlearning import check_step, epsilon_greedy_joint_action


class VDNLearner(AgentQTables):
    """Tabular VDN over named agents: ``q float64[n_agents, n_observations, n_actions]``.

    Tables and decentralised acting (each agent epsilon-greedy on its own ``Q_i``) as
    :class:`marlm.rl.independent.AgentQTables`; only the update is joint.
    """

    def update(
        self,
        obs: Mapping[str, int],
        actions: Mapping[str, int],
        team_reward: float,
        next_obs: Mapping[str, int],
        terminated: Mapping[str, bool],
        *,
        alpha: float,
        gamma: float,
        learn: Sequence[bool] | None = None,
    ) -> float:
        """One joint TD update on the team reward; returns the TD error of ``Q_tot``.

        Raises:
            StepError: an agent in ``actions`` has no value in ``obs``, ``next_obs`` or
                ``terminated`` (:func:`marlm.rl.qlearning.check_step`).
        """
        check_step(actions, "VDNLearner", obs=obs, next_obs=next_obs, terminated=terminated)
        q_tot = 0.0
        next_v = 0.0
        for i, name in enumerate(self.agents):
            if name in actions:
                q_tot += self.q[i, obs[name], actions[name]]
                next_v += (1.0 - terminated[name]) * self.q[i, next_obs[name]].max()
        # Sunehag et al. 2018: y = r + gamma * sum_i max Q_i(o_i'); error shared by every Q_i.
        td_target = team_reward + gamma * next_v
        td_error = td_target - q_tot
        for i, name in enumerate(self.agents):
            if name in actions and (learn is None or learn[i]):
                self.q[i, obs[name], actions[name]] += alpha * td_error
        return float(td_error)


class JointActionLearners:
    """Two joint-action learners: ``q float64[2, O, A, A]`` (own, partner action), ``counts
    float64[2, O, A]`` (partner's actions seen per state)."""

    def __init__(self, agents: Sequence[str], n_observations: int, n_actions: int) -> None:
        if len(agents) != 2:
            raise ValueError("JointActionLearners is written for two agents")
        self.agents = list(agents)
        self.q = np.zeros((2, n_observations, n_actions, n_actions))
        self.counts = np.zeros((2, n_observations, n_actions))
        self._ev = np.empty(n_actions)

    def _rows(self, i: int) -> np.ndarray:
        """Agent i's table as ``float64[O * A, A]`` (a view), the layout ``fast.jal_values`` reads."""
        return self.q[i].reshape(-1, self.q.shape[-1])

    def values(self, i: int, o: int) -> np.ndarray:
        """``float64[A]``: agent i's expected value of each own action in observation ``o``."""
        fast.jal_values(self._rows(i), self.counts[i], o, self._ev)  # compiled (numba)
        return self._ev.copy()

    def act(
        self, obs: Mapping[str, int], epsilon: Sequence[float], rng: np.random.Generator
    ) -> dict[str, int]:
        """Decentralised: epsilon-greedy on the agent's own expected values."""
        return epsilon_greedy_joint_action(self.agents, obs, self.values, epsilon, rng)

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
        stay: int,
        learn: Sequence[bool] | None = None,
    ) -> None:
        """Count the partner's action, then ``Q_i(o, u_i, u_j) += alpha * (y - Q_i)`` with
        ``y = r_i + gamma * (1 - terminated) * max_a EV_i(o', a)``. A finished partner counts as
        taking ``stay``.

        Raises:
            StepError: an agent in ``actions`` has no value in ``obs``, ``rewards``,
                ``next_obs`` or ``terminated`` (:func:`marlm.rl.qlearning.check_step`).
        """
        check_step(
            actions, "JointActionLearners", obs=obs, rewards=rewards, next_obs=next_obs,
            terminated=terminated,
        )  # fmt: skip
        for i, name in enumerate(self.agents):
            if name not in actions or (learn is not None and not learn[i]):
                continue
            partner = self.agents[1 - i]
            u_j = actions.get(partner, stay)
            o, u_i = obs[name], actions[name]
            self.counts[i, o, u_j] += 1.0
            fast.jal_values(self._rows(i), self.counts[i], next_obs[name], self._ev)
            td_target = rewards[name] + gamma * (1.0 - terminated[name]) * self._ev.max()
            self.q[i, o, u_i, u_j] += alpha * (td_target - self.q[i, o, u_i, u_j])

    def tables(self) -> dict[str, np.ndarray]:
        return {"q": self.q, "counts": self.counts}
