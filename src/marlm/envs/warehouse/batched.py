"""Many warehouses stepped at once as arrays: the same rules and results as :class:`WarehouseEnv`.

:class:`BatchedWarehouseEnv` holds ``n_envs`` independent copies of one warehouse (same layout,
robots, time limit and reward weights) and steps all of them with one call to compiled kernels
(numba). It is meant for RL training, where the per-step Python of ``WarehouseEnv`` (dicts per
robot, one ``resolve_moves`` call per warehouse) dominates.

What is the same as ``WarehouseEnv(auto_assign=True)``, step for step, given the same seed and the
same actions (``tests/envs/test_batched.py`` checks it side by side at every step):

* episodes start exactly as ``WarehouseEnv.reset(seed)`` starts them: the orders come from
  :func:`marlm.envs.warehouse.orders.generate_orders` and the robot cells from
  :meth:`Layout.place_robots` on the same ``numpy.random.Generator``; an env that is reset
  without a seed continues its generator, as ``WarehouseEnv.reset()`` does;
* the collision rules of :func:`marlm.envs.warehouse.dynamics.resolve_moves` (RWARE's: refused
  moves into walls/shelves/edges, the longest chain wins a contested cell (ties: lower index),
  swaps refused, robots leading into a standing robot or a cycle wait, rotations move);
* pick, drop, order arrival, deadline misses and auto-assignment (pending orders by priority,
  deadline, arrival, id, each to the nearest idle robot, ties lowest index; an order whose shelf
  is held by an order not yet delivered waits);
* the reward parts and their sum, the 16-float observation, termination (all delivered) and
  truncation (time limit) as documented in :class:`WarehouseEnv`.

What differs: no PettingZoo dicts (arrays ``[n_envs, n_robots, ...]`` instead), no event list
(counters instead), no planner API (orders are always auto-assigned), no rendering, and
finished warehouses restart at once (``autoreset``, see :meth:`BatchedWarehouseEnv.step`).

Arrays use the env's conventions: positions are ``(row, col)``, actions ``0..4`` (STAY, UP, DOWN,
LEFT, RIGHT as in :mod:`marlm.envs.warehouse.dynamics`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numba import njit

from marlm.envs.warehouse.dynamics import MOVES, STAY, check_moves
from marlm.envs.warehouse.env import (
    OBS_BLOCKED,
    OBS_CARRYING,
    OBS_CLOSER,
    OBS_HAS_TASK,
    OBS_ROBOT_NEIGHBOUR,
    OBS_SIZE,
    OBS_TARGET_OFFSET,
    PART_BLOCKED_MOVE,
    PART_DELIVERY,
    PART_PICK,
    PART_PROGRESS,
    PART_STEP_COST,
    REWARD_PARTS,
    RewardWeights,
)
from marlm.envs.warehouse.layout import Layout, load_layout
from marlm.envs.warehouse.orders import (
    ORDER_STATUSES,
    Order,
    dispatch_key,
    generate_orders,
    load_orders,
)
from marlm.errors import InputError

# Order status codes: indices of ORDER_STATUSES (the strings of WarehouseEnv.order_status).
FUTURE, PENDING, ASSIGNED, PICKED, DELIVERED = range(len(ORDER_STATUSES))
# First index of each observation slice, as plain ints for the compiled kernels.
_OBS_ROW, _OBS_BLOCKED, _OBS_ROBOT, _OBS_CLOSER = (
    s.start for s in (OBS_TARGET_OFFSET, OBS_BLOCKED, OBS_ROBOT_NEIGHBOUR, OBS_CLOSER)
)


@dataclass
class BatchedStep:
    """What one :meth:`BatchedWarehouseEnv.step` returns.

    Attributes:
        observations: ``float32[n_envs, n_robots, 16]``; for an env that ended this step and was
            reset, the first observation of its next episode (the last one is in
            ``final_observations``).
        rewards: ``float64[n_envs, n_robots]``, the sum of the reward parts.
        reward_parts: ``float64[n_envs, n_robots, 5]`` in :data:`REWARD_PARTS` order.
        terminated: ``bool[n_envs]``: every order was delivered this step.
        truncated: ``bool[n_envs]``: the time limit was reached (and not terminated).
        collided: ``bool[n_envs, n_robots]``: move refused because of another robot.
        blocked: ``bool[n_envs, n_robots]``: move refused by a wall, a shelf or the map edge.
        delivered: ``int64[n_envs]``: orders delivered this step.
        final_observations: ``float32[n_envs, n_robots, 16]``: the observation after this step
            before any reset (equal to ``observations`` for envs that did not end).
    """

    observations: np.ndarray
    rewards: np.ndarray
    reward_parts: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    collided: np.ndarray
    blocked: np.ndarray
    delivered: np.ndarray
    final_observations: np.ndarray


def estimate_memory_bytes(layout: Layout, n_envs: int, n_robots: int, n_orders: int) -> int:
    """Upper bound of the bytes a :class:`BatchedWarehouseEnv` needs (distance tables dominate).

    One ``int32[H, W]`` distance table per distinct target cell (access cells of the shelves
    orders name, plus stations), counted twice (the layout caches them too), plus the per-env
    arrays.
    """
    cells = layout.height * layout.width
    targets = min(len(set(layout.access.values())), max(1, n_envs * n_orders)) + len(
        layout.stations
    )
    tables = 2 * targets * cells * 4
    per_env = n_robots * (2 * OBS_SIZE * 4 + 8 * 12) + n_orders * 8 * 8 + cells * 8
    return int(tables + n_envs * per_env)


def available_memory_bytes() -> int | None:
    """Physical memory currently available (Linux ``/proc/meminfo``), or None if unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def default_memory_limit_bytes() -> int | None:
    """The memory a run may plan to use when none is given: 80% of
    :func:`available_memory_bytes`, or None if that is unknown."""
    avail = available_memory_bytes()
    return None if avail is None else int(0.8 * avail)


