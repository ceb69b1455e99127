"""Traffic guidance: soft one-way lanes that turn shortest-path preferences into traffic flow.

PIBT decides who goes first; what each robot *wants* is its preference ranking. Plain
shortest-path preferences send robots head-on into each other in every corridor, and PIBT then
shoves them back and forth. Guidance makes the preferred routes flow one way per lane: a move
against a lane's direction costs ``1 + penalty`` instead of 1, and each robot ranks its moves by
the guided distance-to-go. Nothing is forbidden (a robot may still go against the flow when that
is much shorter, or when it is pushed), so every target stays reachable.

Sources: "highway" edge costs for lifelong MAPF, Cohen, Uras, Koenig, "Feasibility Study: Using
Highways for Bounded-Suboptimal Multi-Agent Path Finding" (SoCS 2015); the guidance graph of
Zhang, Chen, Li, Koenig et al., "Guidance Graph Optimization for Lifelong Multi-Agent Path
Finding" (IJCAI 2024), of which this is the hand-designed "crisscross" baseline; and the
motivation of Chen, Harabor, Li, Stuckey, "Traffic Flow Optimisation for Lifelong Multi-Agent
Path Finding" (AAAI 2024): route by congestion-aware costs, not by distance alone.

Lane directions are read off the map: a row (column) whose cells are at least ``min_free``
free is a horizontal (vertical) aisle; aisles alternate direction in the order they appear
(east, west, east, ... and south, north, south, ...), as one-way streets in a grid city.

Density-aware (:func:`traffic_costs`): the one-way rule pays only where robots would otherwise
meet head-on. Vertical aisles (on a warehouse, the one-wide passages between shelf blocks) are
always one-way; horizontal aisles only when the floor is busy (at least ``busy`` robots per free
cell), because on a nearly empty floor their detours cost more steps than the rare head-on
meetings that PIBT resolves. Measured on POGEMA's ``wfi_warehouse`` (``docs/movement.md``).
"""

from __future__ import annotations

import numpy as np

from marlm.envs.warehouse.dynamics import DOWN, LEFT, RIGHT, UP
from marlm.hybrid.core.graph import (
    UNREACHABLE,
    grid_steps,
    neighbour_table,
    njit,
    sentinels,
    store_row,
)

BUSY = 1 / 16
"""Robots per free cell from which :func:`traffic_costs` makes horizontal aisles one-way too."""


def aisle_costs(
    free: np.ndarray, penalty: int = 2, min_free: float = 0.9, row_penalty: int | None = None
) -> np.ndarray:
    """``int32[H*W, 5]`` cost of each action from each cell: 1, or ``1 + penalty`` against a lane.

    Args:
        free: ``bool[H, W]`` cells a robot may stand on.
        penalty: extra cost of a move against the direction of the aisle it is in (0 = plain
            shortest paths).
        min_free: fraction of free cells that makes a row or column an aisle.
        row_penalty: the extra cost against a horizontal aisle (default ``penalty``; 0 = rows
            two-way).

    Returns:
        costs; STAY costs 1 (waiting costs time); blocked moves cost 0 and are never used.
    """
    free = np.asarray(free, dtype=bool)
    h, w = free.shape
    cost = np.ones((h, w, 5), dtype=np.int32)
    rows = np.flatnonzero(free.mean(axis=1) >= min_free)
    cols = np.flatnonzero(free.mean(axis=0) >= min_free)
    row_penalty = penalty if row_penalty is None else row_penalty
    for k, r in enumerate(rows):
        against = LEFT if k % 2 == 0 else RIGHT  # even aisles run east
        cost[r, :, against] += row_penalty
    for k, c in enumerate(cols):
        against = UP if k % 2 == 0 else DOWN  # even aisles run south
        cost[:, c, against] += penalty
    nbr = neighbour_table(free)
    out = cost.reshape(h * w, 5)
    out[nbr < 0] = 0
    return out


