"""The rule layer as a PettingZoo wrapper: safety composed around the raw dynamics, not inside them.

``ShieldWrapper(WarehouseEnv(...))`` is itself a ``ParallelEnv``: any learner or script that
steps it gets the rule layer's guarantees (no robot moves into a wall or shelf, no two robots in
one cell, no swaps) without the environment knowing about it. The wrapper sees one action per
robot; it gives the layer those actions as scores (:func:`marlm.hybrid.core.view.one_hot`) and
applies it through :func:`marlm.hybrid.rules.layer.shielded_step`, with the controller's goals and
priorities, so a wrapped env moves exactly as the hybrid controller would with those proposals.
"""

from __future__ import annotations

import numpy as np
from pettingzoo.utils.wrappers import BaseParallelWrapper

from marlm.envs.warehouse import WarehouseEnv
from marlm.hybrid.core.view import N_ACTIONS, one_hot, step_view
from marlm.hybrid.rules.factory import make_shield
from marlm.hybrid.rules.layer import shielded_step


class ShieldWrapper(BaseParallelWrapper):
    """Choose every joint action with a rule layer before the wrapped env steps.

    Args:
        env: a :class:`WarehouseEnv` (or a wrapper around one).
        rule: ``"pibt"`` (:class:`marlm.hybrid.rules.pibt_layer.PibtShield`, the default: a robot whose
            move is taken is pushed aside or falls back to its next cell) or ``"local"``
            (:class:`marlm.hybrid.rules.shield.Shield`: conflicting moves are held, deadlocks broken).
        seed: seed of the layer's tie-breaks (PIBT) or yield choices (local).

    Information:
        Adds ``infos[agent]["shield_override"]`` (bool): the agent's action was replaced.
        Robots carrying an order get priority for contested cells, then robots with a task.

    Raises:
        ValueError: an unknown ``rule``; at ``step``, an action outside 0..4 or an unknown agent.
    """

    def __init__(self, env: WarehouseEnv, *, rule: str = "pibt", seed: int | None = None):
        super().__init__(env)
        base = env.unwrapped
        self.rule = make_shield(rule, base.layout.free, len(base.possible_agents), seed)

    def reset(self, seed=None, options=None):
        self.rule.reset()
        return self.env.reset(seed=seed, options=options)

    def step(self, actions):
        base = self.env.unwrapped
        agents = list(base.agents)
        index = {a: i for i, a in enumerate(base.possible_agents)}
        proposed = np.zeros(len(base.possible_agents), dtype=np.int64)  # absent robots stay
        for agent, action in actions.items():
            if agent not in index or not 0 <= int(action) < N_ACTIONS:
                raise ValueError(f"action {action!r} of agent {agent!r}: need 0..{N_ACTIONS - 1}")
            proposed[index[agent]] = int(action)
        result = shielded_step(self.rule, step_view(base), one_hot(proposed))
        safe = {a: int(result.actions[index[a]]) for a in agents}
        obs, rewards, terms, truncs, infos = self.env.step(safe)
        for agent in infos:
            infos[agent] = {
                **infos[agent],
                "shield_override": bool(result.overridden[index[agent]]),
            }
        return obs, rewards, terms, truncs, infos