class BatchedWarehouseEnv:
    """``n_envs`` warehouses stepped together; the rules of :class:`WarehouseEnv` (see module doc).

    Args:
        n_envs: number of warehouses (>= 1).
        layout: shipped layout name, map file or :class:`Layout` (shared by all warehouses).
        orders: None (``n_orders`` generated per warehouse and episode from its generator), or a
            list of :class:`Order` / a JSONL file used by every warehouse.
        n_orders: generated orders per episode.
        n_robots: robots per warehouse (default: the layout's).
        max_steps: time limit (truncation).
        reward_weights: :class:`RewardWeights` or a dict of its fields.
        autoreset: restart a warehouse in the same :meth:`step` call in which its episode ends.
        max_memory_bytes: refuse to build when :func:`estimate_memory_bytes` exceeds this
            (default: 80% of the available memory).

    Attributes:
        positions: ``int64[n_envs, n_robots, 2]`` robot cells (row, col).
        carrying: ``bool[n_envs, n_robots]``.
        task: ``int64[n_envs, n_robots]``: index into the env's order list, -1 when idle.
        status: ``int8[n_envs, n_orders]``: order status codes (:data:`ORDER_STATUSES`).
        step_count: ``int64[n_envs]``: steps taken in the current episode.
        n_delivered, n_missed: ``int64[n_envs]`` orders delivered / past their deadline undelivered.
        orders: per env, the list of :class:`Order` of its current episode.

    Raises:
        InputError: a bad argument (names the field), or a warehouse too large for memory.
    """

    def __init__(
        self,
        n_envs: int,
        layout: str | Path | Layout = "small",
        orders: None | list[Order] | str | Path = None,
        n_orders: int = 20,
        n_robots: int | None = None,
        max_steps: int = 500,
        reward_weights: RewardWeights | dict | None = None,
        autoreset: bool = True,
        max_memory_bytes: int | None = None,
    ) -> None:
        if isinstance(n_envs, bool) or not isinstance(n_envs, int | np.integer) or n_envs < 1:
            raise InputError(f"must be an integer >= 1, got {n_envs!r}", field="n_envs")
        self.n_envs = int(n_envs)
        self.layout = layout if isinstance(layout, Layout) else load_layout(layout)
        self.n_robots = int(self.layout.default_robots if n_robots is None else n_robots)
        if self.n_robots < 1:
            raise InputError(f"must be >= 1, got {n_robots!r}", field="n_robots")
        self.layout.place_robots(self.n_robots, np.random.default_rng(0))  # checks the count
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise InputError(f"must be an integer >= 1, got {max_steps!r}", field="max_steps")
        self.max_steps = max_steps
        if isinstance(reward_weights, dict):
            try:
                reward_weights = RewardWeights(**reward_weights)
            except TypeError as e:
                raise InputError(str(e), field="reward_weights") from e
        self.reward_weights = reward_weights or RewardWeights()
        self._weights = np.array(
            [vars(self.reward_weights)[p] for p in REWARD_PARTS], dtype=np.float64
        )
        self._fixed_orders = self._fixed(orders)
        self.n_orders = len(self._fixed_orders) if self._fixed_orders is not None else n_orders
        if self.n_orders < 0:
            raise InputError(f"must be >= 0, got {n_orders!r}", field="n_orders")
        self.autoreset = bool(autoreset)

        need = estimate_memory_bytes(self.layout, self.n_envs, self.n_robots, self.n_orders)
        limit = max_memory_bytes
        if limit is None:
            limit = default_memory_limit_bytes()
        if limit is not None and need > limit:
            raise InputError(
                f"{self.n_envs} warehouses of {self.layout.height}x{self.layout.width} cells need "
                f"about {need / 2**20:.0f} MiB but only {limit / 2**20:.0f} MiB are available; "
                "use fewer envs or a smaller map",
                source=self.layout.source,
                field="layout",
            )

        self._free = np.ascontiguousarray(self.layout.free, dtype=np.bool_)
        self._tid: dict[tuple[int, int], int] = {}  # target cell -> table index
        self._tables: list[np.ndarray] = []
        self._cells = np.zeros((0, 2), dtype=np.int64)
        self._dist = np.zeros((0, self.layout.height, self.layout.width), dtype=np.int32)
        self._rngs: list[np.random.Generator | None] = [None] * self.n_envs
        self.orders: list[list[Order]] = [[] for _ in range(self.n_envs)]

        b, n, k = self.n_envs, self.n_robots, self.n_orders
        self.positions = np.zeros((b, n, 2), dtype=np.int64)
        self.carrying = np.zeros((b, n), dtype=np.bool_)
        self.task = np.full((b, n), -1, dtype=np.int64)
        self._target = np.full((b, n), -1, dtype=np.int64)
        self.status = np.zeros((b, k), dtype=np.int8)
        self.step_count = np.zeros(b, dtype=np.int64)
        self.n_delivered = np.zeros(b, dtype=np.int64)
        self.n_missed = np.zeros(b, dtype=np.int64)
        self._shelf_index = {name: s for s, name in enumerate(self.layout.shelves)}
        self._shelf_of = np.zeros((b, k), dtype=np.int64)
        self._shelf_held = np.zeros((b, max(1, len(self._shelf_index))), dtype=np.bool_)
        self._access_tid = np.zeros((b, k), dtype=np.int64)
        self._drop_tid = np.zeros((b, k), dtype=np.int64)
        self._arrival = np.zeros((b, k), dtype=np.int64)
        self._deadline = np.zeros((b, k), dtype=np.int64)
        self._by_arrival = np.zeros((b, k), dtype=np.int64)
        self._by_deadline = np.zeros((b, k), dtype=np.int64)
        self._by_rule = np.zeros((b, k), dtype=np.int64)
        self._next_arrival = np.zeros(b, dtype=np.int64)
        self._next_deadline = np.zeros(b, dtype=np.int64)
        self._done = np.ones(b, dtype=np.bool_)
        h, w = self.layout.height, self.layout.width
        self._scratch = np.full((2, h, w), -1, dtype=np.int64)  # kernel grids, -1 between calls

    # ------------------------------------------------------------------ API
    @property
    def observation_shape(self) -> tuple[int, int, int]:
        return (self.n_envs, self.n_robots, OBS_SIZE)

    def reset(
        self, seed: int | Sequence[int | None] | None = None, envs: Sequence[int] | None = None
    ) -> np.ndarray:
        """Start new episodes.

        Args:
            seed: one int (env ``i`` gets ``seed + i``), a sequence of per-env seeds (None keeps
                that env's generator going), or None (every generator continues; a generator
                never seeded starts from None, i.e. fresh entropy).
            envs: indices of the envs to reset (default: all).

        Returns:
            ``float32[n_envs, n_robots, 16]`` observations of all envs.
        """
        envs = range(self.n_envs) if envs is None else envs
        if seed is None or isinstance(seed, int | np.integer):
            seeds = [None if seed is None else int(seed) + i for i in range(self.n_envs)]
        else:
            seeds = list(seed)
            if len(seeds) != self.n_envs:
                raise InputError(f"{len(seeds)} seeds for {self.n_envs} envs", field="seed")
        for i in envs:
            self._reset_one(int(i), seeds[int(i)])
        self._start(envs)
        return self.observations()

    def step(self, actions: np.ndarray) -> BatchedStep:
        """Advance every warehouse by one step.

        Args:
            actions: ``int[n_envs, n_robots]`` action codes 0..4.

        Returns:
            :class:`BatchedStep`. With ``autoreset`` an env whose episode ended is reset right
            away (its generator continues, like ``WarehouseEnv.reset()`` without a seed);
            without it, an ended env is frozen (zero rewards) until :meth:`reset`.

        Raises:
            ValueError: wrong shape or an action outside 0..4.
        """
        actions = np.asarray(actions, dtype=np.int64)
        if actions.shape != (self.n_envs, self.n_robots):
            raise ValueError(
                f"actions must have shape {(self.n_envs, self.n_robots)}, got {actions.shape}"
            )
        if actions.size and (actions.min() < 0 or actions.max() >= len(MOVES)):
            raise ValueError(f"actions must be in 0..{len(MOVES) - 1}")
        b, n = self.n_envs, self.n_robots
        parts = np.zeros((b, n, len(REWARD_PARTS)))
        rewards = np.zeros((b, n))
        blocked = np.zeros((b, n), dtype=np.bool_)
        collided = np.zeros((b, n), dtype=np.bool_)
        delivered = np.zeros(b, dtype=np.int64)
        terminated = np.zeros(b, dtype=np.bool_)
        truncated = np.zeros(b, dtype=np.bool_)
        _step_kernel(
            self.positions, actions, self._free, self._dist, self._cells,
            self.task, self._target, self.carrying, self.status,
            self._access_tid, self._drop_tid, self._arrival, self._deadline,
            self._by_arrival, self._by_deadline, self._by_rule, self._shelf_of, self._shelf_held,
            self._next_arrival, self._next_deadline, self.step_count,
            self.n_delivered, self.n_missed, self._done, self._weights, self.max_steps,
            self._scratch, parts, rewards, blocked, collided, delivered, terminated, truncated,
        )  # fmt: skip
        final = self.observations()
        obs = final
        if self.autoreset and (terminated.any() or truncated.any()):
            ended = np.flatnonzero(terminated | truncated)
            for i in ended:
                self._reset_one(int(i), None)
            self._start(ended)
            obs = self.observations()
        return BatchedStep(
            obs, rewards, parts, terminated, truncated, collided, blocked, delivered, final
        )

    def observations(self) -> np.ndarray:
        """``float32[n_envs, n_robots, 16]``: the observation of :class:`WarehouseEnv`, per env."""
        obs = np.zeros((self.n_envs, self.n_robots, OBS_SIZE), dtype=np.float32)
        _observe_kernel(
            self.positions, self._free, self._dist, self._cells, self._target,
            self.carrying, self._scratch[0], obs,
        )  # fmt: skip
        return obs

    def order_status(self, env: int, order_id: str) -> str:
        """Status of an order of env ``env`` (same strings as ``WarehouseEnv.order_status``)."""
        ids = [o.id for o in self.orders[env]]
        return ORDER_STATUSES[int(self.status[env, ids.index(order_id)])]

    # ------------------------------------------------------------ internals
    def _fixed(self, orders) -> list[Order] | None:
        if orders is None:
            return None
        if isinstance(orders, str | Path):
            return load_orders(orders, self.layout)
        fixed = []
        for k, order in enumerate(orders):
            try:
                fixed.append(
                    order.model_copy(update={"shelf": self.layout.shelf_name(order.shelf)})
                )
            except KeyError as e:
                raise InputError(e.args[0], source="orders", line=k + 1, field="shelf") from None
        return fixed

    def _target_id(self, cell: tuple[int, int]) -> int:
        """Index of ``cell``'s distance table (added on first use; see :meth:`_stack_tables`)."""
        cell = (int(cell[0]), int(cell[1]))
        tid = self._tid.get(cell)
        if tid is None:
            tid = len(self._tid)
            self._tid[cell] = tid
            self._tables.append(self.layout.distance_from(cell))
        return tid

    def _stack_tables(self) -> None:
        """Rebuild the kernels' ``int32[T, H, W]`` distance stack and target cells if they grew."""
        if len(self._tables) != len(self._dist):
            self._dist = np.stack(self._tables).astype(np.int32)
            self._cells = np.array(list(self._tid), dtype=np.int64).reshape(-1, 2)

    def _reset_one(self, i: int, seed: int | None) -> None:
        """``WarehouseEnv.reset(seed)`` for env ``i`` up to its clock (see :meth:`_start`): the
        same draws from the same generator."""
        rng = self._rngs[i]
        if seed is not None or rng is None:
            rng = self._rngs[i] = np.random.default_rng(seed)
        if self._fixed_orders is None:
            horizon = max(1, int(0.8 * self.max_steps))
            orders = generate_orders(self.layout, self.n_orders, rng, horizon)
        else:
            orders = self._fixed_orders
        self.orders[i] = orders
        self.positions[i] = np.array(self.layout.place_robots(self.n_robots, rng), dtype=np.int64)
        self.carrying[i] = False
        self.task[i] = -1
        self._target[i] = -1
        self.status[i] = FUTURE
        self.step_count[i] = 0
        self.n_delivered[i] = 0
        self.n_missed[i] = 0
        self._next_arrival[i] = 0
        self._next_deadline[i] = 0
        self._shelf_held[i] = False
        for k, o in enumerate(orders):
            self._shelf_of[i, k] = self._shelf_index[o.shelf]
            self._access_tid[i, k] = self._target_id(self.layout.access[o.shelf])
            self._drop_tid[i, k] = self._target_id(self.layout.drop[o.shelf])
            self._arrival[i, k] = o.arrival
            self._deadline[i, k] = o.deadline
        idx = list(range(len(orders)))
        # Python's stable sorts, exactly as WarehouseEnv._reset_state / _auto_assign sort.
        self._by_arrival[i] = sorted(idx, key=lambda k: orders[k].arrival)
        self._by_deadline[i] = sorted(idx, key=lambda k: orders[k].deadline)
        self._by_rule[i] = sorted(idx, key=lambda k: dispatch_key(orders[k]))
        self._done[i] = False

    def _start(self, envs) -> None:
        """After :meth:`_reset_one` of ``envs``: orders arriving at step 0 and their assignment."""
        self._stack_tables()
        for i in envs:
            _clock_one(
                int(i), 0, self.positions, self._dist, self.task, self._target, self.status,
                self._access_tid, self._arrival, self._deadline, self._by_arrival,
                self._by_deadline, self._by_rule, self._shelf_of, self._shelf_held,
                self._next_arrival, self._next_deadline, self.n_missed,
            )  # fmt: skip


