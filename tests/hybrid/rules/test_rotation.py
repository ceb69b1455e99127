"""The rule layer for turning robots: feasibility on tiny hand-written maps (no vertex or swap
conflict), the action model (forward, rotations, wait), every robot reaching its goal, and the
compiled PIBT reserving what the recursive reference (``rotation_reference.py``) does."""

from __future__ import annotations

import numpy as np
import pytest
from rotation_reference import reference_next

from marlm.hybrid.core.graph import DistanceTables, bfs_filler, neighbour_table
from marlm.hybrid.rules.rotation import (
    CCR,
    CR,
    EAST,
    FW,
    NORTH,
    SOUTH,
    WEST,
    W,
    _step,
    apply_actions,
    conflicts,
    heading_table,
    rotation_step,
)


def grid(rows: list[str]) -> np.ndarray:
    return np.array([[ch == "." for ch in r] for r in rows], dtype=bool)


class World:
    """Robots on a map, goals as cells; one call = one step of the rule layer, checked; the
    priority is the steps since the robot was last at its goal (Okumura et al. 2022)."""

    def __init__(self, rows, cell, heading, goal, seed=0):
        free = grid(rows)
        self.front = heading_table(free)
        self.tables = DistanceTables(free.size, bfs_filler(neighbour_table(free)))
        self.cell = np.array(cell, dtype=np.int64)
        self.heading = np.array(heading, dtype=np.int64)
        self.goal = np.array(goal, dtype=np.int64)
        self.since = np.zeros(len(cell))
        self.commit = np.full(len(cell), -1, dtype=np.int64)
        self.rng = np.random.default_rng(seed)

    def step(self):
        slots = self.tables.slots(self.goal)
        act = rotation_step(
            self.front,
            self.cell,
            self.heading,
            slots,
            self.tables.pool,
            self.since,
            self.rng,
            self.commit,
        )
        nxt, head = apply_actions(self.front, self.cell, self.heading, act)
        assert conflicts(self.cell, nxt) == []
        self.cell, self.heading = nxt, head
        self.since += 1
        self.since[self.cell == self.goal] = 0  # PIBT's priority: steps since at the goal
        return act


def test_front_table_headings():
    front = heading_table(grid(["...", "...", "..."]))
    assert front[4].tolist() == [5, 7, 3, 1]  # east, south, west, north of the centre
    assert front[0].tolist() == [1, 3, -1, -1]


def test_rotation_semantics():
    front = heading_table(grid(["..."]))
    cell, head = apply_actions(front, [1, 1, 1, 1], [EAST] * 4, [FW, CR, CCR, W])
    assert cell.tolist() == [2, 1, 1, 1]
    assert head.tolist() == [EAST, SOUTH, NORTH, EAST]
    with pytest.raises(ValueError, match="wall"):
        apply_actions(front, [2], [EAST], [FW])


def test_conflicts_counts_vertex_and_swap_but_not_a_rotating_cycle():
    assert conflicts([0, 1], [1, 1]) == [("vertex", 0, 1)]
    assert conflicts([0, 1], [1, 0]) == [("edge", 0, 1)]
    assert conflicts([0, 1, 4, 3], [1, 4, 3, 0]) == []  # four robots round a 2x2 block
    assert conflicts([0, 1], [1, 2]) == []  # following


def test_turns_towards_goal_then_moves():
    # robot at the centre facing east, goal north: one counter-clockwise turn, then forward
    w = World(["...", "...", "..."], cell=[4], heading=[EAST], goal=[1])
    assert w.step().tolist() == [CCR]
    assert w.heading.tolist() == [NORTH]
    assert w.step().tolist() == [FW]
    assert w.cell.tolist() == [1]
    # behind: a half turn, clockwise
    w = World(["...", "...", "..."], cell=[4], heading=[EAST], goal=[3])
    assert w.step().tolist() == [CR]
    assert w.step().tolist() == [CR]
    assert w.step().tolist() == [FW]


def test_forward_into_a_robot_that_stays_is_cancelled():
    # A (cell 0, east, goal 2) has priority and reserves B's cell; B faces west and must turn
    # twice to leave east: B turns, A waits instead of running into it.
    w = World(["..."], cell=[0, 1], heading=[EAST, WEST], goal=[2, 2])
    w.since[:] = [5, 0]
    assert w.step().tolist() == [W, CR]
    assert w.cell.tolist() == [0, 1]


def test_head_on_in_a_ring_both_get_through():
    # two robots meet head on along the top of a ring of 10 cells: one is pushed round
    rows = ["....", ".##.", "...."]
    w = World(rows, cell=[0, 3], heading=[EAST, WEST], goal=[3, 0])
    reached = np.zeros(2, dtype=bool)
    for _ in range(40):
        w.step()
        reached |= w.cell == w.goal
    assert reached.all()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lifelong_dense_no_conflict_and_goals_keep_being_reached(seed):
    rows = ["........", ".#..#...", "........", "..##..#.", "........", ".#....#.", "........"]
    free = grid(rows)
    cells = np.flatnonzero(free.ravel())
    rng = np.random.default_rng(seed)
    n = 14
    start = rng.choice(cells, n, replace=False)
    w = World(rows, cell=start, heading=rng.integers(0, 4, n), goal=rng.choice(cells, n), seed=seed)
    done = np.zeros(n, dtype=np.int64)
    for _ in range(300):
        w.step()
        hit = w.cell == w.goal
        done += hit
        w.goal[hit] = rng.choice(cells, int(hit.sum()))
        w.since[hit] = 0
    assert (done >= 3).all(), done.tolist()


@pytest.mark.parametrize("seed", range(6))
def test_compiled_pibt_reserves_what_the_recursive_reference_does(seed):
    rows = ["......#.", ".#..#...", "........", "..##..#.", "#.......", ".#....#."]
    free = grid(rows)
    cells = np.flatnonzero(free.ravel())
    rng = np.random.default_rng(seed)
    n = 20
    cell = rng.choice(cells, n, replace=False).astype(np.int64)
    head = rng.integers(0, 4, n).astype(np.int64)
    goal = np.where(rng.random(n) < 0.8, rng.choice(cells, n), -1).astype(np.int64)
    tables = DistanceTables(free.size, bfs_filler(neighbour_table(free)))
    slots = tables.slots(goal)
    front = heading_table(free)
    order = rng.permutation(n).astype(np.int64)
    noise = rng.random((n, 5)) * 0.5
    commit = np.full(n, -1, dtype=np.int64)
    _, nxt = _step(cell, head, slots, tables.pool, front, order, noise, front.shape[0], commit)
    assert (
        nxt.tolist() == reference_next(front, cell, head, slots, tables.pool, order, noise).tolist()
    )
