"""Typed plan outcomes in the trace: a planner bug is a planner error, never the model's fault;
preemption before pick-up through the scheduler; the plan event's fields are the documented ones."""

from __future__ import annotations

import re
from pathlib import Path

from marlm.envs.warehouse import WarehouseEnv
from marlm.hybrid.planning.planner import Plan, RulePlanner, Snapshot, rule_assign
from marlm.hybrid.planning.scheduler import PlanScheduler

SCHEMA = Path(__file__).resolve().parents[3] / "docs" / "trace-schema.md"


class _BuggyPlanner:
    """A planner whose own code raises (an index error of ours), not a model failure."""

    name = "buggy"

    def plan(self, snapshot: Snapshot) -> Plan:
        return [][0]


class _UrgentFirst:
    """Stands in for the triage planner: preempts the robot on its way to order ``victim``."""

    name = "urgent-first"
    preempts = True

    def __init__(self) -> None:
        self.victim: str | None = None

    def plan(self, snapshot: Snapshot) -> Plan:
        if snapshot.idle:
            return Plan(rule_assign(snapshot), "llm", snapshot, outcome="answered")
        b = next(b for b in snapshot.busy if not b.carrying and b.order.id == self.victim)
        urgent = snapshot.pending[0].id
        return Plan([(b.robot, urgent)], "llm", snapshot, preemptions=[(b.robot, b.order.id)])


def _scheduler(planner, *, n_robots=1):
    env = WarehouseEnv(
        layout="small", n_orders=8, n_robots=n_robots, max_steps=200, auto_assign=False
    )
    env.reset(seed=3)
    events: list[dict] = []
    sched = PlanScheduler(env, planner, lambda t, **f: events.append({"type": t, **f}), sync=True)
    return env, sched, events


def _documented_fields(event: str) -> set[str]:
    text = SCHEMA.read_text(encoding="utf-8")
    section = text.split(f"### `{event}`", 1)[1].split("\n### ", 1)[0]
    return set(re.findall(r"^\| \**`(\w+)`\** \|", section, flags=re.M))


def test_a_planner_bug_is_recorded_as_planner_error_not_as_an_invalid_answer():
    env, sched, events = _scheduler(_BuggyPlanner())
    while not any(e["type"] == "plan" for e in events):
        sched.update()
        env.step({})
    plan = next(e for e in events if e["type"] == "plan")
    failure = next(e for e in events if e["type"] == "failure")
    assert plan["outcome"] == "planner_error" and plan["source"] == "fallback"
    assert plan["error"].startswith("planner error: IndexError")
    assert failure["kind"] == "planner_error"
    assert plan["applied"]  # the rule kept the robot working


def test_preemption_releases_the_robot_before_pick_up_and_requeues_its_order():
    planner = _UrgentFirst()
    env, sched, events = _scheduler(planner)
    robot = env.possible_agents[0]
    while env.task_of(robot) is None:
        sched.update()
        env.step({})
    planner.victim = env.task_of(robot)
    while not env.pending_orders():  # the next order arrives while the only robot is busy
        env.step({})
    urgent = env.pending_orders()[0].id
    sched.update()
    plan = [e for e in events if e["type"] == "plan"][-1]
    assert plan["preempted"] == [{"robot": robot, "order": planner.victim}]
    assert plan["applied"] == [{"robot": robot, "order": urgent}]
    assert env.task_of(robot) == urgent
    assert planner.victim in {o.id for o in env.pending_orders()}


def test_plan_events_carry_exactly_the_documented_fields():
    env, sched, events = _scheduler(RulePlanner(), n_robots=2)
    for _ in range(40):
        sched.update()
        env.step({})
    plans = [e for e in events if e["type"] == "plan"]
    assert plans
    documented = _documented_fields("plan")
    for p in plans:
        fields = set(p) - {"type"}
        assert fields <= documented, sorted(fields - documented)
        assert {"step", "assignments", "source", "outcome", "preempted", "t_s"} <= fields
        assert p["outcome"] == "rule" and p["t_s"] >= p["t_requested_s"]
    assert {"outcome", "preempted", "t_s", "t_requested_s"} <= documented


