"""The shield as a PettingZoo wrapper: safety composed around the raw dynamics, not inside them.

``ShieldWrapper(WarehouseEnv(...))`` is itself a ``ParallelEnv``: any learner or script that
steps it gets the shield's guarantees (no robot moves into a wall or shelf, no two robots in one
cell, no swaps) without the environment knowing about it. The wrapper sees actions only, so it
applies the local shield (:class:`marlm.hybrid.shield.Shield`) through
:func:`marlm.hybrid.shield.shield_step`, with the controller's priorities. The hybrid controller
does not step through the wrapper: it records the overrides in its trace, and its default rule
layer, PIBT, ranks the executor's action scores (:func:`marlm.hybrid.shield.propose_and_shield`).
"""

from __future__ import annotations

import numpy as np
from pettingzoo.utils.wrappers import BaseParallelWrapper

from marlm.envs.warehouse import WarehouseEnv

from .shield import Shield, shield_step


class ShieldWrapper(BaseParallelWrapper):
    """Filter every joint action through a :class:`Shield` before the wrapped env steps.

    Args:
        env: a :class:`WarehouseEnv` (or a wrapper around one).
        deadlock_steps: the shield's deadlock threshold k.
        seed: seed of the shield's yield choices.

    Information:
        Adds ``infos[agent]["shield_override"]`` (bool): the agent's action was replaced.
        Robots carrying an order get priority for contested cells, then robots with a task.
    """

    def __init__(self, env: WarehouseEnv, *, deadlock_steps: int = 4, seed: int | None = None):
        super().__init__(env)
        base = env.unwrapped
        self.shield = Shield(base.layout.free, len(base.possible_agents), deadlock_steps, seed)

    def reset(self, seed=None, options=None):
        self.shield.reset()
        return self.env.reset(seed=seed, options=options)

    def step(self, actions):
        base = self.env.unwrapped
        agents = list(base.agents)
        index = {a: i for i, a in enumerate(base.possible_agents)}
        proposed = np.zeros(len(base.possible_agents), dtype=np.int64)  # absent robots stay
        for agent, action in actions.items():
            proposed[index[agent]] = int(action)
        result = shield_step(self.shield, base, proposed)
        safe = {a: int(result.actions[index[a]]) for a in agents}
        obs, rewards, terms, truncs, infos = self.env.step(safe)
        for agent in infos:
            infos[agent] = {
                **infos[agent],
                "shield_override": bool(result.overridden[index[agent]]),
            }
        return obs, rewards, terms, truncs, infos
