"""PlanScheduler on a fake clock: robots are assigned at once; clock time, not wall time."""

from __future__ import annotations

import threading

from marlm.envs.warehouse import Order, WarehouseEnv
from marlm.hybrid.planning.planner import Plan, RulePlanner, Snapshot
from marlm.hybrid.planning.scheduler import PlanScheduler


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class GatedPlanner:
    """Fault injector: a planner that answers (the rule's plan) only once the gate opens."""

    name = "gated"

    def __init__(self) -> None:
        self.gate = threading.Event()

    def plan(self, snapshot: Snapshot) -> Plan:
        self.gate.wait(10)
        return Plan(RulePlanner().plan(snapshot).assignments, "llm", snapshot)


def env_with_orders() -> WarehouseEnv:
    orders = [
        Order(id="o1", shelf="S3-2", priority="normal", arrival=0, deadline=200),
        Order(id="o2", shelf="S3-3", priority="urgent", arrival=0, deadline=100),
    ]
    env = WarehouseEnv(layout="small", orders=orders, n_robots=2, auto_assign=False)
    env.reset(seed=0)
    return env


def test_the_rule_assigns_at_once_while_the_model_is_asked():
    env, clock, planner, events = env_with_orders(), FakeClock(), GatedPlanner(), []
    scheduler = PlanScheduler(
        env, planner, lambda t, **f: events.append({"type": t, **f}), plan_deadline_s=2.0,
        clock=clock,
    )  # fmt: skip
    scheduler.update()  # submits the request, and the rule assigns both robots now
    assert scheduler.in_flight_since == 0
    (plan,) = [e for e in events if e["type"] == "plan"]
    assert (plan["source"], plan["step"]) == ("rule", 0) and len(plan["applied"]) == 2
    assert env.idle_robots() == [] and scheduler.idle_steps["waiting_for_model"] == 0
    planner.gate.set()
    scheduler.close(wait=True)  # the model's answer: the rule's pairs, nothing to change
    assert events[-1]["type"] == "plan" and events[-1]["source"] == "llm"
    assert events[-1]["applied"] == [] and events[-1]["preempted"] == []


def test_an_unanswered_request_records_the_clock_time_it_waited():
    env, clock, planner, events = env_with_orders(), FakeClock(), GatedPlanner(), []
    scheduler = PlanScheduler(env, planner, lambda t, **f: events.append({"type": t, **f}),
                              clock=clock)  # fmt: skip
    scheduler.update()
    clock.now += 3.0
    scheduler.close(wait=False)
    planner.gate.set()
    (call,) = [e for e in events if e["type"] == "llm_call"]
    assert call["valid"] is False
    assert call["latency_ms"] == 3000.0 and call["step_applied"] is None
