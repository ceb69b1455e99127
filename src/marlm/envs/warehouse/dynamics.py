"""Movement and collision rules of the warehouse, as pure functions.

:func:`resolve_moves` applies the rules; the shield reuses it to predict what a joint action
would do. Its core, :func:`moving_robots` (which robots move once the map has refused its
moves), is the one implementation of the rules between robots: the env calls it every step,
after refusing moves into walls, shelves and edges from a precomputed table. The rules are RWARE's
(Papoudakis et al. 2021, "Benchmarking Multi-Agent Deep Reinforcement Learning Algorithms in
Cooperative Tasks", ``rware/warehouse.py`` 2.0.0: a move graph per step; in each weakly connected
part a rotation of three or more moves, a swap and anything leading into a standing robot or a
cycle waits, and otherwise the longest chain moves), with one deterministic tie-break (lower
index) where RWARE depends on graph iteration order.
"""

from __future__ import annotations

import numpy as np

STAY, UP, DOWN, LEFT, RIGHT = 0, 1, 2, 3, 4
"""Action codes (Discrete(5))."""

ACTION_NAMES = ("stay", "up", "down", "left", "right")

MOVES = np.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]], dtype=np.int64)
"""int64[5, 2]: (drow, dcol) of each action; row grows downwards."""


def check_moves(positions: np.ndarray, actions: np.ndarray) -> None:
    """The input contract of :func:`resolve_moves` (and its compiled twin in ``batched``).

    Args:
        positions: ``int64[n, 2]`` cells, already converted.
        actions: ``int64[n]`` action codes, already converted.

    Raises:
        ValueError: the counts disagree or an action is outside 0..4.
    """
    n = len(positions)
    if len(actions) != n:
        raise ValueError(f"{n} positions but {len(actions)} actions")
    if n and (actions.min() < 0 or actions.max() >= len(MOVES)):
        raise ValueError(f"actions must be in 0..{len(MOVES) - 1}, got {actions.tolist()}")


