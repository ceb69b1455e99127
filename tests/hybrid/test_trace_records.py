"""The planners' trace records: a triage is not a chat message, a failed call counts with its real
duration, every call carries its status, and a run names the model that made its decisions."""

from __future__ import annotations

import json

from marlm.envs.warehouse import WarehouseEnv
from marlm.envs.warehouse.orders import Order
from marlm.eval.records import TriageCallRecord, backend_and_model
from marlm.hybrid.planning.planner import Snapshot
from marlm.hybrid.planning.scheduler import PlanScheduler
from marlm.hybrid.planning.team import TeamPlanner
from marlm.hybrid.planning.triage import TriagePlanner
from marlm.llm.backends import BackendTimeout, ChatResult
from marlm.llm.triage import Triage


class FakeClock:
    """Seconds that move only when a fault injector says so."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class SlowTimeout:
    """A fault injector: every call waits ``wait_s`` on ``clock`` and then times out, after
    ``answers`` calls answered (each ``1`` s long)."""

    name = "openai:slow@http://127.0.0.1:9/v1"

    def __init__(self, clock: FakeClock, wait_s: float, answers: list[str] = ()) -> None:
        self.clock, self.wait_s, self.answers = clock, wait_s, list(answers)

    def chat(self, messages, **kwargs):
        if self.answers:
            self.clock.now += 1.0
            return ChatResult(self.answers.pop(0), 20, 5, latency_s=1.0)
        self.clock.now += self.wait_s
        raise BackendTimeout(f"{self.name} did not answer within {self.wait_s} s")


def _order(oid: str, note: str, priority: str = "normal") -> Order:
    return Order(id=oid, shelf="S1-1", priority=priority, arrival=0, deadline=100, note=note)


def test_a_triage_that_timed_out_after_10_s_counts_10_s_not_0():
    clock = FakeClock()
    planner = TriagePlanner(Triage(SlowTimeout(clock, 10.0), mode="generate", clock=clock))
    snap = Snapshot(0, (_order("a", "the truck leaves at noon"),), ("r0",), {("r0", "a"): 3})
    (call,) = planner.plan(snap).calls
    assert isinstance(call, TriageCallRecord)
    assert call.latency_ms == 10_000.0
    assert call.status == "backend_error" and not call.valid
    fields = call.fields()
    # A triage sends no chat message: the record names the order and the decision instead.
    assert "messages" not in fields and "raw" not in fields
    assert fields["call"] == "triage" and fields["order"] == "a" and fields["label"] == "normal"
    assert fields["decision"]["failure"] == "backend_error"
    assert json.loads(call.raw)["order"] == "a"  # what replay reads as the answer text


def test_a_team_call_that_timed_out_is_recorded_with_its_wait():
    clock = FakeClock()
    ranking = '{"recipient": "dispatcher", "phase": "decide", "content": {"ranking": ["a"]}}'
    model = SlowTimeout(clock, 10.0, answers=[ranking])
    planner = TeamPlanner(model, clock=clock)
    plan = planner.plan(Snapshot(0, (_order("a", "x"),), ("r0",), {("r0", "a"): 3}))
    assert plan.source == "fallback"
    answered, timed_out = plan.calls
    assert answered.latency_ms == 1000.0 and answered.status == "invalid_answer"
    assert timed_out.latency_ms == 10_000.0 and timed_out.status == "timeout"
    assert timed_out.attempt == 1 and timed_out.fields()["call"] == "chat"


def test_the_scheduler_stamps_each_call_and_writes_its_status():
    env = WarehouseEnv(layout="small", n_orders=4, n_robots=1, max_steps=50, auto_assign=False)
    env.reset(seed=0)
    clock = FakeClock()
    planner = TriagePlanner(Triage(SlowTimeout(clock, 2.5), mode="generate", clock=clock))
    events: list[dict] = []
    sched = PlanScheduler(
        env, planner, lambda t, **f: events.append({"type": t, **f}), sync=True, clock=clock
    )
    while not any(e["type"] == "llm_call" for e in events):
        sched.update()
        env.step({})
    call = next(e for e in events if e["type"] == "llm_call")
    assert call["call_id"] == 1 and call["step_applied"] == call["step_requested"]
    assert call["call"] == "triage" and call["status"] == "backend_error"
    assert call["latency_ms"] == 2500.0
    plan = next(e for e in events if e["type"] == "plan")
    assert plan["outcome"] == "backend_error" and plan["source"] == "fallback"


def test_backend_and_model_are_read_from_the_backends_name():
    assert backend_and_model("embedded:SmolLM2-135M-Instruct-Q4_1.gguf") == (
        "embedded:SmolLM2-135M-Instruct-Q4_1.gguf",
        "SmolLM2-135M-Instruct-Q4_1.gguf",
    )
    assert backend_and_model("openai:smollm2@http://127.0.0.1:8000/v1") == (
        "openai:smollm2@http://127.0.0.1:8000/v1",
        "smollm2",
    )
    assert backend_and_model(None) == (None, None)


def test_run_start_names_the_backend_and_the_model_that_decided():
    from marlm.eval.records import RunStartRecord
    from marlm.hybrid.controller import RunConfig, _run_start, make_env
    from marlm.hybrid.planning.planner import LLMPlanner, RulePlanner

    config = RunConfig(gif=False, planner="llm")
    fields = _run_start(config, make_env(config), LLMPlanner(SlowTimeout(FakeClock(), 1.0)))
    event = RunStartRecord(**fields).as_event()
    assert event["backend"] == "openai:slow@http://127.0.0.1:9/v1" and event["model"] == "slow"
    rule = _run_start(config, make_env(config), RulePlanner())
    assert rule["backend"] is None and rule["model"] is None
