"""Urgency read from a note also decides which order of a shared shelf comes first.

The classifier here is a table (a fault injector with instant answers): these tests pin the
planner's and the environment's arithmetic at exact steps; the real model's classes are measured
in the notes-only scenario (``docs/triage.md``)."""

from __future__ import annotations

import math

import pytest

from marlm.envs.warehouse import Order, WarehouseEnv
from marlm.hybrid.planning.scheduler import PlanScheduler, snapshot_of
from marlm.hybrid.planning.triage import TriagePlanner
from marlm.llm.triage import TriageDecision


class TableTriage:
    """Answers each note from ``table``: ``{note: (label, {class: probability})}``."""

    mode = "table"
    prompt_version = "table-v0"

    def __init__(self, table: dict[str, tuple[str, dict[str, float]]]) -> None:
        self.table = table
        self.asked: list[str] = []

    def classify_many(self, notes, fallbacks):
        out = []
        for note in notes:
            self.asked.append(note)
            label, probs = self.table[note]
            scores = {c: math.log(p) for c, p in probs.items()}
            out.append(TriageDecision(label, "model", "table", scores=scores, latency_s=0.1))
        return out


def order(oid: str, shelf: str, note: str = "", *, deadline: int = 300, arrival: int = 0):
    return Order(
        id=oid, shelf=shelf, priority="normal", arrival=arrival, deadline=deadline, note=note
    )


def new_env(orders, n_robots=1) -> WarehouseEnv:
    env = WarehouseEnv(
        layout="small", orders=orders, n_robots=n_robots, max_steps=300, auto_assign=False
    )
    env.reset(seed=0)
    return env


def test_the_environment_offers_the_first_order_of_a_shelf_by_the_given_precedence():
    a = order("a", "S3-2", deadline=100)
    b = order("b", "S3-2", deadline=200)
    env = new_env([a, b])
    assert [o.id for o in env.pending_orders()] == ["a"]  # listed rule: earliest deadline
    b_first = lambda o: (o.id != "b", o.id)  # noqa: E731
    assert [o.id for o in env.pending_orders(b_first)] == ["b"]
    assert [o.id for o in env.waiting_orders(b_first)] == ["a"]
    env.assign(env.idle_robots()[0], "b")  # not the one the listed rule offers: allowed
    assert env.pending_orders() == [] and [o.id for o in env.waiting_orders()] == ["a"]
    env2 = new_env([a, b], n_robots=2)
    env2.assign("robot_0", "a")
    with pytest.raises(ValueError, match="order 'a' holds it"):
        env2.assign("robot_1", "b")


@pytest.mark.parametrize("sync", [True, False])
def test_an_urgent_note_behind_a_routine_order_for_the_same_shelf_is_served_first(sync):
    routine = order("a", "S3-2", "restock when convenient", deadline=100)
    fire = order("b", "S3-2", "fire department, now", deadline=200)
    tri = TableTriage(
        {
            "restock when convenient": ("normal", {"urgent": 0.01, "normal": 0.98, "low": 0.01}),
            "fire department, now": ("urgent", {"urgent": 0.97, "normal": 0.02, "low": 0.01}),
        }
    )
    env = new_env([routine, fire])
    events: list[dict] = []
    sched = PlanScheduler(
        env, TriagePlanner(tri), lambda t, **f: events.append({"type": t, **f}), sync=sync
    )
    for _ in range(200):  # bounded: the worker answers at once
        sched.update()
        if env.task_of("robot_0") is not None:
            break
        if sync is False and sched.async_planner is not None:
            sched.async_planner.poll(wait=True)
            sched.update()
            if env.task_of("robot_0") is not None:
                break
    sched.close(wait=True)
    # the note read on the waiting order decided which order of the shelf came first
    assert env.task_of("robot_0") == "b"
    assert "fire department, now" in tri.asked
    assert [o.id for o in snapshot_of(env, sched._precedence).waiting] == ["a"]
