"""The PIBT rule layer: one collision-free joint action from per-robot action scores.

Every step each robot brings a score for each of the 5 actions (``float[n_robots, 5]``, higher
first). PIBT, Priority Inheritance with Backtracking (Okumura, Machida, Défago, Tamura, Artificial
Intelligence 310, 2022, Algorithm 1), turns them into one joint action: robots decide in priority
order; a robot takes its best cell that nobody reserved and that does not swap it with a robot
that decided; a robot standing there inherits the priority and must move first (recursively),
else the first robot backtracks to its next cell. Priority = steps since the robot last reached
its target, plus a fixed tie-break below 0.1: every robot becomes the highest in turn (Thm. 2).

Additions, each for a case plain PIBT livelocks on (``docs/movement.md`` has the cases):

- LaCAM3's swap (Okumura, AAMAS 2024, §3; ``Kei18/lacam3`` ``src/pibt.cpp``): a robot that can
  pass the robot in its way only at a junction pulls it there; also when the pusher's target is
  inside a dead end with no room past it for the robots in it;
- tie-breaks among equal scores: cells outside dead ends, then empty cells (``Kei18/pibt2``),
  then a fixed random order; a pushed robot avoids cells ahead on its pusher's way;
- nested targets: a robot whose target lies on the way into a dead end to another robot's deeper
  target, which that robot has not reached, decides after every other robot (deeper first);
- overdue robots: the scores order moves freely only while robots get through. A robot that has
  not reached its target for ``patience`` steps is overdue: overdue robots decide before every
  other robot (longest waiting first, whatever the bias or nesting), and an overdue robot ranks
  its cells by distance to its target first, the executor's scores only breaking ties. That is
  PIBT's own ranking (AIJ 2022, Algorithm 1 line 4: candidates sorted by distance), so the
  reachability argument of PIBT's Theorems 1-2 applies from then on whatever the executor
  scored: the longest-overdue robot keeps the top priority until it arrives (every waiting
  robot's priority grows by one per step, so the order among them is fixed), and the top robot
  moves one step along a shortest path each step (Thm. 1: on maps where every pair of adjacent
  cells lies on a simple cycle; with dead ends and one-wide corridors LaCAM3's swap gets it
  through on the tests' maps, not always: on POGEMA's puzzle-00 a robot that must leave a two-cell
  dead end behind two that must enter it holds the top robot at the mouth). Hence every robot with
  a fixed, reachable target stands on it within ``patience + n * diam`` steps on such maps
  (Thm. 2's ``n * diam`` after the wait).

Cost: O(n_robots) per step when robots are spread out, compiled (numba); the map enters only
through tables built once (:mod:`marlm.hybrid.core.graph`) and one BFS table per new target (cached).
``tests/hybrid/rules/pibt_reference.py`` is the same algorithm as a short recursive function.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from marlm.hybrid.core.graph import (  # noqa: F401 - UNREACHABLE: part of this module's interface
    N_ACTIONS,
    UNREACHABLE,
    DistanceTables,
    bfs_distance,
    bfs_filler,
    branch_parent,
    dead_end_depth,
    neighbour_table,
    njit,
)


@njit(cache=True)
def _rank(scores, pos, nbr, depth, noise, cand, cand_key, n_cand, occ):  # pragma: no cover
    """Fill ``cand[i]`` with robot i's reachable cells, best first: score (descending), then
    dead-end depth, empty before occupied (``Kei18/pibt2``), ``noise``. STAY is always one.
    ``occ``: ``int64[V]`` scratch holding -1 (restored)."""
    n = pos.shape[0]
    keys, keys2 = np.empty(5, dtype=np.float64), np.empty(5, dtype=np.float64)
    for i in range(n):
        occ[pos[i]] = i
    for i in range(n):
        k = 0
        for a in range(5):
            c = nbr[pos[i], a]
            if c < 0:
                continue
            s = scores[i, a] if np.isfinite(scores[i, a]) else -1e300
            key2 = depth[c] + noise[i, a]
            if c != pos[i] and occ[c] >= 0:
                key2 += 0.5
            j = k  # insertion sort by (-score, key2)
            while j > 0 and (keys[j - 1] < s or (keys[j - 1] == s and keys2[j - 1] > key2)):
                keys[j], keys2[j], cand[i, j] = keys[j - 1], keys2[j - 1], cand[i, j - 1]
                j -= 1
            keys[j], keys2[j], cand[i, j] = s, key2, c
            k += 1
        n_cand[i] = k
        cand_key[i, :k] = keys[:k]
    for i in range(n):
        occ[pos[i]] = -1


@njit(cache=True)
def _dist(i, v, goal_slot, pool):  # pragma: no cover - compiled
    """Robot i's distance from cell v to its target (0 for an idle robot)."""
    return 0 if goal_slot[i] < 0 else pool[goal_slot[i], v]