def test_outcome_and_failure_kind_come_from_the_error_type_not_its_text():
    from marlm.hybrid.planning.planner import outcome_of
    from marlm.hybrid.planning.scheduler import failure_kind
    from marlm.llm.errors import BackendError, BackendTimeout, CircuitOpen, InvalidAnswer

    snap = Snapshot(0, (), (), {})

    def fallback(error: str, exception: BaseException | None) -> Plan:
        return Plan([], "fallback", snap, [], error, exception=exception)

    cases = [  # (text that misleads, exception) -> (outcome, failure kind)
        (fallback("timeout: but the server said 500", BackendError("500")), "backend_error"),
        (fallback("backend error: slow", BackendTimeout("no answer in 1 s")), "timeout"),
        (fallback("timeout?", InvalidAnswer("not JSON", kind="not_json")), "invalid_llm_answer"),
        (fallback("backend", KeyError("ours")), "planner_error"),
        (fallback("x", CircuitOpen("refused", failures=3, retry_in_s=30.0, first=True)),
         "backend_error"),
    ]  # fmt: skip
    outcomes = [outcome_of(p) for p, _ in cases]
    assert outcomes == [
        "backend_error",
        "backend_error",
        "invalid_answer",
        "planner_error",
        "backend_error",
    ]
    assert [failure_kind(p) for p, _ in cases] == [kind for _, kind in cases]


class _DownModel:
    """Fault injector: every call fails as a dead backend, through a real circuit breaker on
    a fake clock (3 failures open it for 30 s)."""

    name = "down"

    def __init__(self) -> None:
        from marlm.llm.breaker import CircuitBreaker, FakeClock

        self.clock = FakeClock()
        self.breaker = CircuitBreaker(3, 30.0, clock=self.clock)

    def chat(self, messages, **kwargs):
        from marlm.llm.errors import BackendError

        self.breaker.before_call(self.name)  # raises CircuitOpen while open
        self.breaker.failure("connection refused")
        raise BackendError("connection refused")


def test_the_trace_says_once_per_opening_that_the_circuit_breaker_opened():
    from marlm.hybrid.planning.planner import LLMPlanner

    model = _DownModel()
    planner = LLMPlanner(model)
    env, sched, events = _scheduler(planner, n_robots=2)
    while not env.pending_orders():
        env.step({})
    from marlm.hybrid.planning.scheduler import snapshot_of

    snap = snapshot_of(env)
    for _ in range(3):
        assert planner.plan(snap).exception is not None  # three failures: the circuit opens
    step = env.step_count
    sched.update()
    for _ in range(5):  # refused calls while open: no second event
        planner.plan(snap)
        sched.update()
    opened = [e for e in events if e["type"] == "circuit_open"]
    assert opened == [
        {
            "type": "circuit_open",
            "step": step,
            "backend": "down",
            "failures": 3,
            "cooldown_s": 30.0,
            "cause": "connection refused",
        }
    ]
    model.clock.advance(30.0)  # the trial call fails: the circuit stays open, no new event
    planner.plan(snap)
    sched.update()
    assert len([e for e in events if e["type"] == "circuit_open"]) == 1
    model.clock.advance(30.0)
    model.breaker.success()  # a trial call answered: closed; three more failures open it again
    for _ in range(3):
        planner.plan(snap)
    sched.update()
    assert [e["failures"] for e in events if e["type"] == "circuit_open"] == [3, 3]
    assert set(opened[0]) - {"type"} == _documented_fields("circuit_open")


def test_the_triage_planner_types_its_outcome_by_failure_kind_not_by_reason_text():
    from marlm.envs.warehouse.orders import Order
    from marlm.hybrid.planning.triage import TriagePlanner
    from marlm.llm.triage import TriageDecision

    class Misleading:
        """Fault injector: the reason texts say the opposite of the typed failure."""

        mode, prompt_version = "fake", "fake-v0"

        def classify_many(self, notes, fallbacks):
            kinds = {
                "a": ("backend error: timeout", "invalid_answer"),
                "b": ("invalid answer: garbage", "backend_error"),
                "c": ("invalid answer: nothing", "empty_note"),
            }
            return [
                TriageDecision(fb, "fallback", "fake", reason=kinds[n][0], failure=kinds[n][1])
                for n, fb in zip(notes, fallbacks, strict=True)
            ]

    planner = TriagePlanner(Misleading())
    orders = {
        k: Order(id=k, shelf="S3-2", priority="normal", arrival=0, deadline=99, note=k)
        for k in "abc"
    }
    planner.classify(list(orders.values()))
    assert planner.outcome([orders["a"]]) == ("invalid_answer", "backend error: timeout")
    assert planner.outcome([orders["b"]]) == ("backend_error", "invalid answer: garbage")
    assert planner.outcome([orders["c"]]) == ("rule", None)  # nothing to read counts neither way
