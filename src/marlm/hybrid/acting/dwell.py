"""Idle robots drive to their dwell cells: the executor side of the dwell policy.

Where idle robots wait is the planning layer's decision
(:class:`marlm.hybrid.planning.dwell.DwellPolicy`); the controller puts each idle robot's dwell
cell into the step view (``StepView.idle_goals``) and :class:`DwellExecutor` scores the drive
there with the distance-to-go score (:func:`marlm.hybrid.acting.scores.downhill_scores`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from marlm.envs.warehouse.dynamics import MOVES
from marlm.envs.warehouse.layout import Layout
from marlm.hybrid.acting.scores import downhill_scores
from marlm.hybrid.core.view import Cell


def dwell_scores(layout: Layout, position: Sequence[int], target: Cell) -> np.ndarray:
    """``float64[5]`` preference of each action (stay, up, down, left, right) for a robot at
    ``position`` driving to ``target``: +1 for a move that shortens its shortest path, 0 for
    staying, -1 for a move that lengthens it, ``-inf`` into a wall, shelf or off the map (the
    distance-to-go score, :func:`marlm.hybrid.acting.scores.downhill_scores`)."""
    dist = layout.distance_from(target)
    free = layout.free
    h, w = free.shape
    r, c = int(position[0]), int(position[1])
    here = int(dist[r, c])
    closer = np.zeros((1, len(MOVES) - 1), dtype=bool)
    blocked = np.zeros((1, len(MOVES) - 1), dtype=bool)
    for a in range(1, len(MOVES)):
        rr, cc = r + int(MOVES[a, 0]), c + int(MOVES[a, 1])
        if not (0 <= rr < h and 0 <= cc < w) or not free[rr, cc]:
            blocked[0, a - 1] = True
        else:
            closer[0, a - 1] = 0 <= int(dist[rr, cc]) < here
    return downhill_scores(closer, blocked, np.ones(1, dtype=bool))[0]


def closer_bits(layout: Layout, target: Cell) -> np.ndarray:
    """``uint8[H * W]`` by flat cell ``row * W + col``: bit ``k`` set when move ``k + 1`` (up,
    down, left, right) from that cell leads to a free cell nearer to ``target`` by shortest
    path (never from or into a cell with no path to it, nor off the map)."""
    dist = layout.distance_from(target).astype(np.int64)
    padded = np.pad(dist, 1, constant_values=-1)
    h, w = dist.shape
    bits = np.zeros((h, w), dtype=np.uint8)
    for k in range(len(MOVES) - 1):
        dr, dc = int(MOVES[k + 1, 0]), int(MOVES[k + 1, 1])
        nb = padded[1 + dr : 1 + dr + h, 1 + dc : 1 + dc + w]
        bits |= (((nb >= 0) & (dist >= 0) & (nb < dist)) << k).astype(np.uint8)
    return bits.reshape(-1)


def dwell_scores_many(
    layout: Layout,
    positions: np.ndarray,
    targets: Sequence[Cell],
    cache: dict[Cell, np.ndarray] | None = None,
) -> np.ndarray:
    """:func:`dwell_scores` of many robots at once: ``float64[n, 5]``, row ``i`` for the robot
    at ``positions[i]`` (``int[n, 2]``) driving to ``targets[i]``; the same values, read from
    each target's :func:`closer_bits` (kept in ``cache`` when given: one lookup per robot)."""
    n = len(targets)
    free = np.asarray(layout.free, dtype=bool)
    h, w = free.shape
    pos = np.asarray(positions, dtype=np.int64).reshape(n, 2)
    nb = pos[:, None, :] + MOVES[None, 1:, :]  # int64[n, 4, 2]: the cell each move leads to
    inside = (nb[..., 0] >= 0) & (nb[..., 0] < h) & (nb[..., 1] >= 0) & (nb[..., 1] < w)
    rr, cc = np.clip(nb[..., 0], 0, h - 1), np.clip(nb[..., 1], 0, w - 1)
    blocked = ~inside | ~free[rr, cc]
    cache = {} if cache is None else cache
    flat = (pos[:, 0] * w + pos[:, 1]).tolist()
    bits = np.empty(n, dtype=np.uint8)
    for i, target in enumerate(targets):
        table = cache.get(target)
        if table is None:
            table = cache[target] = closer_bits(layout, target)
        bits[i] = table[flat[i]]
    closer = (bits[:, None] >> np.arange(len(MOVES) - 1, dtype=np.uint8)[None, :]) & 1 > 0
    return downhill_scores(closer, blocked, np.ones(n, dtype=bool))


class DwellExecutor:
    """An executor whose idle robots drive to their dwell cells; robots with a task are scored
    by ``inner`` as before.

    The dwell cells come with the step view (``view.idle_goals``, set by the controller from
    :meth:`marlm.hybrid.planning.dwell.DwellPolicy.targets`). Its scores are ``inner``'s, with each idle robot's row replaced
    by :func:`dwell_scores` (with ``explore`` too: a robot driving to its dwell cell takes no
    random action).
    """

    def __init__(self, inner: Any, layout: Layout) -> None:
        self.inner = inner
        self.layout = layout
        self.name = inner.name
        self._closer: dict[Cell, np.ndarray] = {}  # target -> closer_bits(layout, target)

    def scores(self, view: Any, rng: np.random.Generator, explore: bool = False) -> np.ndarray:
        """``float64[len(view.agents), 5]``: ``inner``'s scores, idle robots' rows replaced."""
        out = np.array(self.inner.scores(view, rng, explore), dtype=np.float64)
        goals = view.idle_goals
        rows = [k for k, a in enumerate(view.agents) if a in goals]
        if rows:
            targets = [goals[view.agents[k]] for k in rows]
            positions = np.asarray(view.positions)[rows]
            out[rows] = dwell_scores_many(self.layout, positions, targets, self._closer)
        return out

    def warm_up(self) -> None:
        """``inner``'s warm-up."""
        self.inner.warm_up()