@njit(cache=True)
def _ways_on(v_pusher, v_puller, occ_now, goal_cell, nbr):  # pragma: no cover - compiled
    """``(m, u)``: how many cells the puller at ``v_puller`` can back into, and the last of them.
    Not counted: the pusher's cell, and a dead-end leaf holding a robot on its own target (LaCAM3)
    or an idle one (it could leave only through ``v_puller``)."""
    m, tmp = 0, -1
    for a in range(1, 5):
        u = nbr[v_puller, a]
        if u < 0 or u == v_pusher:
            continue
        k, deg_u = occ_now[u], 0
        for b in range(1, 5):
            deg_u += nbr[u, b] >= 0
        if not (deg_u == 1 and k >= 0 and (goal_cell[k] == u or goal_cell[k] < 0)):
            m, tmp = m + 1, u
    return m, tmp


@njit(cache=True)
def _room_deeper(pusher, v_pusher, v_puller, occ_now, goal_cell, goal_slot, pool, nbr):
    """True unless the corridor from ``v_puller`` away from ``v_pusher`` is a dead end holding
    more robots than it has cells past the pusher's target."""  # pragma: no cover - compiled
    guard, robots, room, past_goal = nbr.shape[0], 0, 0, False
    while guard > 0:
        guard -= 1
        if occ_now[v_puller] >= 0:
            robots += 1
        if past_goal:
            room += 1
        if _dist(pusher, v_puller, goal_slot, pool) == 0:
            past_goal = True
        m, tmp = _ways_on(v_pusher, v_puller, occ_now, goal_cell, nbr)
        if m >= 2:
            return True
        if m <= 0:
            return robots <= room
        v_pusher, v_puller = v_puller, tmp
    return True


@njit(cache=True)
def _swap_required(pusher, puller, v_pusher, v_puller, occ_now, goal_cell, goal_slot, pool, nbr):
    """LaCAM3 ``is_swap_required``: the pusher can pass the puller only by pulling it along.
    Walks from the puller away from the pusher while the pusher gains; a junction means no swap.
    An idle puller wants out; a pusher whose target is inside the corridor needs the swap when
    there is no room deeper (:func:`_room_deeper`)."""  # pragma: no cover - compiled
    if goal_slot[pusher] < 0:
        return False
    guard, dead_end, v_pusher0, v_puller0 = nbr.shape[0], False, v_pusher, v_puller
    while _dist(pusher, v_puller, goal_slot, pool) < _dist(pusher, v_pusher, goal_slot, pool):
        guard -= 1
        if guard < 0:
            return False
        m, tmp = _ways_on(v_pusher, v_puller, occ_now, goal_cell, nbr)
        if m >= 2:
            return False
        if m <= 0:
            dead_end = True
            break
        v_pusher, v_puller = v_puller, tmp
    if not dead_end:  # beyond LaCAM3: the pusher's target is inside the corridor
        if v_pusher == v_pusher0:
            return False
        if goal_slot[puller] >= 0 and _dist(puller, v_pusher0, goal_slot, pool) >= _dist(
            puller, v_puller0, goal_slot, pool
        ):
            return False
        return not _room_deeper(pusher, v_pusher0, v_puller0, occ_now, goal_cell, goal_slot,
                                pool, nbr)  # fmt: skip
    if goal_slot[puller] < 0:
        puller_wants = True
    else:
        puller_wants = _dist(puller, v_pusher, goal_slot, pool) < _dist(
            puller, v_puller, goal_slot, pool
        )
    d_push = _dist(pusher, v_pusher, goal_slot, pool)
    return puller_wants and (d_push == 0 or _dist(pusher, v_puller, goal_slot, pool) < d_push)


