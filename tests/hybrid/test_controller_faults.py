"""Backend faults during a run (cases file, case 12): the planner falls back, robots keep moving."""

from __future__ import annotations

import threading

import pytest

from marlm.eval.trace import read_trace
from marlm.hybrid.controller import run, run_config
from marlm.hybrid.planning.planner import LLMPlanner
from marlm.llm.backends import OpenAICompatible
from marlm.llm.breaker import CircuitBreaker
from marlm.llm.breaker import FakeClock as FrozenClock

#: The run below under every fault, measured: the rule's plans deliver all 24 orders at step
#: 316; the model is asked 23 times, the first 3 calls fail and the open breaker refuses the rest.
STEPS, DELIVERED, CALLS, FAILED = 316, 24, 23, 3


def _join_the_planner() -> None:
    """Wait for the planner's worker thread (the run's only one) to end, its answer handed over."""
    for thread in threading.enumerate():
        if thread.name == "marlm-planner":
            thread.join(600)  # a hang guard only


def _planner_ends_each_step(clock: FakeClock):
    """The run's ``progress``: after every step the run's clock moves 40 ms, and the planner's
    call in flight (a real HTTP call to the fault server, failing at its own pace) ends before
    the next step, so every answer is read at the step after its request however slow the
    machine is. (The run used to pace itself on the wall clock, 5 ms a step, and the test
    accepted several outcomes.)"""

    def tick(_step: int, _n: int) -> None:
        clock.now += 0.04
        _join_the_planner()  # every call ends within its timeout

    return tick


@pytest.mark.parametrize("mode", ["hang", "500", "whitespace", "refused"])
def test_backend_fault_falls_back_to_the_rule_and_robots_keep_moving(
    tmp_path, fault_server, refused_url, mode
):
    url = refused_url if mode == "refused" else fault_server.base(mode)
    # The call's timeout is the wall clock's (a silent server is silent in real time): 1 s where
    # the server answers (an error page, a refused connection: the answer must come in time), a
    # quarter of that where it never does (the three failed calls wait it out in real time). The
    # breaker's cool-down reads a clock that never moves, so once open it stays open to the end.
    breaker = CircuitBreaker(3, 30.0, clock=FrozenClock())
    timeout_s = 0.25 if mode in ("hang", "whitespace") else 1.0
    model = OpenAICompatible(url, timeout_s=timeout_s, max_retries=0, breaker=breaker)
    config = run_config(
        steps=400, tick_ms=0, planner="llm", executor="greedy", shield=True, gif=False, seed=1
    )
    clock = FakeClock()
    result = run(
        config,
        tmp_path / mode,
        planner=LLMPlanner(model),
        progress=_planner_ends_each_step(clock),
        clock=clock,
    )
    m = result.metrics
    events = read_trace(result.files["trace"]).events
    calls = [e for e in events if e["type"] == "llm_call"]
    reason = "timeout" if mode in ("hang", "whitespace") else "backend error"
    refused = [c for c in calls if "calls are refused" in c["error"]]
    failed = [c for c in calls if c["error"].startswith(reason + ":") and c not in refused]
    assert (m["steps"], m["delivered"], m["orders_total"]) == (STEPS, DELIVERED, DELIVERED)
    assert (m["llm_calls"], len(failed), len(refused)) == (CALLS, FAILED, CALLS - FAILED)
    assert m["collisions"] == 0
    # Every call failed and fell back to the rule; none was left in flight at the end.
    assert m["llm_fallbacks"] == m["llm_calls"] == len(calls)
    assert all(not c["valid"] and c["fallback"] for c in calls)
    # After 3 failures in a row the circuit breaker opens: later calls are refused at once,
    # and the trace says so once.
    assert failed == calls[:3] and refused == calls[3:], [c["error"] for c in calls]
    opened = [e for e in events if e["type"] == "circuit_open"]
    assert len(opened) == 1
    # The rule assigned at once; the model's answer (a fallback) came a step later, and robots
    # moved in between.
    first_plan = next(e for e in events if e["type"] == "plan")
    assert first_plan["source"] == "rule" and first_plan["step"] == first_plan["step_requested"]
    first_answer = next(e for e in events if e["type"] == "plan" and e["source"] != "rule")
    assert first_answer["step"] == first_answer["step_requested"] + 1
    assert m["idle_robot_steps"]["waiting_for_model"] == 0
    kinds = {f["kind"] for f in events if f["type"] == "failure"} - {"deadlock_break"}
    assert kinds == {reason.replace(" ", "_"), "backend_error"}


