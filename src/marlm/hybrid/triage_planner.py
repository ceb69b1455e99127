"""A planner where the LLM decides urgency and the queue, and a solver decides geometry.

Division of the decision:

- The LLM (:class:`marlm.llm.triage.Triage`) reads each pending order's note and gives its
  urgency class; the queue is ordered by that class, then the listed priority, deadline, arrival
  and id. It never emits coordinates, robot ids or moves.
- A solver matches idle robots to queued orders: ``scipy.optimize.linear_sum_assignment`` over
  the cost ``RANK_COST * rank(class) + weight(class) * distance``, where ``distance`` is the
  shortest-path length from the robot to the order's shelf. ``RANK_COST`` exceeds any distance
  term, so with fewer robots than orders the more urgent orders are always served first, and
  among orders of one class the assignment minimises the total (weighted) travel.
- Rules are the fallback: any failure of triage or solver ends in :func:`rule_assign`.

A note can change only its own order's class: the answer of triage is a class from a fixed set
(or the order's listed priority as fallback), and the plan holds only pairs of idle robots and
pending orders, which the controller validates again; the shield filters every move.

The "notes-only urgency" scenario that measures this planner against the rule is
:mod:`marlm.experiments.notes_only`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment

from marlm.envs.warehouse.orders import PRIORITY_RANK
from marlm.llm.triage import Triage

from .planner import (
    CANCEL_WAIT_S,
    UNREACHABLE_DISTANCE,
    LLMCall,
    Plan,
    Snapshot,
    cancel_calls,
    rule_assign,
)

#: Cost added per urgency rank (urgent 0, normal 1, low 2); larger than any distance term.
RANK_COST = 1e6
#: Distance weight by class: travel to an urgent order counts more, so the nearest robot is
#: spent on it first when a tie in the rank term must be broken.
DISTANCE_WEIGHT = {"urgent": 2.0, "normal": 1.0, "low": 0.5}


def queue_order(orders: Sequence[Any], classes: dict[str, str]) -> list[Any]:
    """Orders by triaged class, then listed priority, deadline, arrival and id."""
    return sorted(
        orders,
        key=lambda o: (
            PRIORITY_RANK[classes.get(o.id, o.priority)],
            PRIORITY_RANK[o.priority],
            o.deadline,
            o.arrival,
            o.id,
        ),
    )


def solve_assignment(
    snapshot: Snapshot, queue: Sequence[Any], classes: dict[str, str]
) -> list[tuple[str, str]]:
    """Match idle robots to queued orders by ``linear_sum_assignment``.

    Cost ``float64[n_robots, n_orders]``: ``RANK_COST * (rank(class) + position/len(queue)) +
    DISTANCE_WEIGHT[class] * distance`` (the position term keeps the queue order among orders of
    one class when robots are scarce; it is below one rank). Unreachable pairs keep their large
    distance. Returns ``(robot, order_id)`` pairs, at most ``min(n_robots, n_orders)``.
    """
    robots = list(snapshot.idle)
    if not robots or not queue:
        return []
    n = len(queue)
    cost = np.empty((len(robots), n), dtype=np.float64)
    for j, order in enumerate(queue):
        cls = classes.get(order.id, order.priority)
        base = RANK_COST * (PRIORITY_RANK[cls] + 0.5 * j / n)
        for i, robot in enumerate(robots):
            cost[i, j] = base + DISTANCE_WEIGHT[cls] * snapshot.distance.get(
                (robot, order.id), UNREACHABLE_DISTANCE
            )
    rows, cols = linear_sum_assignment(cost)
    pairs = sorted(zip(rows.tolist(), cols.tolist(), strict=True), key=lambda rc: rc[1])
    return [(robots[i], queue[j].id) for i, j in pairs]


class TriagePlanner:
    """The LLM triages each pending order's note; ``linear_sum_assignment`` assigns robots.

    Args:
        triage: the classifier (its mode, model and few-shot examples); one model call per
            distinct note thanks to its cache.
        max_orders: at most this many pending orders are triaged per plan (oldest first), which
            bounds the time of one plan; the others keep their listed priority until triaged.

    ``name`` is ``"triage-<mode>"``; ``prompt_version`` is the triage prompt's version.
    """

    def __init__(self, triage: Triage, *, max_orders: int = 12) -> None:
        self.triage = triage
        self.max_orders = max_orders
        self.name = f"triage-{triage.mode}"
        self.prompt_version = triage.prompt_version
        self.classes: dict[str, str] = {}
        self.sources: dict[str, str] = {}

    def cancel(self, thread: threading.Thread, timeout_s: float = CANCEL_WAIT_S) -> bool:
        """Cancel ``thread``'s model calls (:func:`marlm.hybrid.planner.cancel_calls`)."""
        return cancel_calls(self.triage.model, thread, timeout_s)

    def plan(self, snapshot: Snapshot) -> Plan:
        """Triage the pending notes, order the queue, solve the matching; rules on failure."""
        if not snapshot.pending or not snapshot.idle:
            return Plan([], "rule", snapshot)
        calls: list[LLMCall] = []
        try:
            todo = sorted(snapshot.pending, key=lambda o: (o.arrival, o.id))[: self.max_orders]
            for order in todo:
                if order.id in self.classes:
                    continue
                d = self.triage.classify(order.note, fallback=order.priority)
                self.classes[order.id] = d.label
                self.sources[order.id] = d.source
                if not d.cached and d.reason != "empty note":
                    calls.append(
                        LLMCall(
                            messages=[
                                {
                                    "role": "user",
                                    "content": f"triage {order.id}: {order.note[:200]}",
                                }
                            ],
                            raw=json.dumps({"order": order.id, **d.record()}, ensure_ascii=False),
                            latency_ms=d.latency_s * 1e3,
                            valid=d.source == "model",
                            error=d.reason,
                            attempt=0,
                        )
                    )
            queue = queue_order(snapshot.pending, self.classes)
            pairs = solve_assignment(snapshot, queue, self.classes)
        except Exception as e:  # triage or solver bug: the rule keeps robots moving
            return Plan(
                rule_assign(snapshot), "fallback", snapshot, calls, f"{type(e).__name__}: {e}"
            )
        by_model = any(self.sources.get(o.id) == "model" for o in snapshot.pending)
        return Plan(pairs, "llm" if by_model else "fallback", snapshot, calls)


__all__ = [
    "DISTANCE_WEIGHT",
    "RANK_COST",
    "TriagePlanner",
    "queue_order",
    "solve_assignment",
]