@njit(cache=True)
def _swap_possible(v_pusher_origin, v_puller_origin, occ_now, goal_cell, nbr):
    """LaCAM3 ``is_swap_possible``: pulling backwards reaches a junction before a dead end."""
    # pragma: no cover - compiled
    v_pusher, v_puller, guard = v_pusher_origin, v_puller_origin, nbr.shape[0]
    while v_puller != v_pusher_origin and guard > 0:
        guard -= 1
        m, tmp = _ways_on(v_pusher, v_puller, occ_now, goal_cell, nbr)
        if m >= 2:
            return True
        if m <= 0:
            return False
        v_pusher, v_puller = v_puller, tmp
    return False


@njit(cache=True)
def _swap_agent(i, pos, nxt, cand, occ_now, goal_cell, goal_slot, pool, nbr):
    """LaCAM3 ``is_swap_required_and_possible``: the robot to pull, or -1."""
    # pragma: no cover - compiled
    first = cand[i, 0]
    j = occ_now[first]
    if (
        j >= 0
        and j != i
        and nxt[j] < 0
        and _swap_required(i, j, pos[i], pos[j], occ_now, goal_cell, goal_slot, pool, nbr)
        and _swap_possible(pos[j], pos[i], occ_now, goal_cell, nbr)
    ):
        return j
    # the "clear" operation (cf. push and swap): a neighbour that will need to pass i
    if first != pos[i]:
        for a in range(1, 5):
            u = nbr[pos[i], a]
            if u < 0:
                continue
            k = occ_now[u]
            if (
                k >= 0
                and first != pos[k]
                and _swap_required(k, i, pos[i], first, occ_now, goal_cell, goal_slot, pool, nbr)
                and _swap_possible(first, pos[i], occ_now, goal_cell, nbr)
            ):
                return k
    return -1


@njit(cache=True)
def _frame_order(i, pusher, pos, nxt, occ_now, cand, cand_key, n_cand, goal_cell, goal_slot, pool,
                 nbr, swap, order):  # fmt: skip
    """Fill ``order[:k]`` with robot i's candidate cells for this visit; return swap agent or -1.
    Its own ranking; if pushed, cells ahead on the pusher's way last among equal scores (for an
    idle robot: last of all); if LaCAM3's swap applies, the ranking reversed."""  # pragma: no cover
    k_max = n_cand[i]
    order[:k_max] = cand[i, :k_max]
    if pusher >= 0 and goal_slot[pusher] >= 0:
        d_here = _dist(pusher, pos[pusher], goal_slot, pool)
        ahead = np.zeros(5, dtype=np.int64)
        for k in range(k_max):
            ahead[k] = 1 if _dist(pusher, order[k], goal_slot, pool) < d_here else 0
        idle = goal_slot[i] < 0  # no target, no real preference: "not ahead" comes first
        for k in range(1, k_max):
            c, a, s, m = order[k], ahead[k], cand_key[i, k], k
            while m > 0 and (idle or cand_key[i, m - 1] == s) and ahead[m - 1] > a:
                order[m], ahead[m] = order[m - 1], ahead[m - 1]
                m -= 1
            order[m], ahead[m] = c, a
    swap_agent = -1
    if swap:
        swap_agent = _swap_agent(i, pos, nxt, cand, occ_now, goal_cell, goal_slot, pool, nbr)
        if swap_agent >= 0:
            order[:k_max] = cand[i, :k_max][::-1]
    return swap_agent