def traffic_costs(
    free: np.ndarray, n_robots: int, penalty: int = 2, min_free: float = 0.9, busy: float = BUSY
) -> np.ndarray:
    """Density-aware :func:`aisle_costs`: vertical aisles one-way always, horizontal ones busy only.

    Args:
        free: ``bool[H, W]``; n_robots: robots on the floor; penalty, min_free: as in
            :func:`aisle_costs`; busy: robots per free cell from which rows are one-way too.

    Returns:
        ``int32[H*W, 5]`` as :func:`aisle_costs`.

    Raises:
        ValueError: ``n_robots`` negative or the map has no free cell.
    """
    free = np.asarray(free, dtype=bool)
    if n_robots < 0 or not free.any():
        raise ValueError("n_robots must be >= 0 and the map must have a free cell")
    dense = n_robots / free.sum() >= busy
    return aisle_costs(free, penalty, min_free, row_penalty=penalty if dense else 0)


@njit(cache=True)
def guided_distance(nbr, cost, target):  # pragma: no cover - compiled
    """``int32[V]``: cheapest cost from every cell to ``target`` under ``cost`` (Dial's algorithm).

    ``nbr``: :func:`marlm.hybrid.rules.pibt.neighbour_table`; ``cost``: :func:`aisle_costs`
    (positive integers). Unreachable cells get :data:`marlm.hybrid.rules.pibt.UNREACHABLE`.
    The reference the table store's kernel (:func:`guided_fill`) is tested against.
    """
    v = nbr.shape[0]
    # reverse adjacency: u -> c with cost[u, a] means c's label relaxes u
    dist = np.full(v, UNREACHABLE, dtype=np.int32)
    max_c = 1
    for u in range(v):
        for a in range(1, 5):
            if cost[u, a] > max_c:
                max_c = cost[u, a]
    n_buckets = max_c + 1
    bucket = np.empty((n_buckets, 4 * v + 1), dtype=np.int64)
    size = np.zeros(n_buckets, dtype=np.int64)
    dist[target] = 0
    bucket[0, 0] = target
    size[0] = 1
    d = 0
    remaining = 1
    # reverse neighbour: u is a predecessor of c if nbr[u, a] == c; on a grid, the neighbours
    # of c are exactly the candidates u, with the opposite action.
    opposite = np.array([0, 2, 1, 4, 3])
    while remaining > 0:
        b = d % n_buckets
        while size[b] > 0:
            size[b] -= 1
            remaining -= 1
            c = bucket[b, size[b]]
            if dist[c] != d:
                continue
            for a in range(1, 5):
                u = nbr[c, a]
                if u < 0:
                    continue
                back = opposite[a]  # the action that moves u into c
                nd = d + cost[u, back]
                if nd < dist[u]:
                    dist[u] = nd
                    nb = nd % n_buckets
                    bucket[nb, size[nb]] = u
                    size[nb] += 1
                    remaining += 1
        d += 1
    return dist


@njit(cache=True)
def guided_fill(nbr, rcost, target, n_buckets, dist, head, link, cell, out, sentinel, cap):
    """:func:`guided_distance` into ``out`` (a pool row); returns the largest finite distance.

    The same distances (shortest-path distances are unique), without allocating: ``nbr`` and
    ``rcost`` (``int32[V, 5]``: ``rcost[c, a]`` the cost of the move from ``nbr[c, a]`` into
    ``c``, :func:`guided_filler`) side by side; Dial's buckets are linked lists in the scratch
    arrays ``head`` (``int32[n_buckets]``), ``link`` and ``cell`` (``int32[4 V + 1]``: a cell
    enters a bucket at most once per neighbour), ``dist`` (``int32[V]``); ``n_buckets`` = the
    largest move cost + 1. ``sentinel`` and ``cap`` as in :func:`marlm.hybrid.core.graph.bfs_fill`.
    """  # pragma: no cover - compiled
    dist[:] = UNREACHABLE
    head[:] = -1
    dist[target] = 0
    cell[0], link[0], head[0] = target, -1, 0
    used, remaining, d, b = 1, 1, 0, 0
    while remaining > 0:
        while head[b] >= 0:
            e = head[b]
            head[b] = link[e]
            remaining -= 1
            c = cell[e]
            if dist[c] != d:
                continue
            for a in range(1, 5):
                u = nbr[c, a]
                if u < 0:
                    continue
                nd = d + rcost[c, a]
                if nd < dist[u]:
                    dist[u] = nd
                    nb = b + rcost[c, a]
                    if nb >= n_buckets:
                        nb -= n_buckets
                    cell[used], link[used], head[nb] = u, head[nb], used
                    used += 1
                    remaining += 1
        d += 1
        b = b + 1 if b + 1 < n_buckets else 0
    return store_row(dist, out, sentinel, cap)


