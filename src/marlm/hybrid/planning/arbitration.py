"""Which orders to defer when the robots are short, from what the notes say.

When the robots in service cannot deliver every open order by its deadline (a burst of urgent
orders, a robot in a breakdown), earliest-deadline-first serves the orders that will be late
anyway and makes the next ones late too. :func:`defer` keeps the orders that can still be on
time and that matter most, and defers the rest behind them: the weighted form of Moore and
Hodgson's rule (J. M. Moore, "An n job, one machine sequencing algorithm for minimizing the
number of tardy jobs", Management Science 15(1), 1968), list-scheduled over the robots.

The weights and deadlines come from the model's reading of each note
(:class:`~marlm.hybrid.planning.instructions.InstructionDesk`: urgency, a deadline in words), so
which orders wait is decided by what the notes say; until a note is read its order counts as
``normal`` with its listed deadline, and earliest-deadline-first on the listed fields is what
runs. The choice itself is this solver's, on the control thread, in microseconds: no model is
asked to rank a queue.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

#: Value of an order by the urgency its note was read as (unread: ``normal``).
VALUE = {"urgent": 3.0, "normal": 1.0, "low": 0.3}
#: At most this many open orders (by deadline) are weighed; the rest wait their turn.
MAX_ORDERS = 64


@dataclass(frozen=True)
class Job:
    """One open order as the solver sees it: ``deadline`` (step), ``service`` (steps a robot
    spends on it, estimated), ``value`` (:data:`VALUE` of its urgency)."""

    id: str
    deadline: int
    service: int
    value: float


def late_jobs(jobs: Sequence[Job], free_at: Sequence[int]) -> list[int]:
    """Indices of ``jobs`` (served in the order given, each by the robot free first) that finish
    after their deadline; ``free_at``: the step each robot is free from."""
    heap = list(free_at)
    heapq.heapify(heap)
    late = []
    for k, j in enumerate(jobs):
        finish = heapq.heappop(heap) + j.service
        heapq.heappush(heap, finish)
        if finish > j.deadline:
            late.append(k)
    return late


def defer(jobs: Sequence[Job], free_at: Sequence[int]) -> list[str]:
    """The ids of the orders to serve after the others, so that the rest are on time.

    Serves the jobs earliest deadline first; while one would be late, the least valuable job up
    to it (lowest ``value``, then longest ``service``, then latest deadline) is deferred.

    Args:
        jobs: the open orders (any order; at most :data:`MAX_ORDERS` by deadline are weighed).
        free_at: ``int`` step at which each robot in service is free; empty: no robot.

    Returns:
        deferred ids, in the order chosen (empty when earliest-deadline-first is on time for all,
        or when there is no robot).
    """
    if not free_at:
        return []
    kept = sorted(jobs, key=lambda j: (j.deadline, j.id))[:MAX_ORDERS]
    out: list[str] = []
    while True:
        late = late_jobs(kept, free_at)
        if not late:
            return out
        upto = kept[: late[0] + 1]
        victim = min(upto, key=lambda j: (j.value, -j.service, -j.deadline, j.id))
        kept.remove(victim)
        out.append(victim.id)


__all__ = ["MAX_ORDERS", "VALUE", "Job", "defer", "late_jobs"]
