"""Dwell points and the urgent reserve (real layout, env, planner, rule layer)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from marlm.envs.warehouse import Order, WarehouseEnv
from marlm.envs.warehouse.layout import list_layouts, load_layout
from marlm.eval.trace import read_trace
from marlm.hybrid.acting.dwell import dwell_scores, dwell_scores_many
from marlm.hybrid.build import build_planner
from marlm.hybrid.controller import run, run_config
from marlm.hybrid.planning.dwell import (
    DEMAND_WEIGHT,
    PRIOR_PER_SHELF,
    DwellPolicy,
    GreedyMedians,
    k_median,
    parking_cells,
)
from marlm.hybrid.planning.planner import Plan, RulePlanner, Snapshot
from marlm.hybrid.planning.scheduler import PlanScheduler, idle_cells


@pytest.fixture(scope="module")
def small():
    return load_layout("small")


def test_parking_cells_keep_off_stations_pick_cells_and_one_wide_aisles(small):
    cells = set(parking_cells(small))
    assert not cells & set(small.stations)
    assert not cells & set(small.access.values())
    # col 4 between the shelf pairs of rows 3-4 is a one-wide aisle; row 1 is open floor
    assert (3, 4) not in cells and (6, 7) not in cells
    assert (1, 5) in cells and (5, 4) in cells
    assert all(small.free[c] for c in cells)


def test_k_median_known_answer():
    # Sites 0, 1, 2 on a line at 0, 1, 10; points at 0, 1, 10. Demand 1, 1, 5.
    pos = np.array([0.0, 1.0, 10.0])
    cost = np.abs(pos[:, None] - pos[None, :])
    demand = np.array([1.0, 1.0, 5.0])
    assert k_median(cost, demand, 1) == [2]  # 10 + 9 = 19 < 1 + 45 = 46
    assert k_median(cost, demand, 2) == [2, 0]  # then 0 or 1 (cost 1 each): the lower row
    assert k_median(cost, demand, 1, fixed=[2]) == [0]


def test_demand_counts_each_arrived_order_once(small):
    policy = DwellPolicy(small)
    o = Order(id="a", shelf="S7-8", priority="urgent", arrival=0, deadline=50)
    policy.observe([o, o])
    policy.observe([o])
    i = policy.shelves.index("S7-8")
    assert policy.demand[i] == PRIOR_PER_SHELF + DEMAND_WEIGHT["urgent"]
    assert policy.urgent_demand[i] == PRIOR_PER_SHELF + 1
    assert policy.demand.sum() == PRIOR_PER_SHELF * len(small.shelves) + DEMAND_WEIGHT["urgent"]


def test_dwell_points_follow_the_demand_seen(small):
    policy = DwellPolicy(small, reserve=False)
    idle = {"robot_0": (1, 1)}
    before = policy.targets(idle)["robot_0"]
    d_shelf = small.distance_from(small.access["S7-9"])
    policy.observe(
        Order(id=f"o{k}", shelf="S7-9", priority="normal", arrival=k, deadline=k + 99)
        for k in range(40)
    )
    after = policy.targets(idle)["robot_0"]
    assert d_shelf[after] < d_shelf[before]
    assert after in parking_cells(small)


def test_each_idle_robot_gets_its_own_point_and_the_reserve_is_kept_while_idle(small):
    policy = DwellPolicy(small, reserve=True)
    idle = {"robot_0": (8, 1), "robot_1": (8, 4), "robot_2": (8, 8)}
    targets = policy.targets(idle)
    assert set(targets) == set(idle) and len(set(targets.values())) == 3
    reserve = policy.reserve_robot
    assert targets[reserve] == policy.cells[policy.reserve_point()]
    # a robot nearer to the reserve point becomes idle: the reserve stays the same robot
    policy.targets({**idle, "robot_3": policy.cells[policy.reserve_point()]})
    assert policy.reserve_robot == reserve


def _snapshot(pending, idle, distance):
    return Snapshot(0, tuple(pending), tuple(idle), distance)


def test_keep_reserve_gives_a_normal_order_to_another_idle_robot(small):
    policy = DwellPolicy(small, reserve=True)
    policy.reserve_robot = "r0"
    normal = Order(id="n", shelf="S3-2", priority="normal", arrival=0, deadline=99)
    urgent = Order(id="u", shelf="S3-3", priority="urgent", arrival=0, deadline=50)
    dist = {("r0", "n"): 1, ("r1", "n"): 5, ("r2", "n"): 3, ("r0", "u"): 2, ("r1", "u"): 2}
    snap = _snapshot([normal], ["r0", "r1", "r2"], dist)
    kept = policy.keep_reserve(Plan([("r0", "n")], "rule", snap), {})
    assert kept.assignments == [("r2", "n")]  # the nearest of the robots left idle
    # an urgent order keeps the reserve; so does a normal one the note made urgent
    snap_u = _snapshot([urgent], ["r0", "r1"], dist)
    assert policy.keep_reserve(Plan([("r0", "u")], "rule", snap_u), {}).assignments == [("r0", "u")]
    assert policy.keep_reserve(Plan([("r0", "n")], "rule", snap), {"n": "urgent"}).assignments == [
        ("r0", "n")
    ]
    # no other robot idle: the order is not made to wait
    snap_1 = _snapshot([normal], ["r0"], dist)
    assert policy.keep_reserve(Plan([("r0", "n")], "rule", snap_1), {}).assignments == [("r0", "n")]


def test_dwell_scores_lead_down_the_shortest_path(small):
    scores = dwell_scores(small, (1, 1), (1, 5))
    assert scores.argmax() == 4  # right
    assert scores[1] == -np.inf  # up is the wall
    assert dwell_scores(small, (1, 5), (1, 5)).argmax() == 0  # there: stay


def test_the_scheduler_learns_only_from_orders_that_have_arrived(small):
    orders = [
        Order(id="early", shelf="S3-2", priority="normal", arrival=0, deadline=99),
        Order(id="late", shelf="S7-8", priority="urgent", arrival=50, deadline=120),
    ]
    env = WarehouseEnv(layout=small, orders=orders, max_steps=100, auto_assign=False)
    env.reset(seed=0)
    policy = DwellPolicy(small)
    sched = PlanScheduler(env, RulePlanner(), lambda *a, **k: None, sync=True, dwell=policy)
    for _ in range(10):
        sched.update()
        env.step({})
    late = policy.shelves.index("S7-8")
    assert policy.urgent_demand[late] == PRIOR_PER_SHELF  # the future order is not known
    assert set(idle_cells(env)) == set(env.idle_robots())


def _run(tmp_path: Path, dwell: str, orders: list[dict], steps: int, n_robots: int | None = None):
    path = tmp_path / f"orders-{dwell}.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in orders))
    config = run_config(
        layout="small", orders=str(path), n_robots=n_robots, steps=steps, planner="rule",
        executor="greedy", sync_planner=True, tick_ms=0, gif=False, dwell=dwell,
    )  # fmt: skip
    result = run(config, tmp_path / f"run-{dwell}", planner=build_planner("rule"))
    return result.metrics, read_trace(result.out_dir).events


@pytest.mark.parametrize("dwell", ["points", "reserve"])
def test_idle_robots_leave_the_station_for_dwell_points_without_collisions(
    tmp_path: Path, small, dwell
):
    # Two orders for shelves by the left station; the robots deliver there and then idle.
    orders = [
        {"id": "a", "shelf": "S3-2", "priority": "normal", "arrival": 0, "deadline": 60},
        {"id": "b", "shelf": "S4-2", "priority": "urgent", "arrival": 0, "deadline": 60},
        {"id": "c", "shelf": "S7-9", "priority": "low", "arrival": 70, "deadline": 200},
    ]
    metrics, events = _run(tmp_path, dwell, orders, 120)
    assert metrics["delivered"] == 3 and metrics["collisions"] == 0
    before_c = [e for e in events if e["type"] == "step" and e["step"] == 69][0]
    parking = set(parking_cells(small))
    cells = [tuple(p) for p in before_c["positions"]]
    assert all(c in parking for c in cells)  # every robot idle at step 69 waits on a parking cell
    assert not set(cells) & set(small.stations)


def test_without_dwell_a_robot_stays_on_the_station_it_delivered_to(tmp_path: Path, small):
    orders = [{"id": "a", "shelf": "S3-2", "priority": "normal", "arrival": 0, "deadline": 60}]
    metrics, events = _run(tmp_path, "none", orders, 40)
    last = [e for e in events if e["type"] == "step"][-1]
    assert metrics["delivered"] == 1
    assert any(tuple(p) in set(small.stations) for p in last["positions"])


@pytest.mark.parametrize("dwell", ["points", "reserve"])
def test_the_reserve_robot_is_left_for_urgent_work(tmp_path: Path, small, dwell):
    # Two robots wait at (5, 4) (the 1-median of a uniform demand: the reserve's point) and
    # (5, 7). A normal order for S4-3 (pick cell (5, 3), one step from the reserve) arrives at
    # step 40: dwell points alone give it the nearest robot, the reserve; with the reserve it
    # goes to the other robot, and the reserve takes the urgent order that follows.
    orders = [
        {"id": "n", "shelf": "S4-3", "priority": "normal", "arrival": 40, "deadline": 200},
        {"id": "u", "shelf": "S6-6", "priority": "urgent", "arrival": 42, "deadline": 200},
    ]
    metrics, events = _run(tmp_path, dwell, orders, 120, n_robots=2)
    at_39 = next(e for e in events if e["type"] == "step" and e["step"] == 39)["positions"]
    assert sorted(map(tuple, at_39)) == [(5, 4), (5, 7)]
    reserve = f"robot_{[tuple(p) for p in at_39].index((5, 4))}"
    assigned = {e["order"]: e["robot"] for e in events if e.get("event") == "assigned"}
    assert metrics["delivered"] == 2 and metrics["collisions"] == 0
    if dwell == "points":
        assert assigned["n"] == reserve
    else:
        assert assigned["n"] != reserve and assigned["u"] == reserve


#: Steps each shipped layout takes to deliver its 8 orders below (seed 1), measured.
LAYOUT_STEPS = {"medium": 242, "rware-tiny": 253, "small": 238}


def test_every_shipped_layout_has_its_measured_figure():
    assert sorted(list_layouts()) == sorted(LAYOUT_STEPS)


@pytest.mark.parametrize("layout", list_layouts())
def test_every_shipped_layout_delivers_with_dwell_points(tmp_path: Path, layout):
    config = run_config(
        layout=layout, orders=None, n_orders=8, steps=300, seed=1, planner="rule",
        executor="greedy", sync_planner=True, tick_ms=0, gif=False, dwell="reserve",
    )  # fmt: skip
    result = run(config, tmp_path / "run", planner=build_planner("rule"))
    m = result.metrics
    assert (m["delivered"], m["steps"], m["collisions"]) == (8, LAYOUT_STEPS[layout], 0)
    assert m["still_with_task_max_steps"] == 1  # measured on every layout
    # The robot that made the last delivery stands on a station; every other robot left its
    # station for a dwell point (without dwell points they stay where they delivered).
    last = [e for e in read_trace(result.out_dir).events if e["type"] == "step"][-1]
    stations = set(load_layout(layout).stations)
    assert sum(tuple(p) in stations for p in last["positions"]) == 1


def test_dwell_scores_of_many_robots_are_each_robots_dwell_scores():
    # The executor scores every idle robot in one call (it looped over robots and moves, ~1,000
    # robots a step at scale); the values must be the one-robot reference's, walls and edges
    # included.
    layout = load_layout("medium")
    free = np.argwhere(layout.free)
    rng = np.random.default_rng(0)
    positions = free[rng.integers(0, len(free), 200)]
    targets = [(int(r), int(c)) for r, c in free[rng.integers(0, len(free), 200)]]
    many = dwell_scores_many(layout, positions, targets)
    one = [dwell_scores(layout, p, t) for p, t in zip(positions, targets, strict=True)]
    assert np.array_equal(many, np.array(one))
    # With the executor's cache of each target's closer-move bits, filled, then read again.
    cache: dict = {}
    for _ in range(2):
        assert np.array_equal(dwell_scores_many(layout, positions, targets, cache), many)
    assert len(cache) == len(set(targets))


def test_the_extended_greedy_run_gives_k_medians_points_for_every_k():
    # The dwell points are taken from one greedy run per demand, extended as robots go idle
    # (k_median from scratch each step took ~10 s at 200 robots on a 100x100 map). Integer
    # costs (an unreachable one among them) and demands in halves, with ties: the same rows,
    # also after the demand grows.
    rng = np.random.default_rng(1)
    for _ in range(50):
        n, m = int(rng.integers(1, 30)), int(rng.integers(1, 20))
        cost = rng.integers(0, 6, (n, m)).astype(np.float64)
        cost[rng.random((n, m)) < 0.05] = 10**6
        demand = rng.integers(0, 8, m) / 2
        fixed = [int(j) for j in rng.choice(n, size=min(n, 2), replace=False)][: n % 3]
        greedy = GreedyMedians(cost, demand, fixed)
        for _ in range(4):  # then an order arrives: the run is corrected, not redone
            for k in rng.permutation(n + 1).tolist():
                assert greedy.first(k) == k_median(cost, demand, k, fixed)
            demand = demand.copy()
            demand[int(rng.integers(0, m))] += float(rng.integers(1, 5)) / 2
            assert greedy.set_demand(demand)


def test_the_fleet_scale_path_keeps_the_robots_that_stay_and_matches_the_rest_optimally(small):
    # Above exact_limit idle robots (a 1,000-robot fleet solved a 1,000 x 1,000 matching and
    # re-ran the greedy after every move and order: ~110 ms a step) a robot parked on its point
    # keeps it while it stays idle and the point stays; the others (new, or still driving: a
    # budget of them per call) are matched, optimally among themselves. The points are the
    # greedy k-median of the demand the run was made for.
    from scipy.optimize import linear_sum_assignment

    rng = np.random.default_rng(7)
    policy = DwellPolicy(
        small, reserve=False, exact_limit=2, refresh_budget=3, rematch_budget=2, full_every=0
    )
    free = np.argwhere(small.free)
    robots = [f"robot_{i}" for i in range(12)]
    before: dict[str, tuple[int, int]] = {}
    checked = 0
    for _ in range(80):
        chosen = [r for r in robots if rng.random() < 0.7]
        idle = {r: tuple(int(x) for x in free[rng.integers(0, len(free))]) for r in chosen}
        for r in chosen:  # half of them stand on the point they were given
            if r in before and rng.random() < 0.5:
                idle[r] = before[r]
        if rng.random() < 0.3:
            shelf = policy.shelves[int(rng.integers(0, len(policy.shelves)))]
            policy.demand[policy.shelves.index(shelf)] += 1.0
        out = policy.targets(idle)
        if len(idle) <= 2:
            before = {}
            continue
        run = policy._run
        want = k_median(policy.cost, run.demand, len(idle), run.fixed)
        assert sorted(out.values()) == sorted(policy.cells[j] for j in want)
        assert set(out) == set(idle)
        stayed = {r for r in idle if r in before and out[r] == before[r]}
        parked = {r for r in idle if r in before and idle[r] == before[r]}
        assert {r for r in parked if policy.cells.index(before[r]) in want} <= stayed
        checked += len(parked)
        loose = [r for r in idle if r not in stayed]
        if loose:
            pts = [policy.cells.index(out[r]) for r in loose]
            dist = np.array([[policy.layout.distance_from(policy.cells[p])[idle[r]] for p in pts]
                             for r in loose], dtype=float)  # fmt: skip
            got = sum(dist[i, i] for i in range(len(loose)))
            rows, cols = linear_sum_assignment(dist)
            assert got == dist[rows, cols].sum()
        before = dict(out)
    assert checked > 50


def test_the_fleet_scale_points_follow_a_drifting_demand_within_budgeted_calls(small):
    policy = DwellPolicy(small, reserve=False, exact_limit=1, refresh_drift=0.05,
                         refresh_budget=2)  # fmt: skip
    free = [tuple(int(x) for x in c) for c in np.argwhere(small.free)]
    idle = {f"robot_{i}": free[i] for i in range(6)}
    first = policy.targets(idle)
    assert sorted(first.values()) == sorted(
        policy.cells[j] for j in k_median(policy.cost, policy.demand, 6)
    )
    policy.demand[0] += 0.04 * policy.demand.sum()  # below the drift: the points stay
    assert policy.targets(idle) == first
    policy.demand[-1] += 0.1 * policy.demand.sum()
    want = sorted(policy.cells[j] for j in k_median(policy.cost, policy.demand, 6))
    calls = [sorted(policy.targets(idle).values()) for _ in range(3)]  # 2 additions a call
    assert calls[0] == calls[1] == sorted(first.values())
    assert calls[2] == want


def test_every_full_every_th_fleet_matching_is_the_exact_paths_matching(small):
    # The kept points drift from the least total distance as robots come and go; every
    # full_every-th call matches all idle robots again, from where they stand.
    free = [tuple(int(x) for x in c) for c in np.argwhere(small.free)]
    rng = np.random.default_rng(3)
    fleet = DwellPolicy(small, reserve=False, exact_limit=1, full_every=3)
    exact = DwellPolicy(small, reserve=False)
    for call in range(1, 10):
        idle = {f"robot_{i}": free[int(rng.integers(0, len(free)))] for i in range(8)}
        out = fleet.targets(idle)
        if call % 3 == 0:
            want = exact.targets(idle)
            assert sorted(out.values()) == sorted(want.values())
            d = {r: int(small.distance_from(out[r])[idle[r]]) for r in idle}
            w = {r: int(small.distance_from(want[r])[idle[r]]) for r in idle}
            assert sum(d.values()) == sum(w.values())