@njit(cache=True)
def _pibt_all(
    order, pos, cand, cand_key, n_cand, goal_cell, goal_slot, pool, nbr, swap, occ_now, occ_next
):
    """PIBT for every robot in ``order`` (AIJ 2022, Algorithm 1, with LaCAM3's swap): the
    recursive ``PIBT(i, j)`` (``tests/hybrid/rules/pibt_reference.py``) on an explicit stack, one frame
    per robot being decided (depth <= n), which numba caches on disk (it cannot cache recursion).
    Returns ``int64[n]`` next cells; ``occ_now`` / ``occ_next``: ``int64[V]`` scratch holding -1.
    """  # pragma: no cover - compiled
    n = pos.shape[0]
    nxt = np.full(n, -1, dtype=np.int64)
    for i in range(n):
        occ_now[pos[i]] = i
    st_i = np.empty(n + 1, dtype=np.int64)
    st_k = np.empty(n + 1, dtype=np.int64)  # next candidate to try
    st_kmax = np.empty(n + 1, dtype=np.int64)
    st_swap = np.empty(n + 1, dtype=np.int64)
    st_wait = np.zeros(n + 1, dtype=np.bool_)  # waiting for the child pushed at st_k
    st_order = np.empty((n + 1, 5), dtype=np.int64)
    for idx in range(n):
        root = order[idx]
        if nxt[root] >= 0:
            continue
        depth = 0
        st_i[0] = root
        st_k[0] = 0
        st_kmax[0] = n_cand[root]
        st_wait[0] = False
        st_swap[0] = _frame_order(root, -1, pos, nxt, occ_now, cand, cand_key, n_cand, goal_cell,
                                  goal_slot, pool, nbr, swap, st_order[0])  # fmt: skip
        child_ok = False
        while depth >= 0:
            i = st_i[depth]
            decided = False
            pushed = False
            if st_wait[depth]:
                st_wait[depth] = False
                if child_ok:
                    decided = True  # the pushed robot moved away: i keeps the reserved cell
                else:
                    st_k[depth] += 1  # priority inheritance failed: backtrack, next candidate
            while not decided and st_k[depth] < st_kmax[depth]:
                k = st_k[depth]
                u = st_order[depth, k]
                if occ_next[u] >= 0:
                    st_k[depth] += 1
                    continue  # vertex conflict
                j = occ_now[u]
                if j >= 0 and nxt[j] == pos[i]:
                    st_k[depth] += 1
                    continue  # swap conflict with a robot that already decided
                occ_next[u] = i
                nxt[i] = u
                if j >= 0 and u != pos[i] and nxt[j] < 0:
                    st_wait[depth] = True  # j inherits i's priority: decide j first
                    depth += 1
                    st_i[depth] = j
                    st_k[depth] = 0
                    st_kmax[depth] = n_cand[j]
                    st_wait[depth] = False
                    st_swap[depth] = _frame_order(j, i, pos, nxt, occ_now, cand, cand_key, n_cand,
                                                  goal_cell, goal_slot, pool, nbr, swap,
                                                  st_order[depth])  # fmt: skip
                    child_ok = False
                    pushed = True
                    break
                decided = True
            if pushed:
                continue
            if decided:
                sa = st_swap[depth]  # pull the swap agent into i's cell
                if swap and st_k[depth] == 0 and sa >= 0 and nxt[sa] < 0 and occ_next[pos[i]] < 0:
                    occ_next[pos[i]] = sa
                    nxt[sa] = pos[i]
                child_ok = True
            else:
                occ_next[pos[i]] = i  # no cell left: stay
                nxt[i] = pos[i]
                child_ok = False
            depth -= 1
    for i in range(n):
        occ_now[pos[i]] = -1
        occ_next[nxt[i]] = -1
    return nxt


class StepInputs(NamedTuple):
    """One step's decision inputs: robots in decision ``order`` (``int64[n]``), their cells
    ``pos``, ranked candidate cells ``cand`` / ``cand_key`` / ``n_cand`` (:func:`_rank`), target
    cells ``goal_cells`` and distance-table rows ``slots`` (-1: none)."""

    order: np.ndarray
    pos: np.ndarray
    cand: np.ndarray
    cand_key: np.ndarray
    n_cand: np.ndarray
    goal_cells: np.ndarray
    slots: np.ndarray