@njit(cache=True)
def grid_guided_fill(rcost, step, target, n_buckets, dist, head, entry, out, sentinel, cap):
    """:func:`guided_fill` on a grid, with a smaller working set: the same distances.

    ``rcost``: ``uint8|int32[V, 4]``, ``rcost[c, k]`` the cost of the move from ``c + step[k]``
    into ``c`` (``step``: ``int64[4]``, the cell-id offsets of up, down, left, right), 0 where
    there is no such move; so the neighbour table is not read (280 KB of ``uint8`` costs on a
    500 x 140 map instead of 2.8 MB of ``int32`` neighbours and costs). Dial's buckets are linked
    lists whose entries hold the cell and the next entry side by side (``entry``: ``int32[2 (4 V
    + 1)]``), and a bucket is taken whole before its cells are expanded (every cost is at least 1,
    so nothing enters the bucket being expanded). ``head``: ``int32[n_buckets]``, ``dist``:
    ``int32[V]`` scratch; ``sentinel``, ``cap`` as in :func:`marlm.hybrid.core.graph.bfs_fill`.
    Returns the largest finite distance.
    """  # pragma: no cover - compiled
    dist[:] = UNREACHABLE
    head[:] = -1
    dist[target] = 0
    entry[0], entry[1], head[0] = target, -1, 0
    used, remaining, d, b = 1, 1, 0, 0
    while remaining > 0:
        e = head[b]
        head[b] = -1
        while e >= 0:
            c, e = entry[2 * e], entry[2 * e + 1]
            remaining -= 1
            if dist[c] != d:
                continue
            for k in range(4):
                w = rcost[c, k]
                if w == 0:
                    continue
                u = c + step[k]
                nd = d + w
                if nd < dist[u]:
                    dist[u] = nd
                    nb = b + w
                    if nb >= n_buckets:
                        nb -= n_buckets
                    entry[2 * used], entry[2 * used + 1], head[nb] = u, head[nb], used
                    used += 1
                    remaining += 1
        d += 1
        b = b + 1 if b + 1 < n_buckets else 0
    return store_row(dist, out, sentinel, cap)


@njit(cache=True)
def reverse_costs(nbr, cost, rcost):  # pragma: no cover - compiled
    """``rcost[c, a]`` = ``cost[nbr[c, a], a']``, the cost of the move from ``nbr[c, a]`` into
    ``c`` (``a'`` the opposite action), 0 where ``nbr[c, a] < 0`` and on STAY; returns the
    smallest cost of an existing move (1 if none). ``nbr``: ``int[V, 5]``; ``cost``:
    ``int32[V, 5]``; ``rcost``: ``int32[V, 5]``, filled."""
    into = np.array([0, 2, 1, 4, 3])  # the action that moves nbr[c, a] into c
    low = 1
    first = True
    for c in range(nbr.shape[0]):
        rcost[c, 0] = 0
        for a in range(1, 5):
            u = nbr[c, a]
            if u < 0:
                rcost[c, a] = 0
                continue
            w = cost[u, into[a]]
            rcost[c, a] = w
            if first or w < low:
                low, first = w, False
    return low


def guided_filler(nbr: np.ndarray, cost: np.ndarray):
    """``fill(target, out) -> int`` for :class:`marlm.hybrid.core.graph.DistanceTables`: guided
    distances under ``cost`` (``int32[V, 5]``, positive on possible moves): on a grid's
    neighbour table :func:`grid_guided_fill`, else :func:`guided_fill` (the same distances)."""
    v = nbr.shape[0]
    rcost = np.empty((v, 5), dtype=np.int32)
    low = reverse_costs(nbr, np.ascontiguousarray(cost, dtype=np.int32), rcost)
    n_buckets = int(max(rcost.max(initial=1), 1)) + 1
    dist, head = np.empty(v, dtype=np.int32), np.empty(n_buckets, dtype=np.int32)
    steps = grid_steps(nbr)
    if steps is not None and low > 0:
        small = np.uint8 if n_buckets <= 256 else np.int32
        moves = np.ascontiguousarray(rcost[:, 1:], dtype=small)  # 0: no move (costs are >= 1)
        entry = np.empty(2 * (4 * v + 1), dtype=np.int32)

        def grid_fill(target: int, out: np.ndarray) -> int:
            return grid_guided_fill(moves, steps, target, n_buckets, dist, head, entry, out,
                                    *sentinels(out))  # fmt: skip

        return grid_fill
    nbr32 = np.ascontiguousarray(nbr, dtype=np.int32)
    link, cell = np.empty(4 * v + 1, dtype=np.int32), np.empty(4 * v + 1, dtype=np.int32)

    def fill(target: int, out: np.ndarray) -> int:
        return guided_fill(nbr32, rcost, target, n_buckets, dist, head, link, cell, out,
                           *sentinels(out))  # fmt: skip

    return fill


