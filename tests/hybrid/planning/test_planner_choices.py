"""The triage planner's options: preemption with hysteresis, deadline-aware preemption and the
expected-deadline queue (known answers at exact steps; no model)."""

from __future__ import annotations

import math

from fixed_triage import FixedTriage
from marlm.envs.warehouse import WarehouseEnv
from marlm.envs.warehouse.orders import _SLACK, Order
from marlm.hybrid.planning.planner import BusyRobot, Snapshot, plan_preemptions
from marlm.hybrid.planning.scheduler import snapshot_of
from marlm.hybrid.planning.triage import (
    CLASS_SLACK,
    TriagePlanner,
    class_probabilities,
    expected_deadline,
    queue_order,
)
from marlm.llm.triage import TriageDecision


def order(oid: str, note: str = "", priority: str = "normal", deadline: int = 200) -> Order:
    return Order(id=oid, shelf="S1-1", priority=priority, arrival=0, deadline=deadline, note=note)


def busy(robot, o, *, to_free=25, free=None):
    return BusyRobot(robot, o, False, to_free, free or {})


class ScoredTriage:
    """Answers each note with fixed class probabilities (as the probe's log-probabilities)."""

    mode = "scored"
    prompt_version = "scored-v0"

    def __init__(self, probs: dict[str, dict[str, float]]):
        self.probs = probs

    def classify_many(self, notes, fallbacks):
        out = []
        for note in notes:
            p = self.probs[note]
            out.append(
                TriageDecision(
                    max(p, key=p.get),
                    "model",
                    "probe",
                    scores={c: math.log(v) for c, v in p.items()},
                )
            )
        return out


def first_plan(planner, *, own_pick=5):
    """Step 3: every robot busy; r0 heads for n1 (``own_pick`` steps from its pick cell), u1 urgent."""
    u1, n1 = order("u1", "line down"), order("n1", "restock")
    snap = Snapshot(
        3, (u1,), (), {("r0", "u1"): 2, ("r0", "n1"): own_pick},
        busy=(busy("r0", n1, free={"u1": 6}),),
    )  # fmt: skip
    return planner.plan(snap), n1


def test_hysteresis_refuses_a_second_preemption_of_the_same_order():
    for hysteresis, second in [(False, [("r1", "n1")]), (True, [])]:
        planner = TriagePlanner(FixedTriage({"line down": "urgent"}), hysteresis=hysteresis)
        plan, n1 = first_plan(planner)
        assert plan.preemptions == [("r0", "n1")]  # the first preemption happens either way
        # Step 6: r1 has taken the released n1; a second urgent order u2 is 1 step from r1.
        u2 = order("u2", "line down")
        snap = Snapshot(
            6, (u2,), (), {("r1", "u2"): 1, ("r1", "n1"): 5, ("r0", "u2"): 9},
            busy=(
                busy("r0", order("u1", "line down"), to_free=10, free={"u2": 5, "n1": 5}),
                busy("r1", n1, to_free=20, free={"u2": 5}),
            ),
        )  # fmt: skip
        assert planner.plan(snap).preemptions == second
        assert planner.released == {"n1"}


def test_hysteresis_keeps_a_robot_within_two_steps_of_its_pick_cell():
    def preempted(own_pick: int, hysteresis: bool) -> list:
        planner = TriagePlanner(FixedTriage({"line down": "urgent"}), hysteresis=hysteresis)
        return first_plan(planner, own_pick=own_pick)[0].preemptions

    assert preempted(2, True) == []
    assert preempted(3, True) == [("r0", "n1")]
    assert preempted(2, False) == [("r0", "n1")]


def test_deadline_aware_preemption_only_when_the_urgent_order_would_be_late():
    urgent = order("u", priority="urgent", deadline=60)
    n1, n2 = order("n1"), order("n2")
    snap = Snapshot(
        10, (urgent,), (), {("r0", "u"): 4, ("r1", "u"): 6, ("r0", "n1"): 8, ("r1", "n2"): 9},
        busy=(busy("r0", n1, to_free=20, free={"u": 5}), busy("r1", n2, to_free=30, free={"u": 5, "n1": 5})),
        carry={"u": 8},
    )  # fmt: skip
    # Without preemption u is picked at 10 + 20 + 5 = 35 and delivered at 35 + 8 = 43.
    assert plan_preemptions(snap, {}, [], due={"u": 43}) == []
    assert plan_preemptions(snap, {}, [], due={"u": 42}) == [("r0", "n1", "u")]
    assert plan_preemptions(snap, {}, [], due={}) == [("r0", "n1", "u")]  # u not in due
    assert plan_preemptions(snap, {}, []) == [("r0", "n1", "u")]


