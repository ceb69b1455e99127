"""A note the model has read before, word for word, for another order: its class is the new
order's the step that order arrives, with no model call and no wait behind the notes queued
before it; the trace says so (``recalled``) and the reading metric counts it in time. Before,
such an order waited for the worker and was counted as read late (or not read at all), so the
demo's in-time share told half the truth on streams whose notes repeat. The real embedded
model reads the notes."""

from __future__ import annotations

import time

from marlm.envs.warehouse import Order, WarehouseEnv
from marlm.eval.metrics import reading
from marlm.hybrid.planning.capabilities import PlannerAbilities
from marlm.hybrid.planning.scheduler import PlanScheduler
from marlm.hybrid.planning.triage import TriagePlanner
from marlm.llm.triage import Triage

URGENT = "Production line is down, we need this part right now."
ROUTINE = "Restock when convenient, no rush."


def order(oid: str, note: str, arrival: int = 0, shelf: str = "S3-2") -> Order:
    return Order(id=oid, shelf=shelf, priority="normal", arrival=arrival, deadline=300, note=note)


def test_a_note_read_before_is_recalled_with_no_model_call(embedded_model):
    triage = Triage(embedded_model, mode="score")
    assert triage.recall(triage.note_key(URGENT)) is None  # never read: nothing to recall
    planner = TriagePlanner(triage)
    assert PlannerAbilities.of(planner).recall is not None
    (call,) = planner.classify([order("a", URGENT)])
    model_calls = triage.stats.model_calls
    got = planner.recall([order("b", "  " + URGENT + " "), order("c", ROUTINE), order("a", URGENT)])
    assert got == [("b", call.label)]  # the same note once cleaned; "a" is classified already
    assert planner.sources["b"] == "model" and planner.classes["b"] == planner.classes["a"]
    assert "c" not in planner.sources  # a note never read waits for the model
    assert triage.note_key("  " + URGENT + " ") == triage.note_key(URGENT)
    hit = triage.recall(triage.note_key(URGENT))
    assert (hit.label, hit.cached, hit.latency_s) == (call.label, True, 0.0)
    assert triage.stats.model_calls == model_calls
    # The same new note twice in one request: one model call, the other order recalled.
    calls = planner.classify([order("d", ROUTINE), order("e", ROUTINE)])
    assert [c.order for c in calls] == ["d"]
    # ... and "c", given before with that note unread, waited for it by its text.
    assert planner.recall([]) == [("e", planner.classes["d"]), ("c", planner.classes["d"])]
    assert planner.recall([order("c", ROUTINE)]) == []  # drained once; c is classified


def test_a_repeated_note_gets_its_class_the_step_its_order_arrives(embedded_model):
    orders = [
        order("a", URGENT, 0, "S3-2"),
        order("b", ROUTINE, 0, "S3-3"),
        order("c", URGENT, 3, "S3-5"),
    ]
    env = WarehouseEnv(layout="small", orders=orders, n_robots=1, max_steps=100, auto_assign=False)
    env.reset(seed=0)
    events: list[dict] = []
    sched = PlanScheduler(
        env, TriagePlanner(Triage(embedded_model, mode="score")),
        lambda t, **f: events.append({"type": t, **f}),
    )  # fmt: skip
    assert sched.ahead
    sched.update()  # step 0: a and b go to the worker
    for _ in range(2000):  # bounded wait for the reading of a and b, before c arrives
        if not sched.async_planner.busy:
            break
        time.sleep(0.005)
    while env.step_count < 3:
        env.step({})
        sched.update()
    recalled = [e for e in events if e["type"] == "recalled"]
    label_a = next(e["label"] for e in events if e["type"] == "llm_call" and e["order"] == "a")
    assert recalled == [{"type": "recalled", "step": 3, "order": "c", "label": label_a}]
    assert [e["order"] for e in events if e["type"] == "llm_call"] == ["a", "b"]
    sched.close(wait=False)


def _order(kind, oid, step):
    return {"type": "order", "event": kind, "order": oid, "step": step, "priority": "normal"}


def test_a_recalled_class_counts_in_time_and_as_read_but_not_as_a_model_call():
    events = [
        *({"type": "step", "step": s} for s in range(20)),
        _order("arrived", "a", 0), _order("assigned", "a", 2),
        {"type": "llm_call", "order": "a", "label": "urgent", "valid": True,
         "status": "answered", "step_applied": 1, "latency_ms": 50.0},
        _order("arrived", "b", 5), {"type": "recalled", "step": 5, "order": "b",
                                    "label": "urgent"},
        _order("assigned", "b", 6),
        _order("arrived", "c", 7), _order("assigned", "c", 8),  # never read: late
    ]  # fmt: skip
    r = reading(events, {"a": "urgent", "b": "urgent", "c": "urgent"})
    assert r["read_in_time"] == {"orders": 3, "in_time": 2, "share": 2 / 3}
    assert (r["model_read"], r["recalled"]) == (2, 1)
    assert r["notes_per_s"] == 20.0  # the one model call: 50 ms
    without = [e for e in events if e["type"] != "recalled"]
    assert reading(without)["read_in_time"]["in_time"] == 1


def test_the_table_shows_the_recalled_notes_only_when_there_are_some():
    from marlm.eval.demo_rows import reading_rows

    events = [
        {"type": "step", "step": 0}, _order("arrived", "a", 0), _order("assigned", "a", 0),
        {"type": "recalled", "step": 0, "order": "a", "label": "normal"},
    ]  # fmt: skip
    rows = dict(reading_rows({"llm_calls": 1, "plans_effective": 1, "reading": reading(events)}))
    assert (rows["notes read by the model"], rows["  the same note read before"]) == ("1 of 1", "1")
    rows = dict(reading_rows({"llm_calls": 1, "reading": reading(events[:3])}))
    assert "  the same note read before" not in rows


def test_each_note_is_looked_up_once_not_every_step(embedded_model, monkeypatch):
    triage = Triage(embedded_model, mode="score")
    planner = TriagePlanner(triage)
    keys = []
    real = triage.note_key
    monkeypatch.setattr(triage, "note_key", lambda note: keys.append(note) or real(note))
    backlog = [order(f"o{k}", f"note number {k}") for k in range(1000)]  # none read yet
    for _ in range(3):  # three control steps with the same unread backlog
        assert planner.recall(backlog) == []
    assert len(keys) == 1000
    (call,) = planner.classify([order("x", "note number 7")])  # the model reads one of them
    assert planner.recall(backlog) == [("o7", call.label)]  # found by its text, no rescan
    assert len(keys) == 1000  # nothing cleaned again


def test_two_orders_with_one_note_at_one_step_record_the_reuse_that_step(embedded_model):
    # Both notes are read in one request; the second is the cache's answer to the first, and
    # its recalled event was written only at the next arrival (or never, with none).
    orders = [order("a", URGENT, 0, "S3-2"), order("b", URGENT, 0, "S3-3")]
    env = WarehouseEnv(layout="small", orders=orders, n_robots=2, max_steps=50, auto_assign=False)
    env.reset(seed=0)
    events: list[dict] = []
    sched = PlanScheduler(
        env, TriagePlanner(Triage(embedded_model, mode="score")),
        lambda t, **f: events.append({"type": t, **f}), sync=True,
    )  # fmt: skip
    sched.update()  # step 0: one plan reads both notes and assigns both orders
    assert env.open_orders() == []
    assert [e["order"] for e in events if e["type"] == "llm_call"] == ["a"]
    assert [(e["step"], e["order"]) for e in events if e["type"] == "recalled"] == [(0, "b")]
