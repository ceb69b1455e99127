"""The outcome vocabulary: every enumerated value a trace records, defined once.

Planners, the plan scheduler, the trace writer and the metrics all name outcomes with these
members, and ``docs/trace-schema.md`` and ``docs/metrics.md`` list the same values (a test reads
both documents and compares them with this module, both ways). Each enumeration is a
:class:`enum.StrEnum`: a member *is* its string (``PlanSource.LLM == "llm"``), so it is written
to JSON as that string and compares equal to the text of traces written before this module.

This module imports nothing (like :mod:`marlm.errors`), so any layer may use it.
"""

from __future__ import annotations

from enum import StrEnum


class PlanSource(StrEnum):
    """Who made a plan (trace ``plan.source``)."""

    #: the model's valid answer
    LLM = "llm"
    #: the configured planner is the rule
    RULE = "rule"
    #: the rule, because the model failed (see :class:`PlanOutcome` for how)
    FALLBACK = "fallback"
    #: the rule stood in past the planning deadline
    DEADLINE = "deadline"


class PlanOutcome(StrEnum):
    """Why a plan is what it is (trace ``plan.outcome``): the typed reading of its source."""

    #: the model's answer was used
    ANSWERED = "answered"
    #: the configured planner is the rule
    RULE = "rule"
    #: the rule stood in past the planning deadline
    DEADLINE = "deadline"
    #: the rule replaced the model because the backend failed (timeout, connection, open circuit)
    BACKEND_ERROR = "backend_error"
    #: the rule replaced the model because its answer was invalid
    INVALID_ANSWER = "invalid_answer"
    #: the rule replaced the model because our planner code raised (never blamed on the model)
    PLANNER_ERROR = "planner_error"


#: Outcomes in which the rule replaced the model after a failure (``plan.source`` ``fallback``).
FALLBACK_OUTCOMES = frozenset(
    {PlanOutcome.BACKEND_ERROR, PlanOutcome.INVALID_ANSWER, PlanOutcome.PLANNER_ERROR}
)


class CallStatus(StrEnum):
    """What became of one model call (trace ``llm_call.status``)."""

    #: the model answered and the answer passed validation
    ANSWERED = "answered"
    #: the model answered, but the answer failed validation (not JSON, an unknown id, cut off)
    INVALID_ANSWER = "invalid_answer"
    #: the backend failed (connection, HTTP error, open circuit, context length)
    BACKEND_ERROR = "backend_error"
    #: the backend did not answer within its timeout
    TIMEOUT = "timeout"
    #: the run ended while the call was in flight
    UNANSWERED = "unanswered"


class CallKind(StrEnum):
    """What one model call was for (trace ``llm_call.call``)."""

    #: chat messages sent to the model, its answer text back
    CHAT = "chat"
    #: one order's note classified by the triage classifier (no chat message is sent)
    TRIAGE = "triage"


class FailureKind(StrEnum):
    """What went wrong (trace ``failure.kind``)."""

    #: the model's answer failed validation
    INVALID_LLM_ANSWER = "invalid_llm_answer"
    #: the model backend failed (connection, HTTP error, open circuit)
    BACKEND_ERROR = "backend_error"
    #: the model backend did not answer within its timeout
    TIMEOUT = "timeout"
    #: our planner code raised
    PLANNER_ERROR = "planner_error"
    #: the rule stood in for a model answer that had not arrived within the planning deadline
    PLANNER_DEADLINE = "planner_deadline"
    #: the shield broke a deadlock with a yield move
    DEADLOCK_BREAK = "deadlock_break"


#: Failures of the model side: the system is back to normal only once the configured planner
#: plans again (docs/metrics.md, "Recovery cost", condition 1).
LLM_SIDE_FAILURES = frozenset(
    {
        FailureKind.INVALID_LLM_ANSWER,
        FailureKind.BACKEND_ERROR,
        FailureKind.TIMEOUT,
    }
)


class OrderEvent(StrEnum):
    """A change in an order's life (trace ``order.event``)."""

    ARRIVED = "arrived"
    ASSIGNED = "assigned"
    #: taken off its robot before pick-up; pending again
    RELEASED = "released"
    PICKED = "picked"
    DELIVERED = "delivered"
    DEADLINE_MISSED = "deadline_missed"
    #: cancelled by its note: never assigned again (a carried shelf goes back)
    CANCELLED = "cancelled"


class RunEndReason(StrEnum):
    """Why a run ended (trace ``run_end.reason``). A run that crashed or was interrupted writes
    no ``run_end``."""

    #: the step limit (a truncation, not a real end of the episode)
    TIME_LIMIT = "time_limit"
    #: every order was delivered
    ALL_DELIVERED = "all_delivered"


__all__ = [
    "FALLBACK_OUTCOMES",
    "LLM_SIDE_FAILURES",
    "CallKind",
    "CallStatus",
    "FailureKind",
    "OrderEvent",
    "PlanOutcome",
    "PlanSource",
    "RunEndReason",
]


class IdleCause(StrEnum):
    """Why a robot without a task stood idle while an order was unassigned (trace ``idle``
    fields, ``metrics.idle_robot_steps`` keys)."""

    #: an order is offered, the situation is not planned yet and a model request is in flight
    WAITING_FOR_MODEL = "waiting_for_model"
    #: every unassigned order waits for a shelf another robot holds
    NO_ORDER = "no_order"
    #: the planner saw the robot and left it idle (a reserve robot, a shelf out of reach)
    BLOCKED = "blocked"
