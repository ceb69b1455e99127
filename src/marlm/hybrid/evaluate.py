"""An executor scored on the warehouse under a rule layer: acting and rules composed.

:func:`evaluate_executor` runs the environment with its own rule assignment, the executor's
scores through a fresh rule layer, as the controller does, and reports the delivery rate.
"""

from __future__ import annotations

import numpy as np

from marlm.envs.warehouse import WarehouseEnv
from marlm.hybrid.acting.scores import Executor
from marlm.hybrid.core.view import step_view
from marlm.hybrid.rules.factory import make_shield
from marlm.hybrid.rules.layer import shielded_step


def evaluate_executor(
    executor: Executor,
    *,
    layout: str = "small",
    max_steps: int = 400,
    n_orders: int = 40,
    seeds: tuple[int, ...] = (1000, 1001, 1002),
    shield: bool = False,
    shield_rule: str = "pibt",
) -> dict[str, float]:
    """Delivery rate of an executor on the environment with its own rule assignment.

    The seeds differ from the training seeds (0, 1, ...), so nothing is scored on an episode the
    policy was trained on. With ``shield=True`` the joint action goes through a fresh rule layer
    (:func:`marlm.hybrid.rules.factory.make_shield`: ``shield_rule`` ``"pibt"``, the demo's default,
    ranks the executor's action scores with no random actions; ``"local"`` filters its ``act``)
    by :func:`marlm.hybrid.rules.layer.shielded_step`, exactly as in the hybrid controller; without
    it the executor's actions go to the environment, whose own collision rules refuse
    conflicting moves, which the ``collisions`` figure counts.

    Returns:
        ``{"delivered": mean orders delivered per episode, "delivery_rate": delivered / orders,
        "collisions": mean robot-robot conflicts per episode}``, averaged over ``seeds``.

    Raises:
        ValueError: an unknown ``shield_rule``.
    """
    env = WarehouseEnv(layout=layout, n_orders=n_orders, max_steps=max_steps, auto_assign=True)
    n = len(env.possible_agents)
    delivered, collisions = [], []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        obs, _ = env.reset(seed=seed)
        rule = make_shield(shield_rule if shield else "none", env.layout.free, n, seed=seed)
        d = c = 0
        while env.agents:
            view = step_view(env, obs)
            result = shielded_step(rule, view, executor.scores(view, rng, rule.explores))
            obs, _, _, _, infos = env.step(
                dict(zip(view.agents, result.actions.tolist(), strict=True))
            )
            d += sum(e["type"] == "delivered" for e in env.last_events)
            c += sum(bool(infos[a]["collided"]) for a in infos)
        delivered.append(d)
        collisions.append(c)
    mean_delivered = float(np.mean(delivered))
    return {
        "delivered": mean_delivered,
        "delivery_rate": mean_delivered / n_orders,
        "collisions": float(np.mean(collisions)),
    }