def test_deadline_aware_planner_uses_the_urgent_class_deadline_of_a_note():
    # u is listed normal (deadline 200) and read urgent: it is due by 200 - (100 - 40) = 140.
    def preempted(to_free: int) -> list:
        planner = TriagePlanner(FixedTriage({"line down": "urgent"}), deadline_aware=True)
        u = order("u", "line down")
        snap = Snapshot(
            3, (u,), (), {("r0", "u"): 2, ("r0", "n1"): 5},
            busy=(busy("r0", order("n1", "restock"), to_free=to_free, free={"u": 6}),),
            carry={"u": 10},
        )  # fmt: skip
        return planner.plan(snap).preemptions

    assert preempted(121) == []  # delivered at 3 + 127 + 10 = 140: on time, r0 keeps n1
    assert preempted(122) == [("r0", "n1")]  # 141: late without a preemption


def test_expected_deadline_known_answers():
    assert CLASS_SLACK == _SLACK  # the order generator's slacks
    n = order("a", deadline=200)
    assert expected_deadline(n, {"urgent": 0.5, "normal": 0.3, "low": 0.2}) == 200 - 0.5 * 60
    assert expected_deadline(n, {"urgent": 1.0}) == 140
    low = order("b", priority="low", deadline=300)
    assert expected_deadline(low, {"urgent": 0.25, "normal": 0.75}) == 300 - 0.25 * 160 - 75
    assert expected_deadline(order("c", priority="urgent"), {"low": 1.0}) == 200  # never later
    p = class_probabilities(
        {"urgent": math.log(0.2), "normal": math.log(0.6), "low": math.log(0.2)}
    )
    assert p is not None and abs(p["normal"] - 0.6) < 1e-12 and class_probabilities(None) is None


def test_expected_deadlines_rank_the_likelier_urgent_normal_order_first():
    probs = {
        "restock": {"urgent": 0.1, "normal": 0.8, "low": 0.1},  # a: 100 - 6 = 94
        "soon please": {"urgent": 0.45, "normal": 0.5, "low": 0.05},  # b: 120 - 27 = 93
    }
    a, b = order("a", "restock", deadline=100), order("b", "soon please", deadline=120)
    snap = Snapshot(0, (a, b), ("r0",), {("r0", "a"): 4, ("r0", "b"): 4})
    for on, first in [(False, "a"), (True, "b")]:
        planner = TriagePlanner(ScoredTriage(probs), expected_deadlines=on)
        assert planner.plan(snap).assignments == [("r0", first)]
        assert planner.classes == {"a": "normal", "b": "normal"}
    assert [o.id for o in queue_order([a, b], {}, {"a": 94.0, "b": 93.0})] == ["b", "a"]


def test_snapshot_carry_is_the_pick_to_drop_path_length():
    env = WarehouseEnv(layout="small", n_orders=6, max_steps=50, auto_assign=False)
    env.reset(seed=0)
    while not env.pending_orders():
        env.step({})
    snap = snapshot_of(env)
    lay = env.layout
    for o in snap.pending:
        want = int(lay.distance_from(lay.drop[o.shelf])[lay.access[o.shelf]])
        assert snap.carry[o.id] == want > 0


def test_the_default_ranks_by_expected_deadlines_and_with_triage_keeps_the_options():
    # The planner study (docs/triage.md, "Planner choices") shipped the expected-deadline queue;
    # hysteresis is on so that preemption, which a class arriving late can now start, stays
    # bounded (an order sent back once, a robot near its pick cell kept).
    p = TriagePlanner(FixedTriage())
    assert (p.hysteresis, p.deadline_aware, p.expected_deadlines) == (True, False, True)
    opts = {"hysteresis": True, "deadline_aware": True, "expected_deadlines": False}
    q = TriagePlanner(FixedTriage(), max_orders=3, **opts).with_triage(FixedTriage({"x": "low"}))
    assert q.triage.table == {"x": "low"} and q.max_orders == 3
    assert (q.hysteresis, q.deadline_aware, q.expected_deadlines) == (True, True, False)
