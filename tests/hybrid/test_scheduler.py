"""PlanScheduler on a fake clock: the planning deadline counts clock time, not wall time."""

from __future__ import annotations

import threading

from marlm.envs.warehouse import Order, WarehouseEnv
from marlm.hybrid.planner import Plan, RulePlanner, Snapshot
from marlm.hybrid.scheduler import PlanScheduler


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


def test_the_rule_stands_in_once_the_fake_clock_passes_the_deadline():
    env, clock, planner, events = env_with_orders(), FakeClock(), GatedPlanner(), []
    scheduler = PlanScheduler(
        env, planner, lambda t, **f: events.append({"type": t, **f}), plan_deadline_s=2.0,
        clock=clock,
    )  # fmt: skip
    scheduler.update()  # submits the request; the planner is stuck behind its gate
    assert scheduler.in_flight_since == 0 and events == []
    clock.now += 1.9
    scheduler.update()
    assert events == []  # 1.9 s of clock time: still waiting for the model
    clock.now += 0.2
    scheduler.update()
    kinds = [(e["type"], e.get("kind") or e.get("source")) for e in events]
    assert kinds == [("failure", "planner_deadline"), ("plan", "deadline")]
    assert "waited 2.10 s" in events[0]["detail"]
    assert set(env.idle_robots()) == set()  # the rule assigned both robots
    planner.gate.set()
    scheduler.close(wait=True)  # the late answer is applied, and nothing in it is still valid
    assert events[-1]["type"] == "plan" and events[-1]["applied"] == []


def test_an_unanswered_request_records_the_clock_time_it_waited():
    env, clock, planner, events = env_with_orders(), FakeClock(), GatedPlanner(), []
    scheduler = PlanScheduler(env, planner, lambda t, **f: events.append({"type": t, **f}),
                              clock=clock)  # fmt: skip
    scheduler.update()
    clock.now += 3.0
    scheduler.close(wait=False)
    planner.gate.set()
    (call,) = events
    assert call["type"] == "llm_call" and call["valid"] is False
    assert call["latency_ms"] == 3000.0 and call["step_applied"] is None