class FakeClock:
    """Seconds that move only when the test says so (the run's ``clock``)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class LateModel:
    """Fault injector: a valid answer (the first pairs the schema allows) ``delay_s`` seconds of
    the run's clock after each request; the test's clock hands it over (:func:`_clocked_run`)."""

    name = "late"

    def __init__(self, clock: FakeClock, delay_s: float):
        import threading

        self.clock, self.delay_s = clock, delay_s
        self.due: float | None = None
        self.release, self.answered = threading.Event(), threading.Event()
        self.calls = 0
        self.cancelled = False

    def cancel(self, timeout_s: float, thread=None) -> bool:
        """As a real backend's ``cancel``: the call in flight ends now (``BackendClosed``), later
        ones at once. The run calls it at its end; without it, closing waited 30 s (the cancel
        wait) for the call the stopped clock would never release."""
        self.cancelled = True
        self.release.set()
        return True

    def chat(self, messages, *, schema=None, max_tokens=256, temperature=0.0, seed=None):
        import json

        from marlm.llm.backends import ChatResult
        from marlm.llm.errors import BackendClosed

        self.calls += 1
        self.due = self.clock() + self.delay_s
        self.release.wait(600)  # a hang guard only: the clock releases the answer
        if self.cancelled:
            raise BackendClosed("cancelled at the end of the run")
        items = schema["properties"]["assignments"]["items"]["properties"]
        n = schema["properties"]["assignments"]["minItems"]
        pairs = [
            {"robot": r, "order": o}
            for r, o in zip(items["robot"]["enum"][:n], items["order"]["enum"][:n], strict=True)
        ]
        self.answered.set()
        return ChatResult(json.dumps({"assignments": pairs}), 10, 10, self.delay_s, "stop", "late")


def _clocked_run(tmp_path, *, deadline_s: float, delay_s: float, steps: int):
    """A run on a fake clock that advances 40 ms a step; each model answer comes ``delay_s`` of
    that clock after its request. Nothing depends on how fast the machine is."""
    clock = FakeClock()
    model = LateModel(clock, delay_s)

    def tick(step: int, _n: int) -> None:
        clock.now += 0.04
        if model.due is not None and clock.now >= model.due:
            model.due = None
            model.release.set()
            model.answered.wait(600)
            model.release.clear()
            model.answered.clear()
            _join_the_planner()  # its answer is handed over before the next step reads it

    config = run_config(
        steps=steps, tick_ms=0, planner="llm", executor="greedy", gif=False, seed=2,
        plan_deadline_s=deadline_s,
    )  # fmt: skip
    result = run(config, tmp_path / "run", planner=LLMPlanner(model), progress=tick, clock=clock)
    return result, read_trace(result.files["trace"]).events


def test_the_rule_assigns_at_once_and_an_answer_past_the_deadline_is_only_recorded(tmp_path):
    # Deadline 0.1 s of the run's clock (3 steps); each answer comes 0.6 s (15 steps) late.
    result, events = _clocked_run(tmp_path, deadline_s=0.1, delay_s=0.6, steps=300)
    plans = [e for e in events if e["type"] == "plan"]
    # No robot waits for the model: the rule assigns the idle robots in the step they are free.
    first = plans[0]  # at step 13, when the first order arrives
    assert (first["source"], first["step"], first["step_requested"]) == ("rule", 13, 13)
    assert first["applied"]
    late = [p for p in plans if p["source"] == "llm"]
    assert late and all(p["applied"] == [] and p["error"].startswith("late: ") for p in late)
    assert result.metrics["idle_robot_steps"]["waiting_for_model"] == 0
    m = result.metrics
    assert (m["delivered"], m["steps"], m["collisions"]) == (24, 249, 0)  # all, by the rule
    assert (len(plans), len(late)) == (37, 15)
    # Timed on the run's clock: each answer is exactly 0.6 s (15 steps) after its request.
    answered = [c for c in events if c["type"] == "llm_call" and c["step_applied"] is not None]
    assert len(answered) == 15 and {c["latency_ms"] for c in answered} == {600.0}, answered


def test_without_a_deadline_answers_reassign_robots_the_rule_gave_and_never_stall_one(tmp_path):
    result, events = _clocked_run(tmp_path, deadline_s=0.0, delay_s=0.3, steps=120)
    plans = [e for e in events if e["type"] == "plan"]
    first = plans[0]  # at step 5, when the first order arrives
    assert (first["source"], first["step"], first["step_requested"]) == ("rule", 5, 5)
    assert first["applied"]
    answers = [p for p in plans if p["source"] == "llm"]
    # Each answer comes 0.3 s (8 steps) after its request; a request made while another was in
    # flight waits its turn, so some are read later. Measured:
    assert (len(plans), len(answers)) == (35, 13)
    assert {p["step"] - p["step_requested"] for p in answers} == {8, 10, 11, 13}
    assert (result.metrics["delivered"], result.metrics["steps"]) == (24, 115)
    assert result.metrics["idle_robot_steps"]["waiting_for_model"] == 0


class CountingExecutor:
    """Stays put and counts its calls, as the LLM move executor counts model calls."""

    name = "counting"

    def __init__(self):
        self.calls = 0

    def scores(self, view, rng, explore=False):
        import numpy as np

        self.calls += 1
        return np.eye(5)[np.zeros(len(view.agents), dtype=np.int64)]  # STAY first

    def warm_up(self):
        """Nothing: like a model-backed executor, never called outside the loop."""


def test_the_executor_is_asked_once_per_step_and_never_outside_the_loop(tmp_path):
    from marlm.hybrid.planning.planner import RulePlanner

    executor = CountingExecutor()
    config = run_config(steps=25, tick_ms=0, planner="rule", executor="greedy", gif=False)
    result = run(config, tmp_path / "count", planner=RulePlanner(), executor=executor)
    assert executor.calls == result.metrics["steps"] == 25
