"""The warehouse's reward: named parts and their weights.

Every robot's reward is the sum of its parts (``infos[agent]["reward_parts"]`` names each), so a
learner can read, reweight or assign them (:mod:`marlm.rl.credit`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RewardWeights:
    """Weights of the named reward parts (all non-negative; the sign is fixed by the part).

    Attributes:
        step_cost: subtracted each step from a robot that has a task.
        progress: per cell of shortest-path distance gained towards the robot's target
            (negative when it moves away).
        pick: added when the robot picks its order's shelf.
        delivery: added when the robot drops the order at a station.
        blocked_move: subtracted when the robot's move was refused (wall, shelf, edge or robot).
    """

    step_cost: float = 0.01
    progress: float = 0.1
    pick: float = 0.5
    delivery: float = 1.0
    blocked_move: float = 0.05


REWARD_PARTS = tuple(RewardWeights.__dataclass_fields__)
"""Names of the reward parts, in the column order of every reward-part array."""

#: Column of each part in ``float[..., len(REWARD_PARTS)]`` reward-part arrays.
PART_STEP_COST = REWARD_PARTS.index("step_cost")
PART_PROGRESS = REWARD_PARTS.index("progress")
PART_PICK = REWARD_PARTS.index("pick")
PART_DELIVERY = REWARD_PARTS.index("delivery")
PART_BLOCKED_MOVE = REWARD_PARTS.index("blocked_move")
