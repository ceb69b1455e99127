"""The map as a graph for the rule layer: neighbour table, dead-end depth, BFS distances.

Cell id = ``row * W + col``; action order as :data:`marlm.envs.warehouse.dynamics.MOVES` (stay,
up, down, left, right). Built once per map by :class:`marlm.hybrid.rules.pibt.Pibt` and by the aisle
guidance (:mod:`marlm.hybrid.acting.guidance`). Needs only numpy (numba if present), so the POGEMA
harness can load it by path (``benchmarks/pogema/load_marlm.py``).
"""

from __future__ import annotations

import numpy as np

from marlm.envs.warehouse.dynamics import MOVES

try:  # numba is optional: the POGEMA harness imports this file in a venv that may lack it.
    from numba import njit
except ImportError:  # pragma: no cover - exercised only without numba

    def njit(*args, **kwargs):
        if args and callable(args[0]):
            return args[0]
        return lambda f: f


N_ACTIONS = 5
UNREACHABLE = np.iinfo(np.int32).max // 4
"""Distance value of a cell from which a target cannot be reached (large, never negative)."""


def neighbour_table(free: np.ndarray) -> np.ndarray:
    """``int64[H*W, 5]``: the cell id reached by each action from each cell, -1 if not free.

    Cell id = ``row * W + col``; action order as :data:`marlm.envs.warehouse.dynamics.MOVES`
    (stay, up, down, left, right). A blocked cell has -1 in every column, STAY included.
    """
    free = np.asarray(free, dtype=bool)
    h, w = free.shape
    rows, cols = np.divmod(np.arange(h * w), w)
    table = np.full((h * w, N_ACTIONS), -1, dtype=np.int64)
    for a in range(N_ACTIONS):
        r, c = rows + MOVES[a, 0], cols + MOVES[a, 1]
        inside = (r >= 0) & (r < h) & (c >= 0) & (c < w)
        ok = inside.copy()
        ok[inside] = free[r[inside], c[inside]]
        ok &= free.reshape(-1)
        table[ok, a] = r[ok] * w + c[ok]
    return table


def dead_end_depth(free: np.ndarray) -> np.ndarray:
    """``int64[H*W]``: 0 on cells of the map's cycles, k >= 1 on tree branches (dead ends).

    Peels cells of degree <= 1 layer by layer; the tip of a dead end has the largest k (a tree
    peels entirely). Blocked cells get 0. A branch cell's one neighbour of smaller depth is its
    parent, towards the cycles (:func:`branch_parent`).
    """
    nbr = neighbour_table(free)
    deg = (nbr[:, 1:] >= 0).sum(axis=1)
    alive = np.asarray(free, dtype=bool).reshape(-1).copy()
    depth = np.zeros(len(deg), dtype=np.int64)
    layer = 0
    while True:
        leaves = np.flatnonzero(alive & (deg <= 1))
        if len(leaves) == 0:
            break
        layer += 1
        depth[leaves] = layer
        alive[leaves] = False
        for a in range(1, N_ACTIONS):
            nb = nbr[leaves, a]
            nb = nb[nb >= 0]
            np.subtract.at(deg, nb, 1)
    out = np.zeros_like(depth)
    peeled = depth > 0
    out[peeled] = layer + 1 - depth[peeled]
    return out


def branch_parent(free: np.ndarray) -> np.ndarray:
    """``int64[H*W]``: each dead-end cell's neighbour towards the map's cycles, -1 elsewhere."""
    nbr, depth = neighbour_table(free), dead_end_depth(free)
    parent = np.full(len(depth), -1, dtype=np.int64)
    for c in np.flatnonzero(depth > 0).tolist():
        up = [u for u in nbr[c, 1:].tolist() if u >= 0 and depth[u] < depth[c]]
        parent[c] = up[0] if up else -1
    return parent


@njit(cache=True)
def bfs_distance(nbr, source):  # pragma: no cover - compiled
    """``int32[V]`` BFS distance to ``source`` over ``nbr`` (:func:`neighbour_table`)."""
    v = nbr.shape[0]
    dist = np.full(v, UNREACHABLE, dtype=np.int32)
    queue = np.empty(v, dtype=np.int64)
    dist[source] = 0
    queue[0] = source
    head, tail = 0, 1
    while head < tail:
        c = queue[head]
        head += 1
        for a in range(1, 5):
            u = nbr[c, a]
            if u >= 0 and dist[u] == UNREACHABLE:
                dist[u] = dist[c] + 1
                queue[tail] = u
                tail += 1
    return dist
