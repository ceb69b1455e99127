"""The errand scheduler: exact assignments on a corridor, multi-errand costs, task swaps."""

from __future__ import annotations

import numpy as np
import pytest

from marlm.hybrid.planning.errands import ErrandScheduler


def corridor(n: int) -> np.ndarray:
    return np.ones((1, n), dtype=bool)


def test_cheapest_pairs_first():
    s = ErrandScheduler(corridor(7), n_agents=2)
    s.add_task(10, [1, 3])  # robot 0: 1 + 2 = 3; robot 1: 5 + 2 = 7
    s.add_task(11, [5, 4])  # robot 0: 5 + 1 = 6; robot 1: 1 + 1 = 2
    assert s.step(np.array([0, 6]), t=0).tolist() == [10, 11]
    assert s.assign_d.tolist() == [1, 1]


def test_task_cost_counts_every_errand():
    s = ErrandScheduler(corridor(10), n_agents=1)
    s.add_task(1, [2, 9])  # 2 + 7 = 9
    s.add_task(2, [3, 4])  # 3 + 1 = 4
    assert s.step(np.array([0]), t=0).tolist() == [2]
    assert s.tasks[1].legs == 7


def test_swap_to_a_nearer_new_task_and_opened_tasks_stay():
    s = ErrandScheduler(corridor(10), n_agents=1, swap_margin=2)
    s.add_task(1, [9, 0])
    assert s.step(np.array([0]), t=0).tolist() == [1]
    s.add_task(2, [1, 2])  # robot at 1 at t=1: 8 steps left to 9, 0 to 1
    assert s.step(np.array([1]), t=1).tolist() == [2]
    assert s.swaps == 1 and list(s.unassigned) == [1]
    # the robot reaches errand 1 of task 2: opened, a nearer task does not take it
    assert s.errand_done(0) is False
    s.add_task(3, [2, 3])
    assert s.step(np.array([1]), t=2).tolist() == [2]
    assert s.next_errand(0) == 2
    assert s.errand_done(0) is True
    assert s.step(np.array([2]), t=3).tolist() == [3]  # free again: the nearest total


def test_more_robots_than_tasks_and_bad_settings():
    s = ErrandScheduler(corridor(5), n_agents=3)
    s.add_task(7, [4])
    assert s.step(np.array([0, 2, 3]), t=0).tolist() == [-1, -1, 7]
    with pytest.raises(ValueError, match="candidates"):
        ErrandScheduler(corridor(5), n_agents=1, candidates=0)
    with pytest.raises(ValueError, match="no errand"):
        s.add_task(8, [])


def test_tasks_sharing_a_first_errand_go_shortest_legs_first():
    s = ErrandScheduler(corridor(12), n_agents=2)
    s.add_task(1, [5, 11])  # legs 6
    s.add_task(2, [5, 7])  # legs 2
    s.add_task(3, [5, 10])  # legs 5
    # robot 0 is nearer the shared first errand: it takes the shortest legs, robot 1 the next
    assert s.step(np.array([4, 0]), t=0).tolist() == [2, 3]
    assert list(s.unassigned) == [1]
    assert [s.next_errand(a) for a in (0, 1)] == [5, 5]


def test_legs_of_a_multi_errand_task_and_an_unreachable_first_errand():
    free = np.ones((1, 9), dtype=bool)
    free[0, 6] = False  # a wall: cells 7 and 8 cannot be reached from 0..5
    s = ErrandScheduler(free, n_agents=2)
    s.add_task(1, [1, 4, 2])  # 3 + 2 = 5
    s.add_task(2, [8, 7])  # unreachable from every robot
    assert s.step(np.array([0, 5]), t=0).tolist() == [1, -1]
    assert s.tasks[1].legs == 5 and list(s.unassigned) == [2]


def test_many_groups_score_by_robot_bfs_the_same_as_by_tables():
    rng = np.random.default_rng(0)
    free = rng.random((12, 12)) > 0.2
    cells = np.flatnonzero(free.ravel())
    tasks = [rng.choice(cells, size=2).tolist() for _ in range(40)]
    starts = rng.choice(cells, size=15, replace=False)
    out = []
    for max_tables in (1024, 2):  # 2: more groups than tables, one BFS per free robot
        s = ErrandScheduler(free, n_agents=15, max_tables=max_tables)
        for i, locs in enumerate(tasks):
            s.add_task(i, locs)
        out.append(s.step(starts, t=0).tolist())
    assert out[0] == out[1]
    assert sorted(x for x in out[0] if x >= 0) == sorted(set(x for x in out[0] if x >= 0))


@pytest.mark.parametrize(("queue_cost", "expected"), [(0.0, 4), (2.0, 5)])
def test_queue_cost_sends_a_robot_to_a_less_crowded_first_errand(queue_cost, expected):
    s = ErrandScheduler(corridor(12), n_agents=4, queue_cost=queue_cost)
    for tid, locs in enumerate([[3, 4], [3, 4], [3, 4], [9, 10], [3, 4]]):
        s.add_task(tid, locs)
    assert s.step(np.array([0, 1, 2, 11]), t=0).tolist() == [2, 1, 0, 3]
    assert s.errand_done(3) is False and s.errand_done(3) is True  # robot 3 is free again
    s.add_task(5, [9, 10])
    # robot 3 at 6: 3 steps + 1 of legs to either first errand; three robots head for cell 3
    assert s.step(np.array([0, 1, 2, 6]), t=1).tolist()[3] == expected


def test_max_active_leaves_the_costliest_robots_idle():
    s = ErrandScheduler(corridor(12), n_agents=3, max_active=2)
    for tid, locs in enumerate([[5, 6], [5, 6], [5, 6]]):
        s.add_task(tid, locs)
    assert s.step(np.array([4, 8, 0]), t=0).tolist() == [0, 1, -1]  # robot 2 is farthest
    assert s.errand_done(0) is False and s.errand_done(0) is True
    assert s.step(np.array([6, 8, 0]), t=1).tolist() == [2, 1, -1]  # a place again: robot 0


def test_max_active_rematches_working_robots_before_idle_ones():
    s = ErrandScheduler(corridor(12), n_agents=3, max_active=1)
    s.add_task(0, [5, 6])
    assert s.step(np.array([4, 8, 11]), t=0).tolist() == [0, -1, -1]
    assert s.errand_done(0) is False and s.errand_done(0) is True
    s.add_task(1, [9, 10])  # robot 1 at 8 is nearer than robot 0 at 6, but it never worked
    assert s.step(np.array([6, 8, 11]), t=1).tolist() == [1, -1, -1]


def test_a_swap_weighs_the_way_to_the_first_errand_not_the_legs():
    s = ErrandScheduler(np.ones((1, 30), dtype=bool), n_agents=1, swap_margin=2)
    s.add_task(1, [9, 10])  # legs 1
    assert s.step(np.array([0]), t=0).tolist() == [1]
    s.add_task(2, [2, 22])  # legs 20, its first errand 1 step from the robot at t=1 (8 to go)
    assert s.step(np.array([1]), t=1).tolist() == [2]
    assert list(s.unassigned) == [1]
