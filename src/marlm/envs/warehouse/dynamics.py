"""Movement and collision rules of the warehouse, as one pure function.

:func:`resolve_moves` is the only place where robots move; the env calls it every step and the
shield reuses it to predict what a joint action would do. The rules follow RWARE (Papoudakis et
al. 2021, "Benchmarking Multi-Agent Deep Reinforcement Learning Algorithms in Cooperative Tasks",
``rware/warehouse.py``: a move graph per step where chains and cycles of length >= 3 move and a
two-cycle does not), with one deterministic tie-break where RWARE depends on graph iteration order.
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
    """Apply a joint action under the warehouse collision rules.

    Rules, applied in this order:

    1. A move off the grid or into a non-free cell (wall, shelf) is refused: the robot stays and
       ``blocked_static`` is set.
    2. Several robots aiming at the same cell: only the lowest-index one keeps its move; the
       others stay (``collided``).
    3. A head-on swap (i -> j's cell while j -> i's cell) is refused for both (``collided``).
    4. Repeat until nothing changes: a move into the cell of a robot that stays is refused
       (``collided``). This covers moving into a standing robot and propagates back along a
       chain whose leader was refused.

    Everything left moves: a chain following its leader into a free cell moves as a whole, and a
    rotation (a cycle of three or more robots) moves. Afterwards no two robots share a cell,
    provided none did before.

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
    moving = actions != STAY
    blocked_static = moving & ~ok
    moving &= ok
    collided = np.zeros(n, dtype=bool)

    occupant = {(int(r), int(c)): i for i, (r, c) in enumerate(positions)}
    claimed: dict[tuple[int, int], int] = {}
    for i in np.flatnonzero(moving):  # rule 2: lowest index wins a contested cell
        cell = (int(target[i, 0]), int(target[i, 1]))
        if cell in claimed:
            moving[i], collided[i] = False, True
        else:
            claimed[cell] = int(i)
    for i in np.flatnonzero(moving):  # rule 3: head-on swaps
        j = occupant.get((int(target[i, 0]), int(target[i, 1])))
        if j is not None and moving[j] and (target[j] == positions[i]).all():
            moving[[i, j]], collided[[i, j]] = False, True

    changed = True
    while changed:  # rule 4: into a robot that stays, propagated along chains
        changed = False
        for i in np.flatnonzero(moving):
            j = occupant.get((int(target[i, 0]), int(target[i, 1])))
            if j is not None and not moving[j]:
                moving[i], collided[i], changed = False, True, True

    new_positions = np.where(moving[:, None], target, positions)
    return new_positions, blocked_static, collided
