"""The map as a graph for every layer: neighbour table, dead-end depth, BFS distances, and
the store of distance tables to the targets in use (:class:`DistanceTables`, PIBT's and the
guidance's).

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

    def njit(*args, **kwargs):  # type: ignore[no-redef]  # numba's decorator, as a no-op
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
    dist = np.empty(v, dtype=np.int32)
    bfs_into(nbr, source, dist, np.empty(v, dtype=np.int64))
    return dist


@njit(cache=True)
def bfs_into(nbr, source, dist, queue):  # pragma: no cover - compiled
    """BFS distance to ``source`` into ``dist`` (``int32[V]``), ``queue`` (``int[V]``) scratch."""
    dist[:] = UNREACHABLE
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


COMPACT_MAX = np.iinfo(np.uint16).max - 1
"""Largest finite distance a ``uint16`` table holds; ``COMPACT_MAX + 1`` there means unreachable."""


@njit(cache=True)
def bfs_fill(nbr, source, dist, queue, out, sentinel, cap):  # pragma: no cover - compiled
    """:func:`bfs_distance` into ``out`` (a pool row); returns the largest finite distance.

    ``dist``, ``queue``: ``int32[V]`` scratch; finite distances above ``cap`` are written as
    ``cap`` (the caller sees the returned maximum and widens the pool), unreachable cells as
    ``sentinel`` (:func:`sentinels`).
    """
    bfs_into(nbr, source, dist, queue)
    return store_row(dist, out, sentinel, cap)


@njit(cache=True)
def store_row(dist, out, sentinel, cap):  # pragma: no cover - compiled
    """Copy ``int32`` distances into ``out`` (unreachable as ``sentinel``, others at most
    ``cap``); returns the largest finite distance (0 if none)."""
    top = 0
    for c in range(dist.shape[0]):
        d = dist[c]
        if d < UNREACHABLE:
            out[c] = min(d, cap)
            top = max(top, d)
        else:
            out[c] = sentinel
    return top


def sentinels(out: np.ndarray) -> tuple[int, int]:
    """``(unreachable value, largest finite value)`` of a table row of ``out``'s dtype."""
    if out.dtype == np.uint16:
        return COMPACT_MAX + 1, COMPACT_MAX
    return UNREACHABLE, UNREACHABLE - 1


@njit(cache=True)
def grid_bfs_fill(moves, step, source, dist, queue, out, sentinel, cap):  # pragma: no cover
    """:func:`bfs_fill` on a grid, with a smaller working set: the same distances.

    ``moves``: ``uint8[V, 4]``, 1 where the move from ``c`` to ``c + step[k]`` exists (``step``:
    ``int64[4]``, the cell-id offsets of up, down, left, right; :func:`grid_steps`), so the
    neighbour table is not read (280 KB instead of 1.4 MB on a 500 x 140 map). ``dist``,
    ``queue``: ``int32[V]`` scratch; returns the largest finite distance.
    """
    dist[:] = UNREACHABLE
    dist[source] = 0
    queue[0] = source
    head, tail = 0, 1
    while head < tail:
        c = queue[head]
        head += 1
        dc = dist[c] + 1
        for k in range(4):
            if moves[c, k]:
                u = c + step[k]
                if dist[u] == UNREACHABLE:
                    dist[u] = dc
                    queue[tail] = u
                    tail += 1
    return store_row(dist, out, sentinel, cap)


@njit(cache=True)
def _offsets(nbr, steps):  # pragma: no cover - compiled
    """True if every move ``a`` of ``nbr`` is ``c -> c + steps[a - 1]`` (``steps`` filled)."""
    seen = np.zeros(4, dtype=np.bool_)
    for c in range(nbr.shape[0]):
        for k in range(4):
            u = nbr[c, k + 1]
            if u < 0:
                continue
            if not seen[k]:
                seen[k], steps[k] = True, u - c
            elif u - c != steps[k]:
                return False
    return True


def grid_steps(nbr: np.ndarray) -> np.ndarray | None:
    """``int64[4]`` the cell-id offsets of up, down, left, right if every move of ``nbr``
    (:func:`neighbour_table`) is ``c -> c + offset``, else None."""
    steps = np.zeros(4, dtype=np.int64)
    return steps if nbr.shape[0] and _offsets(nbr, steps) else None