def resolve_moves(
    positions: np.ndarray, actions: np.ndarray, free: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Apply a joint action under the warehouse collision rules (RWARE 2.0.0's).

    The rules of RWARE's ``Warehouse.step`` (Papoudakis et al. 2021, ``rware/warehouse.py``): each
    robot is an edge from its cell to the cell it asks for (a robot that stays, or whose move is
    refused by the map, is a loop on its cell). In every weakly connected part of that graph:

    1. A move off the grid or into a non-free cell (wall, shelf) is refused first: the robot
       stays and ``blocked_static`` is set.
    2. A part with a cycle: a rotation of three or more robots moves; a loop (a robot that stays)
       and a two-cycle (a head-on swap) do not move. Every other robot of the part (the tails
       leading into the cycle) stays.
    3. A part without a cycle is a tree of chains ending in one free cell: only the longest chain
       into that cell moves, as a whole; every other robot of the part stays. Where two chains of
       equal length meet in one cell, the robot with the lower index moves (RWARE keeps the first
       edge networkx meets, an order that depends on its set iteration: the only place where the
       outcome here may differ from RWARE's).

    A robot that asked to move and stays without being refused by the map is ``collided``.
    Afterwards no two robots share a cell, provided none did before.

    Differences to RWARE that stay (documented in :class:`~marlm.envs.warehouse.env.WarehouseEnv`):
    moves are absolute (up, down, left, right) rather than turn-and-forward, and shelves always
    block (RWARE lets an unloaded robot drive under shelves).

    Algorithm: the move graph is a functional graph over robots (each robot points at the robot in
    the cell it asks for, or at a free cell). Kahn's topological order peels the chains from their
    leaves; the robots it cannot peel are exactly the cycles. Walking the peeled order gives the
    longest chain into every robot and its best predecessor; from each free cell's winner the
    chain is followed back. Chains that end in a cycle are never reached that way. O(n).

    Args:
        positions: int[n, 2] (row, col) cells, pairwise distinct.
        actions: int[n] action codes in 0..4 (STAY, UP, DOWN, LEFT, RIGHT).
        free: bool[H, W], True where a robot may stand.

    Returns:
        ``(new_positions int64[n, 2], blocked_static bool[n], collided bool[n])``.

    Raises:
        ValueError: shapes disagree or an action is outside 0..4.
    """
    positions = np.asarray(positions, dtype=np.int64).reshape(-1, 2)
    actions = np.asarray(actions, dtype=np.int64).reshape(-1)
    check_moves(positions, actions)
    n = len(positions)

    target = positions + MOVES[actions]
    height, width = free.shape
    inside = (
        (target[:, 0] >= 0) & (target[:, 0] < height) & (target[:, 1] >= 0) & (target[:, 1] < width)
    )
    ok = inside.copy()
    ok[inside] = free[target[inside, 0], target[inside, 1]]
    wants = actions != STAY
    blocked_static = wants & ~ok
    target[~ok] = positions[~ok]  # rule 1: refused by the map, the robot is a loop

    start = list(zip(*positions.T.tolist(), strict=True)) if n else []
    goal = list(zip(*target.T.tolist(), strict=True)) if n else []
    moving = np.array(moving_robots(start, goal), dtype=bool)

    collided = wants & ~blocked_static & ~moving
    new_positions = np.where(moving[:, None], target, positions)
    return new_positions, blocked_static, collided


def moving_robots(start: list, goal: list) -> list[bool]:
    """Rules 2 and 3 of :func:`resolve_moves`: which robots move, once rule 1 is applied.

    The whole move graph in plain Python lists (for the few robots of one warehouse a list walk
    is faster than numpy's per-call overhead; :func:`resolve_moves` and the env both call this).

    Args:
        start: each robot's cell, any hashable key (``(row, col)`` or a flat index), pairwise
            distinct.
        goal: the cell each robot asks for after rule 1 (its own ``start`` when it stays or the
            map refused its move), keys comparable with ``start``.

    Returns:
        ``moving``: one bool per robot; a moving robot ends in its ``goal``, the others stay.
    """
    n = len(start)
    starts = set(start)
    pairs = list(zip(start, goal, strict=True))
    if len(set(goal)) == n and all(g == s or g not in starts for s, g in pairs):
        # No robot asks for a cell where a robot stands or that another asks for: a graph of
        # loops (robots that stay) and single edges into free cells, each of which moves.
        return [g != s for s, g in pairs]
    # The move graph: nxt[i] = robot in the cell i asks for (i itself for a loop), -1 = free cell.
    occupant = {cell: i for i, cell in enumerate(start)}
    nxt = [occupant.get(cell, -1) for cell in goal]
    indegree = [0] * n
    for j in nxt:
        if j >= 0:
            indegree[j] += 1

    order = [i for i in range(n) if not indegree[i]]  # Kahn: leaves first
    for i in order:
        j = nxt[i]
        if j >= 0:
            indegree[j] -= 1
            if not indegree[j]:
                order.append(j)
    on_cycle = [True] * n
    for i in order:
        on_cycle[i] = False

    moving = [False] * n
    if len(order) < n:
        for i in range(n):  # rule 2: rotations of three or more move
            if on_cycle[i]:
                length, j = 1, nxt[i]
                while j != i:
                    length, j = length + 1, nxt[j]
                moving[i] = length >= 3

    # Rule 3: per free cell, the longest chain into it; ties go to the lower index.
    chain = [1] * n  # robots in the longest chain ending with this robot
    best_pred = [-1] * n
    winner: dict = {}
    for i in order:  # leaves first: every robot's predecessors are final before it
        j = nxt[i]
        if j < 0:
            cell = goal[i]
            w = winner.get(cell)
            if w is None or chain[i] > chain[w] or (chain[i] == chain[w] and i < w):
                winner[cell] = i
        elif not on_cycle[j]:
            p = best_pred[j]
            if p < 0 or chain[i] > chain[p] or (chain[i] == chain[p] and i < p):
                best_pred[j] = i
                chain[j] = chain[i] + 1
    for i in winner.values():
        while i >= 0:
            moving[i] = True
            i = best_pred[i]
    return moving


def count_conflicts(
    positions: np.ndarray, actions: np.ndarray, free: np.ndarray
) -> tuple[int, int]:
    """Vertex and swap conflicts of a proposed joint action, before any rule resolves them.

    A move into a wall, a shelf or off the grid counts as staying. A vertex conflict is a pair of
    robots that would end in one cell (two movers, or a mover and a robot that stays); a swap
    conflict is a pair of movers exchanging cells. Following a robot that moves away and a
    rotation of three or more robots are not conflicts (Stern et al. 2019, "Multi-Agent
    Pathfinding: Definitions, Variants, and Benchmarks", section 2.4: vertex and swapping
    conflicts; following and cycle conflicts allowed).

    Args:
        positions: int[n, 2] (row, col) cells, pairwise distinct.
        actions: int[n] action codes in 0..4.
        free: bool[H, W].

    Returns:
        ``(vertex_pairs, swap_pairs)``.

    Raises:
        ValueError: shapes disagree or an action is outside 0..4.
    """
    positions = np.asarray(positions, dtype=np.int64).reshape(-1, 2)
    actions = np.asarray(actions, dtype=np.int64).reshape(-1)
    check_moves(positions, actions)
    target = positions + MOVES[actions]
    height, width = free.shape
    inside = (
        (target[:, 0] >= 0) & (target[:, 0] < height) & (target[:, 1] >= 0) & (target[:, 1] < width)
    )
    ok = inside.copy()
    ok[inside] = free[target[inside, 0], target[inside, 1]]
    end = np.where(ok[:, None], target, positions)
    _, counts = np.unique(end, axis=0, return_counts=True) if len(end) else (None, np.zeros(0))
    vertex = int((counts * (counts - 1) // 2).sum())
    start_of = {(int(r), int(c)): i for i, (r, c) in enumerate(positions)}
    swap = 0
    for i in range(len(positions)):
        j = start_of.get((int(end[i, 0]), int(end[i, 1])))
        if j is not None and j > i and (end[j] == positions[i]).all():
            swap += 1
    return vertex, swap


def numpy_sum(values: list[float]) -> float:
    """``float(np.sum(np.array(values)))`` bit for bit, without numpy: its pairwise summation
    (numpy ``loops_utils.h``: under 8 values a plain loop; up to 128, eight interleaved partial
    sums; above, split in halves at a multiple of 8), added to 0.0 as numpy's reduction does."""
    return 0.0 + _pairwise(values, 0, len(values))


def _pairwise(a: list[float], lo: int, n: int) -> float:
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    if n <= 128:
        r = a[lo : lo + 8]
        whole = n - n % 8
        for i in range(lo + 8, lo + whole, 8):
            for j in range(8):
                r[j] += a[i + j]
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        for i in range(lo + whole, lo + n):
            res += a[i]
        return res
    half = n // 2
    half -= half % 8
    return _pairwise(a, lo, half) + _pairwise(a, lo + half, n - half)
