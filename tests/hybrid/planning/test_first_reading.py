"""The first reading of a note (TF-IDF n-grams + logistic regression) and the model's reading
order (which notes it reads first)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from marlm.envs.warehouse.orders import Order
from marlm.hybrid.planning.first_reading import FirstReader
from marlm.hybrid.planning.planner import Snapshot
from marlm.hybrid.planning.scheduler import PlanScheduler, reading_queue
from marlm.llm.triage import LabelledNote

POOL = [
    LabelledNote(id=f"p{i}", note=n, label=lab)
    for i, (n, lab) in enumerate(
        [
            ("urgent rush now", "urgent"),
            ("rush, the line is stopped", "urgent"),
            ("needed immediately", "urgent"),
            ("马上要，急", "urgent"),
            ("routine restock", "normal"),
            ("monthly refill, no hurry", "normal"),
            ("standard weekly delivery", "normal"),
            ("例行补货", "normal"),
        ]
    )
]


def test_the_first_reader_separates_the_pool_and_gives_probabilities():
    fr = FirstReader(POOL, classes=("urgent", "normal"))
    assert fr.predict("rush now please") == "urgent"
    assert fr.predict("routine monthly restock") == "normal"
    assert fr.predict("很急，马上") == "urgent"
    p = fr.proba("rush")
    assert set(p) == {"urgent", "normal"} and sum(p.values()) == pytest.approx(1.0)
    assert fr.proba("") is None and fr.predict("   ", fallback="normal") == "normal"
    # Deterministic: the same pool gives the same weights.
    assert (FirstReader(POOL, classes=("urgent", "normal")).weights == fr.weights).all()


def test_the_first_reader_refuses_a_bad_c():
    with pytest.raises(ValueError, match="c must be > 0"):
        FirstReader(POOL, c=0)


def _order(oid: str, arrival: int) -> Order:
    return Order(id=oid, shelf="S1-1", priority="normal", arrival=arrival, deadline=arrival + 200)


class _Planner:
    """A triaging planner's reading-order surface: classes read, first readings."""

    def __init__(self, read=(), first=None, view=None):
        self.sources = dict.fromkeys(read, "model")
        self.first_urgent = first or {}
        self._view = view or {}

    def unclassified(self, orders):
        return [o for o in orders if o.id not in self.sources]

    def view(self, orders):
        return self._view

    def deadlines(self, orders):
        return None


def _snap(pending, waiting=()):
    return Snapshot(0, tuple(pending), (), {}, (), tuple(waiting), {})


def test_the_model_reads_the_head_of_the_queue_and_uncertain_first_readings_first():
    a, b, c, d, w = (_order(x, t) for x, t in (("a", 0), ("b", 1), ("c", 2), ("d", 3), ("w", 0)))
    # The queue ranks d first (its first reading says urgent), then a, b, c by deadline.
    planner = _Planner(first={"a": 0.1, "b": 0.5, "c": 0.05, "d": 0.95}, view={"d": "urgent"})
    snap = _snap([a, b, c, d], waiting=[w])
    # Places 0 (d), 1 (a), 2 (b), 3 (c) times 0.5 + |p - 0.5|: d 0, a 0.9, b 1.0, c 2.85;
    # the order waiting for its shelf last.
    assert [o.id for o in reading_queue(planner, snap)] == ["d", "a", "b", "c", "w"]
    assert [o.id for o in reading_queue(planner, snap, "arrival")] == ["a", "w", "b", "c", "d"]
    assert [o.id for o in reading_queue(planner, snap, "newest")] == ["d", "c", "b", "a", "w"]
    assert reading_queue(planner, snap, "none") == []
    # A note already read is not read again.
    read = _Planner(read=("d",), first=planner.first_urgent, view={"d": "urgent"})
    assert [o.id for o in reading_queue(read, snap)][:2] == ["a", "b"]


def test_the_scheduler_takes_its_reading_order_from_the_planner_and_refuses_an_unknown_one():
    env = SimpleNamespace(possible_agents=[])
    planner = SimpleNamespace(name="rule", reading_order="arrival")
    assert PlanScheduler(env, planner, lambda *a, **k: None).reading_order == "arrival"
    with pytest.raises(ValueError, match="reading_order"):
        PlanScheduler(env, planner, lambda *a, **k: None, reading_order="soonest")