def bfs_filler(nbr: np.ndarray):
    """``fill(target, out) -> int`` for :class:`DistanceTables`: BFS steps (on a grid's
    neighbour table :func:`grid_bfs_fill`, else :func:`bfs_fill`: the same distances)."""
    v = nbr.shape[0]
    dist, queue = np.empty(v, dtype=np.int32), np.empty(v, dtype=np.int32)
    steps = grid_steps(nbr)
    if steps is not None:
        moves = np.ascontiguousarray(nbr[:, 1:] >= 0, dtype=np.uint8)

        def grid_fill(target: int, out: np.ndarray) -> int:
            return grid_bfs_fill(moves, steps, target, dist, queue, out, *sentinels(out))

        return grid_fill
    nbr32 = np.ascontiguousarray(nbr, dtype=np.int32)

    def fill(target: int, out: np.ndarray) -> int:
        return bfs_fill(nbr32, target, dist, queue, out, *sentinels(out))

    return fill


REFRESH_CELLS = 1 << 20
"""Default refresh budget of :class:`DistanceTables`: cells of stale tables rebuilt per change of
the costs (1,048,576: 690 tables of POGEMA's 33 x 46 ``wfi_warehouse``, more than its robots
ever ask for in one period, so there every stale table is rebuilt; 14 tables of a 500 x 140
map, where 10,000 robots hold about 8,600)."""


