"""The grid worlds' dynamics as pure functions over tables, without the environment classes.

:func:`move_table` and :func:`race_transition` are the rules ``GridWorld.step`` and
``GridRace.step`` (:mod:`marlm.envs.grid`, which re-exports them) apply, and the compiled training
loops of :mod:`marlm.rl.fast` compile the same function (:mod:`marlm.rl.kernels`), so the two
cannot drift. This module imports only numpy, so a training run loads neither Gymnasium nor
PettingZoo (nor numba, when its loop was built ahead of time: :mod:`marlm.rl.aot`).

Cells are numbered row-major: cell ``row * size + col``; row 0 is the top.
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = [
    "ACTION_NAMES",
    "COLLISION_REWARD",
    "DOWN",
    "GOAL_REWARD",
    "GRIDRACE_AGENTS",
    "GRIDRACE_NAME",
    "LEFT",
    "RIGHT",
    "STAY",
    "STEP_REWARD",
    "UP",
    "move_table",
    "race_transition",
]

# Actions. GridWorld uses the first four; GridRace adds STAY (the default action of difference
# rewards).
UP, DOWN, LEFT, RIGHT, STAY = 0, 1, 2, 3, 4
ACTION_NAMES = ("up", "down", "left", "right", "stay")
_DELTAS = ((-1, 0), (1, 0), (0, -1), (0, 1), (0, 0))

GOAL_REWARD = 1.0
STEP_REWARD = -0.01
COLLISION_REWARD = -0.5


@functools.cache
def move_table(size: int) -> np.ndarray:
    """``int64[size*size, 5]``: the cell reached from each cell by each action (walls: stay put).

    The returned array is read-only and shared (cached per size).
    """
    table = np.empty((size * size, len(_DELTAS)), dtype=np.int64)
    for cell in range(size * size):
        row, col = divmod(cell, size)
        for action, (dr, dc) in enumerate(_DELTAS):
            r, c = row + dr, col + dc
            table[cell, action] = r * size + c if 0 <= r < size and 0 <= c < size else cell
    table.setflags(write=False)
    return table


GRIDRACE_NAME = "gridrace_v0"  # GridRace.metadata["name"]
GRIDRACE_AGENTS = ("agent_0", "agent_1")  # GridRace.possible_agents


def race_transition(p0, p1, a0, a1, active0, active1, moves, goal):
    """One GridRace step as a pure function (no state): the same rule ``GridRace.step`` applies.

    Plain Python, and compiled with numba by :mod:`marlm.rl.kernels` for the training loops (the
    function must stay in the subset numba compiles: scalars, table look-ups, no objects).

    Args:
        p0, p1: cells of agent 0 and 1. a0, a1: their actions (0..4, 4 = stay).
        active0, active1: whether each agent still acts (a finished agent stays where it is).
        moves: ``int64[S, 5]`` from :func:`move_table`. goal: the goal cell.

    Returns:
        ``(n0, n1, r0, r1)``: next cells and each agent's individual reward. A *collision* is both
        agents ending in one non-goal cell with at least one of them having moved there, or the two
        swapping cells: then neither moves, and each agent that tried to move gets -0.5 (one that
        stayed gets the step reward -0.01). Otherwise each agent gets +1 on reaching the goal and
        -0.01 on any other step. A finished agent's reward is 0.
    """
    t0 = moves[p0, a0] if active0 else p0
    t1 = moves[p1, a1] if active1 else p1
    moved0 = t0 != p0
    moved1 = t1 != p1
    collide = False
    if active0 and active1:
        same = t0 == t1 and t0 != goal and (moved0 or moved1)
        swap = t0 == p1 and t1 == p0 and p0 != p1
        collide = same or swap
    if collide:
        r0 = COLLISION_REWARD if moved0 else STEP_REWARD
        r1 = COLLISION_REWARD if moved1 else STEP_REWARD
        return p0, p1, r0, r1
    r0 = 0.0
    r1 = 0.0
    if active0:
        r0 = GOAL_REWARD if t0 == goal else STEP_REWARD
    if active1:
        r1 = GOAL_REWARD if t1 == goal else STEP_REWARD
    return t0, t1, r0, r1
