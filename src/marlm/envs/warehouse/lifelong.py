"""Lifelong multi-agent path finding on a grid: a new target as soon as one is reached.

The scenario of POGEMA's lifelong benchmark (Skrynnik et al., "POGEMA: A Benchmark Platform for
Cooperative Multi-Agent Pathfinding", ICLR 2025, ``GridConfig(on_target="restart")``) and of
lifelong MAPF in general (Li et al., "Lifelong Multi-Agent Path Finding in Large-Scale
Warehouses", AAAI 2021): ``n_agents`` agents start on distinct start cells of a
:class:`~marlm.envs.warehouse.grid_maps.GridMap`; each has one target cell; an agent standing on its
target after a step has reached it and at once gets a new one. Throughput is targets reached per
step.

Moves are resolved by :func:`marlm.envs.warehouse.dynamics.resolve_moves`, the warehouse's rules
(no two agents in one cell, no swap; refused moves stay), so a movement layer that is right in the
warehouse is right here. A step also counts the vertex and swap conflicts of the *proposed* joint
action (:func:`marlm.envs.warehouse.dynamics.count_conflicts`), which a conflict-free planner
keeps at zero.

Randomness: one ``numpy.random.Generator`` per episode, seeded by :meth:`LifelongScenario.reset`.
Starts are drawn uniformly without replacement from the map's start cells; every target is drawn
uniformly from the map's target cells in the agent's connected component other than the cell it
stands on (as POGEMA's ``generate_new_target``), first for agent 0, then 1, ...

Usage::

    from marlm.envs.warehouse.lifelong import LifelongScenario
    sc = LifelongScenario("wfi_warehouse.txt", n_agents=64, seed=0, max_steps=256)
    while not sc.done:
        sc.step(sc.greedy_actions())       # any int[n] of action codes 0..4
    print(sc.throughput)                   # targets reached per step
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from marlm.envs.warehouse.dynamics import MOVES, STAY, count_conflicts, resolve_moves
from marlm.envs.warehouse.grid_maps import GridMap, grid_map_of, load_grid_map
from marlm.envs.warehouse.layout import Layout
from marlm.errors import InputError


@dataclass(frozen=True)
class LifelongStep:
    """What one :meth:`LifelongScenario.step` did.

    Attributes:
        reached: ``bool[n]``: the agent stood on its target after the move (it now has a new one).
        refused: ``bool[n]``: the agent's move was refused (another agent, an obstacle, the edge).
        vertex_conflicts: pairs of agents whose proposed moves end in one cell.
        swap_conflicts: pairs of agents proposing to swap cells.
    """

    reached: np.ndarray
    refused: np.ndarray
    vertex_conflicts: int
    swap_conflicts: int


class LifelongScenario:
    """Agents on a grid, each with a target that is replaced as soon as it is reached.

    Args:
        grid: a :class:`GridMap`, a :class:`Layout` (via :func:`marlm.envs.warehouse.grid_maps.grid_map_of`), a map file
            path (POGEMA, MovingAI, marlm or RWARE format) or a shipped layout name.
        n_agents: agents (>= 1, at most the number of start cells).
        seed: seed of the first episode (``reset()`` is called by the constructor).
        max_steps: episode length in steps (POGEMA's ``max_episode_steps``; 256 in its benchmark).

    Attributes:
        grid: the :class:`GridMap`.
        positions: ``int64[n, 2]`` (row, col) of every agent; read, do not write.
        targets: ``int64[n, 2]`` current target of every agent; read, do not write.
        t: steps taken in this episode.
        reached_total: targets reached in this episode.
        reached_per_agent: ``int64[n]``.
        vertex_conflicts, swap_conflicts: totals over the episode (see :class:`LifelongStep`).

    Raises:
        InputError: a bad argument (names the field), or a start cell with no other target cell in
            its connected component.
    """

    def __init__(
        self,
        grid: GridMap | Layout | str | Path,
        n_agents: int,
        seed: int | None = 0,
        max_steps: int = 256,
    ) -> None:
        if isinstance(grid, Layout):
            grid = grid_map_of(grid)
        elif not isinstance(grid, GridMap):
            grid = load_grid_map(grid)
        self.grid = grid
        for name, value in (("n_agents", n_agents), ("max_steps", max_steps)):
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
                raise InputError(f"must be an integer >= 1, got {value!r}", field=name)
        if n_agents > len(grid.starts):
            raise InputError(
                f"{n_agents} agents but map {grid.name!r} has {len(grid.starts)} start cells; "
                f"use at most {len(grid.starts)} agents",
                source=grid.source,
                field="n_agents",
            )
        self.n_agents = int(n_agents)
        self.max_steps = int(max_steps)
        comp = grid.components()
        by_comp: dict[int, list[tuple[int, int]]] = {}
        for cell in grid.targets:
            by_comp.setdefault(int(comp[cell]), []).append(cell)
        self._targets_by_comp: dict[int, np.ndarray] = {
            k: np.array(v, dtype=np.int64).reshape(-1, 2) for k, v in by_comp.items()
        }
        self._starts = np.array(grid.starts, dtype=np.int64).reshape(-1, 2)
        self.reset(seed)

    # ------------------------------------------------------------------ API
    def reset(self, seed: int | None = None) -> None:
        """New episode: starts and first targets drawn from ``default_rng(seed)``."""
        self.rng = np.random.default_rng(seed)
        pick = self.rng.choice(len(self._starts), size=self.n_agents, replace=False)
        self.positions = self._starts[np.sort(pick)].copy()
        self.targets = np.zeros_like(self.positions)
        for i in range(self.n_agents):
            self.targets[i] = self._draw_target(self.positions[i])
        self.t = 0
        self.reached_total = 0
        self.reached_per_agent = np.zeros(self.n_agents, dtype=np.int64)
        self.vertex_conflicts = 0
        self.swap_conflicts = 0

    def step(self, actions: np.ndarray) -> LifelongStep:
        """Move every agent (``int[n]`` action codes 0..4: stay, up, down, left, right), then
        give a new target to every agent standing on its target.

        Raises:
            ValueError: wrong length or an action outside 0..4.
        """
        actions = np.asarray(actions, dtype=np.int64).reshape(-1)
        vertex, swap = count_conflicts(self.positions, actions, self.grid.free)
        self.positions, blocked, collided = resolve_moves(self.positions, actions, self.grid.free)
        reached = (self.positions == self.targets).all(axis=1)
        for i in np.flatnonzero(reached):
            self.targets[i] = self._draw_target(self.positions[i])
        self.t += 1
        self.reached_total += int(reached.sum())
        self.reached_per_agent += reached
        self.vertex_conflicts += vertex
        self.swap_conflicts += swap
        return LifelongStep(reached, blocked | collided, vertex, swap)

    @property
    def done(self) -> bool:
        """The episode has taken ``max_steps`` steps."""
        return self.t >= self.max_steps

    @property
    def throughput(self) -> float:
        """Targets reached per step so far (POGEMA's ``avg_throughput`` at the episode's end)."""
        return self.reached_total / self.t if self.t else 0.0

    def distance_to_target(self, i: int) -> np.ndarray:
        """``int32[H, W]`` shortest-path distances to agent ``i``'s target (-1 unreachable)."""
        return self.grid.distance_from(tuple(self.targets[i]))

    def greedy_actions(self) -> np.ndarray:
        """``int64[n]``: each agent's first move (up, down, left, right) that shortens its
        distance to its target, ignoring other agents; stay on the target. A baseline, not a
        movement layer."""
        actions = np.full(self.n_agents, STAY, dtype=np.int64)
        h, w = self.grid.height, self.grid.width
        for i, (r, c) in enumerate(self.positions):
            dist = self.distance_to_target(i)
            for a in range(1, len(MOVES)):
                nr, nc = r + MOVES[a, 0], c + MOVES[a, 1]
                if 0 <= nr < h and 0 <= nc < w and 0 <= dist[nr, nc] < dist[r, c]:
                    actions[i] = a
                    break
        return actions

    # ------------------------------------------------------------ internals
    def _draw_target(self, cell: np.ndarray) -> np.ndarray:
        """A target cell in ``cell``'s component other than ``cell``, uniformly from ``rng``."""
        comp = int(self.grid.components()[cell[0], cell[1]])
        pool = self._targets_by_comp.get(comp, np.zeros((0, 2), dtype=np.int64))
        pool = pool[(pool != cell).any(axis=1)]
        if not len(pool):
            raise InputError(
                f"no target cell is reachable from cell {tuple(map(int, cell))} other than itself; "
                "mark more target cells ('$' or '.') in its part of the map",
                source=self.grid.source,
                field="map",
            )
        return pool[self.rng.integers(len(pool))].copy()


__all__ = ["LifelongScenario", "LifelongStep"]
