"""A run's figures computed from its trace: success rate, throughput, latency, recovery cost
(the same signals while a run goes: :mod:`marlm.eval.online`).

Every figure here is computed from trace events alone (see docs/trace-schema.md), so a run, a replay
and a comparison are measured by the same code. Definitions, including what "back to normal" means
for recovery cost, are in docs/metrics.md; the key names of :func:`summarise` are stable (the demo's
``metrics.json`` and ``marlm compare`` use them).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypedDict

import numpy as np

from marlm.eval.recovery import REAL_PLAN_SOURCES, Recovery, events_of, recoveries
from marlm.outcomes import (
    FALLBACK_OUTCOMES,
    CallStatus,
    FailureKind,
    IdleCause,
    OrderEvent,
    PlanOutcome,
    PlanSource,
)

PRIORITIES = ("urgent", "normal", "low")


def percentile(values: Sequence[float] | np.ndarray, q: float) -> float | None:
    """The ``q``-th percentile (0..100) of ``values`` by linear interpolation, ``None`` when empty."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        return None
    return float(np.percentile(arr, q))


def _mean(values: Sequence[float] | np.ndarray) -> float | None:
    return float(np.mean(values)) if len(values) else None


def order_table(events: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Fold ``order`` events into one record per order id.

    Returns:
        ``{order_id: {"priority", "arrived", "assigned", "picked", "delivered", "deadline_missed",
        "cancelled", "deadline", "robot"}}`` with step numbers (``None`` when the event did not
        happen).
    """
    table: dict[str, dict[str, Any]] = {}
    for ev in events_of(events, "order"):
        oid = str(ev["order"])
        rec = table.setdefault(
            oid,
            {k: None for k in ("priority", *_ORDER_STEPS, "deadline", "robot")},
        )
        kind = ev["event"]
        if kind in _ORDER_STEPS and rec[kind] is None:
            rec[kind] = int(ev["step"])
        if ev.get("priority") is not None:
            rec["priority"] = ev["priority"]
        if ev.get("deadline") is not None:
            rec["deadline"] = int(ev["deadline"])
        if ev.get("robot") is not None:
            rec["robot"] = ev["robot"]
    return table


_ORDER_STEPS = tuple(
    OrderEvent(e)
    for e in ("arrived", "assigned", "picked", "delivered", "deadline_missed", "cancelled")
)


def _on_time(rec: dict[str, Any], deadline: int | None = None) -> bool:
    """Delivered, and no deadline miss recorded for it (the env records a miss at step
    ``deadline + 1`` for every order not delivered at a step ``<= deadline``); against a
    scored ``deadline`` (:func:`scored_deadlines`), delivered at a step ``<= deadline``."""
    if deadline is not None:
        return rec["delivered"] is not None and rec["delivered"] <= deadline
    return rec["delivered"] is not None and rec["deadline_missed"] is None


def _missed(rec: dict[str, Any], deadline: int | None, n_steps: int) -> bool:
    """A deadline miss: recorded by the env, or against a scored ``deadline`` delivered after
    it, or not delivered when the run went past it (the env's rule: a miss at ``deadline + 1``)."""
    if deadline is None:
        return rec["deadline_missed"] is not None
    if rec["delivered"] is not None:
        return rec["delivered"] > deadline
    return n_steps > deadline + 1


def scored_deadlines(events: Sequence[dict[str, Any]]) -> dict[str, int]:
    """``{order_id: step}``: the deadlines the run is scored against where they differ from
    the listed ones (``run_start.config.scored_deadlines``, set by the notes-only scenario);
    empty for a run scored on its listed deadlines."""
    for ev in events_of(events, "run_start"):
        config = ev.get("config")
        found = config.get("scored_deadlines") if isinstance(config, dict) else None
        if isinstance(found, dict):
            return {str(k): int(v) for k, v in found.items()}
    return {}


#: The failure a writer records beside a fallback plan, by the outcome it stands for (traces
#: written before ``plan.outcome`` existed are read by it).
_OUTCOME_OF_FAILURE: dict[str, PlanOutcome] = {  # a StrEnum key: its text finds it
    FailureKind.BACKEND_ERROR: PlanOutcome.BACKEND_ERROR,
    FailureKind.TIMEOUT: PlanOutcome.BACKEND_ERROR,
    FailureKind.PLANNER_ERROR: PlanOutcome.PLANNER_ERROR,
    FailureKind.INVALID_LLM_ANSWER: PlanOutcome.INVALID_ANSWER,
}


def plan_outcome(plan: dict[str, Any], failure: str | None = None) -> PlanOutcome:
    """The outcome of a ``plan`` event (:class:`marlm.outcomes.PlanOutcome`): its ``outcome``
    field; for a trace written before that field existed, its ``source`` (``llm`` answered,
    ``rule``, ``deadline``), and for a ``fallback`` the kind of the ``failure`` recorded at
    the plan's step (``timeout`` and ``backend_error``: a backend error; ``planner_error``;
    anything else, or none: an invalid answer). Never read from error text."""
    if plan.get("outcome") in set(PlanOutcome):
        return PlanOutcome(plan["outcome"])
    source = plan.get("source")
    if source == PlanSource.LLM:
        return PlanOutcome.ANSWERED
    if source == PlanSource.RULE:
        return PlanOutcome.RULE
    if source == PlanSource.DEADLINE:
        return PlanOutcome.DEADLINE
    if failure is None:
        return PlanOutcome.INVALID_ANSWER
    return _OUTCOME_OF_FAILURE.get(failure, PlanOutcome.INVALID_ANSWER)


def call_status(call: dict[str, Any]) -> CallStatus:
    """What became of an ``llm_call`` (:class:`marlm.outcomes.CallStatus`): its ``status``
    field; for a trace written before that field existed, ``answered`` when ``valid``,
    ``unanswered`` for the record of a request the run ended without (``finish_reason`` is
    ``"none"``), else ``invalid_answer`` (such a trace does not tell a failed backend from an
    invalid answer). Never read from error text."""
    if call.get("status") in set(CallStatus):
        return CallStatus(call["status"])
    if call.get("valid"):
        return CallStatus.ANSWERED
    if call.get("finish_reason") == "none":
        return CallStatus.UNANSWERED
    return CallStatus.INVALID_ANSWER


#: The three ends of a call, which split :class:`CallStatus` (docs/metrics.md, "LLM use"; every
#: count of calls reads these, nowhere else): ``answered``; *invalid*, the model answered and the
#: answer failed validation (``llm_invalid``); *unanswered*, no answer came (``llm_unanswered``).
INVALID = frozenset({CallStatus.INVALID_ANSWER})
#: Unanswered because the backend failed or its timeout passed (``llm_no_answer``).
NO_ANSWER = frozenset({CallStatus.BACKEND_ERROR, CallStatus.TIMEOUT})
#: Unanswered: the backend failed, its timeout passed, or the run ended first (``unanswered``).
#: Their time is not a latency of the model: it is the backend's timeout or the run's end.
UNANSWERED = NO_ANSWER | {CallStatus.UNANSWERED}


def call_counts(calls: Sequence[dict[str, Any]]) -> dict[str, int]:
    """How the ``llm_call`` events ``calls`` ended: ``llm_invalid`` (:data:`INVALID`),
    ``llm_unanswered`` (:data:`UNANSWERED`, a timeout included) and ``llm_no_answer``
    (:data:`NO_ANSWER`, a part of ``llm_unanswered``), each an ``int``."""
    ends = [call_status(c) for c in calls]
    return {
        "llm_invalid": sum(1 for s in ends if s in INVALID),
        "llm_unanswered": sum(1 for s in ends if s in UNANSWERED),
        "llm_no_answer": sum(1 for s in ends if s in NO_ANSWER),
    }


def answer_timed(call: dict[str, Any]) -> bool:
    """Whether ``call``'s ``latency_ms`` is a model's answer time (``llm_latency_*``): the model
    answered (``answered`` or ``invalid_answer``), not a failed, timed-out or unanswered call."""
    if call.get("latency_ms") is None:
        return False
    return call_status(call) not in UNANSWERED


def decisions(events: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Who decided the plans that took effect, and how soon the model first answered.

    A plan *took effect* when at least one of its assignments was applied (``plan.applied``
    non-empty; a trace without ``applied`` counts every plan with assignments).

    Returns:
        ``plans_effective`` (int), ``plans_by_outcome`` (``{outcome: int}`` over those plans),
        ``decided_by_model_share``, ``decided_by_rule_stand_in_share`` (deadline),
        ``decided_by_fallback_share`` (backend error, invalid answer, planner error): shares of
        the plans that took effect in a run whose planner is not the rule (``None`` otherwise),
        ``llm_unanswered`` (calls no answer came to, :func:`call_counts`), ``llm_first_answer_s``
        (wall seconds from the first model request to the first model plan taking effect,
        from ``plan.t_s`` and ``t_requested_s``; ``None`` without those fields or without an
        answer) and ``llm_first_answer_step`` (control step at which it took effect).
    """
    plans = events_of(events, "plan")
    calls = events_of(events, "llm_call")
    failed_at = {
        int(f["step"]): f["kind"]
        for f in events_of(events, "failure")
        if f["kind"] in _OUTCOME_OF_FAILURE
    }

    def outcome(p: dict[str, Any]) -> PlanOutcome:
        return plan_outcome(p, failed_at.get(int(p["step"])) if "step" in p else None)

    effective = [p for p in plans if (p.get("applied") if "applied" in p else p.get("assignments"))]
    counts = {str(k): 0 for k in PlanOutcome}
    for p in effective:
        counts[outcome(p)] += 1
    decided = len(effective) - counts[PlanOutcome.RULE]

    def share(n: int) -> float | None:
        return n / decided if decided else None

    requests = [
        float(x["t_requested_s"])
        for x in [*plans, *calls]
        if x.get("t_requested_s") is not None
        and (
            x.get("type") == "llm_call"
            or outcome(x) not in (PlanOutcome.RULE, PlanOutcome.DEADLINE)
        )
    ]
    answered = [p for p in plans if outcome(p) == PlanOutcome.ANSWERED]
    first = min(answered, key=lambda p: int(p["step"]), default=None)
    first_s = None
    if first is not None and first.get("t_s") is not None and requests:
        first_s = float(first["t_s"]) - min(requests)
    return {
        "plans_effective": len(effective),
        "plans_by_outcome": counts,
        "decided_by_model_share": share(counts[PlanOutcome.ANSWERED]),
        "decided_by_rule_stand_in_share": share(counts[PlanOutcome.DEADLINE]),
        "decided_by_fallback_share": share(sum(counts[k] for k in FALLBACK_OUTCOMES)),
        "llm_unanswered": call_counts(calls)["llm_unanswered"],
        "llm_first_answer_s": first_s,
        "llm_first_answer_step": int(first["step"]) if first is not None else None,
    }


def task_steps(events: Sequence[dict[str, Any]]) -> dict[str, list[tuple[int, int | None]]]:
    """The control steps in which each robot had a task, from ``order`` events.

    A robot has a task from the step of its ``assigned`` event (plans are applied before the
    robots act) to the step of its ``delivered`` event (it moved onto the station in that step),
    or to the step before its ``released`` event; a task not ended by the end of the trace is
    open (``None``).

    Returns:
        ``{robot: [(first_step, last_step or None), ...]}`` in trace order.
    """
    spans: dict[str, list[tuple[int, int | None]]] = defaultdict(list)
    since: dict[str, int] = {}
    for ev in events_of(events, "order"):
        robot, kind, step = ev.get("robot"), ev["event"], int(ev["step"])
        if robot is None:
            continue
        if kind == OrderEvent.ASSIGNED:
            since[str(robot)] = step
        elif kind in (OrderEvent.DELIVERED, OrderEvent.RELEASED) and str(robot) in since:
            first = since.pop(str(robot))
            spans[str(robot)].append((first, step if kind == OrderEvent.DELIVERED else step - 1))
    for robot, first in since.items():
        spans[robot].append((first, None))
    return dict(spans)


class StillWithTask(TypedDict):
    """:func:`still_with_task`'s figures, as ``metrics.json`` keeps them."""

    still_with_task_max_steps: int | None
    still_with_task_max_robot: str | None
    still_with_task_max_from_step: int | None


def cells_around(prev: Any, pos: Any, *, consecutive: bool) -> tuple[Sequence[Any], Sequence[Any]]:
    """``(prev, pos)``: the robots' cells before and after a step (``positions`` lists, one
    cell a robot), where both are known and the steps ``consecutive``; else two empty lists
    (no robot stood still)."""
    if prev is None or pos is None or not consecutive:
        return [], []
    return prev, pos


def still_with_task(events: Sequence[dict[str, Any]]) -> StillWithTask:
    """The longest time a robot with a task stood still, from the trace.

    A robot *stood still with a task* at step ``s`` when it had a task at ``s``
    (:func:`task_steps`) and its cell after ``s`` (``step.positions``) equals its cell before
    (the previous step's positions, or ``run_start.positions`` at step 0). A step without
    positions, or a gap in the step numbers, ends every run.

    Returns:
        ``still_with_task_max_steps`` (int: the most consecutive such steps of one robot; 0 when
        none; ``None`` when the steps carry no positions), ``still_with_task_max_robot``
        (str or None) and ``still_with_task_max_from_step`` (int or None: the run's first step).
    """
    starts = events_of(events, "run_start")
    start = starts[0] if starts else {}
    steps = sorted(events_of(events, "step"), key=lambda e: int(e["step"]))
    n = max((len(e.get("positions") or []) for e in steps), default=0)
    names = [str(a) for a in start.get("agents") or []][:n]
    names += [f"robot_{i}" for i in range(len(names), n)]
    spans = task_steps(events)
    todo = [sorted(spans.get(name, ()), key=lambda ab: ab[0]) for name in names]
    cursor = [0] * n  # the first span of robot r that may still contain a step (steps ascend)

    def busy(r: int, step: int) -> bool:
        ab, c = todo[r], cursor[r]
        while c < len(ab) and (end := ab[c][1]) is not None and end < step:
            c += 1
        cursor[r] = c
        return c < len(ab) and ab[c][0] <= step

    longest = 0  # the longest run so far, its robot and its first step
    longest_robot: str | None = None
    longest_from: int | None = None
    run = [0] * n
    prev, prev_step = start.get("positions"), -1
    for ev in steps:
        s, pos = int(ev["step"]), ev.get("positions")
        before, after = cells_around(prev, pos, consecutive=s == prev_step + 1)
        for r in range(n):
            still = r < len(after) and r < len(before) and list(after[r]) == list(before[r])
            run[r] = run[r] + 1 if busy(r, s) and still else 0
            if run[r] > longest:
                longest, longest_robot, longest_from = run[r], names[r], s - run[r] + 1
        prev, prev_step = pos, s
    return {
        "still_with_task_max_steps": longest if n else None,
        "still_with_task_max_robot": longest_robot,
        "still_with_task_max_from_step": longest_from,
    }


#: Steps between two samples of the unread backlog (:func:`reading`).
BACKLOG_EVERY = 50


def reading(
    events: Sequence[dict[str, Any]], true_class: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Whether the model's reading of each note came in time to inform its order's assignment.

    An order's note was *read in time* when the class the model read was applied (its triage
    ``llm_call`` answered, ``step_applied``; or, for a note the model had read before for
    another order, its ``recalled`` event) at or before the step its order was assigned, or
    when the order was assigned at the step it arrived (no plan could wait for a reading); an
    order never assigned counts as read in time once its class was applied. Only orders that
    arrived count; only triage calls (with an ``order``) are read.

    Args:
        events: a run's trace events.
        true_class: ``{order_id: class}`` where the true class is known (a scenario's labels,
            the ``label`` of an order line); None: none known.

    Returns:
        ``read_in_time`` (``{"orders": int, "in_time": int, "share": float or None}``),
        ``read_in_time_by_true_class`` (``{class: that dict}``, empty without ``true_class``),
        ``model_read`` (orders whose class the model read, at any time, the ``recalled`` ones
        included), ``recalled`` (orders given the class of the same note read before, with no
        model call), ``unread_backlog``
        (``{"every_steps": BACKLOG_EVERY, "counts": [int, ...], "max": int}``: orders arrived,
        not assigned and without a class from the model, at steps 0, 50, ...; notes still worth
        reading), ``notes_per_s`` (answered triage calls over the seconds they took: the
        reading rate while reading; None without one), ``arrivals_per_s`` (orders arrived over
        the run's wall seconds from the plans' ``t_s``; None without them),
        ``plans_with_model_class`` (plans that took effect in which at least one applied order
        had its model class by then) and ``latency_by_model_class`` (``{class: mean steps
        arrival to delivery}`` over delivered orders, by the class the model read).
    """
    table = order_table(events)
    applied: dict[str, int] = {}
    label: dict[str, str] = {}
    seconds, answered = 0.0, 0
    for c in events_of(events, "llm_call"):
        oid = c.get("order")
        if oid is None or call_status(c) != CallStatus.ANSWERED:
            continue
        answered += 1
        seconds += float(c.get("latency_ms") or 0.0) / 1e3
        if c.get("step_applied") is None:
            continue
        step = int(c["step_applied"])
        if oid not in applied or step < applied[oid]:
            applied[str(oid)], label[str(oid)] = step, str(c.get("label"))
    recalled = events_of(events, "recalled")
    for r in recalled:  # a note the model read before, for another order: its class, no call
        oid, step = str(r["order"]), int(r["step"])
        if oid not in applied or step < applied[oid]:
            applied[oid], label[oid] = step, str(r.get("label"))

    def in_time(oid: str, r: dict[str, Any]) -> bool:
        a = applied.get(oid)
        if r["assigned"] is None:
            return a is not None
        return r["assigned"] == r["arrived"] or (a is not None and a <= r["assigned"])

    # a cancelled order is never assigned: nothing its reading could have informed
    arrived = {
        oid: r for oid, r in table.items() if r["arrived"] is not None and r["cancelled"] is None
    }

    def tally(ids: Sequence[str]) -> dict[str, Any]:
        n = len(ids)
        k = sum(in_time(oid, arrived[oid]) for oid in ids)
        return {"orders": n, "in_time": k, "share": k / n if n else None}

    by_true: dict[str, Any] = {}
    if true_class:
        for cls in sorted({true_class[o] for o in arrived if o in true_class}):
            by_true[cls] = tally([o for o in arrived if true_class.get(o) == cls])
    n_steps = len(events_of(events, "step"))
    counts = []
    for s in range(0, max(n_steps, 1), BACKLOG_EVERY):
        counts.append(
            sum(
                1
                for oid, r in arrived.items()
                if r["arrived"] <= s
                and (r["assigned"] is None or r["assigned"] > s)
                and (oid not in applied or applied[oid] > s)
            )
        )
    plans = events_of(events, "plan")
    effective = [p for p in plans if p.get("applied")]
    reached = sum(
        1
        for p in effective
        if any(
            applied.get(a["order"]) is not None and applied[a["order"]] <= int(p["step"])
            for a in p["applied"]
        )
    )
    wall = max((float(p["t_s"]) for p in plans if p.get("t_s") is not None), default=None)
    lat: dict[str, list[int]] = {}
    for oid, r in arrived.items():
        if oid in label and r["delivered"] is not None:
            lat.setdefault(label[oid], []).append(r["delivered"] - r["arrived"])
    return {
        "read_in_time": tally(list(arrived)),
        "read_in_time_by_true_class": by_true,
        "model_read": len(applied),
        "recalled": len({str(r["order"]) for r in recalled}),
        "unread_backlog": {"every_steps": BACKLOG_EVERY, "counts": counts, "max": max(counts)},
        "notes_per_s": answered / seconds if seconds > 0 else None,
        "arrivals_per_s": len(arrived) / wall if wall else None,
        "plans_with_model_class": reached,
        "latency_by_model_class": {c: _mean(v) for c, v in sorted(lat.items())},
    }


@dataclass
class FoldedSteps:
    """The ``step`` and ``idle`` events' figures folded beforehand (:mod:`marlm.eval.stream`):
    their number, collisions (sum), shield overrides by robot, step and planning latencies
    (``float64[n]``, milliseconds), each failure's recovery, the :func:`still_with_task` figures
    and the :func:`idle_robot_steps` counts."""

    n: int
    collisions: int
    overrides: Counter[str]
    step_lat: np.ndarray
    plan_lat: np.ndarray
    still: StillWithTask
    recoveries: list[Recovery]
    idle: dict[str, int]


def summarise(events: Sequence[dict[str, Any]], steps: FoldedSteps | None = None) -> dict[str, Any]:
    """Compute a run's metrics from its trace events (definitions in docs/metrics.md).

    Args:
        events: trace events as :func:`marlm.eval.trace.read_trace` returns them.
        steps: the ``step`` and ``idle`` events' figures folded beforehand, when ``events``
            holds neither (:func:`marlm.eval.stream.read_run`, which reads a trace of any
            length a line at a time); ``None``: read from ``events``.

    Returns:
        A JSON-ready dict with (at least) the keys: ``delivered``, ``steps``, ``collisions``,
        ``shield_overrides``, ``llm_calls``, ``llm_fallbacks``, ``llm_invalid``,
        ``llm_no_answer`` (calls the backend failed or that timed out), ``llm_latency_mean_ms``,
        ``llm_latency_p50_ms``/``p95``/``p99`` (calls the model answered, validly or not: a
        failed, timed-out or unanswered call's wait is not the model's latency),
        ``step_latency_mean_ms``,
        ``step_latency_p50_ms``/``p95``/``p99`` (control loop: planning on the control thread +
        executor + shield, without an LLM answered off the thread), ``planning_latency_mean_ms``,
        ``planning_latency_p50_ms``/``p99`` (the planning part alone; None for traces without it),
        ``throughput_per_1000_steps``, ``orders_arrived``, ``deadline_misses``, ``on_time``,
        ``on_time_rate``, ``order_latency_mean_steps`` (``{priority: steps or None}``),
        ``prompt_tokens``, ``completion_tokens``, ``tokens``, ``failures``, ``recoveries``,
        ``unrecovered``, ``recovery_steps_mean``, ``recovery_steps_total``,
        ``recovery_actions_total``, ``recovery_tokens_total``, ``recovery_by_kind``,
        ``shield_overrides_by_robot``, the :func:`still_with_task` keys, the
        :func:`decisions` keys, and ``idle_robot_steps`` (:func:`idle_robot_steps`). Latencies are
        milliseconds; a figure with no data is ``None``.
    """
    folded = steps
    step_events = events_of(events, "step") if folded is None else []
    calls = events_of(events, "llm_call")
    plans = events_of(events, "plan")
    n_steps = len(step_events) if folded is None else folded.n
    ends = events_of(events, "run_end")
    if not n_steps and ends:
        n_steps = int(ends[-1]["step"])

    orders = order_table(events)
    delivered = sum(1 for r in orders.values() if r["delivered"] is not None)
    arrived = sum(1 for r in orders.values() if r["arrived"] is not None)
    # a cancelled order not delivered has no deadline left to meet (nor to miss)
    dropped = sum(
        1 for r in orders.values() if r["cancelled"] is not None and r["delivered"] is None
    )
    scored = scored_deadlines(events)
    on_time = sum(
        1 for oid, r in orders.items() if r["arrived"] is not None and _on_time(r, scored.get(oid))
    )
    misses = sum(1 for oid, r in orders.items() if _missed(r, scored.get(oid), n_steps))

    latency_by_priority: dict[str, list[int]] = defaultdict(list)
    for r in orders.values():
        if r["arrived"] is not None and r["delivered"] is not None:
            latency_by_priority[str(r["priority"])].append(r["delivered"] - r["arrived"])
    priorities = list(PRIORITIES) + sorted(set(latency_by_priority) - set(PRIORITIES))

    overrides_by_robot: dict[str, int] = defaultdict(int)
    for ev in step_events:
        for robot in ev.get("overrides") or []:
            overrides_by_robot[str(robot)] += 1
    if folded is not None:
        overrides_by_robot.update(folded.overrides)

    step_lat: Sequence[float] | np.ndarray  # milliseconds, one a step
    plan_lat: Sequence[float] | np.ndarray
    if folded is None:
        step_lat = [float(e["latency_ms"]) for e in step_events if e.get("latency_ms") is not None]
        plan_lat = [
            float(e["planning_ms"]) for e in step_events if e.get("planning_ms") is not None
        ]
    else:
        step_lat, plan_lat = folded.step_lat, folded.plan_lat
    llm_lat = [float(c["latency_ms"]) for c in calls if answer_timed(c)]
    # None where no call was counted (a backend that gives no counts), never a false 0.
    counted = not calls or any(c.get("prompt_tokens") is not None for c in calls)
    prompt_sum = sum(int(c.get("prompt_tokens") or 0) for c in calls)
    completion_sum = sum(int(c.get("completion_tokens") or 0) for c in calls)
    if plans:
        fallbacks = sum(1 for p in plans if p["source"] == PlanSource.FALLBACK)
    else:
        fallbacks = sum(1 for c in calls if c.get("fallback"))

    recs = recoveries(events) if folded is None else folded.recoveries
    by_kind: dict[str, dict[str, Any]] = {}
    for kind in sorted({r.kind for r in recs}):
        rs = [r for r in recs if r.kind == kind]
        by_kind[kind] = {
            "count": len(rs),
            "unrecovered": sum(1 for r in rs if not r.recovered),
            "steps_mean": _mean([r.steps for r in rs]),
            "actions_total": sum(r.actions for r in rs),
            "tokens_total": sum(r.tokens for r in rs),
        }

    return {
        "delivered": delivered,
        "steps": n_steps,
        "collisions": int(sum(int(e.get("collisions") or 0) for e in step_events))
        + (folded.collisions if folded is not None else 0),
        "shield_overrides": int(sum(overrides_by_robot.values())),
        "shield_overrides_by_robot": dict(sorted(overrides_by_robot.items())),
        "llm_calls": len(calls),
        **call_counts(calls),  # llm_invalid, llm_unanswered (decisions() agrees), llm_no_answer
        "llm_fallbacks": fallbacks,
        "llm_latency_mean_ms": _mean(llm_lat),
        "llm_latency_p50_ms": percentile(llm_lat, 50),
        "llm_latency_p95_ms": percentile(llm_lat, 95),
        "llm_latency_p99_ms": percentile(llm_lat, 99),
        "step_latency_mean_ms": _mean(step_lat),
        "step_latency_p50_ms": percentile(step_lat, 50),
        "step_latency_p95_ms": percentile(step_lat, 95),
        "step_latency_p99_ms": percentile(step_lat, 99),
        "planning_latency_mean_ms": _mean(plan_lat),
        "planning_latency_p50_ms": percentile(plan_lat, 50),
        "planning_latency_p99_ms": percentile(plan_lat, 99),
        "throughput_per_1000_steps": (1000.0 * delivered / n_steps) if n_steps else None,
        "orders_arrived": arrived,
        "deadline_misses": misses,
        "on_time": on_time,
        "on_time_rate": (on_time / (arrived - dropped)) if arrived - dropped > 0 else None,
        "order_latency_mean_steps": {p: _mean(latency_by_priority.get(p, [])) for p in priorities},
        "prompt_tokens": prompt_sum if counted else None,
        "completion_tokens": completion_sum if counted else None,
        "tokens": prompt_sum + completion_sum if counted else None,
        "failures": len(recs),
        "recoveries": [asdict(r) for r in recs],
        "unrecovered": sum(1 for r in recs if not r.recovered),
        "recovery_steps_mean": _mean([r.steps for r in recs]),
        "recovery_steps_total": sum(r.steps for r in recs),
        "recovery_actions_total": sum(r.actions for r in recs),
        "recovery_tokens_total": sum(r.tokens for r in recs),
        "recovery_by_kind": by_kind,
        **(still_with_task(events) if folded is None else folded.still),
        **decisions(events),
        "idle_robot_steps": idle_robot_steps(events) if folded is None else dict(folded.idle),
    }


#: Why a robot without a task was idle while an order had arrived and was unassigned, as the
#: plan scheduler (:mod:`marlm.hybrid.planning.scheduler`) writes them in ``idle`` trace events.
IDLE_CAUSES: tuple[str, ...] = tuple(IdleCause)


def idle_robot_steps(events: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Robot-steps spent without a task while an order had arrived and was unassigned, by cause
    (``waiting_for_model``, ``no_order``, ``blocked``; docs/metrics.md), summed over the
    ``idle`` events (each lists the robots idle in one step under their cause).

    Returns:
        ``{cause: int}`` for every cause of :data:`IDLE_CAUSES` (0 when none).
    """
    out = dict.fromkeys(IDLE_CAUSES, 0)
    for ev in events_of(events, "idle"):
        for cause in IDLE_CAUSES:
            out[cause] += len(ev.get(cause) or [])
    return out


def reward_curves(events: Sequence[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Per-agent reward per step from ``step`` events.

    Returns:
        ``{agent_name: float64[n_steps]}``; agent names come from ``run_start.agents`` when present,
        else ``robot_0``, ``robot_1``, ... A missing reward (agent already done) is NaN.
    """
    steps = events_of(events, "step")
    starts = events_of(events, "run_start")
    n = max((len(e.get("rewards") or []) for e in steps), default=0)
    names = list(starts[0].get("agents") or []) if starts else []
    names = [str(a) for a in names][:n] + [f"robot_{i}" for i in range(len(names), n)]
    out = {name: np.full(len(steps), np.nan) for name in names}
    for t, ev in enumerate(steps):
        for i, r in enumerate(ev.get("rewards") or []):
            if r is not None:
                out[names[i]][t] = float(r)
    return out


def deliveries_over_time(events: Sequence[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """Cumulative deliveries per step.

    Returns:
        ``(step: int64[n], delivered: int64[n])`` where ``delivered[k]`` counts deliveries at steps
        ``<= step[k]``; ``n`` is the number of ``step`` events.
    """
    steps = np.array(sorted(int(e["step"]) for e in events_of(events, "step")), dtype=np.int64)
    times = np.array(
        sorted(
            int(e["step"]) for e in events_of(events, "order") if e["event"] == OrderEvent.DELIVERED
        ),
        dtype=np.int64,
    )
    counts = np.searchsorted(times, steps, side="right").astype(np.int64)
    return steps, counts


__all__ = [
    "reading",
    "INVALID",
    "NO_ANSWER",
    "REAL_PLAN_SOURCES",
    "PRIORITIES",
    "BACKLOG_EVERY",
    "Recovery",
    "UNANSWERED",
    "call_counts",
    "answer_timed",
    "call_status",
    "deliveries_over_time",
    "order_table",
    "percentile",
    "plan_outcome",
    "recoveries",
    "reward_curves",
    "summarise",
    "cells_around",
    "FoldedSteps",
    "StillWithTask",
]