@dataclass
class Pibt:
    """PIBT with persistent priorities and cached distance tables, for one map.

    Args:
        free: ``bool[H, W]``, True where a robot may stand.
        n_robots: number of robots.
        seed: seed of the fixed tie-breaks (robot order among equal priorities, equal scores).
        swap: use LaCAM3's swap operation (dead ends, one-wide corridors).
        max_tables: BFS distance tables kept between steps (more while more targets are in
            use; :class:`marlm.hybrid.core.graph.DistanceTables`, ``2 * H * W`` bytes each).
        patience: steps a robot may go without reaching its target before it is overdue (module
            docstring): from then on it decides first and ranks its cells by distance to its
            target. None (default): ``2 * |V| * n`` (|V| free cells), twice the bound within
            which every robot arrives with distance scores (``tests/hybrid/rules/test_pibt.py``), so
            executors that get robots through are never overruled; 0: PIBT's ranking by
            distance always, the scores only breaking ties.

    Attributes:
        elapsed: ``int64[n]`` steps since each robot last reached its target (0 while idle).
    """

    free: np.ndarray
    n_robots: int
    seed: int = 0
    swap: bool = True
    max_tables: int = 2048
    patience: int | None = None
    elapsed: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.free = np.array(self.free, dtype=bool)
        if self.free.ndim != 2:
            raise ValueError(f"free must be a 2-D bool grid, got shape {self.free.shape}")
        self.height, self.width = self.free.shape
        self.nbr = neighbour_table(self.free)
        self.depth = dead_end_depth(self.free).astype(np.float64)
        self.parent = branch_parent(self.free)
        if self.patience is None:
            self.patience = 2 * int(self.free.sum()) * max(self.n_robots, 1)
        if isinstance(self.patience, bool) or not isinstance(self.patience, int | np.integer):
            raise ValueError(f"patience must be a whole number >= 0, got {self.patience!r}")
        if self.patience < 0:
            raise ValueError(f"patience must be a whole number >= 0, got {self.patience}")
        v = self.nbr.shape[0]
        self.tables = DistanceTables(v, bfs_filler(self.nbr), self.max_tables)
        self._occ_now, self._occ_next = np.full(v, -1, np.int64), np.full(v, -1, np.int64)
        self.reset()

    def reset(self) -> None:
        """Forget priorities (start of an episode); the tie-breaks are drawn again from ``seed``."""
        rng = np.random.default_rng(self.seed)
        self.elapsed = np.zeros(self.n_robots, dtype=np.int64)
        self._last_goal = np.full(self.n_robots, -1, dtype=np.int64)
        self._eps = 0.1 * rng.permutation(self.n_robots) / max(self.n_robots, 1)
        self._noise = rng.random((self.n_robots, N_ACTIONS)) * 0.5

    @property
    def _pool(self) -> np.ndarray:
        """``uint16|int32[rows, V]`` the BFS tables (:class:`DistanceTables`), rows as ``slots``."""
        return self.tables.pool

    def nested_behind(self, pos: np.ndarray, goal_cells: np.ndarray) -> np.ndarray:
        """``bool[n]``: robots whose target lies on the way into a dead end to a deeper target of
        a robot that has not reached it (both targets not reached; cell ids ``row * W + col``)."""
        out = np.zeros(len(pos), dtype=bool)
        deep = np.flatnonzero((goal_cells >= 0) & (pos != goal_cells))
        deep = deep[self.depth[goal_cells[deep]] > 0]
        if len(deep) < 2:
            return out
        waiting: dict[int, list[int]] = {int(goal_cells[i]): [] for i in deep}
        for i in deep.tolist():
            waiting[int(goal_cells[i])].append(i)
        for j in deep.tolist():
            cell = int(self.parent[goal_cells[j]])
            while cell >= 0:
                out[waiting.get(cell, [])] = True
                cell = int(self.parent[cell])
        return out

    def step(
        self,
        positions: np.ndarray,
        scores: np.ndarray,
        goals: np.ndarray | None = None,
        bias: np.ndarray | None = None,
    ) -> np.ndarray:
        """Choose the joint action and update the priorities.

        Args:
            positions: ``int[n, 2]`` (row, col), pairwise distinct free cells.
            scores: ``float[n, 5]`` preference of each action (higher first; NaN/-inf last).
            goals: ``int[n, 2]`` target (row, col) of each robot, ``(-1, -1)`` for an idle robot;
                None = all idle (priorities stay at their tie-breaks, the swap is off).
            bias: optional ``float[n]`` added to the priority; below 1 it only orders robots that
                waited equally long, a larger one lets some robots overtake others.

        Returns:
            ``int64[n]`` action ids that :func:`marlm.envs.warehouse.dynamics.resolve_moves`
            executes exactly (no vertex or swap conflict, no move into a blocked cell). A robot
            on its target, or whose target changed since the last call (lifelong: it reached the
            old one), restarts its priority at 0; every other robot with a target gains one.

        Raises:
            ValueError: shapes disagree, a position or target is not a free cell.
        """
        step = self.prepare(positions, scores, goals, bias)
        return self.actions(step.pos, self.decide(step))

    def prepare(self, positions, scores, goals=None, bias=None) -> StepInputs:
        """:meth:`step`'s checks and priority update: the inputs of :meth:`decide`."""
        n, w = self.n_robots, self.width
        positions = np.asarray(positions, dtype=np.int64).reshape(-1, 2)
        scores = np.asarray(scores, dtype=np.float64)
        if positions.shape != (n, 2) or scores.shape != (n, N_ACTIONS):
            raise ValueError(
                f"positions and scores must have shapes ({n}, 2) and ({n}, {N_ACTIONS}), "
                f"got {positions.shape} and {scores.shape}"
            )
        if not _free_cells(self.free, positions).all():
            raise ValueError("positions must be free cells inside the map")
        goal_cells = np.full(n, -1, dtype=np.int64)
        if goals is not None:
            goals = np.asarray(goals, dtype=np.int64).reshape(-1, 2)
            has = goals[:, 0] >= 0
            if goals.shape != (n, 2) or not _free_cells(self.free, goals[has]).all():
                raise ValueError("goals must be free cells inside the map, or (-1, -1) for none")
            goal_cells = np.where(has, goals[:, 0] * w + goals[:, 1], -1)
        pos = positions[:, 0] * w + positions[:, 1]
        reached = (pos == goal_cells) | (goal_cells != self._last_goal)
        self._last_goal = goal_cells
        self.elapsed = np.where((goal_cells >= 0) & ~reached, self.elapsed + 1, 0)
        priority = self.elapsed + self._eps
        if bias is not None:
            priority = priority + np.asarray(bias, dtype=np.float64).reshape(n)
        priority = np.where(self.nested_behind(pos, goal_cells), priority - 1e12, priority)
        slots = self.tables.slots(goal_cells) if self.swap else np.full(n, -1, dtype=np.int64)
        cand, cand_key = np.empty((n, N_ACTIONS), np.int64), np.empty((n, N_ACTIONS))
        n_cand = np.empty(n, dtype=np.int64)
        _rank(scores, pos, self.nbr, self.depth, self._noise, cand, cand_key, n_cand, self._occ_now)
        overdue = (goal_cells >= 0) & (pos != goal_cells) & (self.elapsed >= self.patience)
        if overdue.any():
            # decide first, longest waiting first (fixed tie-break), whatever bias or nesting said
            priority = np.where(overdue, self.elapsed + self._eps, priority)
            rows = slots if self.swap else self.tables.slots(np.where(overdue, goal_cells, -1))
            self._rank_by_distance(np.flatnonzero(overdue), rows, cand, cand_key, n_cand)
        order = np.lexsort((-priority, ~overdue))
        return StepInputs(order, pos, cand, cand_key, n_cand, goal_cells, slots)

    def _rank_by_distance(self, robots, rows, cand, cand_key, n_cand) -> None:
        """Re-rank the candidate cells of ``robots`` (overdue, with targets; ``rows``: their
        distance tables) in place: distance to the target first (PIBT's ranking), their
        executor ranking after (stable sort); ``cand_key`` becomes minus the distance."""
        for i in robots.tolist():
            k = int(n_cand[i])
            dist = self.tables.distances(rows[i], cand[i, :k])
            idx = np.argsort(dist, kind="stable")
            cand[i, :k], cand_key[i, :k] = cand[i, idx], -dist[idx].astype(np.float64)

    def decide(self, s: StepInputs) -> np.ndarray:
        """``int64[n]`` next cell of each robot: PIBT over the prepared step (compiled)."""
        return _pibt_all(s.order, s.pos, s.cand, s.cand_key, s.n_cand, s.goal_cells, s.slots,
                         self._pool, self.nbr, self.swap, self._occ_now, self._occ_next)  # fmt: skip

    def actions(self, pos: np.ndarray, nxt: np.ndarray) -> np.ndarray:
        """``int64[n]`` the action ids that move each robot from cell ``pos`` to cell ``nxt``."""
        d, w = nxt - pos, self.width
        return np.select([d == -w, d == w, d == -1, d == 1], [1, 2, 3, 4], 0).astype(np.int64)


def _free_cells(free: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """``bool[k]``: each (row, col) of ``cells`` lies inside ``free``'s map on a free cell."""
    h, w = free.shape
    r, c = cells[:, 0], cells[:, 1]
    ok = (r >= 0) & (r < h) & (c >= 0) & (c < w)
    ok[ok] = free[r[ok], c[ok]]
    return ok