class DistanceTables:
    """Distance tables to the target cells in use, built once each, kept compact and shared.

    One row of ``pool`` per target cell: ``pool[slot_of[t], c]`` is the distance from cell ``c``
    to target ``t`` under ``fill`` (BFS steps for PIBT's swap, guided cost for the guidance). A
    table is built the first time a target is asked for and kept until :meth:`clear` or until
    more than ``max_tables`` are kept, when the least recently used ones that no robot needs now
    are dropped; the targets of one call are always all present, so the capacity only bounds
    what is kept between calls, never the answer.

    When the costs change (:meth:`restale`), the tables held become stale. A stale table asked
    for is rebuilt on the new costs while the change's refresh budget lasts (``refresh_cells``
    cells of rebuilding, ``V`` a table; the tables built on the oldest costs first, then by
    target cell), else it is served as it was built, on older costs, and counted in
    ``deferred``; a table not held is always built on the current costs. With a budget that
    covers every table asked for (``refresh_cells=None``, or a small map), each one is rebuilt:
    the same distances as dropping every table at the change. This bounds the CPU of a change
    to ``refresh_cells`` cells of rebuilding, whatever the number of tables held.

    Storage: ``uint16[rows, V]`` (2 bytes a cell: 140 KB a table on a 500 x 140 map), unreachable
    ``COMPACT_MAX + 1``; if a table ever holds a finite distance above :data:`COMPACT_MAX` the pool
    becomes ``int32`` (unreachable :data:`UNREACHABLE`), so values never saturate. Both orders are
    the same, so PIBT's comparisons do not depend on the dtype; :meth:`distances` maps the
    sentinel back to :data:`UNREACHABLE` for scores.

    Args:
        n_cells: ``V = H * W``; fill: ``fill(target, out) -> int``, writes the table of ``target``
            into ``out`` (the pool's row, of its dtype) and returns its largest finite distance;
        max_tables: tables kept between calls; more only while one call needs more (memory:
            ``2 * V`` bytes a table, ``max(max_tables, targets of one call)`` tables at most,
            the pool grown by half at a time);
        refresh_cells: cells of stale tables rebuilt per change of the costs
            (:data:`REFRESH_CELLS`), None = every stale table asked for; read at each change.

    Counters: ``builds`` tables built (new or rebuilt), ``refreshed`` stale ones rebuilt,
    ``deferred`` stale tables served (once per call that asked for one).

    Raises:
        ValueError: ``max_tables`` < 1 or ``refresh_cells`` < 0.
    """

    def __init__(
        self, n_cells: int, fill, max_tables: int = 4096, refresh_cells: int | None = REFRESH_CELLS
    ) -> None:
        if max_tables < 1:
            raise ValueError(f"max_tables must be >= 1, got {max_tables}")
        if refresh_cells is not None and refresh_cells < 0:
            raise ValueError(f"refresh_cells must be >= 0 or None, got {refresh_cells}")
        self.fill, self.max_tables, self.refresh_cells = fill, max_tables, refresh_cells
        self.slot_of = np.full(n_cells, -1, dtype=np.int64)
        self.pool = np.zeros((min(64, max_tables), n_cells), dtype=np.uint16)
        self.cell_of = np.full(len(self.pool), -1, dtype=np.int64)  # -1: a free row
        self.used = np.zeros(len(self.pool), dtype=np.int64)  # call count of the last use
        self.version = 0  # of the costs: one more at each restale()
        self.built_on = np.zeros(len(self.pool), dtype=np.int64)  # version each row was built on
        self.credit: int | None = refresh_cells  # cells of rebuilding left for this change
        self.calls = self.builds = self.refreshed = self.deferred = 0

    def clear(self) -> None:
        """Forget every table."""
        self.slot_of[:] = -1
        self.cell_of[:] = -1

    def restale(self, fill) -> None:
        """The costs changed: ``fill`` builds on the new ones; every table held becomes stale,
        rebuilt when asked for within this change's budget of ``refresh_cells`` cells."""
        self.fill, self.version, self.credit = fill, self.version + 1, self.refresh_cells

    def slots(self, goal_cells: np.ndarray) -> np.ndarray:
        """``int64[n]`` the pool row of each target cell (``goal_cells``: ``int64[n]``, -1 =
        none, row -1), building the missing tables."""
        self.calls += 1
        has = goal_cells >= 0
        slots = np.where(has, self.slot_of[np.maximum(goal_cells, 0)], -1)
        missing = np.unique(goal_cells[has & (slots < 0)])
        if len(missing):
            self._build(missing, goal_cells[has])
            slots = np.where(has, self.slot_of[np.maximum(goal_cells, 0)], -1)
        if self.version:  # the costs changed at least once: some tables may be stale
            asked = np.zeros(len(self.pool), dtype=bool)  # np.unique of 10,000 rows: 2 ms
            asked[slots[has]] = True
            stale = np.flatnonzero(asked & (self.built_on < self.version))
            if len(stale):
                self._refresh(stale)
        self.used[slots[has]] = self.calls
        return slots

    def _refresh(self, stale: np.ndarray) -> None:
        """Rebuild the stale rows ``stale`` on the current costs, oldest costs first, while the
        budget lasts; the rest are served as they are."""
        v = self.pool.shape[1]
        k = len(stale) if self.credit is None else min(len(stale), self.credit // v)
        if k:
            order = stale[np.lexsort((self.cell_of[stale], self.built_on[stale]))]
            for row in order[:k].tolist():
                self._fill_row(int(self.cell_of[row]), row)
        if self.credit is not None:
            self.credit -= k * v
        self.refreshed += k
        self.builds += k
        self.deferred += len(stale) - k

    def distances(self, slots: np.ndarray, cells: np.ndarray) -> np.ndarray:
        """``int64[...]`` ``pool[slots, cells]`` (broadcast), unreachable as :data:`UNREACHABLE`."""
        d = self.pool[slots, cells].astype(np.int64)
        if self.pool.dtype == np.uint16:
            d[d > COMPACT_MAX] = UNREACHABLE
        return d

    def _free_rows(self, k: int, keep: np.ndarray) -> np.ndarray:
        """``k`` free rows: drop least recently used tables not in ``keep``, grow the pool."""
        free = np.flatnonzero(self.cell_of < 0)
        kept = len(self.pool) - len(free)
        over = kept + k - self.max_tables
        if over > 0:
            held = np.flatnonzero(self.cell_of >= 0)
            spare = held[~np.isin(self.cell_of[held], keep)]
            drop = spare[np.argsort(self.used[spare], kind="stable")[:over]]
            self.slot_of[self.cell_of[drop]] = -1
            self.cell_of[drop] = -1
            free = np.flatnonzero(self.cell_of < 0)
        if len(free) < k:  # grow by half the pool (doubling up to max_tables): few copies
            n = len(self.pool)
            grown = min(2 * n, max(self.max_tables, n + n // 2))
            self._resize(max(grown, n + k - len(free)), self.pool.dtype)
            free = np.flatnonzero(self.cell_of < 0)
        return free[:k]

    def _resize(self, rows: int, dtype) -> None:
        grown = np.zeros((rows, self.pool.shape[1]), dtype=dtype)
        old = self.pool[: min(rows, len(self.pool))]
        if dtype != self.pool.dtype:  # uint16 -> int32: the sentinel becomes UNREACHABLE
            old = np.where(old > COMPACT_MAX, UNREACHABLE, old.astype(np.int64))
        grown[: len(old)] = old
        self.pool = grown
        extra = rows - len(self.cell_of)
        self.cell_of = np.concatenate([self.cell_of, np.full(extra, -1, dtype=np.int64)])
        self.used = np.concatenate([self.used, np.zeros(extra, dtype=np.int64)])
        self.built_on = np.concatenate([self.built_on, np.zeros(extra, dtype=np.int64)])

    def _build(self, missing: np.ndarray, in_use: np.ndarray) -> None:
        rows = self._free_rows(len(missing), in_use)
        for cell, row in zip(missing.tolist(), rows.tolist(), strict=True):
            self._fill_row(cell, row)
            self.slot_of[cell], self.cell_of[row] = row, cell
        self.builds += len(missing)

    def _fill_row(self, cell: int, row: int) -> None:
        """Table of target ``cell`` on the current costs into ``pool[row]`` (widening if need be)."""
        top = self.fill(cell, self.pool[row])
        if top > COMPACT_MAX and self.pool.dtype == np.uint16:
            self._resize(len(self.pool), np.int32)
            self.fill(cell, self.pool[row])
        self.built_on[row] = self.version
