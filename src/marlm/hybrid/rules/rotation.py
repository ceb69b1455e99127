"""The rule layer for robots that turn: PIBT over cells, then each chosen cell reached by the
action model of the League of Robot Runners (forward, rotate clockwise, rotate counter-clockwise,
wait), with states ``(cell, heading)``.

One step:

1. PIBT (Okumura et al., "Priority inheritance with backtracking for iterative multi-agent path
   finding", AIJ 2022, Alg. 1) reserves for every robot a next cell among its four neighbours and
   its own cell, highest priority first, pushing lower robots out of the way; each candidate is
   ranked by the rotation-aware cost to go: turns to face it + 1 + BFS distance from it to the goal
   (staying: 1 + the distance from here), ties broken by a seeded noise.
2. A robot whose reserved cell is in front of it moves forward; one whose reserved cell is beside
   or behind it rotates towards it (clockwise for a half turn) and stays; one that keeps its cell
   turns towards its best neighbour when it has somewhere to go, else waits.
3. A forward move into a cell whose robot does not leave is cancelled (wait), and the cancellation
   propagates back along the chain of robots behind it (the start-kit's default planner does the
   same check, ``moveCheck`` in its ``pibt.cpp``).

Guarantees, whatever the priorities, goals and noise: no two robots end in one cell (PIBT reserves
each cell once; a forward move survives step 3 only into a cell whose robot leaves), and no two
robots swap cells (PIBT never moves a robot into its pusher's cell, and step 3 only removes moves).
Rotating cycles of three or more robots are kept: the action model allows them. Reaching the goal:
PIBT's guarantee (the highest-priority robot reaches its goal) needs its moves to happen; here a
reserved neighbour beside the robot costs one or two turns first. The lifelong priority (steps since
the goal was set) keeps the waiting robot on top until it gets there; :func:`rotation_step` is
tested to reach every goal on small hand-written maps, not proved to.

Headings and actions follow the start-kit: heading 0 east (column + 1), 1 south (row + 1), 2 west,
3 north; :data:`FW` 0, :data:`CR` 1 (clockwise, heading + 1), :data:`CCR` 2, :data:`W` 3.
Cell id = ``row * W + col``.
"""

from __future__ import annotations

import numpy as np

from marlm.hybrid.core.graph import neighbour_table, njit

FW, CR, CCR, W = 0, 1, 2, 3
"""The start-kit's action ids (``Action::FW, CR, CCR, W``)."""

EAST, SOUTH, WEST, NORTH = 0, 1, 2, 3
"""The start-kit's headings."""


def heading_table(free: np.ndarray) -> np.ndarray:
    """``int64[H*W, 4]``: the cell in front of each cell for each heading (east, south, west,
    north), -1 if blocked or off the map. ``free``: ``bool[H, W]``."""
    nbr = neighbour_table(free)  # columns: stay, up, down, left, right
    return np.ascontiguousarray(nbr[:, [4, 2, 3, 1]])


