"""Provisional classes: an order whose note the model has not read yet is ranked by the class
of a similar note while the backend is healthy, and never when it fails (the run then stays the
rule planner's step for step). The failing backend here is a fault injector; the healthy one is
the real embedded model."""

from __future__ import annotations

from faultserver import DownModel
from marlm.envs.warehouse.orders import Order
from marlm.eval.trace import read_trace
from marlm.hybrid.controller import run, run_config
from marlm.hybrid.planning.planner import RulePlanner, Snapshot
from marlm.hybrid.planning.triage import TriagePlanner
from marlm.llm.triage import Triage

ROUTINE = "Routine restock for next week's shelves, no rush."
URGENT = "Production line is stopped until these parts arrive, ship immediately!"


def order(oid: str, note: str, arrival: int) -> Order:
    return Order(id=oid, shelf="S1-1", priority="normal", arrival=arrival, deadline=300, note=note)


def two_orders() -> Snapshot:
    a, b = order("a", ROUTINE, 0), order("b", URGENT, 1)
    return Snapshot(5, (a, b), ("r0",), {("r0", "a"): 4, ("r0", "b"): 4})


def test_the_similar_notes_class_ranks_an_unread_note_once_the_model_answered(embedded_model):
    planner = TriagePlanner(Triage(embedded_model, mode="score"), provisional=True)
    assert not planner.healthy()  # no warm-up, no answer yet
    assert planner.decide(two_orders()).assignments == [("r0", "a")]  # the rule's: first come
    assert planner.guessed == set()
    planner.classify([order("x", "Please send when convenient.", 0)])
    assert planner.sources["x"] == "model" and planner.healthy()
    assert (planner.guess(order("a", ROUTINE, 0)), planner.guess(order("b", URGENT, 1))) == (
        "normal",
        "urgent",
    )
    plan = planner.decide(two_orders())
    assert plan.assignments == [("r0", "b")]  # the note that reads as urgent first
    assert planner.guessed == {"a", "b"}
    assert planner.sources.keys() == {"x"}  # no model call was waited for
    # The synchronous path reads the notes before it decides: no provisional class there.
    sync = TriagePlanner(Triage(embedded_model, mode="score"), provisional=True)
    sync.classify([order("x", "Please send when convenient.", 0)])
    assert sync.healthy() and sync.view([order("b", URGENT, 1)]) is sync.classes


def _run(tmp_path, name, planner):
    config = run_config(
        steps=160, tick_ms=0, planner="rule" if planner is None else "triage", executor="greedy",
        gif=False, seed=3, sync_planner=planner is None,
    )  # fmt: skip
    result = run(config, tmp_path / name, planner=planner or RulePlanner())
    return result, read_trace(result.files["trace"]).events


def test_a_backend_that_fails_every_call_gets_no_provisional_class(tmp_path):
    from trace_diff import moves

    planner = TriagePlanner(Triage(DownModel(), mode="probe"), provisional=True)
    planner.warm_up()  # the probe cannot be fitted: the warm-up did not succeed
    assert planner.guess(order("b", URGENT, 1)) == "urgent"  # the classifier has a view...
    assert not planner.healthy()  # ...which the gate keeps out
    result, events = _run(tmp_path, "down", planner)
    rule_result, rule_events = _run(tmp_path, "rule", None)
    assert planner.triage.model.calls >= 2 and not planner.healthy()
    assert planner.guessed == set()
    assert moves(events) == moves(rule_events)
    assert result.metrics["delivered"] == rule_result.metrics["delivered"] == 24
