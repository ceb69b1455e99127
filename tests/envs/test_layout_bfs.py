"""The compiled breadth-first search gives the plain queue version's distance tables."""

from __future__ import annotations

import numpy as np

from marlm.envs.warehouse.layout import _bfs, _bfs_reference, list_layouts, load_layout


def test_distance_tables_of_every_shipped_layout_match_the_queue_version():
    for name in list_layouts():
        layout = load_layout(name)
        free = layout.free
        for r, c in np.argwhere(free)[::3].tolist():
            assert np.array_equal(_bfs(free, [(r, c)]), _bfs_reference(free, [(r, c)]))
        stations = list(layout.stations)
        assert np.array_equal(_bfs(free, stations), _bfs_reference(free, stations))


def test_random_grids_with_sources_blocked_off_the_map_or_none():
    rng = np.random.default_rng(0)
    for _ in range(200):
        h, w = (int(x) for x in rng.integers(1, 12, 2))
        free = rng.random((h, w)) < 0.7
        n = int(rng.integers(0, 4))
        sources = [(int(rng.integers(-1, h + 1)), int(rng.integers(-1, w + 1))) for _ in range(n)]
        got, want = _bfs(free, sources), _bfs_reference(free, sources)
        assert got.dtype == want.dtype == np.int32
        assert np.array_equal(got, want)
