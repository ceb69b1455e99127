"""Windowed planning under the rule layer: PIBT rolled out over a window, improved by MAPF-LNS.

Every step, :class:`WindowedMover` plans the next ``window`` steps of every robot and hands the
first step of each plan to PIBT as a strongly preferred move (the score seam):

1. PIBT itself (:class:`marlm.hybrid.rules.pibt.Pibt`, with the wrapped mover's scores for the
   first step and its guided distance-to-go after) is rolled out ``window`` steps: an initial,
   conflict-free plan of everyone. A robot that reaches its target within the window holds
   there: its next target is unknown (POGEMA draws it only when the robot arrives).
2. Large-neighbourhood search (MAPF-LNS: Li, Chen, Harabor, Stuckey, Koenig, "Anytime Multi-Agent
   Path Finding via Large Neighborhood Search", IJCAI 2021; "MAPF-LNS2", AAAI 2022) improves the
   plan: ``iterations`` times, a group of ``group`` robots (one drawn by its delay, and the
   robots nearest to it) is removed and replanned one by one, in a random order, with a
   space-time search against the others' window paths (:func:`_window_path`); the change is kept
   when it lowers the group's window cost. The robot first in PIBT's order, once it has waited
   ``patience`` steps for its target, is not replanned: it keeps PIBT's path, so, as in PIBT,
   the robot that waited longest makes its way. The
   window cost of a robot is the recipe of WPPL (Jiang, Zhang, Chen, Li, Koenig et al., "Scaling Lifelong Multi-Agent Path Finding to More
   Realistic Settings", SoCS 2024; League of Robot Runners 2023): ``unit * t`` if it reaches
   its target first at step ``t <= window``, else ``unit * window`` plus its guided
   distance-to-go from where the window ends (``unit``: the mover's cheapest move), so the
   progress of every robot counts, not only the first arrival.
3. The first step of each improved path becomes a bonus on that robot's score; PIBT (without
   LaCAM3's swap in this pass: the preferred moves already form a conflict-free joint move)
   chooses the joint move, and with every robot's best move in one vertex- and swap-free joint
   move PIBT plays exactly it. So no conflict can come from the planner: PIBT still checks every
   move (reserved cells, swaps, walls). When the search changed nothing, PIBT's own move of
   step 1 is played, unchanged.

The window is planned again every step (windows overlap); only the first step is executed.
Costs: ``window`` PIBT steps and ``iterations * group`` space-time searches of
``O(window * V * 5)`` each (compiled) per step. Needs only numpy (numba if present), so the
POGEMA harness loads it by path (``benchmarks/pogema/load_marlm.py``).
"""

from __future__ import annotations

import numpy as np

from marlm.hybrid.core.graph import N_ACTIONS, UNREACHABLE, njit
from marlm.hybrid.rules.pibt import _pibt_all, _rank

PREFERRED = 1e12
"""Score bonus of a robot's planned first move (scores are minus guided distances, far smaller)."""

_NONE = 1 << 60


