"""A continuous-action toy for the deep learners' tests: two agents on a line walk to 0."""

from __future__ import annotations

import functools

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv


class Reach(ParallelEnv):
    """Two agents on a line, each to walk to the origin.

    ## Description
    Each agent starts at a uniform position in [-1.5, 1.5] and moves by half its action.

    ## Action Space
    ``Box(-1, 1, (1,), float32)`` per agent: the move is ``0.5 * action``.

    ## Observation Space
    ``Box(-2, 2, (1,), float32)``: the agent's position. ``state()``: both positions.

    ## Rewards
    ``-|position|`` after the move, per agent.

    ## Episode End
    Truncated after ``max_steps`` steps (no termination).

    ## Information
    ``infos[agent]`` is empty.

    ## Arguments
    ``Reach(max_steps=8)``.

    ## References
    None: a test toy.

    ## Version History
    v0: first version.
    """

    metadata = {"name": "reach_v0"}
    possible_agents = ["agent_0", "agent_1"]

    def __init__(self, max_steps: int = 8) -> None:
        self.max_steps = max_steps
        self.agents: list[str] = []
        self.state_space = spaces.Box(-2.0, 2.0, (2,), np.float32)
        self._pos = np.zeros(2, dtype=np.float32)
        self._t = 0

    @functools.cache  # noqa: B019
    def observation_space(self, agent: str) -> spaces.Box:
        return spaces.Box(-2.0, 2.0, (1,), np.float32)

    @functools.cache  # noqa: B019
    def action_space(self, agent: str) -> spaces.Box:
        return spaces.Box(-1.0, 1.0, (1,), np.float32)

    def state(self) -> np.ndarray:
        return self._pos.copy()

    def _obs(self) -> dict[str, np.ndarray]:
        return {a: self._pos[i : i + 1].copy() for i, a in enumerate(self.possible_agents)}

    def reset(self, seed: int | None = None, options: dict | None = None):
        rng = np.random.default_rng(seed)
        self._pos = rng.uniform(-1.5, 1.5, size=2).astype(np.float32)
        self._t = 0
        self.agents = list(self.possible_agents)
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions: dict[str, np.ndarray]):
        for i, a in enumerate(self.possible_agents):
            move = 0.5 * float(np.clip(np.asarray(actions[a]).reshape(-1)[0], -1.0, 1.0))
            self._pos[i] = np.clip(self._pos[i] + move, -2.0, 2.0)
        self._t += 1
        done = self._t >= self.max_steps
        rewards = {a: -abs(float(self._pos[i])) for i, a in enumerate(self.possible_agents)}
        terms = {a: False for a in self.agents}
        truncs = {a: done for a in self.agents}
        obs, infos = self._obs(), {a: {} for a in self.agents}
        if done:
            self.agents = []
        return obs, rewards, terms, truncs, infos
