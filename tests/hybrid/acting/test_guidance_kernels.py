"""The compiled score kernels of the guided mover give exactly the floats of their numpy
references (``DistanceTables.distances`` plus the move's cost, and ``hindrance``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from marlm.envs.warehouse.dynamics import MOVES
from marlm.hybrid.acting.guidance import hindrance_into, table_scores
from marlm.hybrid.acting.learned_guidance import SHIPPED_NARROW_PRIORITY, hindrance, params_from
from marlm.hybrid.core.graph import COMPACT_MAX, UNREACHABLE, neighbour_table, sentinels
from marlm.hybrid.simulator import Guidance, random_instance

WFI = Path(__file__).resolve().parents[3] / "benchmarks" / "pogema" / "data" / "wfi_warehouse.txt"


def reference_scores(tables, slots, cells, nbr, cost):
    """The numpy scores ``GuidedMover.act`` computed before the compiled kernel."""
    nxt = nbr[cells]
    d = tables.distances(slots[:, None], np.maximum(nxt, 0)) + cost[cells]
    return np.where(nxt >= 0, -d.astype(np.float64), -np.inf)


def test_compiled_scores_and_hindrance_equal_the_numpy_references():
    """POGEMA's warehouse, the shipped learned scheme, 96 robots for 20 steps (the tables of
    every target in use), then the same check on an ``int32`` pool; and the hindrance of scores
    full of ties, as the reference computes it."""
    grid = np.array([list(r) for r in WFI.read_text().split()])
    free, starts, targets = grid != "#", grid == "@", grid == "$"
    params = params_from(json.loads(WFI.with_name("guidance-wfi_warehouse.json").read_text()))
    g = Guidance(params, narrow_priority=SHIPPED_NARROW_PRIORITY, hindrance=True)
    inst = random_instance(free, 96, 20, seed=3, start_cells=starts, target_cells=targets)
    mover = g.mover(free, 96, 3, targets)
    nbr, w = mover.layer.nbr, free.shape[1]
    pos, idx, rows = inst.starts.copy(), np.zeros(96, dtype=np.int64), np.arange(96)
    want = np.zeros(nbr.shape[0], dtype=np.uint8)
    for _ in range(inst.steps):
        goals = inst.targets[rows, idx]
        cells, goal_cells = pos @ [w, 1], goals @ [w, 1]
        slots = mover.tables.slots(goal_cells)
        ref = reference_scores(mover.tables, slots, cells, nbr, mover.cost)
        got = np.empty_like(ref)
        pool = mover.tables.pool
        table_scores(pool, slots, cells, nbr, mover.cost, sentinels(pool)[1], got)
        np.testing.assert_array_equal(got, ref)
        tied = np.where(np.isfinite(ref), np.round(ref / 40.0), ref)  # many equal moves
        expected = tied - hindrance(cells, nbr[cells], tied) / 5.0
        hindrance_into(cells, nbr, tied, want)
        np.testing.assert_array_equal(tied, expected)
        assert not want.any()  # the scratch is left zero
        a = mover.act(pos, goals)
        pos = pos + MOVES[a]
        idx += (pos == goals).all(axis=1)
    wide = mover.tables.pool[:, :].astype(np.int32)
    wide[wide > COMPACT_MAX] = UNREACHABLE
    mover.tables.pool = wide  # the pool as it is once a distance exceeds uint16
    ref = reference_scores(mover.tables, slots, cells, nbr, mover.cost)
    table_scores(wide, slots, cells, nbr, mover.cost, sentinels(wide)[1], got)
    np.testing.assert_array_equal(got, ref)
    assert (ref == -np.inf).any() and idx.sum() == 19  # targets reached, as on today's main


def test_compiled_hindrance_on_the_hand_made_case():
    """The reference's 3 x 3 case (A in the centre, B and C heading into it, D below it)."""
    free = np.ones((3, 3), dtype=bool)
    nbr = neighbour_table(free)
    cells = np.array([4, 1, 3, 8])
    nxt = nbr[cells]
    scores = np.where(nxt >= 0, -1.0, -np.inf)
    scores[0] = np.where(nxt[0] >= 0, 0.0, -np.inf)
    scores[1, 2] = scores[2, 4] = scores[3, 3] = 0.0
    expected = scores - hindrance(cells, nxt, scores) / 5.0
    hindrance_into(cells, nbr, scores, np.zeros(9, dtype=np.uint8))
    np.testing.assert_array_equal(scores, expected)
    np.testing.assert_array_equal(scores[0], [-0.4, 0.0, -0.2, 0.0, 0.0])
