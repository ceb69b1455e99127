"""Metrics from hand-built traces whose answers are worked out by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from marlm.eval.metrics import (
    deliveries_over_time,
    recoveries,
    reward_curves,
    summarise,
)
from marlm.eval.online import OnlineSignals
from marlm.eval.trace import TraceWriter, read_trace


def _step(step, actions, proposed=None, positions=None, rewards=None, overrides=(), lat=1.0, col=0):
    return {
        "v": 1,
        "type": "step",
        "step": step,
        "actions": actions,
        "proposed": proposed if proposed is not None else actions,
        "positions": positions,
        "rewards": rewards if rewards is not None else [0.0] * len(actions),
        "overrides": list(overrides),
        "collisions": col,
        "latency_ms": lat,
    }


def _order(event, order, step, priority="normal", robot=None, **kw):
    return {
        "v": 1,
        "type": "order",
        "event": event,
        "order": order,
        "step": step,
        "priority": priority,
        "robot": robot,
        **kw,
    }


def test_orders_throughput_on_time_and_latency_by_priority() -> None:
    events = [{"v": 1, "type": "run_start", "config": {}, "agents": ["a", "b"]}]
    events += [_step(t, [0, 0], lat=float(t + 1)) for t in range(10)]  # latencies 1..10 ms
    events += [
        _order("arrived", "O1", 0, "urgent"),
        _order("delivered", "O1", 4, "urgent", "a"),  # on time, latency 4
        _order("arrived", "O2", 1, "normal"),
        _order("deadline_missed", "O2", 3, "normal"),
        _order("delivered", "O2", 8, "normal", "b"),  # late, latency 7
        _order("arrived", "O3", 2, "low", deadline=9),  # never delivered
        _order("arrived", "O4", 2, "urgent", deadline=5),
        _order("delivered", "O4", 5, "urgent", "b"),  # on deadline step: on time, latency 3
    ]
    m = summarise(events)
    assert m["steps"] == 10
    assert m["delivered"] == 3
    assert m["orders_arrived"] == 4
    assert m["on_time"] == 2 and m["on_time_rate"] == pytest.approx(0.5)
    assert m["deadline_misses"] == 1
    assert m["throughput_per_1000_steps"] == pytest.approx(300.0)
    assert m["order_latency_mean_steps"] == {"urgent": 3.5, "normal": 7.0, "low": None}
    assert m["step_latency_p50_ms"] == pytest.approx(5.5)
    assert m["step_latency_p99_ms"] == pytest.approx(9.91)
    assert m["llm_calls"] == 0 and m["llm_latency_p50_ms"] is None
    for key in (
        "delivered",
        "collisions",
        "steps",
        "llm_calls",
        "llm_fallbacks",
        "shield_overrides",
        "step_latency_p99_ms",
    ):
        assert key in m


def test_llm_counts_tokens_fallbacks_and_shield_counts() -> None:
    events = [
        _step(0, [1, 0], proposed=[1, 2], overrides=["robot_1"], col=0),
        _step(1, [0, 0], proposed=[3, 4], overrides=["robot_0", "robot_1"], col=2),
    ]
    for i, (lat, valid) in enumerate([(100.0, False), (200.0, True), (300.0, False)]):
        events.append(
            {
                "v": 1,
                "type": "llm_call",
                "call_id": i,
                "latency_ms": lat,
                "valid": valid,
                "prompt_tokens": 10,
                "completion_tokens": 2,
                "step_requested": 0,
            }
        )
    events.append({"v": 1, "type": "plan", "step": 1, "assignments": [], "source": "llm"})
    events.append({"v": 1, "type": "plan", "step": 1, "assignments": [], "source": "fallback"})
    m = summarise(events)
    assert m["llm_calls"] == 3 and m["llm_invalid"] == 2 and m["llm_fallbacks"] == 1
    assert m["llm_latency_mean_ms"] == pytest.approx(200.0)
    assert m["tokens"] == 36 and m["prompt_tokens"] == 30
    assert m["shield_overrides"] == 3
    assert m["shield_overrides_by_robot"] == {"robot_0": 1, "robot_1": 2}
    assert m["collisions"] == 2


def test_tokens_are_null_when_no_call_was_counted_never_a_false_zero() -> None:
    # A triage mode that does not count tokens records None; its run's figures are null, not 0.
    call = {"v": 1, "type": "llm_call", "latency_ms": 5.0, "valid": True, "step_requested": 0}
    uncounted = [_step(0, [0, 0]), {**call, "prompt_tokens": None, "completion_tokens": None}]
    m = summarise(uncounted)
    assert m["llm_calls"] == 1
    assert (m["prompt_tokens"], m["completion_tokens"], m["tokens"]) == (None, None, None)
    counted = [*uncounted, {**call, "prompt_tokens": 17, "completion_tokens": 0}]
    assert summarise(counted)["tokens"] == 17
    assert summarise([_step(0, [0, 0])])["tokens"] == 0  # no call: nothing was read


def test_recovery_after_invalid_llm_answer_waits_for_a_real_plan() -> None:
    events = [_step(t, [0, 0]) for t in range(20)]
    events += [
        {"v": 1, "type": "failure", "kind": "invalid_llm_answer", "step": 5},
        {
            "v": 1,
            "type": "llm_call",
            "call_id": 1,
            "latency_ms": 5.0,
            "valid": False,
            "step_requested": 5,
            "prompt_tokens": 100,
            "completion_tokens": 10,
        },
        {
            "v": 1,
            "type": "llm_call",
            "call_id": 2,
            "latency_ms": 5.0,
            "valid": False,
            "step_requested": 5,
            "prompt_tokens": 120,
            "completion_tokens": 10,
        },
        {"v": 1, "type": "plan", "step": 6, "assignments": [], "source": "fallback"},
        {
            "v": 1,
            "type": "llm_call",
            "call_id": 3,
            "latency_ms": 5.0,
            "valid": True,
            "step_requested": 9,
            "prompt_tokens": 100,
            "completion_tokens": 8,
        },
        {"v": 1, "type": "plan", "step": 11, "assignments": [], "source": "llm"},
        {
            "v": 1,
            "type": "llm_call",
            "call_id": 4,
            "latency_ms": 5.0,
            "valid": True,
            "step_requested": 15,
            "prompt_tokens": 999,
            "completion_tokens": 1,
        },
    ]
    (rec,) = recoveries(events)
    assert rec.recovered and rec.end_step == 11 and rec.steps == 6
    assert rec.actions == 3  # three calls in [5, 11], no shield changes
    assert rec.tokens == 110 + 130 + 108
    m = summarise(events)
    assert m["recovery_by_kind"]["invalid_llm_answer"]["count"] == 1
    assert m["recovery_steps_total"] == 6 and m["unrecovered"] == 0


def test_deadlock_recovery_waits_until_stuck_robots_move() -> None:
    # Two robots face each other; both propose moves and do not move at steps 3..5.
    pos = {t: [[0, 0], [0, 1]] for t in range(0, 6)}
    pos.update({6: [[1, 0], [0, 1]], 7: [[1, 0], [0, 0]], 8: [[1, 0], [0, 0]]})
    events = []
    for t in range(9):
        proposed = [4, 3] if 3 <= t <= 5 else [0, 0]
        actions = [0, 0] if 3 <= t <= 5 else [0, 0]
        if t == 5:
            actions = [0, 0]
        events.append(_step(t, actions, proposed=proposed, positions=pos[t]))
    events.append({"v": 1, "type": "failure", "kind": "deadlock_break", "step": 5})
    (rec,) = recoveries(events)
    assert rec.end_step == 7 and rec.steps == 2 and rec.recovered
    assert rec.actions == 2  # step 5: both proposals changed by the shield


def test_unrecovered_failure_runs_to_the_end() -> None:
    events = [_step(t, [0]) for t in range(10)]
    events.append({"v": 1, "type": "failure", "kind": "backend_error", "step": 4})
    events.append({"v": 1, "type": "plan", "step": 5, "assignments": [], "source": "fallback"})
    (rec,) = recoveries(events)
    assert not rec.recovered and rec.end_step == 9 and rec.steps == 5


def test_reward_curves_and_deliveries_over_time(tmp_path: Path) -> None:
    with TraceWriter(tmp_path / "trace.jsonl") as t:
        t.write("run_start", config={}, agents=["robot_0", "robot_1"])
        t.write("step", step=0, actions=[0, 0], rewards=[-1.0, -1.0])
        t.write("step", step=1, actions=[0, 0], rewards=[-1.0, None])
        t.write("order", event="delivered", order="O1", step=1)
        t.write("step", step=2, actions=[0, 0], rewards=[2.0, None])
    events = read_trace(tmp_path / "trace.jsonl").events
    curves = reward_curves(events)
    assert list(curves) == ["robot_0", "robot_1"]
    np.testing.assert_array_equal(curves["robot_0"], [-1.0, -1.0, 2.0])
    np.testing.assert_array_equal(curves["robot_1"], [-1.0, np.nan, np.nan])
    steps, delivered = deliveries_over_time(events)
    assert steps.tolist() == [0, 1, 2] and delivered.tolist() == [0, 1, 1]


def test_online_signals_agree_with_the_offline_summary_on_a_real_run(tmp_path: Path) -> None:
    from marlm.hybrid.controller import run, run_config
    from marlm.hybrid.planning.planner import RulePlanner

    run(
        run_config(steps=200, seed=4, planner="rule", executor="greedy", gif=False, tick_ms=0),
        tmp_path,
        planner=RulePlanner(),
    )
    events = read_trace(tmp_path).events
    online = OnlineSignals(window=10_000)  # window covers the run: figures must equal summarise's
    for e in events:
        online.update(e)
    now, full = online.snapshot(), summarise(events)
    for key in (
        "delivered",
        "on_time_rate",
        "throughput_per_1000_steps",
        "collisions",
        "shield_overrides",
        "llm_calls",
        "tokens",
        "step_latency_p50_ms",
        "step_latency_p99_ms",
    ):
        assert now[key] == pytest.approx(full[key]), key
    # The run ends at its last step event: the 200-step limit, or earlier once every order is in.
    last_step = max(e["step"] for e in events if e["type"] == "step")
    assert last_step > 100 and now["step"] == last_step


def test_online_signals_window_and_open_failures() -> None:
    sig = OnlineSignals(window=10)
    for t in range(30):
        sig.update(_step(t, [0], lat=100.0 if t < 20 else 1.0))
        if t in (5, 25):
            sig.update(_order("delivered", f"O{t}", t))
    snap = sig.snapshot()
    assert snap["step_latency_p99_ms"] == 1.0  # the slow steps left the window
    assert snap["throughput_per_1000_steps"] == 100.0  # 1 delivery in the last 10 steps
    sig.update({"type": "failure", "kind": "backend_error", "step": 30})
    sig.update({"type": "plan", "step": 31, "source": "fallback", "assignments": []})
    assert sig.snapshot()["open_failures"] == 1
    sig.update({"type": "plan", "step": 40, "source": "llm", "assignments": []})
    assert sig.snapshot()["open_failures"] == 0


def _plan(step, outcome, applied, t_s=None, t_req=None, source=None, error=None):
    ev = {"type": "plan", "step": step, "assignments": applied, "applied": applied}
    ev.update(source=source or {"answered": "llm"}.get(outcome, "fallback"), error=error)
    if outcome is not None:
        ev["outcome"] = outcome
    if t_s is not None:
        ev.update(t_s=t_s, t_requested_s=t_req)
    return ev


def test_who_decided_shares_unanswered_calls_and_time_to_first_answer() -> None:
    a = [{"robot": "r0", "order": "o1"}]
    events = [
        _plan(
            3, "deadline", a, t_s=2.5, t_req=0.4
        ),  # the rule stood in; the first request at 0.4 s
        _plan(5, "answered", [], t_s=2.9, t_req=0.4),  # answered, but nothing left to apply
        _plan(9, "answered", a, t_s=3.0, t_req=2.6),
        _plan(12, "answered", a, t_s=4.0, t_req=3.1),
        _plan(14, "planner_error", a, t_s=4.2, t_req=4.1),
        # A trace older than plan.outcome: the failure written beside the plan types it.
        _plan(20, None, a, source="fallback", error="no answer in 2 s"),
        {"type": "failure", "kind": "timeout", "step": 20},
        {
            "type": "llm_call",
            "valid": False,
            "error": "the run ended while the request was in flight",
            "status": "unanswered",
            "t_requested_s": 9.0,
        },
    ]
    d = summarise(events)
    assert d["plans_effective"] == 5
    assert d["plans_by_outcome"] == {
        "answered": 2, "rule": 0, "deadline": 1, "backend_error": 1,
        "invalid_answer": 0, "planner_error": 1,
    }  # fmt: skip
    assert d["decided_by_model_share"] == pytest.approx(2 / 5)
    assert d["decided_by_rule_stand_in_share"] == pytest.approx(1 / 5)
    assert d["decided_by_fallback_share"] == pytest.approx(2 / 5)
    assert d["llm_unanswered"] == 1
    # First answer: the plan of step 5 (answered, at 2.9 s) minus the first request (0.4 s).
    assert d["llm_first_answer_s"] == pytest.approx(2.5)
    assert d["llm_first_answer_step"] == 5
    rule_run = summarise([_plan(1, "rule", a, source="rule")])
    assert rule_run["decided_by_model_share"] is None and rule_run["llm_first_answer_s"] is None


def test_longest_time_a_robot_with_a_task_stood_still():
    # r0: assigned at step 0, still at steps 1-3 (3 steps), moves at 4, delivers at 5, then
    # stands idle (no task: not counted). r1: idle and still at steps 0-2 (not counted),
    # assigned at 3, still at 3-4 (2 steps), released at 5 (no task from step 5 on).
    a, b, c = [0, 0], [0, 1], [0, 2]
    cells = {  # step -> positions after the step
        0: [b, [5, 5]], 1: [b, [5, 5]], 2: [b, [5, 5]], 3: [b, [5, 5]],
        4: [c, [5, 5]], 5: [a, [5, 6]], 6: [a, [5, 6]], 7: [a, [5, 6]], 8: [a, [5, 6]],
    }  # fmt: skip
    events = [
        {
            "v": 1,
            "type": "run_start",
            "config": {},
            "agents": ["r0", "r1"],
            "positions": [a, [5, 5]],
        },
        _order("assigned", "o1", 0, robot="r0"),
        *[_step(s, [0, 0], positions=p) for s, p in cells.items() if s < 3],
        _order("assigned", "o2", 3, robot="r1"),
        *[_step(s, [0, 0], positions=p) for s, p in cells.items() if 3 <= s < 5],
        _order("released", "o2", 5, robot="r1"),
        _step(5, [0, 0], positions=cells[5]),
        _order("delivered", "o1", 5, robot="r0"),
        *[_step(s, [0, 0], positions=p) for s, p in cells.items() if s > 5],
    ]
    m = summarise(events)
    assert m["still_with_task_max_steps"] == 3
    assert m["still_with_task_max_robot"] == "r0" and m["still_with_task_max_from_step"] == 1
    # A step without positions ends a run (and the next step has no "before"): r0's wait is cut
    # to step 3 alone, and r1's two steps (3-4) are the longest.
    events[3]["positions"] = None
    m = summarise(events)
    assert m["still_with_task_max_steps"] == 2 and m["still_with_task_max_robot"] == "r1"
    assert m["still_with_task_max_from_step"] == 3


def test_statuses_and_outcomes_are_read_from_typed_fields_never_from_error_text() -> None:
    a = [{"robot": "r0", "order": "o1"}]
    events = [
        # The error text says "timeout" and "unanswered"; the typed fields say otherwise.
        _plan(3, None, a, source="fallback", error="timeout: misleading text"),
        {"type": "failure", "kind": "invalid_llm_answer", "step": 3},
        {"type": "llm_call", "valid": False, "error": "unanswered? no", "status": "timeout"},
        {"type": "llm_call", "valid": False, "error": "timeout", "status": "invalid_answer"},
        # A trace older than llm_call.status: the record of an unanswered request.
        {"type": "llm_call", "valid": False, "error": "gone", "finish_reason": "none"},
        {"type": "llm_call", "valid": True, "error": "unanswered", "status": "answered"},
        {"type": "llm_call", "valid": False, "error": "unanswered: 503", "status": "backend_error"},
    ]
    m = summarise(events)
    assert m["plans_by_outcome"]["invalid_answer"] == 1
    assert m["plans_by_outcome"]["backend_error"] == 0
    # No answer came to the timeout, the legacy finish_reason "none" record, the backend error.
    assert m["llm_unanswered"] == 3
    assert m["llm_invalid"] == 1  # the invalid answer alone


def test_a_timeout_waits_for_a_real_plan_like_every_llm_side_failure() -> None:
    # A timeout is a failure of the model side: back to normal only with the planner's plan.
    events = [_step(t, [0]) for t in range(10)]
    events.append({"v": 1, "type": "failure", "kind": "timeout", "step": 2})
    events.append({"v": 1, "type": "plan", "step": 2, "assignments": [], "source": "fallback"})
    events.append({"v": 1, "type": "plan", "step": 6, "assignments": [], "source": "llm"})
    (rec,) = recoveries(events)
    assert rec.recovered and rec.end_step == 6 and rec.steps == 4


def test_the_rule_standing_in_past_the_deadline_is_not_back_to_normal() -> None:
    # docs/metrics.md, condition 1: plan.source llm or rule; a deadline plan is the rule
    # standing in for the model, not the configured planner delivering again.
    events = [_step(t, [0]) for t in range(12)]
    events.append({"v": 1, "type": "failure", "kind": "backend_error", "step": 1})
    events.append({"v": 1, "type": "plan", "step": 3, "assignments": [], "source": "deadline"})
    events.append({"v": 1, "type": "plan", "step": 8, "assignments": [], "source": "llm"})
    (rec,) = recoveries(events)
    assert rec.recovered and rec.end_step == 8 and rec.steps == 7
    sig = OnlineSignals(window=10)
    for e in events[-3:]:
        sig.update(e)
        if e["type"] == "plan" and e["source"] == "deadline":
            assert sig.snapshot()["open_failures"] == 1
    assert sig.snapshot()["open_failures"] == 0
    sig.update({"type": "failure", "kind": "timeout", "step": 9})
    assert sig.snapshot()["open_failures"] == 1


def test_llm_latency_is_of_answered_calls_and_calls_without_an_answer_are_counted_apart() -> None:
    # A timeout's 30 s wait and a refused connection's 1 ms were in the model's p50/p95.
    calls = [
        (100.0, "answered"), (200.0, "answered"), (300.0, "answered"),
        (400.0, "invalid_answer"),  # the model answered, invalidly: its time is a latency
        (30000.0, "timeout"), (1.0, "backend_error"), (12000.0, "unanswered"),
        (250.0, None),  # a trace written before `status`: valid, so answered
    ]  # fmt: skip
    events = [_step(0, [0, 0])]
    for i, (lat, status) in enumerate(calls):
        call = {"v": 1, "type": "llm_call", "call_id": i, "latency_ms": lat, "step_requested": 0}
        call.update({"status": status} if status else {"valid": True})
        events.append(call)
    m = summarise(events)
    assert (m["llm_calls"], m["llm_no_answer"], m["llm_unanswered"]) == (8, 2, 3)
    assert m["llm_latency_mean_ms"] == 250.0 and m["llm_latency_p50_ms"] == 250.0
    assert m["llm_latency_p95_ms"] == pytest.approx(380.0)  # of 100, 200, 250, 300, 400
    online = OnlineSignals()
    for e in events:
        online.update(e)
    assert online.snapshot()["llm_latency_p50_ms"] == 250.0