@njit(cache=True)
def _window_path(nbr, occ, start, goal, togo, unit, path):  # pragma: no cover - compiled
    """Cheapest window path of one robot against the others' reservations (space-time search).

    A breadth-first sweep over the time layers ``t = 0..w`` (``w = occ.shape[0] - 1``) of the
    (cell, arrived) states: a move into cell ``u`` at ``t`` is allowed when ``occ[t, u] < 0``
    and it does not swap with the robot ``occ[t - 1, u]``. Cost as the module's window cost:
    ``unit * t`` of the first arrival at ``goal``, else ``unit * w + togo[end]``.

    Args:
        nbr: ``int64[V, 5]`` neighbour table; occ: ``int64[w + 1, V]`` the other robots' cells
            per step (robot id, -1 free); start, goal: cells; togo: ``int64[V]`` guided
            distance to ``goal``; unit: cost of one step; path: ``int64[w + 1]`` output.

    Returns:
        the path's window cost, or -1 when no path stays clear of the others up to ``w``.
    """
    w, v_n = occ.shape[0] - 1, nbr.shape[0]
    arr = np.full((w + 1, v_n), _NONE, dtype=np.int64)  # earliest arrival among arrived paths
    seen = np.zeros((w + 1, v_n), dtype=np.bool_)  # reached, target not yet reached
    par0 = np.full((w + 1, v_n), -1, dtype=np.int64)
    par1 = np.full((w + 1, v_n), -1, dtype=np.int64)  # previous cell * 2 + its arrived flag
    if start == goal:
        arr[0, start] = 0
    else:
        seen[0, start] = True
    for t in range(1, w + 1):
        for v in range(v_n):
            s0, s1 = seen[t - 1, v], arr[t - 1, v] < _NONE
            if not (s0 or s1):
                continue
            for a in range(5):
                u = nbr[v, a]
                if u < 0 or occ[t, u] >= 0:
                    continue
                if u != v:
                    j = occ[t - 1, u]
                    if j >= 0 and occ[t, v] == j:
                        continue  # swap with robot j
                if s1 and arr[t - 1, v] < arr[t, u]:
                    arr[t, u] = arr[t - 1, v]
                    par1[t, u] = v * 2 + 1
                if s0:
                    if u == goal:
                        if t < arr[t, u]:
                            arr[t, u] = t
                            par1[t, u] = v * 2
                    elif not seen[t, u]:
                        seen[t, u] = True
                        par0[t, u] = v
    best, end, flag = _NONE, -1, 0
    for v in range(v_n):  # arrived: earliest arrival, then ending nearest the target
        if arr[w, v] < _NONE:
            key = arr[w, v] * unit * 4 * v_n + min(togo[v], 4 * v_n)
            if key < best:
                best, end, flag = key, v, 1
    if end < 0:
        for v in range(v_n):
            if seen[w, v] and togo[v] < best:
                best, end = togo[v], v
    if end < 0:
        return -1
    cost = unit * arr[w, end] if flag else unit * w + togo[end]
    cur = end
    for t in range(w, 0, -1):
        path[t] = cur
        if flag:
            p = par1[t, cur]
            cur, flag = p // 2, p % 2
        else:
            cur = par0[t, cur]
    path[0] = cur
    return cost


def window_costs(paths: np.ndarray, goals: np.ndarray, togo: np.ndarray, unit: int) -> np.ndarray:
    """``int64[n]`` window cost of each robot's path (the module's objective).

    Args:
        paths: ``int64[w + 1, n]`` cells per step (row 0: now); goals: ``int64[n]`` target
            cells; togo: ``int64[n, V]`` guided distance of every cell to each robot's target;
            unit: cost of one step.
    """
    w, n = paths.shape[0] - 1, paths.shape[1]
    at = paths == goals[None, :]
    first = np.where(at.any(axis=0), np.argmax(at, axis=0), -1)
    end = togo[np.arange(n), paths[-1]]
    return np.where(first >= 0, unit * first, unit * w + end).astype(np.int64)