# ---------------------------------------------------------------------- compiled kernels
@njit(cache=True)
def _resolve_one(
    pos, actions, free, cell_of, claim, new_pos, blocked, collided
):  # pragma: no cover
    """:func:`marlm.envs.warehouse.dynamics.resolve_moves` for one warehouse, over grids.

    ``pos int64[n, 2]``, ``actions int64[n]``; writes ``new_pos``, ``blocked``, ``collided``.
    ``cell_of``/``claim`` are ``int64[H, W]`` grids holding -1; restored before returning.
    The same steps as the reference: Kahn's order over the move graph, cycles of three or more
    move, the longest chain into each free cell moves (ties: lower index).
    """
    h, w = free.shape
    n = actions.shape[0]
    tr = np.empty(n, dtype=np.int64)
    tc = np.empty(n, dtype=np.int64)
    for i in range(n):
        r = pos[i, 0] + MOVES[actions[i], 0]
        c = pos[i, 1] + MOVES[actions[i], 1]
        ok = 0 <= r < h and 0 <= c < w and free[r, c]
        blocked[i] = actions[i] != STAY and not ok
        collided[i] = False
        tr[i] = r if ok else pos[i, 0]
        tc[i] = c if ok else pos[i, 1]
        cell_of[pos[i, 0], pos[i, 1]] = i
    nxt = np.empty(n, dtype=np.int64)
    indegree = np.zeros(n, dtype=np.int64)
    for i in range(n):
        nxt[i] = cell_of[tr[i], tc[i]]
        if nxt[i] >= 0:
            indegree[nxt[i]] += 1
    order = np.empty(n, dtype=np.int64)
    m = 0
    for i in range(n):
        if indegree[i] == 0:
            order[m] = i
            m += 1
    k = 0
    while k < m:  # Kahn: leaves first
        j = nxt[order[k]]
        k += 1
        if j >= 0:
            indegree[j] -= 1
            if indegree[j] == 0:
                order[m] = j
                m += 1
    on_cycle = np.ones(n, dtype=np.bool_)
    for k in range(m):
        on_cycle[order[k]] = False
    moving = np.zeros(n, dtype=np.bool_)
    for i in range(n):  # rotations of three or more move
        if on_cycle[i]:
            length = 1
            j = nxt[i]
            while j != i:
                length += 1
                j = nxt[j]
            moving[i] = length >= 3
    chain = np.ones(n, dtype=np.int64)
    best_pred = np.full(n, -1, dtype=np.int64)
    for k in range(m):  # the longest chain into every robot, ties lower index
        i = order[k]
        j = nxt[i]
        if j >= 0 and not on_cycle[j]:
            p = best_pred[j]
            if p < 0 or chain[i] > chain[p] or (chain[i] == chain[p] and i < p):
                best_pred[j] = i
                chain[j] = chain[i] + 1
    for k in range(m):  # per free cell, the longest chain into it
        i = order[k]
        if nxt[i] < 0:
            win = claim[tr[i], tc[i]]
            if win < 0 or chain[i] > chain[win] or (chain[i] == chain[win] and i < win):
                claim[tr[i], tc[i]] = i
    for k in range(m):
        i = order[k]
        if nxt[i] < 0 and claim[tr[i], tc[i]] == i:
            j = i
            while j >= 0:
                moving[j] = True
                j = best_pred[j]
    for i in range(n):
        cell_of[pos[i, 0], pos[i, 1]] = -1
        claim[tr[i], tc[i]] = -1
        collided[i] = actions[i] != STAY and not blocked[i] and not moving[i]
        if moving[i]:
            new_pos[i, 0] = tr[i]
            new_pos[i, 1] = tc[i]
        else:
            new_pos[i, 0] = pos[i, 0]
            new_pos[i, 1] = pos[i, 1]


