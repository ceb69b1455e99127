"""``grid_map_of(layout)`` (the lifelong scenario's view of a warehouse) offers as starts only
the floor joined to the stations, the area the loader's reachability check guarantees; it
offered walled-off floor cells too, from where a robot reaches no target."""

from __future__ import annotations

import numpy as np
import pytest

from marlm.envs.warehouse.grid_maps import grid_map_of
from marlm.envs.warehouse.layout import _bfs, parse_layout
from marlm.envs.warehouse.lifelong import LifelongScenario

# Columns 7 of rows 1-2 are floor walled off from the station and the shelf.
POCKET = """\
#########
#P....#.#
#..S..#.#
#{r}....###
#########
"""
WALLED_OFF = {(1, 7), (2, 7)}


@pytest.mark.parametrize("start", ["R", "."], ids=["with R cell", "without R cells"])
def test_grid_map_starts_are_only_floor_joined_to_the_stations(start):
    layout = parse_layout(POCKET.format(r=start), "pocket")
    grid = grid_map_of(layout)
    assert WALLED_OFF.isdisjoint(grid.starts)
    assert set(grid.starts) == set(layout.joined_cells()) - set(layout.stations)
    for s in grid.starts:  # every start reaches every target
        reach = _bfs(layout.free, [s]) >= 0
        assert all(reach[t] for t in grid.targets), s


def test_lifelong_agents_never_start_walled_off():
    grid = grid_map_of(parse_layout(POCKET.format(r="."), "pocket"))
    for seed in range(20):
        sc = LifelongScenario(grid, n_agents=len(grid.starts), seed=seed)
        cells = {tuple(map(int, p)) for p in np.asarray(sc.positions)}
        assert WALLED_OFF.isdisjoint(cells), seed
