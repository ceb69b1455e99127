"""The PIBT rule layer: one collision-free joint action from per-robot action preferences.

Every step, each robot brings a score for each of the 5 actions (``float[n_robots, 5]``, higher
is better: Q-values of an RL executor, negative distance-to-go of a greedy one, anything). The
layer turns those rankings into one joint action with **PIBT**, Priority Inheritance with
Backtracking (Okumura, Machida, Défago, Tamura, "Priority Inheritance with Backtracking for
Iterative Multi-agent Path Finding", Artificial Intelligence 310, 2022, Algorithm 1):

- robots decide in order of priority; a robot takes its best-ranked cell that nobody has reserved
  and that does not swap it with a robot that already decided;
- if that cell holds a robot that has not decided yet, that robot inherits the priority and must
  move away first (recursively); if it cannot, the first robot backtracks to its next cell;
- so a robot that must move pushes lower-priority robots out of its way, idle robots included:
  an idle robot is a movable obstacle, never a wall;
- priority = steps since the robot last reached its target (plus a fixed fraction per robot that
  breaks ties, below 0.1), reset on arrival: every robot becomes the highest in turn (the paper's Thm. 2).

Plain PIBT livelocks where the graph is a tree: a robot cannot pass another in a one-wide corridor
or a dead end (a station at the end of a lane with an idle robot on it). The layer adds the
**swap operation** of LaCAM3 (Okumura, "Engineering LaCAM*: Towards Real-Time, Large-Scale, and
Near-Optimal Multi-Agent Pathfinding", AAMAS 2024, §3; reference code ``Kei18/lacam3``,
``src/pibt.cpp``, ``is_swap_required`` / ``is_swap_possible``): when the robot in the way can
only get out through the pusher's own cell, the pusher reverses its ranking and *pulls* the other
robot behind it until they reach a junction, where they pass each other. Beyond LaCAM3, the swap
also applies when the pusher's target lies inside a dead-end corridor and the robot in the way
wants out (idle, or its own target is outside) while the corridor past the target has fewer free
cells than robots to hold (pushing deeper cannot make room). Robots that are pushed prefer, among
equally scored cells, cells outside dead-end branches, so an idle robot that was pulled out of a
dead end does not walk back in; among equally scored cells every robot prefers one that is empty
now (the tie-break of Okumura's reference PIBT, ``Kei18/pibt2`` ``src/pibt.cpp``).

Dead end that forks (a branch cell with two leaves, an idle robot on one leaf, the pusher's target
on the other): LaCAM3 skips a leaf whose robot stands on its own target when it counts the ways on
from a cell; the layer skips a leaf holding an idle robot too. Counting it, the fork looked like a
junction where pusher and idle robot could pass, so the pusher pushed the idle robot from the fork
into its target and pulled it back, forever; now the swap goes on until the idle robot is pulled
out of the branch onto the map's cycles.

Guarantees, checked by ``tests/hybrid/test_pibt.py`` (hypothesis, random maps with dead ends and
corridors, random scores): the joint action never puts two robots in one cell, never swaps two
robots through each other, and never moves into a wall or off the map. Progress (greedy scores, a
robot idle once it has stood on its target, up to 10 robots on maps with a one-wide ring and
dead-end corridors): every robot reaches its target within |V| x n steps provided no target lies
behind another robot's target in a dead-end branch, i.e. removing the cell of target j never cuts
target i off the map's cycles (``dead_end_depth == 0``). Without that, two robots waiting at a
branch's mouth can livelock (the deeper target must be entered first, which PIBT does not plan).

Cost: O(n_robots) per step when robots are spread out (each robot is decided once; backtracking
is bounded by the 5 candidates of each robot on the recursion path), in compiled code; the map
size enters only through tables built once (neighbour table, dead-end depth) and the distance
tables of the targets (one BFS per new target cell, cached).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from marlm.envs.warehouse.dynamics import MOVES, STAY

try:  # numba is optional: the POGEMA harness imports this file in a venv that may lack it.
    from numba import njit
except ImportError:  # pragma: no cover - exercised only without numba

    def njit(*args, **kwargs):
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

    Peels cells of degree <= 1 layer by layer (k = the layer in which the cell was peeled, so the
    tip of a dead end has the largest k). A map that is a tree peels entirely: every cell gets a
    depth. Blocked cells get 0.
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
    # the tip is the deepest: invert so that depth grows towards the tip of each branch
    out = np.zeros_like(depth)
    peeled = depth > 0
    out[peeled] = layer + 1 - depth[peeled]
    return out


@njit(cache=True)
def bfs_distance(nbr, source):  # pragma: no cover - compiled
    """``int32[V]`` BFS distance to ``source`` over ``nbr`` (:func:`neighbour_table`)."""
    v = nbr.shape[0]
    dist = np.full(v, UNREACHABLE, dtype=np.int32)
    queue = np.empty(v, dtype=np.int64)
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
    return dist


@njit(cache=True)
def _rank(
    scores, pos, nbr, depth, noise, cand, cand_key, n_cand, occ
):  # pragma: no cover - compiled
    """Fill ``cand[i]`` with robot i's reachable cells, best first.

    Key: score (descending), then dead-end depth (ascending), then empty before occupied now
    (``Kei18/pibt2``), then ``noise`` (a fixed random tie-break). Moves into blocked cells are
    dropped; STAY (the own cell) is always a candidate. ``occ``: ``int64[V]`` scratch holding -1
    (restored).
    """
    n = pos.shape[0]
    keys = np.empty(5, dtype=np.float64)
    keys2 = np.empty(5, dtype=np.float64)
    for i in range(n):
        occ[pos[i]] = i
    for i in range(n):
        k = 0
        for a in range(5):
            c = nbr[pos[i], a]
            if c < 0:
                continue
            s = scores[i, a]
            if not np.isfinite(s):
                s = -1e300
            # insertion sort by (-score, depth + noise)
            key2 = depth[c] + noise[i, a]
            if c != pos[i] and occ[c] >= 0:
                key2 += 0.5
            j = k
            while j > 0 and (keys[j - 1] < s or (keys[j - 1] == s and keys2[j - 1] > key2)):
                keys[j] = keys[j - 1]
                keys2[j] = keys2[j - 1]
                cand[i, j] = cand[i, j - 1]
                j -= 1
            keys[j] = s
            keys2[j] = key2
            cand[i, j] = c
            k += 1
        n_cand[i] = k
        for j in range(k):
            cand_key[i, j] = keys[j]
    for i in range(n):
        occ[pos[i]] = -1


@njit(cache=True)
def _dist(i, v, goal_slot, pool):  # pragma: no cover - compiled
    s = goal_slot[i]
    if s < 0:
        return 0
    return pool[s, v]


@njit(cache=True)
def _ways_on(v_pusher, v_puller, occ_now, goal_cell, nbr):  # pragma: no cover - compiled
    """``(m, u)``: how many cells the puller at ``v_puller`` can back into, and the last of them.

    Excluded: the pusher's cell, and a dead-end cell where a robot already stands on its target
    (LaCAM3 ``src/pibt.cpp``, the neighbour count shared by ``is_swap_required`` and
    ``is_swap_possible``) or an idle robot stands (no target: in MAPF terms it rests on its goal;
    it can leave the leaf only through ``v_puller``, so the two cannot pass there).
    """
    m = 0
    tmp = -1
    for a in range(1, 5):
        u = nbr[v_puller, a]
        if u < 0:
            continue
        k = occ_now[u]
        deg_u = 0
        for b in range(1, 5):
            if nbr[u, b] >= 0:
                deg_u += 1
        if u == v_pusher or (deg_u == 1 and k >= 0 and (goal_cell[k] == u or goal_cell[k] < 0)):
            continue
        m += 1
        tmp = u
    return m, tmp


@njit(cache=True)
def _room_deeper(pusher, v_pusher, v_puller, occ_now, goal_cell, goal_slot, pool, nbr):
    """True unless the corridor from ``v_puller`` away from ``v_pusher`` is a dead end holding
    more robots than it has cells past the pusher's target (walks while there is one way on).
    """  # pragma: no cover - compiled
    guard = nbr.shape[0]
    robots = 0
    room = 0
    past_goal = False
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
        v_pusher = v_puller
        v_puller = tmp
    return True


@njit(cache=True)
def _swap_required(pusher, puller, v_pusher, v_puller, occ_now, goal_cell, goal_slot, pool, nbr):
    """LaCAM3 ``is_swap_required``: the pusher can only pass the puller by pulling it along.

    Walks from the puller's cell away from the pusher while the pusher still gains: a junction
    (two or more other exits) means they can pass there, no swap needed. An idle puller (no
    target) counts as wanting to come out. If the pusher stops gaining inside a corridor (its
    target is there), the swap is required when the corridor has no room deeper
    (:func:`_room_deeper`).
    """  # pragma: no cover - compiled
    if goal_slot[pusher] < 0:
        return False
    guard = nbr.shape[0]
    dead_end = False
    v_pusher0, v_puller0 = v_pusher, v_puller
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
        v_pusher = v_puller
        v_puller = tmp
    # An idle puller (no target) must come out only if the walk ended in a dead end; one with a
    # target, if coming out brings it closer (LaCAM3's condition).
    if not dead_end:
        # Beyond LaCAM3: the pusher's target lies inside a dead-end corridor and a robot that
        # wants out (idle, or closer to its own target outside) stands in the way. Pushing it
        # deeper works only if the corridor past the target has room for every robot in it;
        # otherwise it must come out past the pusher.
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
    v_pusher = v_pusher_origin
    v_puller = v_puller_origin
    guard = nbr.shape[0]
    while v_puller != v_pusher_origin and guard > 0:
        guard -= 1
        m, tmp = _ways_on(v_pusher, v_puller, occ_now, goal_cell, nbr)
        if m >= 2:
            return True
        if m <= 0:
            return False
        v_pusher = v_puller
        v_puller = tmp
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
    idle robot: last of all); if LaCAM3's swap applies, the ranking reversed.
    """  # pragma: no cover - compiled
    k_max = n_cand[i]
    for k in range(k_max):
        order[k] = cand[i, k]
    if pusher >= 0 and goal_slot[pusher] >= 0:
        # Pushed: prefer cells not ahead on the pusher's way (closer to its target than it is
        # now), so the pushed robot does not walk in front of the pusher again.
        d_here = _dist(pusher, pos[pusher], goal_slot, pool)
        ahead = np.zeros(5, dtype=np.int64)
        for k in range(k_max):
            ahead[k] = 1 if _dist(pusher, order[k], goal_slot, pool) < d_here else 0
        idle = goal_slot[i] < 0  # no target, no real preference: "not ahead" comes first
        for k in range(1, k_max):
            c, a, s = order[k], ahead[k], cand_key[i, k]
            m = k
            while m > 0 and (idle or cand_key[i, m - 1] == s) and ahead[m - 1] > a:
                order[m] = order[m - 1]
                ahead[m] = ahead[m - 1]
                m -= 1
            order[m] = c
            ahead[m] = a
    swap_agent = -1
    if swap:
        swap_agent = _swap_agent(i, pos, nxt, cand, occ_now, goal_cell, goal_slot, pool, nbr)
        if swap_agent >= 0:
            for k in range(k_max):
                order[k] = cand[i, k_max - 1 - k]
    return swap_agent