def resolve_moves_fast(
    positions: np.ndarray, actions: np.ndarray, free: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Same contract and results as :func:`marlm.envs.warehouse.dynamics.resolve_moves`, compiled.

    Args/Returns: as ``resolve_moves`` (``int[n, 2]``, ``int[n]`` in 0..4, ``bool[H, W]``).
    """
    positions = np.ascontiguousarray(positions, dtype=np.int64).reshape(-1, 2)
    actions = np.ascontiguousarray(actions, dtype=np.int64).reshape(-1)
    check_moves(positions, actions)
    n = len(positions)
    free = np.ascontiguousarray(free, dtype=np.bool_)
    grids = np.full((2, *free.shape), -1, dtype=np.int64)
    new = np.empty((n, 2), dtype=np.int64)
    blocked = np.zeros(n, dtype=np.bool_)
    collided = np.zeros(n, dtype=np.bool_)
    _resolve_one(positions, actions, free, grids[0], grids[1], new, blocked, collided)
    return new, blocked, collided


@njit(cache=True)
def _clock_one(
    b, t, pos, dist, task, target, status, access_tid, arrival, deadline,
    by_arrival, by_deadline, by_rule, shelf_of, shelf_held, next_arrival, next_deadline, n_missed,
):  # fmt: skip  # pragma: no cover - compiled
    """``WarehouseEnv._advance_clock`` for env ``b`` at step ``t``: arrivals, misses, assignment."""
    k_total = status.shape[1]
    while next_arrival[b] < k_total and arrival[b, by_arrival[b, next_arrival[b]]] <= t:
        status[b, by_arrival[b, next_arrival[b]]] = PENDING
        next_arrival[b] += 1
    while next_deadline[b] < k_total and deadline[b, by_deadline[b, next_deadline[b]]] < t:
        if status[b, by_deadline[b, next_deadline[b]]] != DELIVERED:
            n_missed[b] += 1
        next_deadline[b] += 1
    n = task.shape[1]
    idle = 0
    for i in range(n):
        if task[b, i] < 0:
            idle += 1
    for k in range(k_total):  # pending orders by (priority, deadline, arrival, id)
        if idle == 0:
            break
        o = by_rule[b, k]
        if status[b, o] != PENDING or shelf_held[b, shelf_of[b, o]]:
            continue
        table = dist[access_tid[b, o]]
        best = -1
        best_d = 0
        for i in range(n):  # nearest reachable idle robot, ties lowest index
            if task[b, i] >= 0:
                continue
            d = table[pos[b, i, 0], pos[b, i, 1]]
            if d >= 0 and (best < 0 or d < best_d):
                best = i
                best_d = d
        if best < 0:
            continue
        task[b, best] = o
        target[b, best] = access_tid[b, o]
        status[b, o] = ASSIGNED
        shelf_held[b, shelf_of[b, o]] = True
        idle -= 1


@njit(cache=True)
def _step_kernel(
    pos, actions, free, dist, cells, task, target, carrying, status, access_tid, drop_tid,
    arrival, deadline, by_arrival, by_deadline, by_rule, shelf_of, shelf_held, next_arrival,
    next_deadline, step_count,
    n_delivered, n_missed, done, weights, max_steps, scratch, parts, rewards, blocked, collided,
    delivered, terminated, truncated,
):  # fmt: skip  # pragma: no cover - compiled
    """``WarehouseEnv.step`` for every env that is not done, in the same order of effects."""
    n_envs, n = actions.shape
    k_total = status.shape[1]
    new_pos = np.empty((n, 2), dtype=np.int64)
    for b in range(n_envs):
        if done[b]:
            continue
        _resolve_one(
            pos[b], actions[b], free, scratch[0], scratch[1], new_pos, blocked[b], collided[b]
        )
        for i in range(n):  # reward parts against the target held at the start of the step
            tid = target[b, i]
            if tid >= 0:
                before = dist[tid, pos[b, i, 0], pos[b, i, 1]]
                after = dist[tid, new_pos[i, 0], new_pos[i, 1]]
                gain = before - after if before >= 0 and after >= 0 else 0
                parts[b, i, PART_STEP_COST] = -weights[PART_STEP_COST]
                parts[b, i, PART_PROGRESS] = weights[PART_PROGRESS] * gain
            if blocked[b, i] or collided[b, i]:
                parts[b, i, PART_BLOCKED_MOVE] = -weights[PART_BLOCKED_MOVE]
            pos[b, i, 0] = new_pos[i, 0]
            pos[b, i, 1] = new_pos[i, 1]
        for i in range(n):  # pick or drop on arrival at the target
            o = task[b, i]
            if o < 0:
                continue
            tid = target[b, i]
            if pos[b, i, 0] != cells[tid, 0] or pos[b, i, 1] != cells[tid, 1]:
                continue
            if not carrying[b, i]:
                carrying[b, i] = True
                target[b, i] = drop_tid[b, o]
                status[b, o] = PICKED
                parts[b, i, PART_PICK] = weights[PART_PICK]
            else:
                carrying[b, i] = False
                task[b, i] = -1
                target[b, i] = -1
                status[b, o] = DELIVERED
                shelf_held[b, shelf_of[b, o]] = False
                n_delivered[b] += 1
                delivered[b] += 1
                parts[b, i, PART_DELIVERY] = weights[PART_DELIVERY]
        step_count[b] += 1
        _clock_one(
            b, step_count[b], pos, dist, task, target, status, access_tid, arrival, deadline,
            by_arrival, by_deadline, by_rule, shelf_of, shelf_held, next_arrival, next_deadline,
            n_missed,
        )  # fmt: skip
        for i in range(n):  # same summation order as numpy's row sum of five parts
            s = 0.0
            for p in range(parts.shape[2]):
                s += parts[b, i, p]
            rewards[b, i] = s
        terminated[b] = n_delivered[b] == k_total
        truncated[b] = not terminated[b] and step_count[b] >= max_steps
        done[b] = terminated[b] or truncated[b]


@njit(cache=True)
def _observe_kernel(pos, free, dist, cells, target, carrying, occupied, obs):  # pragma: no cover
    """``WarehouseEnv._observations`` for every env (layout of the 16 floats in its docstring)."""
    h, w = free.shape
    n_envs, n = carrying.shape
    for b in range(n_envs):
        for i in range(n):
            occupied[pos[b, i, 0], pos[b, i, 1]] = 1
        for i in range(n):
            r = pos[b, i, 0]
            c = pos[b, i, 1]
            tid = target[b, i]
            for k in range(4):
                nr = r + MOVES[k + 1, 0]
                nc = c + MOVES[k + 1, 1]
                inside = 0 <= nr < h and 0 <= nc < w
                obs[b, i, _OBS_BLOCKED + k] = 0.0 if inside and free[nr, nc] else 1.0
                obs[b, i, _OBS_ROBOT + k] = 1.0 if inside and occupied[nr, nc] == 1 else 0.0
                if tid >= 0:
                    d = dist[tid, r, c]
                    nb = dist[tid, nr, nc] if inside else -1
                    obs[b, i, _OBS_CLOSER + k] = 1.0 if nb >= 0 and d >= 0 and nb < d else 0.0
            if tid >= 0:
                obs[b, i, _OBS_ROW] = (cells[tid, 0] - r) / h
                obs[b, i, _OBS_ROW + 1] = (cells[tid, 1] - c) / w
                obs[b, i, OBS_HAS_TASK] = 1.0
            obs[b, i, OBS_CARRYING] = 1.0 if carrying[b, i] else 0.0
        for i in range(n):
            occupied[pos[b, i, 0], pos[b, i, 1]] = -1


__all__ = [
    "ORDER_STATUSES",
    "BatchedStep",
    "BatchedWarehouseEnv",
    "available_memory_bytes",
    "default_memory_limit_bytes",
    "estimate_memory_bytes",
    "resolve_moves_fast",
]