@njit(cache=True)
def table_scores(pool, slots, cells, nbr, cost, top, out):  # pragma: no cover - compiled
    """``out[i, a] = -(cost[cells[i], a] + pool[slots[i], nbr[cells[i], a]])``, ``-inf`` for a
    blocked move, a stored value above ``top`` read as :data:`UNREACHABLE`: in one pass, the
    scores :class:`marlm.hybrid.simulator.GuidedMover` computes with numpy as
    :meth:`marlm.hybrid.core.graph.DistanceTables.distances` plus the cost (the same floats).

    ``pool``: ``uint16|int32[rows, V]``; ``slots``, ``cells``: ``int64[n]``; ``nbr``:
    ``int32|int64[V, 5]``; ``cost``: ``int32[V, 5]``; ``top``: the pool's largest finite value
    (:func:`marlm.hybrid.core.graph.sentinels`); ``out``: ``float64[n, 5]``.
    """
    for i in range(cells.shape[0]):
        c, s = cells[i], slots[i]
        for a in range(5):
            u = nbr[c, a]
            if u < 0:
                out[i, a] = -np.inf
                continue
            d = np.int64(pool[s, u])
            if d > top:
                d = UNREACHABLE
            out[i, a] = -np.float64(d + cost[c, a])


@njit(cache=True)
def hindrance_into(cells, nbr, scores, want):  # pragma: no cover - compiled
    """``scores -= hindrance / 5`` in place, compiled: the tie-break of
    :func:`marlm.hybrid.acting.learned_guidance.hindrance` (the reference, the same floats).

    ``cells``: ``int64[n]``; ``nbr``: ``int32|int64[V, 5]``; ``scores``: ``float64[n, 5]``
    (-inf blocked); ``want``: ``uint8[V]`` scratch of zeros, left zero (a cell is the best move
    of at most its 4 neighbours; 70 KB on a 500 x 140 map, so it stays in cache).
    """
    n = cells.shape[0]
    best = np.empty(n, dtype=np.int64)
    for i in range(n):
        k = 0
        for a in range(1, 5):
            if scores[i, a] > scores[i, k]:
                k = a
        best[i] = nbr[cells[i], k]
        if best[i] != cells[i]:
            want[best[i]] += 1
    for i in range(n):
        c = cells[i]
        moving = best[i] != c
        scores[i, 0] -= np.float64(want[c]) / 5.0
        for a in range(1, 5):
            u = nbr[c, a]
            h = np.float64(want[max(u, 0)])
            if moving and best[i] == u:
                h -= 1.0
            scores[i, a] -= h / 5.0
    for i in range(n):
        want[best[i]] = 0


def guided_scores(
    cells: np.ndarray, tables: np.ndarray, nbr: np.ndarray, cost: np.ndarray
) -> np.ndarray:
    """``float64[n, 5]`` preferences: minus (cost of the action + guided distance after it).

    Args:
        cells: ``int64[n]`` cell id of each robot; tables: ``int32[n, V]`` each robot's
            :func:`guided_distance` table; nbr, cost: as in :func:`aisle_costs`.

    Returns:
        scores, higher first; blocked moves ``-inf``.
    """
    nxt = nbr[cells]
    rows = np.arange(len(cells))[:, None]
    d = tables[rows, np.maximum(nxt, 0)].astype(np.float64) + cost[cells]
    return np.where(nxt >= 0, -d, -np.inf)
