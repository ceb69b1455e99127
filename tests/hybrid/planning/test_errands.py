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
