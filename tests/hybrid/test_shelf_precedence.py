"""Urgency read from a note also decides which order of a shared shelf comes first, and the queue
uses the classifier's probabilities, not only its argmax class.

The classifier here is a table (a fault injector with instant answers): these tests pin the
planner's and the environment's arithmetic at exact steps; the real model's classes are measured
in the notes-only scenario (``docs/triage.md``)."""

from __future__ import annotations

import math

import pytest

from marlm.envs.warehouse import Order, WarehouseEnv
from marlm.hybrid.scheduler import PlanScheduler, snapshot_of
from marlm.hybrid.triage_planner import TriagePlanner, expected_rank, queue_order
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


def test_expected_rank_is_the_probability_weighted_rank():
    probs = {"urgent": 0.45, "normal": 0.5, "low": 0.05}
    scores = {c: math.log(p) for c, p in probs.items()}
    assert expected_rank(scores, "normal") == pytest.approx(0.5 * 1 + 0.05 * 2)
    # unnormalised log-likelihoods (the score modes) go through a softmax
    shifted = {c: v - 7.0 for c, v in scores.items()}
    assert expected_rank(shifted, "normal") == pytest.approx(0.6)
    assert expected_rank(None, "low") == 2.0  # generate mode: the label's rank
    assert expected_rank({"urgent": float("nan"), "normal": 0.0}, "normal") == 1.0


def test_among_normal_orders_the_likelier_urgent_goes_first_and_urgent_ones_keep_deadline_order():
    a = order("a", "S3-2", deadline=50)  # routine for sure
    b = order("b", "S3-3", deadline=90)  # normal, but maybe urgent
    u1 = order("u1", "S3-5", deadline=120)
    u2 = order("u2", "S3-6", deadline=60)
    classes = {"a": "normal", "b": "normal", "u1": "urgent", "u2": "urgent"}
    urgency = {"a": 0.99, "b": 0.55, "u1": 0.0, "u2": 0.2}
    q = queue_order([a, b, u1, u2], classes, urgency)
    # urgent first, by deadline (not by how sure the model is); then b before a
    assert [o.id for o in q] == ["u2", "u1", "b", "a"]
    # without probabilities the deadline decides among the normal ones
    assert [o.id for o in queue_order([a, b, u1, u2], classes)] == ["u2", "u1", "a", "b"]
    # the listed priority stays a floor: a listed-urgent order is not ranked by its note
    lu = Order(id="lu", shelf="S3-8", priority="urgent", arrival=0, deadline=200, note="")
    assert queue_order([b, lu], {"lu": "low", "b": "normal"}, {"lu": 2.0, "b": 0.55})[0] is lu


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
