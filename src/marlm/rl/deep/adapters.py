"""Gymnasium environments with per-agent tuples (RWARE, LBF) as PettingZoo ParallelEnvs.

RWARE (Christianos et al. 2020, the ``rware`` package) and level-based foraging are Gymnasium
``Env`` s whose observation and action spaces are ``Tuple`` s with one entry per agent, whose
reward is a list, and whose ``terminated``/``truncated`` end the episode for every agent.
:class:`TupleParallelEnv` presents such an environment through the ParallelEnv API the deep
learners read, so that

    marlm train env marlm.rl.deep.adapters:rware --env-kwargs '{"name": "rware-tiny-2ag-v2"}'

trains on it. It has no ``state()``: MAPPO's critic then reads all agents' observations.
"""

from __future__ import annotations

from typing import Any

import gymnasium
from gymnasium import spaces
from pettingzoo import ParallelEnv


class TupleParallelEnv(ParallelEnv):
    """A Gymnasium env with ``Tuple`` observation and action spaces as a ParallelEnv.

    Agents are ``agent_0 .. agent_{n-1}`` in the tuples' order; ``infos[agent]`` is the step's
    ``info`` dict (shared by all agents). Every agent leaves ``agents`` when the episode ends.
    ``metadata["name"]`` is the id of ``env``'s ``spec`` (a ``gymnasium.Env`` made by
    ``gymnasium.make``), else its class name.

    Raises:
        ValueError: the observation or action space is not a ``Tuple`` of one entry per agent.
    """

    def __init__(self, env: Any) -> None:
        obs, act = env.observation_space, env.action_space
        if not (isinstance(obs, spaces.Tuple) and isinstance(act, spaces.Tuple)):
            raise ValueError(f"needs Tuple observation and action spaces, got {obs} and {act}")
        if len(obs.spaces) != len(act.spaces):
            raise ValueError("the observation and action tuples differ in length")
        self.env = env
        self.possible_agents = [f"agent_{i}" for i in range(len(obs.spaces))]
        self.agents: list[str] = []
        spec = env.spec if isinstance(env, gymnasium.Env) else None  # None unless registered
        self.metadata = {"name": spec.id if spec is not None else type(env).__name__}

    def observation_space(self, agent: str) -> spaces.Space:
        return self.env.observation_space.spaces[self.possible_agents.index(agent)]

    def action_space(self, agent: str) -> spaces.Space:
        return self.env.action_space.spaces[self.possible_agents.index(agent)]

    def reset(self, seed: int | None = None, options: dict | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        self.agents = list(self.possible_agents)
        return dict(zip(self.agents, obs, strict=True)), {a: dict(info) for a in self.agents}

    def step(self, actions: dict[str, Any]):
        acting = list(self.agents)
        obs, rewards, terminated, truncated, info = self.env.step(
            tuple(actions[a] for a in self.possible_agents)
        )
        if not isinstance(rewards, list | tuple):  # a team reward: every agent gets it
            rewards = [rewards] * len(acting)
        out = (
            dict(zip(acting, obs, strict=True)),
            {a: float(r) for a, r in zip(acting, rewards, strict=True)},
            {a: bool(terminated) for a in acting},
            {a: bool(truncated) and not terminated for a in acting},
            {a: dict(info) for a in acting},
        )
        if terminated or truncated:
            self.agents = []
        return out

    def close(self) -> None:
        self.env.close()


def rware(name: str = "rware-tiny-2ag-v2", **kwargs: Any) -> TupleParallelEnv:
    """An RWARE task (``rware`` package, e.g. ``rware-tiny-2ag-v2``) as a ParallelEnv.

    ``kwargs`` go to ``gymnasium.make``. Raises ``ImportError`` without the ``rware`` package
    (``pip install rware==2.0.0``, in the ``bench`` and ``dev`` extras).
    """
    import rware as _rware  # noqa: F401  (registers the rware-* ids)

    return TupleParallelEnv(gymnasium.make(name, disable_env_checker=True, **kwargs))
