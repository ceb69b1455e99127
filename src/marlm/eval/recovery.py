"""Recovery cost: how many steps, corrective actions and tokens each failure cost until the run was
back to normal (definitions in docs/metrics.md, "Recovery cost"), computed from trace events alone.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from marlm.outcomes import LLM_SIDE_FAILURES, PlanSource

#: Plans from the configured planner: after an LLM-side failure the system is back to normal
#: only once one of these took effect (not a ``fallback``, nor the rule standing in past the
#: ``deadline``; docs/metrics.md, "Recovery cost", condition 1).
REAL_PLAN_SOURCES = frozenset({PlanSource.LLM, PlanSource.RULE})


def events_of(events: Iterable[dict[str, Any]], etype: str) -> list[dict[str, Any]]:
    """The events of one ``type``, in trace order."""
    return [e for e in events if e.get("type") == etype]


@dataclass(frozen=True)
class Recovery:
    """The cost of recovering from one failure event.

    Attributes:
        kind: the failure kind (:class:`marlm.outcomes.FailureKind`).
        step: the step of the failure event.
        end_step: the first step at which the system was back to normal (docs/metrics.md), or the last
            step of the run when it never was.
        recovered: whether back-to-normal was reached before the run ended.
        steps: ``end_step - step``: control steps spent recovering.
        actions: corrective actions in ``[step, end_step]``: robot actions the shield changed plus LLM
            calls made.
        tokens: prompt + completion tokens of the LLM calls requested in ``[step, end_step]``.
    """

    kind: str
    step: int
    end_step: int
    recovered: bool
    steps: int
    actions: int
    tokens: int


def _stuck_robots(step_event: dict[str, Any], prev_positions: list[Any] | None) -> set[int]:
    """Robots that proposed a move (proposed action != 0, stay) but did not change cell this step."""
    proposed = step_event.get("proposed")
    positions = step_event.get("positions")
    if proposed is None or positions is None or prev_positions is None:
        return set()
    return {
        i
        for i, (a, pos, prev) in enumerate(zip(proposed, positions, prev_positions, strict=False))
        if a != 0 and list(pos) == list(prev)
    }


def recoveries(events: Sequence[dict[str, Any]]) -> list[Recovery]:
    """Measure the recovery cost of every ``failure`` event (definitions in docs/metrics.md).

    Back to normal, for a failure at step ``s``, is the first step ``e >= s`` at which both hold:

    1. for an LLM-side failure (:data:`marlm.outcomes.LLM_SIDE_FAILURES`: ``invalid_llm_answer``,
       ``backend_error``, ``timeout``): a plan from the configured planner
       (:data:`REAL_PLAN_SOURCES`: ``plan.source`` is ``llm`` or ``rule``, neither the fallback
       nor the rule standing in past the deadline) took effect at a step in ``[s, e]``; for the
       other kinds this condition holds at once;
    2. every robot stuck at ``s`` (it proposed a move and did not change cell) has moved since.

    Returns:
        One :class:`Recovery` per failure, in trace order.
    """
    steps = sorted(events_of(events, "step"), key=lambda e: e["step"])
    nums = [int(e["step"]) for e in steps]
    good_plans = sorted(
        int(p["step"]) for p in events_of(events, "plan") if p["source"] in REAL_PLAN_SOURCES
    )
    calls = sorted(
        (
            int(c["step_requested"]),
            int(c.get("prompt_tokens") or 0) + int(c.get("completion_tokens") or 0),
        )
        for c in events_of(events, "llm_call")
        if c.get("step_requested") is not None
    )
    call_steps = [c[0] for c in calls]
    token_prefix = np.concatenate([[0], np.cumsum([c[1] for c in calls], dtype=np.int64)])
    # Robot actions the shield changed, per step, as a prefix sum over the sorted steps.
    changed = [
        sum(1 for a, b in zip(ev.get("proposed") or [], ev["actions"], strict=False) if a != b)
        for ev in steps
    ]
    changed_prefix = np.concatenate([[0], np.cumsum(changed, dtype=np.int64)])
    # next_move[i][r]: index of the first step after i at which robot r is in another cell than
    # at step i (None: never). One backward pass; steps without positions count as "no change".
    next_move: list[list[int | None]] = [[] for _ in steps]
    carry: list[int | None] = []
    carry_pos: list[Any] = []
    for i in range(len(steps) - 1, -1, -1):
        pos = steps[i].get("positions")
        if pos is None:
            next_move[i] = list(carry)
            continue
        row = []
        for r, cell in enumerate(pos):
            if (
                r < len(carry_pos)
                and carry_pos[r] is not None
                and list(carry_pos[r][0]) != list(cell)
            ):
                row.append(carry_pos[r][1])  # the next recorded cell differs: it moved there
            else:
                row.append(carry[r] if r < len(carry) else None)
        next_move[i] = row
        carry = row
        carry_pos = [(cell, i) for cell in pos]
    last_step = nums[-1] if nums else 0
    ends = events_of(events, "run_end")
    if ends:
        last_step = max(last_step, int(ends[-1]["step"]))

    out: list[Recovery] = []
    for failure in events_of(events, "failure"):
        s = int(failure["step"])
        kind = str(failure["kind"])
        # Condition 1: first plan from the configured planner (not the fallback) at or after s.
        plan_ok_at: int | None = s
        if kind in LLM_SIDE_FAILURES:
            k = bisect.bisect_left(good_plans, s)
            plan_ok_at = good_plans[k] if k < len(good_plans) else None
        # Condition 2: every robot stuck at s has changed cell since.
        i0 = bisect.bisect_left(nums, s)
        moved_at: int | None = s
        if i0 < len(steps):
            prev = steps[i0 - 1].get("positions") if i0 > 0 else None
            stuck = _stuck_robots(steps[i0], prev)
            if stuck:
                later = [next_move[i0][r] if r < len(next_move[i0]) else None for r in stuck]
                moved = [j for j in later if j is not None]
                moved_at = None if len(moved) < len(later) else max(nums[j] for j in moved)
        recovered = plan_ok_at is not None and moved_at is not None
        if plan_ok_at is not None and moved_at is not None:
            e = max(plan_ok_at, moved_at)
        else:
            e = last_step
        e = max(e, s)
        lo, hi = bisect.bisect_left(nums, s), bisect.bisect_right(nums, e)
        c_lo, c_hi = bisect.bisect_left(call_steps, s), bisect.bisect_right(call_steps, e)
        out.append(
            Recovery(
                kind=kind,
                step=s,
                end_step=int(e),
                recovered=recovered,
                steps=int(e - s),
                actions=int(changed_prefix[hi] - changed_prefix[lo]) + (c_hi - c_lo),
                tokens=int(token_prefix[c_hi] - token_prefix[c_lo]),
            )
        )
    return out
