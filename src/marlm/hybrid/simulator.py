"""The guidance simulator: PIBT over guided scores on lifelong instances, no environment.

A :class:`GuidedMover` composes the acting layer's guidance (the hand costs of
:mod:`marlm.hybrid.acting.guidance`, the learned costs and online update of
:mod:`marlm.hybrid.acting.learned_guidance`) with the rule layer's PIBT
(:class:`marlm.hybrid.rules.pibt.Pibt`); :func:`simulate` runs it on a :class:`LifelongInstance`
under POGEMA's lifelong rules and returns the throughput that the guidance's CMA-ES training
(:mod:`marlm.experiments.guidance_training`) maximises and the POGEMA harness reports.

The module needs only numpy (numba if present), so the POGEMA harness loads it by path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from marlm.envs.warehouse.dynamics import MOVES
from marlm.hybrid.acting.guidance import guided_filler, hindrance_into, table_scores, traffic_costs
from marlm.hybrid.acting.learned_guidance import (
    N_PARAMS,
    OnlineAdapter,
    density_feature,
    learned_costs,
    move_features,
    online_adapter,
)
from marlm.hybrid.core.graph import (
    UNREACHABLE,
    DistanceTables,
    bfs_distance,
    neighbour_table,
    sentinels,
)
from marlm.hybrid.rules.pibt import Pibt


class GuidedMover:
    """PIBT over guided distance-to-go preferences: the hand guidance or a learned one.

    Each robot ranks its moves by ``cost[cell, a] + guided_distance(next cell, target)``
    (:func:`marlm.hybrid.acting.guidance.guided_scores`), one distance table per target cell in use,
    built once and rebuilt when the online update changes the costs, within the store's refresh
    budget (:class:`marlm.hybrid.core.graph.DistanceTables`: past it, a table is served on the
    costs it was built on); the joint move is PIBT's (:class:`marlm.hybrid.rules.pibt.Pibt`).

    Args:
        free: ``bool[H, W]``; n_robots; seed: PIBT's tie-breaks; swap: LaCAM3's swap.
        costs: ``int32[V, 5]`` guidance costs (positive on possible moves).
        online: an :class:`OnlineAdapter` over ``costs``, or None (static costs).
        max_tables: distance tables kept between steps (more while more targets are in use),
            by the guidance and by PIBT each (:class:`marlm.hybrid.core.graph.DistanceTables`).
        narrow_priority: added to PIBT's priority of a robot standing on a cell with at most 2
            free neighbours (a one-wide passage), so it moves before the robots around it
            (0 = PIBT's own order; any value keeps PIBT's guarantees, it only reorders).
        hindrance: break ties between moves of equal guided cost by :func:`hindrance` (it
            only reorders a robot's equal-scored moves, so PIBT's guarantees hold).

    Attributes:
        goal_priority, priority_noise: 0 here; a subclass that reorders PIBT by distance to go
            or draws its tie-breaks again every step sets them (read by the rollouts of
            ``benchmarks/pogema/rollout_planner.py``).
    """

    goal_priority = 0.0
    priority_noise = 0.0

    def __init__(
        self,
        free: np.ndarray,
        n_robots: int,
        costs: np.ndarray,
        seed: int = 0,
        swap: bool = True,
        online: OnlineAdapter | None = None,
        max_tables: int = 4096,
        narrow_priority: float = 0.0,
        hindrance: bool = False,
    ) -> None:
        self.hindrance = hindrance
        self.layer = Pibt(free, n_robots, seed=seed, swap=swap, max_tables=max_tables)
        self.width = self.layer.width
        self.online = online
        self.cost = np.asarray(online.costs() if online else costs, dtype=np.int32)
        # one compact table per target cell in use, built once, rebuilt when the costs change
        nbr = self.layer.nbr
        self.tables = DistanceTables(nbr.shape[0], guided_filler(nbr, self.cost), max_tables)
        deg = (self.layer.nbr[:, 1:] >= 0).sum(axis=1)
        self.bias = narrow_priority * (deg <= 2) if narrow_priority else None  # float64[V]
        self._want = np.zeros(nbr.shape[0], dtype=np.uint8)  # hindrance_into's scratch
        self._nbr32 = np.ascontiguousarray(nbr, dtype=np.int32)  # half the cache lines

    def priority(self, cells: np.ndarray, slots: np.ndarray) -> np.ndarray | None:
        """``float64[n]`` added to PIBT's priority of the robots at ``cells`` (``int64[n]`` cell
        indices; ``slots``: their targets' rows in :attr:`tables`), or None for PIBT's own order:
        the passage priority here. Any value keeps PIBT's guarantees: it only reorders robots."""
        return None if self.bias is None else self.bias[cells]

    def act(self, positions: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """``int64[n]`` collision-free actions for robots at ``positions`` (``int[n, 2]``) with
        targets ``targets`` (``int[n, 2]``, every robot has one)."""
        cells = positions[:, 0] * self.width + positions[:, 1]
        goal_cells = targets[:, 0] * self.width + targets[:, 1]
        slots = self.tables.slots(goal_cells)
        # minus (cost of the move + guided distance after it), -inf blocked; then the
        # tie-break: one compiled pass each (guided_scores and hindrance are the references)
        scores = np.empty((len(cells), 5), dtype=np.float64)
        pool = self.tables.pool
        table_scores(pool, slots, cells, self._nbr32, self.cost, sentinels(pool)[1], scores)
        if self.hindrance:
            hindrance_into(cells, self._nbr32, scores, self._want)
        actions = self.layer.step(positions, scores, targets, self.priority(cells, slots))
        if self.online is not None:
            after = cells + np.array([0, -self.width, self.width, -1, 1])[actions]
            if self.online.observe(cells, goal_cells, after):
                self.cost = self.online.costs()
                # the tables are stale: rebuilt within the store's refresh budget
                self.tables.restale(guided_filler(self.layer.nbr, self.cost))
        return actions


@dataclass(frozen=True)
class LifelongInstance:
    """One lifelong MAPF episode: starts and each robot's target sequence (POGEMA ``restart``).

    Attributes:
        free: ``bool[H, W]``; starts: ``int64[n, 2]`` (row, col);
        targets: ``int64[n, m, 2]`` each robot's targets in order (rows past its last target
            are -1); steps: episode length; seed: the instance's seed (PIBT's tie-breaks too).
    """

    free: np.ndarray
    starts: np.ndarray
    targets: np.ndarray
    steps: int
    seed: int = 0


def random_instance(
    free: np.ndarray,
    n_robots: int,
    steps: int,
    seed: int,
    start_cells: np.ndarray | None = None,
    target_cells: np.ndarray | None = None,
) -> LifelongInstance:
    """A lifelong instance drawn like POGEMA's: distinct starts, then each robot's targets drawn
    uniformly from ``target_cells`` by its own generator, never its current cell.

    Args:
        free: ``bool[H, W]``; start_cells / target_cells: ``bool[H, W]`` (default: free cells).
        steps: episode length (enough targets are drawn for a robot that never waits).

    Raises:
        ValueError: fewer start cells than robots, or fewer than 2 target cells.
    """
    free = np.asarray(free, dtype=bool)
    starts_ok = np.argwhere(free if start_cells is None else start_cells & free)
    targets_ok = np.argwhere(free if target_cells is None else target_cells & free)
    if len(starts_ok) < n_robots or len(targets_ok) < 2:
        raise ValueError("need at least n_robots start cells and 2 target cells")
    rng = np.random.default_rng(seed)
    starts = starts_ok[rng.choice(len(starts_ok), n_robots, replace=False)]
    m = steps + 1
    targets = np.empty((n_robots, m, 2), dtype=np.int64)
    for i, sub in enumerate(rng.spawn(n_robots)):
        here = starts[i]
        for k in range(m):
            t = targets_ok[sub.integers(len(targets_ok))]
            while (t == here).all():
                t = targets_ok[sub.integers(len(targets_ok))]
            targets[i, k] = here = t
    return LifelongInstance(free, starts.astype(np.int64), targets, steps, seed)


@dataclass(frozen=True)
class Guidance:
    """A guidance scheme for one map and robot count: the hand rule, or learned weights.

    Args:
        params: ``float[N_PARAMS]`` (MOVE_FEATURES weights, then ONLINE_PARAMS), None = the hand
            guidance; penalty: the hand rule's penalty; period, bound: of :class:`OnlineAdapter`.
        min_density: robots per free cell below which the hand guidance is used even with
            ``params`` (0 = learned at every density; :data:`SHIPPED_MIN_DENSITY` ships).
        narrow_priority: of :class:`GuidedMover`, with learned ``params`` only (the hand
            guidance keeps PIBT's own order; :data:`SHIPPED_NARROW_PRIORITY` ships).
        hindrance: of :class:`GuidedMover`, with learned ``params`` only
            (:data:`SHIPPED_HINDRANCE` ships).
    """

    params: np.ndarray | None = None
    penalty: int = 2
    period: int = 16
    bound: float = 2.0
    min_density: float = 0.0
    narrow_priority: float = 0.0
    hindrance: bool = False

    def mover(
        self,
        free: np.ndarray,
        n_robots: int,
        seed: int,
        target_cells: np.ndarray | None = None,
        swap: bool = True,
    ) -> GuidedMover:
        """The :class:`GuidedMover` of this scheme on ``free`` with ``n_robots``."""
        hand = traffic_costs(free, n_robots, penalty=self.penalty)
        quiet = n_robots < self.min_density * np.asarray(free, dtype=bool).sum()
        if self.params is None or quiet:
            return GuidedMover(free, n_robots, hand, seed=seed, swap=swap)
        params = np.asarray(self.params, dtype=np.float64).reshape(-1)
        if params.shape != (N_PARAMS,):
            raise ValueError(f"params must have {N_PARAMS} entries, got {params.shape}")
        base = learned_costs(move_features(free, n_robots, target_cells), hand, params)
        rho = density_feature(free, n_robots)
        nbr = neighbour_table(free)
        online = online_adapter(base, nbr, params, rho, self.period, self.bound)
        return GuidedMover(
            free,
            n_robots,
            base,
            seed,
            swap,
            online,
            narrow_priority=self.narrow_priority,
            hindrance=self.hindrance,
        )


class ConflictError(RuntimeError):
    """A joint move that leaves the free cells, puts two robots in one cell, or swaps two."""


def _check_joint_move(pos: np.ndarray, new: np.ndarray, free: np.ndarray, step: int) -> None:
    """Raise :class:`ConflictError` naming the first broken rule of the move ``pos -> new``
    (``int64[n, 2]`` each) on ``free`` (``bool[H, W]``) at ``step``."""
    h, w = free.shape
    inside = (new[:, 0] >= 0) & (new[:, 0] < h) & (new[:, 1] >= 0) & (new[:, 1] < w)
    if not inside.all() or not free[new[:, 0], new[:, 1]].all():
        raise ConflictError(f"step {step}: a robot moves into a wall or off the map")
    cells, after = pos[:, 0] * w + pos[:, 1], new[:, 0] * w + new[:, 1]
    if len(np.unique(after)) != len(after):
        raise ConflictError(f"step {step}: vertex conflict (two robots in one cell)")
    where = {c: i for i, c in enumerate(cells.tolist())}
    for i, c in enumerate(after.tolist()):
        j = where.get(c)
        if j is not None and j != i and after[j] == cells[i]:
            raise ConflictError(f"step {step}: robots {i} and {j} swap cells")


def simulate(
    instance: LifelongInstance,
    guidance: Guidance,
    target_cells: np.ndarray | None = None,
    swap: bool = True,
    check: bool = False,
) -> float:
    """Throughput (targets reached per step) of ``guidance`` on a lifelong ``instance``.

    Same rules as POGEMA's lifelong ``restart`` episode under a collision-free policy: every
    robot moves as the layer chose; one that stands on its target after the step counts one and
    gets its next target, seen from the next step on.

    Args:
        check: check after every step that no robot left the free cells, no two robots share
            a cell and none swapped (the layer guarantees it; tests turn this on).

    Raises:
        ValueError: a robot ran out of targets (the instance is too short for ``steps``).
        ConflictError: ``check`` and a joint move broke one of those rules (never, by PIBT's
            guarantee).
    """
    n = len(instance.starts)
    mover = guidance.mover(instance.free, n, instance.seed, target_cells, swap)
    pos = instance.starts.copy()
    idx = np.zeros(n, dtype=np.int64)
    rows = np.arange(n)
    m = instance.targets.shape[1]
    reached = 0
    for step in range(instance.steps):
        if (idx >= m).any() or (instance.targets[rows, np.minimum(idx, m - 1), 0] < 0).any():
            raise ValueError("a robot ran out of targets: the instance is too short")
        goals = instance.targets[rows, idx]
        actions = mover.act(pos, goals)
        new = pos + MOVES[actions]
        if check:
            _check_joint_move(pos, new, instance.free, step)
        pos = new
        hit = (pos == goals).all(axis=1)
        reached += int(hit.sum())
        idx += hit
    return reached / instance.steps


def free_flow_bound(instance: LifelongInstance) -> float:
    """Throughput if every robot were alone: each follows shortest paths (BFS) through its own
    target sequence, one move per step; targets reached within ``steps``, summed, per step.

    An upper bound on any collision-free policy's throughput on ``instance`` (other robots can
    only delay a robot). Raises ValueError if a target is unreachable from the one before.
    """
    nbr = neighbour_table(instance.free)
    w = instance.free.shape[1]
    tables: dict[int, np.ndarray] = {}
    reached = 0
    for i in range(len(instance.starts)):
        here = int(instance.starts[i, 0] * w + instance.starts[i, 1])
        t = 0
        for r, c in instance.targets[i].tolist():
            if r < 0:
                break
            goal = r * w + c
            if goal not in tables:
                tables[goal] = bfs_distance(nbr, goal)
            d = int(tables[goal][here])
            if d >= UNREACHABLE:
                raise ValueError(f"robot {i}: target {(r, c)} unreachable")
            # a target equal to the current cell is reached by waiting one step (POGEMA)
            t += max(d, 1)
            if t > instance.steps:
                break
            reached += 1
            here = goal
    return reached / instance.steps
