"""Asynchronous triage planner: the notes of new orders are classified together as soon as the
orders arrive; robots are assigned at once (an unread note keeps its listed priority); a class
that arrives re-ranks the queue and may reassign a robot not yet picked; a plan is the model's
only when every class in it came from the model. A gated classifier (a fault injector) decides
when the model answers."""

from __future__ import annotations

import threading
import time

from marlm.envs.warehouse import Order, WarehouseEnv
from marlm.hybrid.planning.planner import Snapshot
from marlm.hybrid.planning.scheduler import PlanScheduler
from marlm.hybrid.planning.triage import TriagePlanner
from marlm.llm.triage import TriageDecision


class FakeClock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


class GatedTriage:
    """Stands in for :class:`marlm.llm.triage.Triage`: each ``classify_many`` waits for one
    ``release()``, then answers from ``table`` (source ``model``), or fails a note listed in
    ``down`` as a backend that is down (its listed priority, source ``fallback``)."""

    mode = "gated"
    prompt_version = "gated-v0"

    def __init__(self, table: dict[str, str], down: tuple[str, ...] = ()) -> None:
        self.table, self.down = table, down
        self.asked: list[list[str]] = []
        self._gate = threading.Semaphore(0)

    def release(self, n: int = 1) -> None:
        for _ in range(n):
            self._gate.release()

    def classify_many(self, notes, fallbacks):
        self.asked.append(list(notes))
        self._gate.acquire(timeout=10)
        out = []
        for note, fb in zip(notes, fallbacks, strict=True):
            if not note:
                out.append(
                    TriageDecision(
                        fb, "fallback", "gated", reason="empty note", failure="empty_note"
                    )
                )
            elif note in self.down:
                out.append(
                    TriageDecision(
                        fb,
                        "fallback",
                        "gated",
                        reason="BackendError: down",
                        failure="backend_error",
                    )
                )
            else:
                out.append(TriageDecision(self.table[note], "model", "gated", latency_s=0.25))
        return out


def order(oid: str, note: str, *, priority: str = "normal", arrival: int = 0) -> Order:
    shelf = {"a": "S3-2", "b": "S3-3", "c": "S3-5"}[oid]
    return Order(id=oid, shelf=shelf, priority=priority, arrival=arrival, deadline=300, note=note)


def setup(orders, n_robots, triage):
    env = WarehouseEnv(
        layout="small", orders=orders, n_robots=n_robots, max_steps=300, auto_assign=False
    )
    env.reset(seed=0)
    clock, events = FakeClock(), []
    sched = PlanScheduler(
        env, TriagePlanner(triage), lambda t, **f: events.append({"type": t, **f}),
        plan_deadline_s=2.0, clock=clock,
    )  # fmt: skip
    assert sched.ahead
    return env, clock, sched, events


def answered(sched: PlanScheduler) -> None:
    """Wait (bounded) until the worker's request has finished."""
    for _ in range(2000):
        if not sched.async_planner.busy:
            return
        time.sleep(0.005)
    raise AssertionError("the worker did not finish")


def of(events, kind):
    return [e for e in events if e["type"] == kind]


def test_notes_are_classified_together_ahead_and_robots_are_assigned_at_once():
    tri = GatedTriage({"line down": "urgent", "restock": "normal"})
    orders = [order("a", "restock"), order("b", "line down")]
    env, clock, sched, events = setup(orders, 2, tri)
    sched.update()  # step 0: both notes go to the worker in one request; the rule's order now
    assert tri.asked == [["restock", "line down"]]
    (plan,) = of(events, "plan")
    assert (plan["outcome"], plan["step"], len(plan["applied"])) == ("rule", 0, 2)
    assert env.idle_robots() == [] and sched.idle_steps["waiting_for_model"] == 0
    clock.now += 0.5
    tri.release()
    answered(sched)
    sched.update()  # the classes are in; nothing is pending, so nothing more to plan
    calls = of(events, "llm_call")
    assert [(c["step_requested"], c["step_applied"], c["t_requested_s"]) for c in calls] == [
        (0, 0, 0.0),
        (0, 0, 0.0),
    ]
    for _ in range(3):
        sched.update()
    assert len(tri.asked) == 1 and len(of(events, "plan")) == 1
    sched.close(wait=False)


def test_a_class_that_arrives_reassigns_a_robot_not_yet_picked_to_the_urgent_order():
    tri = GatedTriage({"line down": "urgent", "restock": "normal"})
    orders = [order("a", "restock"), order("b", "line down")]
    env, clock, sched, events = setup(orders, 1, tri)
    sched.update()  # the one robot takes "a" at once (the rule's order: same listing, id first)
    assert env.task_of("robot_0") == "a"
    tri.release()
    answered(sched)
    sched.update()  # "b" is read as urgent: the robot has not picked "a", so it turns to "b"
    last = of(events, "plan")[-1]
    assert last["preempted"] == [{"robot": "robot_0", "order": "a"}]
    assert last["applied"] == [{"robot": "robot_0", "order": "b"}]
    assert env.task_of("robot_0") == "b"
    for _ in range(3):  # "a" was sent back once: it is not preempted again, nothing thrashes
        env.step({})
        sched.update()
    assert env.task_of("robot_0") == "b" and len(of(events, "plan")) == 2
    sched.close(wait=False)


def test_a_plan_is_the_models_only_when_every_class_in_it_came_from_the_model():
    tri = GatedTriage({"restock": "normal", "line down": "urgent"}, down=("fire",))
    tri.release(10)
    planner = TriagePlanner(tri)
    a = order("a", "restock")
    b = order("b", "fire", priority="urgent")
    c = order("c", "")
    robots = ("r0", "r1", "r2")
    snap = Snapshot(0, (a, b, c), robots, {(r, o): 3 for r in robots for o in "abc"})
    plan = planner.plan(snap)
    assert (plan.outcome, plan.source, plan.error) == (
        "backend_error",
        "fallback",
        "BackendError: down",
    )
    only_a = Snapshot(0, (a,), ("r0",), {("r0", "a"): 3})
    assert planner.plan(only_a).outcome == "answered"
    # an empty note gives the model nothing to read: it counts neither way
    a_and_c = Snapshot(0, (a, c), ("r0", "r1"), {(r, o): 3 for r in ("r0", "r1") for o in "ac"})
    assert planner.plan(a_and_c).outcome == "answered"
    only_c = Snapshot(0, (c,), ("r0",), {("r0", "c"): 3})
    assert (planner.plan(only_c).outcome, planner.plan(only_c).source) == ("rule", "rule")
    assert tri.asked == [["restock", "fire", ""]]  # each note asked once, in one request