class WindowedMover:
    """A guided mover whose moves come from a window plan improved by LNS (module docstring).

    Wraps a :class:`marlm.hybrid.simulator.GuidedMover` (or a subclass: it must
    have ``layer``, ``tables``, ``cost`` and ``act``): the mover still computes its scores,
    priorities and online update; its PIBT call goes through :meth:`decide`.

    Args:
        mover: the guided mover (its layer's ``step`` is this planner's :meth:`decide`).
        window: steps planned ahead (>= 1).
        iterations: LNS iterations per step (0 = the PIBT rollout alone).
        group: robots replanned together in one LNS iteration (>= 1).
        seed: seed of the LNS draws (groups, replanning orders).
        warm: start the search from the last step's plan when it is cheaper than the rollout.
        patience: steps since its last target from which the robot first in PIBT's order keeps
            PIBT's path (0: always).

    Attributes:
        changed: steps at which the plan changed PIBT's own joint move.

    Raises:
        ValueError: ``window`` or ``group`` below 1, ``iterations`` negative.
    """

    def __init__(self, mover, window: int = 4, iterations: int = 8, group: int = 4,
                 seed: int = 0, warm: bool = False, patience: int = 0) -> None:  # fmt: skip
        if window < 1 or group < 1 or iterations < 0:
            raise ValueError(
                f"window and group must be >= 1 and iterations >= 0, got window={window}, "
                f"group={group}, iterations={iterations}"
            )
        self.mover, self.layer = mover, mover.layer
        self.window, self.iterations, self.group = window, iterations, group
        self.rng = np.random.default_rng(seed)
        self.changed = 0
        self.warm, self._last, self.patience = warm, None, patience
        # the cost of one step: the cheapest move, so that a step waited and a step not gained
        # towards the target cost the same (a family setting makes moves dearer than waits)
        moves = np.asarray(mover.cost)[:, 1:][self.layer.nbr[:, 1:] >= 0]
        self.unit = int(moves.min()) if moves.size else 1
        h, w = self.layer.height, self.layer.width
        self.rc = np.stack(np.divmod(np.arange(h * w), w), axis=1)  # cell -> (row, col)
        self.layer.step = self.decide  # the mover's PIBT call, through the plan

    def act(self, positions: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """``int64[n]`` collision-free actions (``positions``, ``targets``: ``int[n, 2]``)."""
        return self.mover.act(positions, targets)

    def decide(self, positions, scores, goals=None, bias=None) -> np.ndarray:
        """:meth:`marlm.hybrid.rules.pibt.Pibt.step` with the window plan's first moves preferred
        (``scores``: ``float64[n, 5]``; returns ``int64[n]`` action ids)."""
        layer = self.layer
        step = layer.prepare(positions, scores, goals, bias)
        nxt = layer.decide(step)
        if self.window == 1 and self.iterations == 0:
            return layer.actions(step.pos, nxt)
        paths = self._rollout(step.pos, step.goal_cells, nxt)
        togo = self._togo(step.goal_cells)
        paths = self._warm(paths, step.goal_cells, togo)
        if self.iterations:
            top = int(step.order[0])
            keep = top if layer.elapsed[top] >= self.patience else -1
            self._improve(paths, step.goal_cells, togo, keep)
        self._last = paths
        plan = paths[1]
        if not np.array_equal(plan, nxt):
            self.changed += 1
            want = layer.actions(step.pos, plan)
            preferred = np.asarray(scores, dtype=np.float64).copy()
            preferred[np.arange(len(want)), want] += PREFERRED
            n = len(want)
            cand, cand_key = np.empty((n, N_ACTIONS), np.int64), np.empty((n, N_ACTIONS))
            n_cand = np.empty(n, dtype=np.int64)
            _rank(preferred, step.pos, layer.nbr, layer.depth, layer._noise, cand, cand_key,
                  n_cand, layer._occ_now)  # fmt: skip
            nxt = _pibt_all(step.order, step.pos, cand, cand_key, n_cand, step.goal_cells,
                            step.slots, layer._pool, layer.nbr, False, layer._occ_now,
                            layer._occ_next)  # fmt: skip
        return layer.actions(step.pos, nxt)

    def _warm(self, paths: np.ndarray, goals: np.ndarray, togo: np.ndarray) -> np.ndarray:
        """The cheaper of the fresh rollout ``paths`` and the last step's searched plan moved on
        one step (every robot waits at its last cell in the step added: still conflict-free),
        so the search's gains carry over from step to step (as WPPL keeps its plan). The old
        plan is used only where the robots stand at its step 1 (it was played)."""
        last = self._last
        if last is None or not self.warm or not np.array_equal(last[1], paths[0]):
            return paths
        moved = np.concatenate([last[1:], last[-1:]], axis=0)
        if (
            window_costs(moved, goals, togo, self.unit).sum()
            < window_costs(paths, goals, togo, self.unit).sum()
        ):
            return moved
        return paths

    def _togo(self, goal_cells: np.ndarray) -> np.ndarray:
        """``int64[n, V]`` the mover's guided distance of every cell to each robot's target."""
        slots = self.mover.tables.slots(goal_cells)
        v = self.layer.nbr.shape[0]
        return self.mover.tables.distances(slots[:, None], np.arange(v)[None, :])

    def _rollout(self, pos: np.ndarray, goal_cells: np.ndarray, nxt: np.ndarray) -> np.ndarray:
        """``int64[window + 1, n]``: PIBT's own joint moves over the window (row 1: ``nxt``),
        on the mover's guided distances; PIBT's priorities are put back afterwards."""
        layer, mover = self.layer, self.mover
        paths = np.empty((self.window + 1, len(pos)), dtype=np.int64)
        paths[0], paths[1] = pos, nxt
        saved = layer.elapsed, layer._last_goal
        slots = mover.tables.slots(goal_cells)
        targets = self.rc[goal_cells]
        for t in range(2, self.window + 1):
            cells = paths[t - 1]
            moves = layer.nbr[cells]
            d = mover.tables.distances(slots[:, None], np.maximum(moves, 0)) + mover.cost[cells]
            scores = np.where(moves >= 0, -d.astype(np.float64), -np.inf)
            paths[t] = layer.decide(layer.prepare(self.rc[cells], scores, targets))
        layer.elapsed, layer._last_goal = saved
        return paths

    def _improve(self, paths: np.ndarray, goals: np.ndarray, togo: np.ndarray, top: int) -> None:
        """MAPF-LNS over the window, in place: replan groups, keep what lowers the cost. The
        robot ``top`` (-1: none) keeps PIBT's path: the others plan around it, so as in PIBT the
        robot that waited longest makes its way (without it, a robot that must step aside for
        another's long trip can be planned to stay every step, and a 5 x 5 puzzle deadlocks)."""
        w, n = paths.shape[0] - 1, paths.shape[1]
        v = self.layer.nbr.shape[0]
        occ = np.full((w + 1, v), -1, dtype=np.int64)
        ts = np.arange(w + 1)
        for i in range(n):
            occ[ts, paths[:, i]] = i
        cost = window_costs(paths, goals, togo, self.unit)
        start_togo = togo[np.arange(n), paths[0]]
        xy = self.rc[paths[0]]
        k = min(self.group, n)
        out = np.empty(w + 1, dtype=np.int64)
        for _ in range(self.iterations):
            delay = np.maximum(cost - start_togo, 0).astype(np.float64)
            if top >= 0:
                delay[top] = 0.0
            if delay.sum() <= 0:
                return  # every robot on a path as cheap as alone: nothing to gain
            seed_robot = self.rng.choice(n, p=delay / delay.sum())
            near = np.abs(xy - xy[seed_robot]).sum(axis=1)
            if top >= 0:
                near[top] = np.iinfo(np.int64).max
            members = np.argsort(near, kind="stable")[: min(k, n - (top >= 0))]
            old_paths, old_cost = paths[:, members].copy(), int(cost[members].sum())
            for i in members:
                occ[ts, paths[:, i]] = -1
            new_cost, ok = 0, True
            for i in self.rng.permutation(members):
                c = _window_path(self.layer.nbr, occ, paths[0, i], goals[i], togo[i],
                                 self.unit, out)  # fmt: skip
                if c < 0 or c >= UNREACHABLE:
                    ok = False
                    break
                paths[:, i] = out
                occ[ts, out] = i
                cost[i] = c
                new_cost += c
            if ok and new_cost < old_cost:
                continue
            for i in members:  # not better: put the old paths back
                occ[ts, paths[:, i]] = np.where(occ[ts, paths[:, i]] == i, -1, occ[ts, paths[:, i]])
            paths[:, members] = old_paths
            for col, i in enumerate(members):
                occ[ts, old_paths[:, col]] = i
            cost[members] = window_costs(old_paths, goals[members], togo[members], self.unit)


class WindowScheme:
    """A scheme (anything with ``mover(free, n_robots, seed, target_cells, swap)``, such as a
    :class:`marlm.hybrid.simulator.Guidance`) with its movers wrapped in a
    :class:`WindowedMover` of ``window``, ``iterations`` and ``group`` (the LNS seeded with the
    instance's seed), for :func:`marlm.hybrid.simulator.simulate`."""

    def __init__(self, base, window: int = 4, iterations: int = 8, group: int = 4,
                 warm: bool = False, patience: int = 0) -> None:  # fmt: skip
        self.base, self.window, self.iterations, self.group = base, window, iterations, group
        self.warm, self.patience = warm, patience

    def mover(self, free, n_robots, seed, target_cells=None, swap=True) -> WindowedMover:
        """The wrapped base mover on ``free`` (``bool[H, W]``) with ``n_robots``."""
        base = self.base.mover(free, n_robots, seed, target_cells, swap)
        return WindowedMover(base, self.window, self.iterations, self.group, seed, self.warm,
                             self.patience)  # fmt: skip