@njit(cache=True)
def _pibt_all(
    order, pos, cand, cand_key, n_cand, goal_cell, goal_slot, pool, nbr, swap, occ_now, occ_next
):
    """PIBT for every robot in ``order`` (AIJ 2022, Algorithm 1, with LaCAM3's swap).

    The paper's recursive ``PIBT(i, j)`` runs here on an explicit stack (one frame per robot
    being decided; a robot is on the stack at most once, so depth <= n), which numba can cache
    on disk (its cache of self-recursive functions crashes when loaded back). Returns
    ``int64[n]`` next cell of each robot. ``occ_now`` / ``occ_next`` are ``int64[V]`` scratch
    arrays holding -1, restored on return.
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
                sa = st_swap[depth]
                if swap and st_k[depth] == 0 and sa >= 0 and nxt[sa] < 0 and occ_next[pos[i]] < 0:
                    occ_next[pos[i]] = sa  # pull the swap agent into i's cell
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


def pibt_step(
    positions: np.ndarray,
    scores: np.ndarray,
    priority: np.ndarray,
    nbr: np.ndarray,
    width: int,
    *,
    goal_cells: np.ndarray | None = None,
    goal_slot: np.ndarray | None = None,
    pool: np.ndarray | None = None,
    depth: np.ndarray | None = None,
    noise: np.ndarray | None = None,
    swap: bool = True,
    scratch: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """One PIBT step as a pure function: the joint action from scores and priorities.

    Args:
        positions: ``int[n, 2]`` (row, col) of each robot, pairwise distinct free cells.
        scores: ``float[n, 5]`` preference of each action (higher first); NaN/-inf = last.
        priority: ``float[n]`` higher decides first (distinct values give a strict order).
        nbr: :func:`neighbour_table` of the map; ``width`` its column count.
        goal_cells: ``int64[n]`` target cell id per robot, -1 for an idle robot.
        goal_slot: ``int64[n]`` row of ``pool`` holding the robot's distance table, -1 if idle.
        pool: ``int32[k, V]`` distance-to-target tables (:func:`bfs_distance`); needed by the
            swap operation only (without it the swap is off).
        depth: ``int64[V]`` :func:`dead_end_depth` (default zeros); noise: ``float[n, 5]`` in
            [0, 1) tie-break between equal scores (default zeros = action order).
        swap: use LaCAM3's swap operation.
        scratch: two ``int64[V]`` arrays holding -1 (returned so), to save allocations.

    Returns:
        ``int64[n]`` action ids (0..4) that :func:`marlm.envs.warehouse.dynamics.resolve_moves`
        executes exactly: no vertex conflict, no swap conflict, no move into a blocked cell.

    Raises:
        ValueError: shapes disagree.
    """
    pos2 = np.asarray(positions, dtype=np.int64).reshape(-1, 2)
    n = len(pos2)
    scores = np.asarray(scores, dtype=np.float64)
    if scores.shape != (n, N_ACTIONS):
        raise ValueError(f"scores must have shape ({n}, {N_ACTIONS}), got {scores.shape}")
    priority = np.asarray(priority, dtype=np.float64).reshape(-1)
    if priority.shape != (n,):
        raise ValueError(f"priority must have shape ({n},), got {priority.shape}")
    v = nbr.shape[0]
    pos = pos2[:, 0] * width + pos2[:, 1]
    if n and (pos.min() < 0 or pos.max() >= v or (nbr[pos, STAY] < 0).any()):
        raise ValueError("positions must be free cells inside the map")
    if goal_cells is None:
        goal_cells = np.full(n, -1, dtype=np.int64)
    if pool is None or goal_slot is None:
        pool = np.zeros((1, v), dtype=np.int32)
        goal_slot = np.full(n, -1, dtype=np.int64)
        swap = False
    if depth is None:
        depth = np.zeros(v, dtype=np.int64)
    if noise is None:
        noise = np.zeros((n, N_ACTIONS), dtype=np.float64)
    cand = np.empty((n, N_ACTIONS), dtype=np.int64)
    cand_key = np.empty((n, N_ACTIONS), dtype=np.float64)
    n_cand = np.empty(n, dtype=np.int64)
    if scratch is None:
        scratch = (np.full(v, -1, dtype=np.int64), np.full(v, -1, dtype=np.int64))
    occ_now, occ_next = scratch
    _rank(scores, pos, nbr, np.asarray(depth, dtype=np.float64), noise, cand, cand_key, n_cand,
          occ_now)  # fmt: skip
    order = np.argsort(-priority, kind="stable")
    nxt = _pibt_all(
        order, pos, cand, cand_key, n_cand, np.asarray(goal_cells, dtype=np.int64),
        np.asarray(goal_slot, dtype=np.int64), pool, nbr, bool(swap), occ_now, occ_next,
    )  # fmt: skip
    return _actions_of(pos, nxt, width)


@njit(cache=True)
def _actions_of(pos, nxt, width):  # pragma: no cover - compiled
    """``int64[n]`` action ids that move each robot from cell ``pos`` to cell ``nxt``."""
    n = pos.shape[0]
    actions = np.zeros(n, dtype=np.int64)
    for i in range(n):
        d = nxt[i] - pos[i]
        if d == -width:
            actions[i] = 1
        elif d == width:
            actions[i] = 2
        elif d == -1:
            actions[i] = 3
        elif d == 1:
            actions[i] = 4
    return actions


@dataclass
class Pibt:
    """PIBT with persistent priorities and cached distance tables, for one map.

    Args:
        free: ``bool[H, W]``, True where a robot may stand.
        n_robots: number of robots.
        seed: seed of the fixed tie-breaks (robot order among equal priorities, equal scores).
        swap: use LaCAM3's swap operation (dead ends, one-wide corridors).
        max_tables: distance tables kept before the cache is cleared (memory:
            ``max_tables * H * W * 4`` bytes).

    Attributes:
        elapsed: ``int64[n]`` steps since each robot last reached its target (0 while idle).
    """

    free: np.ndarray
    n_robots: int
    seed: int = 0
    swap: bool = True
    max_tables: int = 2048
    elapsed: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.free = np.array(self.free, dtype=bool)
        if self.free.ndim != 2:
            raise ValueError(f"free must be a 2-D bool grid, got shape {self.free.shape}")
        self.height, self.width = self.free.shape
        self.nbr = neighbour_table(self.free)
        self.depth = dead_end_depth(self.free).astype(np.float64)
        v = self.nbr.shape[0]
        self._slot_of = np.full(v, -1, dtype=np.int64)
        self._pool = np.zeros((min(64, self.max_tables), v), dtype=np.int32)
        self._n_tables = 0
        self._occ_now = np.full(v, -1, dtype=np.int64)
        self._occ_next = np.full(v, -1, dtype=np.int64)
        self.reset()

    def reset(self) -> None:
        """Forget priorities (start of an episode); the tie-breaks are drawn again from ``seed``."""
        rng = np.random.default_rng(self.seed)
        self.elapsed = np.zeros(self.n_robots, dtype=np.int64)
        self._last_goal = np.full(self.n_robots, -1, dtype=np.int64)
        self._eps = 0.1 * rng.permutation(self.n_robots) / max(self.n_robots, 1)
        self._noise = rng.random((self.n_robots, N_ACTIONS)) * 0.5

    def _slots(self, goal_cells: np.ndarray) -> np.ndarray:
        """Row of the table pool for each robot's target, computing missing tables."""
        slots = self._slot_of[np.maximum(goal_cells, 0)]
        if (slots >= 0).all() or not ((goal_cells >= 0) & (slots < 0)).any():
            return np.where(goal_cells >= 0, slots, -1)
        missing = np.unique(goal_cells[(goal_cells >= 0) & (slots < 0)])
        if self._n_tables + len(missing) > self.max_tables:
            self._slot_of[:] = -1
            self._n_tables = 0
            missing = np.unique(goal_cells[goal_cells >= 0])
        need = self._n_tables + len(missing)
        if need > len(self._pool):
            grown = np.zeros((min(max(need, 2 * len(self._pool)), max(need, self.max_tables)),
                              self._pool.shape[1]), dtype=np.int32)  # fmt: skip
            grown[: self._n_tables] = self._pool[: self._n_tables]
            self._pool = grown
        for cell in missing.tolist():
            self._pool[self._n_tables] = bfs_distance(self.nbr, cell)
            self._slot_of[cell] = self._n_tables
            self._n_tables += 1
        return np.where(goal_cells >= 0, self._slot_of[np.maximum(goal_cells, 0)], -1)

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
            scores: ``float[n, 5]`` action preferences, higher first.
            goals: ``int[n, 2]`` target (row, col) of each robot, ``(-1, -1)`` for an idle robot;
                None = all idle (then priorities stay at their tie-break values and the swap is
                off).
            bias: optional ``float[n]`` added to the priority (elapsed steps + a tie-break in
                [0, 1)); a bias below 1 only orders robots that waited equally long, a larger
                one lets some robots overtake others that waited longer.

        Returns:
            ``int64[n]`` collision-free action ids. A robot standing on its target, or whose
            target changed since the last call (lifelong: it reached the old one), has its
            priority reset (``elapsed`` becomes 0); every other robot with a target gains one.

        Raises:
            ValueError: shapes disagree, a position or target is not a free cell.
        """
        positions = np.asarray(positions, dtype=np.int64).reshape(-1, 2)
        n = self.n_robots
        if positions.shape != (n, 2):
            raise ValueError(f"positions must have shape ({n}, 2), got {positions.shape}")
        if goals is None:
            goal_cells = np.full(n, -1, dtype=np.int64)
        else:
            goals = np.asarray(goals, dtype=np.int64).reshape(-1, 2)
            if goals.shape != (n, 2):
                raise ValueError(f"goals must have shape ({n}, 2), got {goals.shape}")
            has = goals[:, 0] >= 0
            goal_cells = np.where(has, goals[:, 0] * self.width + goals[:, 1], -1)
            bad = has & (
                (goals[:, 0] >= self.height) | (goals[:, 1] < 0) | (goals[:, 1] >= self.width)
            )
            if (
                bad.any()
                or (has & ~bad).any()
                and not self.free[goals[has, 0], goals[has, 1]].all()
            ):
                raise ValueError("goals must be free cells inside the map, or (-1, -1) for none")
        pos = positions[:, 0] * self.width + positions[:, 1]
        # reached: standing on the target, or given a new one (lifelong: the old one was reached)
        reached = (pos == goal_cells) | (goal_cells != self._last_goal)
        self._last_goal = goal_cells
        self.elapsed = np.where((goal_cells >= 0) & ~reached, self.elapsed + 1, 0)
        priority = self.elapsed + self._eps
        if bias is not None:
            priority = priority + np.asarray(bias, dtype=np.float64).reshape(n)
        slots = self._slots(goal_cells) if self.swap else None
        return pibt_step(
            positions, scores, priority, self.nbr, self.width, goal_cells=goal_cells,
            goal_slot=slots, pool=self._pool if self.swap else None, depth=self.depth,
            noise=self._noise, swap=self.swap, scratch=(self._occ_now, self._occ_next),
        )  # fmt: skip


def distance_scores(
    positions: np.ndarray,
    goal_dist: np.ndarray,
    nbr: np.ndarray,
    width: int,
    table_of: np.ndarray | None = None,
) -> np.ndarray:
    """Greedy preferences: ``float[n, 5]`` = minus the distance-to-go after each action.

    Args:
        positions: ``int[n, 2]``; goal_dist: ``int32[k, V]`` distance tables
            (:func:`bfs_distance`); nbr: :func:`neighbour_table`; width: map columns.
        table_of: ``int[n]`` row of ``goal_dist`` for each robot (default: row ``i`` for robot
            ``i``, so ``k == n``); robots sharing a target share a row (no copy per robot).

    Returns:
        ``float64[n, 5]``; blocked moves get ``-inf``; STAY gets minus the current distance.
    """
    pos = np.asarray(positions, dtype=np.int64)
    cells = pos[:, 0] * width + pos[:, 1]
    nxt = nbr[cells]
    rows = np.arange(len(cells)) if table_of is None else np.asarray(table_of, dtype=np.int64)
    d = goal_dist[rows[:, None], np.maximum(nxt, 0)].astype(np.float64)
    return np.where(nxt >= 0, -d, -np.inf)
