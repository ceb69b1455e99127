"""The LLM as executor: one model call per control step chooses every busy robot's move.

This is the executor of the "LLM only" scheme (:mod:`marlm.experiments.compare`), there to show
what putting the model inside the control loop costs: latency per step, tokens, invalid answers.
"""

from __future__ import annotations

import json
import time
from typing import Any

from marlm.envs.warehouse.dynamics import ACTION_NAMES
from marlm.envs.warehouse.env import OBS_BLOCKED, OBS_CLOSER, OBS_HAS_TASK, OBS_ROBOT_NEIGHBOUR
from marlm.hybrid.core.view import StepView, one_hot

_SIDES = ACTION_NAMES[1:]  # up, down, left, right: the order of the observation's neighbour slices

MOVE_SYSTEM_PROMPT = (
    "You steer warehouse robots on a grid, one move per robot per step. For each robot you get "
    "the moves that bring it closer to its target and the moves that are blocked. Answer only with "
    'JSON: {"moves": [{"robot": "<robot id>", "action": "stay|up|down|left|right"}, ...]}'
)


class LLMMoveExecutor:
    """The LLM as executor: one model call per control step chooses every busy robot's move.

    This is the "LLM only" scheme's executor, there to show what putting the model inside the
    control loop costs (latency per step, tokens, invalid answers). Robots without a task stay and
    are not sent. The answer is decoded under a JSON schema (robot ids and move names as enums)
    and validated; an invalid answer or a backend error makes every robot stay this step.

    The observation is read through the warehouse's named slices (``OBS_CLOSER``,
    ``OBS_BLOCKED``, ``OBS_ROBOT_NEIGHBOUR``, ``OBS_HAS_TASK`` of
    :mod:`marlm.envs.warehouse.env`).

    Attributes:
        calls, invalid, prompt_tokens, completion_tokens, latency_ms: running totals (the
            controller's trace does not see these calls;
            :func:`marlm.experiments.compare.compare_schemes` adds them to the row).
    """

    name = "llm"

    def __init__(self, model: Any, *, max_tokens_per_robot: int = 18) -> None:
        self.model = model
        self.max_tokens_per_robot = max_tokens_per_robot
        self.calls = 0
        self.invalid = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.latency_ms: list[float] = []

    def scores(self, view: StepView, rng: Any, explore: bool = False) -> Any:
        """``float64[n, 5]`` naming the model's move for each robot (one call, see :meth:`act`);
        the same with or without ``explore`` (the model's answer is the only proposal)."""
        return one_hot(self.act(dict(view.observed()), view.agents, rng))

    def warm_up(self) -> None:
        """Nothing: the model is never called outside the control loop."""

    @staticmethod
    def describe(agent: str, obs: Any) -> str:
        closer = [m for m, v in zip(_SIDES, obs[OBS_CLOSER], strict=True) if v > 0.5]
        walls = [m for m, v in zip(_SIDES, obs[OBS_BLOCKED], strict=True) if v > 0.5]
        robots = [m for m, v in zip(_SIDES, obs[OBS_ROBOT_NEIGHBOUR], strict=True) if v > 0.5]
        return (
            f"- {agent}: closer: {', '.join(closer) or 'none'}; blocked by wall or shelf: "
            f"{', '.join(walls) or 'none'}; robot next to it: {', '.join(robots) or 'none'}"
        )

    def act(
        self,
        observations: dict[str, Any],
        agents: list[str],
        rng: Any,
        epsilon: float | None = None,
    ):
        """Joint action ``int64[len(agents)]``: the model's moves for busy robots, stay otherwise."""
        import numpy as np

        from marlm.llm.backends import BackendError

        actions = np.zeros(len(agents), dtype=np.int64)
        busy = [a for a in agents if observations[a][OBS_HAS_TASK] > 0.5]
        if not busy:
            return actions
        lines = [self.describe(a, observations[a]) for a in busy]
        messages = [
            {"role": "system", "content": MOVE_SYSTEM_PROMPT},
            {
                "role": "user",
                "content": "Robots:\n"
                + "\n".join(lines)
                + f"\nGive exactly one move for each of the {len(busy)} robots.",
            },
        ]
        schema = {
            "type": "object",
            "properties": {
                "moves": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "robot": {"type": "string", "enum": busy},
                            "action": {"type": "string", "enum": list(ACTION_NAMES)},
                        },
                        "required": ["robot", "action"],
                        "additionalProperties": False,
                    },
                    "minItems": len(busy),
                    "maxItems": len(busy),
                }
            },
            "required": ["moves"],
            "additionalProperties": False,
        }
        self.calls += 1
        t0 = time.perf_counter()
        try:
            result = self.model.chat(
                messages,
                schema=schema,
                temperature=0.0,
                max_tokens=12 + self.max_tokens_per_robot * len(busy),
            )
        except BackendError:
            self.invalid += 1
            self.latency_ms.append((time.perf_counter() - t0) * 1e3)
            return actions
        self.latency_ms.append(result.latency_s * 1e3)
        self.prompt_tokens += result.prompt_tokens
        self.completion_tokens += result.completion_tokens
        try:
            moves = json.loads(result.text)["moves"]
            chosen = {str(m["robot"]): ACTION_NAMES.index(str(m["action"])) for m in moves}
            if set(chosen) != set(busy):
                raise ValueError("not one move per busy robot")
        except (ValueError, KeyError, TypeError):
            self.invalid += 1
            return actions
        for i, a in enumerate(agents):
            actions[i] = chosen.get(a, 0)
        return actions


__all__ = ["MOVE_SYSTEM_PROMPT", "LLMMoveExecutor"]
