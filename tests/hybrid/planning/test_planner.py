"""Planner: the rule, answer validation, retry and fallback (scripted faults), the real model."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass

import pytest

from marlm.hybrid.planning.planner import (
    LLMPlanner,
    RulePlanner,
    Snapshot,
    rule_assign,
    validate_answer,
)
from marlm.hybrid.planning.worker import AsyncPlanner
from marlm.llm.backends import BackendError, ChatResult


@dataclass(frozen=True)
class Ord:
    id: str
    priority: str
    deadline: int
    shelf: str = "A1"
    arrival: int = 0
    note: str = ""


def snap(pending, idle, distance):
    return Snapshot(step=5, pending=tuple(pending), idle=tuple(idle), distance=distance)


ORDERS = [
    Ord("o1", "low", 50),
    Ord("o2", "urgent", 90),
    Ord("o3", "normal", 40),
    Ord("o4", "urgent", 60),
]
DIST = {
    ("r0", "o1"): 1,
    ("r0", "o2"): 9,
    ("r0", "o3"): 2,
    ("r0", "o4"): 3,
    ("r1", "o1"): 5,
    ("r1", "o2"): 2,
    ("r1", "o3"): 5,
    ("r1", "o4"): 8,
    ("r2", "o1"): 5,
    ("r2", "o2"): 4,
    ("r2", "o3"): 1,
    ("r2", "o4"): 2,
}


def test_rule_takes_priority_then_deadline_then_nearest_robot():
    s = snap(ORDERS, ["r0", "r1", "r2"], DIST)
    # o4 (urgent, due 60) first -> nearest r2 (2); o2 (urgent, due 90) -> r1 (2); o3 -> r0
    assert rule_assign(s) == [("r2", "o4"), ("r1", "o2"), ("r0", "o3")]
    assert RulePlanner().plan(s).source == "rule"


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ("not json", "invalid JSON"),
        ('{"assignments": [{"robot": "r9", "order": "o1"}]}', "'r9' is not an idle robot"),
        ('{"assignments": [{"robot": "r0", "order": "o9"}]}', "'o9' is not pending"),
        (
            '{"assignments": [{"robot": "r0", "order": "o1"}, {"robot": "r0", "order": "o2"}]}',
            "robot appears more than once",
        ),
        (
            '{"assignments": [{"robot": "r0", "order": "o1"}, {"robot": "r1", "order": "o1"}]}',
            "order appears more than once",
        ),
        ('{"assignments": []}', "expected 2 assignments, got 0"),
        ('{"assignments": [{"robot": "r0", "order": "o1", "x": 1}]}', "Extra inputs"),
    ],
)
def test_validation_names_what_is_wrong(answer, message):
    s = snap(ORDERS[:2], ["r0", "r1"], DIST)
    with pytest.raises(ValueError, match=message):
        validate_answer(answer, s, 2)


class ScriptedModel:
    """Fault injector: returns the given texts in order (or raises the given exceptions)."""

    name = "scripted"

    def __init__(self, replies, gate: threading.Event | None = None):
        self.replies = list(replies)
        self.seen: list[list[dict]] = []
        self.gate = gate

    def chat(self, messages, *, schema=None, max_tokens=256, temperature=0.0, seed=None):
        if self.gate is not None:
            self.gate.wait(10)
        self.seen.append(messages)
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        text, finish = reply if isinstance(reply, tuple) else (reply, "stop")
        return ChatResult(text, 10, 5, 0.01, finish, "scripted")


def ok_answer(*pairs):
    return json.dumps({"assignments": [{"robot": r, "order": o} for r, o in pairs]})


def test_invalid_answer_is_retried_once_with_the_error_text():
    s = snap(ORDERS[:2], ["r0", "r1"], DIST)
    model = ScriptedModel(
        [ok_answer(("r0", "o1"), ("r0", "o2")), ok_answer(("r0", "o1"), ("r1", "o2"))]
    )
    plan = LLMPlanner(model).plan(s)
    assert plan.source == "llm"
    assert plan.assignments == [("r0", "o1"), ("r1", "o2")]
    assert [c.valid for c in plan.calls] == [False, True]
    assert "robot appears more than once" in model.seen[1][-1]["content"]


def test_two_invalid_answers_fall_back_to_the_rule():
    s = snap(ORDERS[:2], ["r0", "r1"], DIST)
    model = ScriptedModel(["garbage", ('{"assignments": [{"robot": "r0", "ord', "length")])
    plan = LLMPlanner(model).plan(s)
    assert plan.source == "fallback"
    assert plan.assignments == rule_assign(s)
    assert len(plan.calls) == 2 and not any(c.valid for c in plan.calls)
    assert "cut off" in plan.calls[1].error


def test_backend_error_falls_back_without_retrying():
    s = snap(ORDERS[:2], ["r0", "r1"], DIST)
    model = ScriptedModel([BackendError("connection refused")])
    plan = LLMPlanner(model).plan(s)
    assert plan.source == "fallback"
    assert plan.error.startswith("backend error")
    assert len(plan.calls) == 1


def test_async_planner_never_blocks_the_caller():
    gate = threading.Event()
    s = snap(ORDERS[:2], ["r0", "r1"], DIST)
    ap = AsyncPlanner(LLMPlanner(ScriptedModel([ok_answer(("r0", "o2"), ("r1", "o1"))], gate)))
    assert ap.submit(s) is True
    assert ap.submit(s) is False  # one request in flight at a time
    assert ap.poll() is None and ap.busy  # the model is still "thinking"
    gate.set()
    plan = ap.poll(wait=True)
    assert plan.assignments == [("r0", "o2"), ("r1", "o1")]
    assert ap.poll() is None  # a plan is delivered once
    ap.close()


def test_real_embedded_model_gives_a_valid_complete_plan(embedded_model):
    orders = [
        Ord("o1", "normal", 300, note="The truck for this route leaves at 11, load before then."),
        Ord("o2", "low", 400, note="Restock, no rush."),
        Ord("o3", "normal", 350, note="产线停机等这个零件"),
    ]
    s = snap(orders, ["r0", "r1"], {(r, o.id): 3 for r in ("r0", "r1") for o in orders})
    plan = LLMPlanner(embedded_model).plan(s)
    assert plan.calls, "the model was not called"
    first = plan.calls[0]
    assert first.prompt_tokens > 0 and first.completion_tokens > 0 and first.latency_ms > 0
    assert "产线停机等这个零件" in first.messages[-1]["content"]
    # Whatever the source, the plan is complete and valid.
    assert len(plan.assignments) == 2
    assert {r for r, _ in plan.assignments} == {"r0", "r1"}
    assert len({o for _, o in plan.assignments}) == 2
    if plan.source == "llm":
        assert first.valid or plan.calls[-1].valid
