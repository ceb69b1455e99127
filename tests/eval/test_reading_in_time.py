"""Whether the model's reading of each note came in time (``marlm.eval.metrics.reading``), the
demo's table rows and end-of-run line built from it, and order files that carry labels."""

from __future__ import annotations

import json

import pytest

from marlm.errors import InputError
from marlm.eval.demo_rows import reading_rows
from marlm.eval.metrics import reading
from marlm.experiments.demo import fell_behind, order_labels


def _order(kind, oid, step):
    return {"type": "order", "event": kind, "order": oid, "step": step, "priority": "normal"}


def _call(oid, label, applied, latency_ms=100.0):
    return {
        "type": "llm_call", "order": oid, "label": label, "valid": True, "status": "answered",
        "step_applied": applied, "latency_ms": latency_ms,
    }  # fmt: skip


EVENTS = [
    *({"type": "step", "step": s} for s in range(120)),
    _order("arrived", "a", 0), _order("assigned", "a", 0), _order("delivered", "a", 20),
    _order("arrived", "b", 5), _call("b", "urgent", 8), _order("assigned", "b", 10),
    _order("delivered", "b", 30),
    _order("arrived", "c", 6), _order("assigned", "c", 12), _call("c", "normal", 40),
    _order("delivered", "c", 56),
    _order("arrived", "d", 60), _call("d", "urgent", 70),  # never assigned, read
    _order("arrived", "e", 61),  # never assigned, never read
    {"type": "plan", "step": 10, "applied": [{"robot": "r0", "order": "b"}], "t_s": 2.0},
    {"type": "plan", "step": 12, "applied": [{"robot": "r1", "order": "c"}], "t_s": 4.0},
]  # fmt: skip


def test_a_reading_is_in_time_when_applied_by_the_assignment_or_the_order_went_on_arrival():
    r = reading(EVENTS, {"a": "normal", "b": "urgent", "c": "urgent", "d": "urgent", "e": "normal"})
    # a: assigned on arrival; b: read at 8, assigned at 10; c: read after its assignment;
    # d: read, never assigned; e: never read.
    assert r["read_in_time"] == {"orders": 5, "in_time": 3, "share": 0.6}
    assert r["read_in_time_by_true_class"] == {
        "normal": {"orders": 2, "in_time": 1, "share": 0.5},
        "urgent": {"orders": 3, "in_time": 2, "share": pytest.approx(2 / 3)},
    }
    assert r["model_read"] == 3
    # Unassigned, unread orders at steps 0, 50, 100: none; c (arrived 6, assigned 12) is gone
    # by 50; d and e at 100? d read at 70, so e alone.
    assert r["unread_backlog"] == {"every_steps": 50, "counts": [0, 0, 1], "max": 1}
    assert r["notes_per_s"] == pytest.approx(10.0)
    assert r["arrivals_per_s"] == pytest.approx(5 / 4.0)
    assert r["plans_with_model_class"] == 1  # the plan of b; c's class came later
    assert r["latency_by_model_class"] == {"normal": 50.0, "urgent": 25.0}


def test_the_table_says_how_many_plans_the_model_reached_not_a_share_decided_by_it():
    m = {"llm_calls": 3, "plans_effective": 2, "decided_by_model_share": 1.0,
         "reading": reading(EVENTS, {"b": "urgent"})}  # fmt: skip
    rows = dict(reading_rows(m))
    assert rows["  with a class the model read"] == "1 of 2"
    assert rows["notes read in time (before assignment)"] == "60%"
    assert rows["  truly urgent"] == "100% (1 of 1)"
    assert "  decided by the model" not in rows
    assert dict(reading_rows({"decided_by_model_share": None}))["  decided by the model"] == "-"


def test_the_demo_says_when_the_model_fell_behind_and_what_helps():
    m = {"llm_calls": 3, "reading": reading(EVENTS)}
    line = fell_behind(m, sync=False, llm="embedded")
    assert line.splitlines() == [
        "the model fell behind: 60% of notes read before their order was assigned (it read "
        "10.0 notes/s while orders came at 1.2/s); the first reading ranked the rest.",
        "what helps: a free CPU core, a model server (--llm http://HOST:PORT/v1), or --sync "
        "(the robots wait for every reading)",
    ]
    assert "model server" not in fell_behind(m, sync=False, llm="http://h:1/v1")
    assert fell_behind(m, sync=True, llm="embedded") is None
    kept_up = {"llm_calls": 3, "reading": {"read_in_time": {"share": 0.9}}}
    assert fell_behind(kept_up, sync=False, llm="embedded") is None


def test_an_order_file_with_labels_gives_them_and_keeps_the_orders(tmp_path):
    path = tmp_path / "orders.jsonl"
    lines = [
        {"id": "o1", "shelf": "S1-1", "priority": "normal", "arrival": 0, "deadline": 9,
         "note": "rush", "label": "urgent"},
        {"id": "o2", "shelf": "S1-2", "priority": "normal", "arrival": 1, "deadline": 9},
    ]  # fmt: skip
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    text, labels = order_labels(path)
    assert labels == {"o1": "urgent"}
    assert [json.loads(x) for x in text.splitlines()] == [
        {k: v for k, v in lines[0].items() if k != "label"},
        lines[1],
    ]
    lines[1]["label"] = "asap"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    with pytest.raises(InputError, match=":2: field 'label': 'asap' is not urgent, normal or low"):
        order_labels(path)
    path.write_text(json.dumps(lines[0] | {"label": "normal"}).replace("label", "tag") + "\n")
    assert order_labels(path) is None


def test_the_report_page_shows_the_rule_column_and_the_reading_as_the_terminal_table_does():
    from marlm.eval.report import _triage_html

    m = {
        "delivered": 5, "orders_total": 5, "throughput_per_1000_steps": 41.7,
        "by_true_class": {"latency_mean_steps": {"urgent": 12.0, "normal": 30.0}},
        "true_class_source": "the order's label", "idle_robot_steps": {},
        "counterfactual_rule": {"delivered": 5, "throughput_per_1000_steps": 41.7,
                                "latency_mean_steps": {"urgent": 24.0, "normal": 25.0},
                                "idle_robot_steps": {}},
        "llm_calls": 3, "plans_effective": 2, "reading": reading(EVENTS, {"b": "urgent"}),
    }  # fmt: skip
    html = "\n".join(_triage_html(m))
    assert "rule, same orders" in html
    assert "mean order latency, urgent by the order&#x27;s label (steps)" in html
    assert '<td class="num">24</td>' in html or ">24<" in html
    assert "with a class the model read" in html and "1 of 2" in html
    assert _triage_html({"delivered": 1}) == []
