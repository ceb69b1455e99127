"""Distance tables of the targets in use: compact, the same distances as the reference kernels,
and the same moves whatever their capacity."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from marlm.envs.warehouse.dynamics import MOVES, RIGHT
from marlm.hybrid.acting.guidance import guided_distance, guided_filler, traffic_costs
from marlm.hybrid.acting.learned_guidance import params_from
from marlm.hybrid.core.graph import (
    COMPACT_MAX,
    UNREACHABLE,
    DistanceTables,
    bfs_distance,
    bfs_filler,
    neighbour_table,
)
from marlm.hybrid.rules.pibt import Pibt
from marlm.hybrid.simulator import Guidance, GuidedMover, random_instance

WFI = Path(__file__).resolve().parents[3] / "benchmarks" / "pogema" / "data" / "wfi_warehouse.txt"
LEARNED = WFI.with_name("guidance-wfi_warehouse.json")

# 5 x 7: shelves, a dead end, and a walled-in free cell at (4, 6) that no other cell reaches
SMALL = ["...#...", ".#...#.", ".#.#...", "...#.##", "#....#."]


def small_map() -> np.ndarray:
    return np.array([[ch == "." for ch in row] for row in SMALL])


def test_compact_tables_hold_exactly_the_reference_distances():
    free = small_map()
    nbr = neighbour_table(free)
    v = free.size
    cost = traffic_costs(free, 4, penalty=2) * 4 + (np.arange(v * 5).reshape(v, 5) % 3)
    cost[nbr < 0] = 0
    targets = np.flatnonzero(free.reshape(-1))
    for fill, ref in ((bfs_filler(nbr), lambda t: bfs_distance(nbr, t)),
                      (guided_filler(nbr, cost), lambda t: guided_distance(nbr, cost, t))):  # fmt: skip
        tables = DistanceTables(v, fill, max_tables=3)
        slots = tables.slots(targets)  # more targets than capacity: all present for this call
        assert tables.pool.dtype == np.uint16 and tables.builds == len(targets)
        for t, s in zip(targets.tolist(), slots.tolist(), strict=True):
            expected = ref(t)
            got = tables.distances(np.full(v, s), np.arange(v))
            np.testing.assert_array_equal(got, expected)
            assert (tables.pool[s][expected == UNREACHABLE] == COMPACT_MAX + 1).all()
        assert UNREACHABLE in got  # the walled-in cell is there, and unreachable
        tables.slots(targets[:2])  # held: nothing is built again
        assert tables.builds == len(targets)
        tables.clear()
        tables.slots(targets[1:])
        again = tables.slots(targets[:2])  # one to build: the least recently used are dropped
        assert tables.builds == 2 * len(targets)
        assert sorted(tables.cell_of[tables.cell_of >= 0]) == [targets[0], targets[1], targets[-1]]
        assert tables.used[again[1]] > tables.used[tables.slot_of[targets[-1]]]


def test_a_distance_beyond_uint16_widens_the_pool_to_int32_exactly():
    free = np.ones((1, 12), dtype=bool)
    nbr = neighbour_table(free)
    cost = np.where(nbr >= 0, 1, 0).astype(np.int32)
    cost[nbr[:, RIGHT] >= 0, RIGHT] = 9000  # 11 moves right: 99,000 > COMPACT_MAX
    tables = DistanceTables(12, guided_filler(nbr, cost))
    first = tables.slots(np.array([0]))  # to the left end: every distance fits
    assert tables.pool.dtype == np.uint16
    slots = tables.slots(np.array([0, 11]))
    assert tables.pool.dtype == np.int32 and slots[0] == first[0]
    np.testing.assert_array_equal(tables.pool[slots[0]], np.arange(12))
    np.testing.assert_array_equal(tables.pool[slots[1]], 9000 * np.arange(12)[::-1])


def test_stale_tables_are_rebuilt_oldest_first_within_the_refresh_budget():
    """After a change of the costs a held table is rebuilt only while the change's budget lasts
    (here 2 tables' cells), the tables built on the oldest costs first; the others keep the
    distances of the costs they were built on, and a table not held is built on the new ones."""
    free = small_map()
    nbr = neighbour_table(free)
    v = free.size
    base = traffic_costs(free, 4, penalty=2)
    costs = [base, base + 2 * (np.arange(v)[:, None] % 4 == 0), base + 3 * (nbr[:, :1] % 3 == 1)]
    for c in costs:
        c[nbr < 0] = 0
    a, b, c, d = 6, 14, 0, 20  # target cells (free); c first by cell, last by age

    def held(tables, t):  # the table of target t as stored
        return tables.distances(np.full(v, tables.slot_of[t]), np.arange(v))

    def ref(k, t):  # the table of target t on costs k
        return guided_distance(nbr, costs[k], t)

    tables = DistanceTables(v, guided_filler(nbr, costs[0]), refresh_cells=2 * v)
    tables.slots(np.array([a, b, c]))
    tables.restale(guided_filler(nbr, costs[1]))
    tables.slots(np.array([c, c]))  # c rebuilt on costs 1: one table of the budget spent
    tables.restale(guided_filler(nbr, costs[2]))
    tables.slots(np.array([c, d, b, a, -1]))  # d is new; a, b (costs 0) go before c (costs 1)
    assert (tables.builds, tables.refreshed, tables.deferred) == (7, 3, 1)
    for t, k in ((a, 2), (b, 2), (c, 1), (d, 2)):
        np.testing.assert_array_equal(held(tables, t), ref(k, t))
    assert not np.array_equal(ref(1, c), ref(2, c)) and not np.array_equal(ref(0, a), ref(2, a))
    tables.slots(np.array([c]))  # the budget of this change is spent: served again as it is
    assert (tables.refreshed, tables.deferred) == (3, 2)
    tables.refresh_cells = None  # every stale table asked for is rebuilt from the next change
    tables.restale(guided_filler(nbr, costs[0]))
    tables.slots(np.array([a, b, c, d]))
    assert (tables.refreshed, tables.deferred) == (7, 2)
    for t in (a, b, c, d):
        np.testing.assert_array_equal(held(tables, t), ref(0, t))
    with pytest.raises(ValueError, match="refresh_cells"):
        DistanceTables(v, guided_filler(nbr, base), refresh_cells=-1)


def test_tables_are_built_once_per_target_not_again_each_step():
    """Past its capacity, PIBT's swap cache used to be cleared and every table rebuilt each step
    (2,048 tables; here 2): now only the targets not held are built."""
    free = np.ones((4, 6), dtype=bool)
    layer = Pibt(free, 3, seed=0, max_tables=2)
    pos = np.array([[0, 0], [3, 5], [1, 2]])
    goals = np.array([[3, 0], [0, 5], [2, 4]])
    for _ in range(3):
        layer.step(pos, np.zeros((3, 5)), goals)
    assert layer.tables.builds == 3
    with pytest.raises(ValueError, match="max_tables"):
        DistanceTables(24, bfs_filler(layer.nbr), max_tables=0)


@pytest.mark.parametrize("learned", [False, True])
def test_a_cache_smaller_than_the_targets_in_use_gives_the_same_moves(learned):
    """64 robots on POGEMA's warehouse for 40 steps (learned: with the online update every 16):
    tables kept for 4 targets besides those in use, within the default refresh budget, give, step
    for step, the moves of a cache that never drops one and rebuilds every stale table."""
    import json

    grid = np.array([list(r) for r in WFI.read_text().split()])
    free, starts, targets = grid != "#", grid == "@", grid == "$"
    params = params_from(json.loads(LEARNED.read_text())) if learned else None
    g = Guidance(params)
    inst = random_instance(free, 64, 40, seed=5, start_cells=starts, target_cells=targets)
    big = g.mover(free, 64, 5, targets)
    small = g.mover(free, 64, 5, targets)
    small.tables.max_tables = small.layer.tables.max_tables = 4
    big.tables.refresh_cells = None
    assert isinstance(small, GuidedMover) and (small.online is not None) == learned
    pos, idx, rows = inst.starts.copy(), np.zeros(64, dtype=np.int64), np.arange(64)
    for _ in range(inst.steps):
        goals = inst.targets[rows, idx]
        a = big.act(pos, goals)
        np.testing.assert_array_equal(small.act(pos, goals), a)
        pos = pos + MOVES[a]
        idx += (pos == goals).all(axis=1)
    assert small.layer.tables.builds > big.layer.tables.builds  # dropped tables were rebuilt
    assert small.tables.deferred == 0 and (small.tables.refreshed > 0) == learned
    assert idx.sum() == (52 if learned else 53)  # as today's main computes on this instance


def test_grid_kernels_give_the_reference_distances_and_the_generic_path_is_kept():
    """The grid kernels (``uint8`` moves and costs, cell-id offsets instead of the neighbour
    table) hold exactly the reference kernels' distances: on POGEMA's warehouse under learned
    costs with an online extra, with costs above 255 (``int32`` costs), and on a neighbour table
    that is not a grid's (a row that wraps around), where the generic kernels run."""
    from marlm.hybrid.acting.guidance import grid_guided_fill
    from marlm.hybrid.acting.learned_guidance import learned_costs, move_features
    from marlm.hybrid.core.graph import grid_bfs_fill, grid_steps

    grid = np.array([list(r) for r in WFI.read_text().split()])
    free, targets = grid != "#", grid == "$"
    nbr = neighbour_table(free)
    v, w = nbr.shape[0], free.shape[1]
    assert grid_steps(nbr).tolist() == [-w, w, -1, 1]
    hand = traffic_costs(free, 192, penalty=2)
    base = learned_costs(move_features(free, 192, targets), hand, np.full(14, 0.37))
    extra = np.where(nbr >= 0, (np.arange(v)[:, None] * 7 + np.arange(5)) % 9, 0)
    online = (base + extra).astype(np.int32)
    huge = np.where(nbr >= 0, online * 40, 0).astype(np.int32)  # up to 300 > 255: int32 costs
    cells = np.flatnonzero(free.reshape(-1))[::151].tolist()
    out = np.zeros(v, dtype=np.uint16)
    for cost in (hand, online, huge):
        fill = guided_filler(nbr, cost)
        for t in cells:
            fill(t, out)
            ref = guided_distance(nbr, cost, t)
            np.testing.assert_array_equal(
                np.where(out > COMPACT_MAX, UNREACHABLE, out.astype(np.int64)), ref
            )
    assert guided_filler(nbr, hand).__name__ == "grid_fill" and huge.max() > 255
    for t in cells:
        bfs_filler(nbr)(t, out)
        np.testing.assert_array_equal(np.where(out > COMPACT_MAX, UNREACHABLE, out.astype(np.int64)),
                                      bfs_distance(nbr, t))  # fmt: skip
    assert bfs_filler(nbr).__name__ == "grid_fill"
    assert grid_guided_fill.signatures and grid_bfs_fill.signatures  # the grid kernels ran
    wrap = neighbour_table(np.ones((3, 5), dtype=bool))
    wrap[4, RIGHT], wrap[0, 3] = 0, 4  # (0, 4) -> (0, 0) and back: not one offset a move
    cost = np.where(wrap >= 0, 1 + np.arange(15)[:, None] % 3, 0).astype(np.int32)
    assert grid_steps(wrap) is None
    small = np.zeros(15, dtype=np.uint16)
    for t in range(15):
        guided_filler(wrap, cost)(t, small)
        np.testing.assert_array_equal(small, guided_distance(wrap, cost, t))
        bfs_filler(wrap)(t, small)
        np.testing.assert_array_equal(small, bfs_distance(wrap, t))
    assert guided_filler(wrap, cost).__name__ == "fill" == bfs_filler(wrap).__name__
