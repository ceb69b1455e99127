"""``--planner team``: a coordinator that ranks orders and a dispatcher that assigns robots.

Two role agents on one backend (:class:`marlm.llm.team.Team`), each with its own context:

- the **coordinator** reads the pending orders and their notes and sends a ranking of order ids
  (most urgent first); its ``done`` message carries the final ranking and ends the run;
- the **dispatcher** reads the ranking and the robots' distances and proposes
  ``{robot, order}`` assignments.

The coordinator has the final word: only orders in its final ranking are served, in its order.
For each of them the dispatcher's robot is used when that robot is still free; otherwise the
nearest free idle robot takes it. Every id is decoded under a schema whose enums are the valid
ids and checked again here. When the team ends without the coordinator's ``done`` (``max_rounds``,
``backend_error``, ``timeout``) the rule plans instead (``source="fallback"``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from marlm.hybrid.planning.planner import (
    CANCEL_WAIT_S,
    LLMCall,
    Plan,
    Snapshot,
    answer_schema,
    cancel_calls,
    render_prompt,
    rule_assign,
    rule_order,
)
from marlm.llm.backends import BackendError, BackendTimeout, ChatModel
from marlm.llm.errors import InvalidAnswer
from marlm.llm.team import Role, Team, TeamMessage
from marlm.outcomes import CallStatus, PlanSource

PROMPT_VERSION = "team-v1"

COORDINATOR = (
    "You rank pending warehouse orders, most urgent first. An order whose note says it is "
    "time-critical (a truck leaving, a line stopped, a patient waiting) is urgent whatever its "
    'priority field says. Your content is {"ranking": [order ids]}. Send your ranking to the '
    "dispatcher with phase 'decide'; after reading the dispatcher's reply, send phase 'done' with "
    "the final ranking."
)
DISPATCHER = (
    "You assign idle robots to the coordinator's ranked orders: the first orders get the nearest "
    'robots. Your content is {"assignments": [{"robot": id, "order": id}]}; send it to the '
    "coordinator with phase 'execute'."
)


def _ranking_schema(orders: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "ranking": {
                "type": "array",
                "items": {"enum": orders},
                "minItems": 1,
                "maxItems": len(orders),
            }
        },
        "required": ["ranking"],
        "additionalProperties": False,
    }


def _unique(msg: TeamMessage, key: str, field: str | None = None) -> str | None:
    """A domain check the schema cannot express: no id twice."""
    items = msg.content.get(key, []) if isinstance(msg.content, dict) else []
    values = [i if field is None else i.get(field) for i in items]
    if len(set(values)) != len(values):
        return f"an id appears twice in {key}; list each at most once"
    return None


def merge(ranking: list[str], proposal: list[dict], snapshot: Snapshot) -> list[tuple[str, str]]:
    """Final assignments: the coordinator's ranking decides which orders and in which order; the
    dispatcher's robot is kept when still free, else the nearest free idle robot is taken."""
    by_id = {o.id: o for o in snapshot.pending}
    queue = [by_id[i] for i in dict.fromkeys(ranking) if i in by_id]
    wish = {p["order"]: p["robot"] for p in proposal if p.get("robot") in snapshot.idle}
    return rule_assign(snapshot, queue, prefer=wish)


