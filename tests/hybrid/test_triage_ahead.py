"""Asynchronous triage planner: each note is classified once, as soon as its order is pending;
plans over classified orders are made at once with no model call; a plan is the model's only when
every class in it came from the model. A fake clock drives the deadline; a gated classifier
(a fault injector) decides when the model answers."""

from __future__ import annotations

import threading
import time

from marlm.envs.warehouse import Order, WarehouseEnv
from marlm.hybrid.planner import Snapshot
from marlm.hybrid.scheduler import PlanScheduler
from marlm.hybrid.triage_planner import TriagePlanner
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


def test_each_note_is_classified_once_ahead_and_plans_wait_for_no_model():
    tri = GatedTriage({"line down": "urgent", "restock": "normal"})
    orders = [order("a", "restock"), order("b", "line down")]
    env, clock, sched, events = setup(orders, 2, tri)
    sched.update()  # step 0: the oldest order's note goes to the worker; nothing to plan yet
    assert tri.asked == [["restock"]] and of(events, "plan") == []
    clock.now += 0.5
    tri.release()
    answered(sched)
    sched.update()  # its class is in: a plan at once, and the next note goes to the worker
    (call,) = of(events, "llm_call")
    assert (call["step_requested"], call["step_applied"], call["t_requested_s"]) == (0, 0, 0.0)
    (plan,) = of(events, "plan")
    assert plan["outcome"] == "answered" and plan["source"] == "llm"
    assert plan["pending"] == ["a"] and len(plan["applied"]) == 1
    assert plan["t_s"] == plan["t_requested_s"] == 0.5  # no model inside the plan
    assert tri.asked == [["restock"], ["line down"]]
    clock.now += 0.5
    tri.release()
    answered(sched)
    sched.update()
    plans = of(events, "plan")
    assert [p["outcome"] for p in plans] == ["answered", "answered"]
    assert plans[1]["pending"] == ["b"] and plans[1]["t_s"] == 1.0
    assert env.idle_robots() == []
    # Once every order is classified, later updates ask the model for nothing more.
    for _ in range(3):
        sched.update()
    assert len(tri.asked) == 2 and len(of(events, "llm_call")) == 2
    sched.close(wait=False)


def test_the_rule_stands_in_only_for_the_order_still_unclassified_past_the_deadline():
    tri = GatedTriage({"line down": "urgent", "restock": "normal"})
    orders = [order("a", "restock"), order("b", "line down")]
    env, clock, sched, events = setup(orders, 2, tri)
    sched.update()
    tri.release()  # "restock" is answered at once; "line down" never within the deadline
    answered(sched)
    sched.update()
    clock.now += 2.0
    sched.update()  # "b" waited 2.0 s, the deadline: the rule assigns it, and only it
    outcomes = [(p["outcome"], p["pending"]) for p in of(events, "plan")]
    assert outcomes == [("answered", ["a"]), ("deadline", ["b"])]
    (failure,) = of(events, "failure")
    assert failure["kind"] == "planner_deadline" and "waited 2.00 s" in failure["detail"]
    assert env.idle_robots() == []
    tri.release()
    answered(sched)
    sched.close(wait=True)


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


def test_when_the_model_falls_behind_it_decides_the_order_it_can_still_decide_in_time():
    tri = GatedTriage({"restock": "normal", "line down": "urgent", "fire": "urgent"})
    orders = [order("a", "restock"), order("b", "fire"), order("c", "line down", arrival=1)]
    env, clock, sched, events = setup(orders, 1, tri)
    sched.update()  # t = 0 s: "a" (first listed of the two at step 0) goes to the worker
    while "c" not in {o.id for o in env.pending_orders()}:
        env.step({})
    clock.now += 2.5  # "b" has now waited past the deadline, "c" has just arrived
    tri.release()
    answered(sched)
    sched.update()
    # "a" is planned (the only robot takes it); of "b" (stale) and "c" (fresh), "c" is asked
    assert [p["pending"] for p in of(events, "plan")] == [["a"]]
    assert tri.asked == [["restock"], ["line down"]]
    tri.release()
    answered(sched)
    sched.close(wait=False)