def apply_actions(
    front: np.ndarray, cell: np.ndarray, heading: np.ndarray, actions: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The states after ``actions`` under the start-kit's action model (no conflict check):
    ``(cell int64[n], heading int64[n])``. Raises ValueError on a forward move into a wall."""
    cell, heading, actions = (np.asarray(a, dtype=np.int64) for a in (cell, heading, actions))
    nxt_cell, nxt_head = cell.copy(), heading.copy()
    fw = actions == FW
    nxt_cell[fw] = front[cell[fw], heading[fw]]
    if (nxt_cell < 0).any():
        raise ValueError(f"forward into a wall for robots {np.flatnonzero(nxt_cell < 0).tolist()}")
    nxt_head[actions == CR] = (heading[actions == CR] + 1) % 4
    nxt_head[actions == CCR] = (heading[actions == CCR] + 3) % 4
    return nxt_cell, nxt_head


def conflicts(cell: np.ndarray, nxt_cell: np.ndarray) -> list[tuple[str, int, int]]:
    """The vertex and edge (swap) conflicts of one joint move, as the start-kit's
    ``ActionModelWithRotate::is_valid`` counts them: ``[(kind, i, j)]``, empty if feasible."""
    out: list[tuple[str, int, int]] = []
    at: dict[int, int] = {}
    edge: dict[tuple[int, int], int] = {}
    for i, (u, v) in enumerate(
        zip(np.asarray(cell).tolist(), np.asarray(nxt_cell).tolist(), strict=True)
    ):
        if v in at:
            out.append(("vertex", at[v], i))
        if (u, v) in edge and u != v:
            out.append(("edge", edge[(u, v)], i))
        at[v] = i
        edge[(v, u)] = i
    return out


@njit(cache=True)
def _turns(h, d):  # pragma: no cover - compiled
    r = (d - h) % 4
    return 2 if r == 2 else (0 if r == 0 else 1)


@njit(cache=True)
def _dist(i, c, goal_slot, pool):  # pragma: no cover - compiled
    s = goal_slot[i]
    return 0 if s < 0 else pool[s, c]


@njit(cache=True)
def _rank(i, cell, head, goal_slot, pool, front, noise, out):  # pragma: no cover - compiled
    """``i``'s candidate cells (4 neighbours, own cell) into ``out``, best first; their count."""
    v = cell[i]
    cand = np.empty(5, dtype=np.int64)
    key = np.empty(5, dtype=np.float64)
    k = 0
    for d in range(4):
        u = front[v, d]
        if u >= 0:
            cand[k] = u
            key[k] = _turns(head[i], d) + 1 + _dist(i, u, goal_slot, pool) + noise[i, d]
            k += 1
    cand[k] = v
    key[k] = 1 + _dist(i, v, goal_slot, pool) + noise[i, 4]
    k += 1
    order = np.argsort(key[:k])
    for o in range(k):
        out[o] = cand[order[o]]
    return k


@njit(cache=True)
def _pibt(
    root,
    cell,
    head,
    nxt,
    occ_now,
    occ_next,
    goal_slot,
    pool,
    front,
    noise,
    st_i,
    st_parent,
    st_o,
    st_k,
    st_cand,
):  # pragma: no cover - compiled
    """Okumura's recursive ``funcPIBT`` (pibt2's ``pibt.cpp``) from ``root``, on an explicit
    stack (numba caches no self-recursive function): each frame tries its robot's candidates in
    order; a push calls the occupant's frame; a failed push tries the next candidate; a robot
    whose candidates all fail keeps its cell. The reference recursion is in the tests."""
    top = 0
    st_i[0], st_parent[0], st_o[0] = root, -1, 0
    st_k[0] = _rank(root, cell, head, goal_slot, pool, front, noise, st_cand[0])
    res = -1  # result of the frame just popped: -1 none, 0 failed, 1 succeeded
    while top >= 0:
        i, parent = st_i[top], st_parent[top]
        if res == 1:  # the pushed robot moved away: i keeps the cell it reserved
            res = 1
            top -= 1
            continue
        res = -1
        pushed = False
        while st_o[top] < st_k[top]:
            u = st_cand[top, st_o[top]]
            st_o[top] += 1
            if occ_next[u] >= 0:
                continue
            if parent >= 0 and u == cell[parent]:
                continue  # never swap with the robot pushing us
            if occ_now[u] >= 0 and nxt[occ_now[u]] == cell[i]:
                continue  # nor with a robot committed to our cell
            occ_next[u] = i
            nxt[i] = u
            j = occ_now[u]
            if j >= 0 and j != i and nxt[j] < 0:
                top += 1
                st_i[top], st_parent[top], st_o[top] = j, i, 0
                st_k[top] = _rank(j, cell, head, goal_slot, pool, front, noise, st_cand[top])
                pushed = True
                break
            res = 1
            break
        if pushed:
            continue
        if res != 1:  # every candidate failed: keep the cell
            occ_next[cell[i]] = i
            nxt[i] = cell[i]
            res = 0
        top -= 1


@njit(cache=True)
def _step(cell, head, goal_slot, pool, front, order, noise, n_cells, commit):  # pragma: no cover
    n = len(cell)
    occ_now = np.full(n_cells, -1, dtype=np.int64)
    occ_next = np.full(n_cells, -1, dtype=np.int64)
    nxt = np.full(n, -1, dtype=np.int64)
    st_i = np.empty(n, dtype=np.int64)
    st_parent = np.empty(n, dtype=np.int64)
    st_o = np.empty(n, dtype=np.int64)
    st_k = np.empty(n, dtype=np.int64)
    st_cand = np.empty((n, 5), dtype=np.int64)
    for i in range(n):
        occ_now[cell[i]] = i
    for i in range(n):  # a robot still turning towards the neighbour it chose keeps it
        c = commit[i]
        if c >= 0 and c != cell[i] and occ_next[c] < 0:
            for d in range(4):
                if front[cell[i], d] == c:
                    nxt[i] = c
                    occ_next[c] = i
    for o in range(n):
        i = order[o]
        if nxt[i] < 0:
            _pibt(
                i,
                cell,
                head,
                nxt,
                occ_now,
                occ_next,
                goal_slot,
                pool,
                front,
                noise,
                st_i,
                st_parent,
                st_o,
                st_k,
                st_cand,
            )
    act = np.full(n, W, dtype=np.int64)
    moving = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        v = cell[i]
        if nxt[i] == v:
            # keep the cell; face the best neighbour if the goal is elsewhere
            if goal_slot[i] >= 0 and _dist(i, v, goal_slot, pool) > 0:
                best, best_d = -1, _dist(i, v, goal_slot, pool)
                for d in range(4):
                    u = front[v, d]
                    if u >= 0 and _dist(i, u, goal_slot, pool) < best_d:
                        best, best_d = d, _dist(i, u, goal_slot, pool)
                ahead = front[v, head[i]]
                if ahead >= 0 and _dist(i, ahead, goal_slot, pool) == best_d:
                    best = head[i]  # already facing a best neighbour
                if best >= 0 and best != head[i]:
                    act[i] = CCR if (best - head[i]) % 4 == 3 else CR
            continue
        d = 0
        while front[v, d] != nxt[i]:
            d += 1
        if d == head[i]:
            act[i] = FW
            moving[i] = True
        else:
            act[i] = CCR if (d - head[i]) % 4 == 3 else CR
    # cancel forward moves into cells whose robot stays (or that another robot enters, or that
    # swap), back along the chain of robots behind: no vertex or edge conflict survives
    into = np.full(n_cells, -1, dtype=np.int64)
    stack = np.empty(2 * n, dtype=np.int64)
    top = 0
    for i in range(n):
        if moving[i]:
            u = nxt[i]
            j = occ_now[u]
            if into[u] >= 0 or (j >= 0 and moving[j] and nxt[j] == cell[i]):
                moving[i] = False
                act[i] = W
            else:
                into[u] = i
    for i in range(n):
        if not moving[i]:
            stack[top] = i
            top += 1
    while top > 0:
        top -= 1
        j = stack[top]  # j keeps its cell: whoever wanted it stays too
        k = into[cell[j]]
        if k >= 0 and moving[k]:
            moving[k] = False
            act[k] = W
            into[cell[j]] = -1
            stack[top] = k
            top += 1
    for i in range(n):
        commit[i] = nxt[i] if nxt[i] != cell[i] else -1
    return act, nxt


def rotation_step(
    front: np.ndarray,
    cell: np.ndarray,
    heading: np.ndarray,
    goal_slot: np.ndarray,
    pool: np.ndarray,
    priority: np.ndarray,
    rng: np.random.Generator,
    commit: np.ndarray | None = None,
) -> np.ndarray:
    """One joint move of the rule layer for turning robots.

    Args:
        front: ``int64[V, 4]`` from :func:`heading_table`; cell, heading: ``int64[n]`` each
            robot's state; goal_slot: ``int64[n]`` row of ``pool`` holding the distances to the
            robot's goal, -1 = no goal (it stays unless pushed); pool: ``int[rows, V]`` BFS
            distances (e.g. :class:`marlm.hybrid.core.graph.DistanceTables`' ``pool``);
            priority: ``float64[n]``, higher plans first; rng: the tie-break noise;
            commit: ``int64[n]`` each robot's chosen cell not reached yet (-1 none), read and
            updated in place: a robot turning towards its cell keeps it reserved, unplanned,
            until it gets there (the start-kit's default planner does the same); None = no
            memory between steps.

    Returns:
        ``int64[n]`` actions (:data:`FW`, :data:`CR`, :data:`CCR`, :data:`W`): no vertex or
        swap conflict (see the module docstring).
    """
    cell = np.ascontiguousarray(cell, dtype=np.int64)
    heading = np.ascontiguousarray(heading, dtype=np.int64)
    goal_slot = np.ascontiguousarray(goal_slot, dtype=np.int64)
    order = np.argsort(-np.asarray(priority, dtype=np.float64), kind="stable")
    noise = rng.random((len(cell), 5)) * 0.5
    if commit is None:
        commit = np.full(len(cell), -1, dtype=np.int64)
    act, _ = _step(cell, heading, goal_slot, pool, front, order, noise, front.shape[0], commit)
    return act