class TeamPlanner:
    """The two-role team as a :class:`marlm.hybrid.planning.planner.Planner`.

    Args:
        model: the shared chat backend.
        max_orders: orders shown (first by the rule's order), bounding prompt length.
        max_rounds: team rounds (each role speaks once a round).
        max_tokens: bound on each reply.
        clock: seconds, monotonic (default :func:`time.perf_counter`): the team's wall time,
            from which a failed call's duration is recorded.
    """

    name = "team"

    def __init__(
        self,
        model: ChatModel,
        *,
        max_orders: int = 6,
        max_rounds: int = 2,
        max_tokens: int = 96,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.model = model
        self.clock = clock
        self.max_orders = max_orders
        self.max_rounds = max_rounds
        self.max_tokens = max_tokens
        self.prompt_version = PROMPT_VERSION

    def cancel(self, thread: threading.Thread, timeout_s: float = CANCEL_WAIT_S) -> bool:
        """Cancel ``thread``'s model calls (:func:`marlm.hybrid.planning.planner.cancel_calls`)."""
        return cancel_calls(self.model, thread, timeout_s)

    def plan(self, snapshot: Snapshot) -> Plan:
        """Run the team on ``snapshot``; fall back to the rule unless the coordinator is done."""
        if not snapshot.pending or not snapshot.idle:
            return Plan([], PlanSource.RULE, snapshot)
        orders = rule_order(snapshot.pending)[: self.max_orders]
        ids = [o.id for o in orders]
        team = Team(
            self.model,
            [
                Role(
                    "coordinator",
                    COORDINATOR,
                    content_schema=_ranking_schema(ids),
                    validate=lambda m: _unique(m, "ranking"),
                ),
                Role(
                    "dispatcher",
                    DISPATCHER,
                    content_schema=answer_schema(snapshot.idle, ids),
                    validate=lambda m: (
                        _unique(m, "assignments", "robot") or _unique(m, "assignments", "order")
                    ),
                ),
            ],
            coordinator="coordinator",
            max_rounds=self.max_rounds,
            max_retry=1,
            max_tokens=self.max_tokens,
        )
        t0 = self.clock()
        result = team.run(render_prompt(snapshot, orders))
        elapsed_ms = (self.clock() - t0) * 1e3
        calls = self._calls(result, elapsed_ms)
        if result.reason != "done":
            error = f"team ended with {result.reason}: {result.detail}".strip(": ")
            exception = {"timeout": BackendTimeout, "backend_error": BackendError}.get(
                result.reason, InvalidAnswer
            )(error)
            return Plan(
                rule_assign(snapshot),
                PlanSource.FALLBACK,
                snapshot,
                calls,
                error,
                exception=exception,
            )
        proposals = [
            m.content.get("assignments", [])
            for m in result.messages
            if m.sender == "dispatcher" and isinstance(m.content, dict)
        ]
        pairs = merge(
            result.answer.get("ranking", []), proposals[-1] if proposals else [], snapshot
        )
        return Plan(pairs, PlanSource.LLM, snapshot, calls)

    @staticmethod
    def _calls(result, elapsed_ms: float) -> list[LLMCall]:
        """One trace record per model call; each carries the role's context and the raw reply.

        The call that failed (the team ended with ``timeout`` or ``backend_error``) returned no
        reply, so it is recorded apart, with its real duration: the team's wall time not
        accounted for by the calls that answered (a timeout counts its whole wait)."""
        out = []
        replies = {
            role: [m["content"] for m in ctx if m["role"] == "assistant"]
            for role, ctx in result.contexts.items()
        }
        flat = [(role, text) for role, texts in replies.items() for text in texts]
        for i, stats in enumerate(result.calls):
            role, raw = flat[i] if i < len(flat) else ("?", "")
            out.append(
                LLMCall.from_result(
                    result.contexts.get(role, []),
                    stats,
                    raw=raw,
                    valid=result.reason == "done",
                    error=None if result.reason == "done" else result.reason,
                    attempt=i,
                )
            )
        if result.reason in _FAILED_STATUS or not out:
            out.append(
                LLMCall(
                    messages=[],
                    latency_ms=max(0.0, elapsed_ms - sum(c.latency_ms for c in out)),
                    valid=False,
                    error=f"{result.reason}: {result.detail}",
                    attempt=len(out),
                    status=_FAILED_STATUS.get(result.reason, CallStatus.INVALID_ANSWER),
                )
            )
        return out


#: The status of the call that ended a team, by the team's end reason.
_FAILED_STATUS = {"timeout": CallStatus.TIMEOUT, "backend_error": CallStatus.BACKEND_ERROR}
