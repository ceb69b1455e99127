"""Which robot serves which task, for tasks that are sequences of errands (cells visited in order):
token passing with task swaps over BFS distances, incremental, for ten thousand robots.

The rule is Ma, Li, Kumar and Koenig's TPTS ("Lifelong multi-agent path finding for online pickup
and delivery tasks", AAMAS 2017, Alg. 2: a robot takes the task it finishes soonest, and may take a
task held by another robot that has not started it if that saves time), with the cost of a task
the time to do all of it (as the League of Robot Runners' default scheduler counts it): BFS
distance to the first errand + the BFS legs between the errands. Each step:

1. New tasks get their legs, from the distance tables of their errands (one BFS table per errand
   cell a leg starts from, kept in a :class:`~marlm.hybrid.core.graph.DistanceTables`).
2. Free robots (no task) are matched to unassigned tasks. Tasks that share a first errand are one
   *group*: to a robot they differ only in their legs, so a robot scores each group once (its
   distance to the group's first errand + the group's shortest legs) and keeps its ``candidates``
   cheapest groups; the pairs are taken cheapest first, a robot once, a group as many times as it
   has tasks (shortest legs first); the robots whose candidates all went are scored again on what
   is left. Distances come from the groups' tables while there are at most ``max_tables // 2``
   groups (warehouses, where tasks start at a few hundred stations: cached across steps), else
   from one BFS per free robot.
3. Swaps: each task that arrived this step (or was given up by a swap) and is still unassigned is
   offered to the robots travelling to a first errand they have not reached (a task not *opened*):
   the robot whose way to the offered task's first errand is shorter than its way left to its own
   by the most takes it, if by more than ``swap_margin`` steps, and its old task is offered in
   turn (at most ``swap_budget`` offers a step). A robot's way left to its first errand is
   estimated as the distance when assigned less the steps since (optimistic: no waiting).
   Weighing the legs too swapped more and finished fewer tasks on eight of the ten League of
   Robot Runners 2024 instances (more on SORTATION and WAREHOUSE; docs/lorr.md).

A task whose first errand was reached (opened) stays with its robot until done. Costs a step:
``O(G * F)`` for ``G`` groups and ``F`` free robots, plus one BFS per new leg start or (many
groups) per free robot; ``O(robots)`` per offer.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from marlm.hybrid.core.graph import (
    UNREACHABLE,
    DistanceTables,
    bfs_distance,
    bfs_filler,
    neighbour_table,
)

ROBOT_CHUNK = 2048
"""Free robots scored at once against every group (bounds the cost matrix to ``G * 2048``)."""


@dataclass
class ErrandTask:
    """One task: ``locs`` the errand cells in order (``int64[k]``), ``idx`` the next errand,
    ``legs`` the BFS steps from the first errand through the last (-1 until computed), ``agent``
    its robot or -1, ``row`` its row in the scheduler's task arrays."""

    task_id: int
    locs: np.ndarray
    legs: int = -1
    idx: int = 0
    agent: int = -1
    row: int = -1


class ErrandScheduler:
    """Incremental assignment of robots to multi-errand tasks (module docstring).

    Args:
        free: ``bool[H, W]`` the free cells (cell id ``row * W + col``); n_agents: robots;
        candidates: cheapest groups kept per free robot in one round of the matching (>= 1);
        swap_margin: steps a swap must save (>= 0); swap_budget: offers a step (>= 0);
        max_tables: distance tables kept between steps (>= 2; ``2 * H * W`` bytes each);
        queue_cost: steps added to a group's cost per robot already travelling to its first
            errand (0: none), so that robots spread over the first errands;
        max_active: at most this many robots hold a task (None: all); the others stay idle,
            the costliest pairs left out, which thins the traffic where the planner jams.

    Raises:
        ValueError: a setting out of its range, or a task with no errand.
    """

    def __init__(
        self,
        free: np.ndarray,
        n_agents: int,
        candidates: int = 8,
        swap_margin: int = 2,
        swap_budget: int = 64,
        max_tables: int = 1024,
        queue_cost: float = 0.0,
        max_active: int | None = None,
    ) -> None:
        if (
            candidates < 1
            or swap_margin < 0
            or swap_budget < 0
            or max_tables < 2
            or (max_active is not None and max_active < 1)
        ):
            raise ValueError(
                f"candidates >= 1, swap_margin >= 0, swap_budget >= 0, max_tables >= 2, "
                f"max_active >= 1 or None needed, got {candidates}, {swap_margin}, "
                f"{swap_budget}, {max_tables}, {max_active}"
            )
        self.nbr = neighbour_table(free)
        self.tables = DistanceTables(free.size, bfs_filler(self.nbr), max_tables=max_tables)
        self.candidates, self.swap_margin, self.swap_budget = candidates, swap_margin, swap_budget
        self.queue_cost, self.max_active = queue_cost, max_active
        self.tasks: dict[int, ErrandTask] = {}
        self.unassigned: dict[int, None] = {}  # insertion-ordered set of task ids
        self.offer: list[int] = []  # tasks to offer to travelling robots this step
        self.pending: list[int] = []  # tasks whose legs are not computed yet
        # task arrays by row (rows are never reused): first errand, legs, id, unassigned
        self.t_first = np.zeros(1024, dtype=np.int64)
        self.t_legs = np.zeros(1024, dtype=np.int64)
        self.t_id = np.zeros(1024, dtype=np.int64)
        self.t_free = np.zeros(1024, dtype=bool)
        self.rows = 0
        self.agent_task = np.full(n_agents, -1, dtype=np.int64)
        #: ``int64[n]`` each robot's next errand cell, -1 without a task.
        self.goal = np.full(n_agents, -1, dtype=np.int64)
        self.assign_d = np.zeros(n_agents, dtype=np.int64)  # distance to first errand when assigned
        self.assign_t = np.zeros(n_agents, dtype=np.int64)
        self.opened = np.zeros(n_agents, dtype=bool)  # the robot's task has an errand done
        self.worked = np.zeros(n_agents, dtype=bool)  # the robot has held a task
        self.swaps = self.finished = 0  # counters: swaps made, tasks finished

    def add_task(self, task_id: int, locs) -> None:
        """A new task, its errand cells in order (at least one); its legs are computed at the
        next :meth:`step`."""
        locs = np.asarray(locs, dtype=np.int64)
        if len(locs) == 0:
            raise ValueError(f"task {task_id} has no errand")
        if self.rows == len(self.t_first):  # full: each array twice as long
            grow = len(self.t_first)
            self.t_first = np.concatenate([self.t_first, np.zeros(grow, dtype=np.int64)])
            self.t_legs = np.concatenate([self.t_legs, np.zeros(grow, dtype=np.int64)])
            self.t_id = np.concatenate([self.t_id, np.zeros(grow, dtype=np.int64)])
            self.t_free = np.concatenate([self.t_free, np.zeros(grow, dtype=bool)])
        row, self.rows = self.rows, self.rows + 1
        self.t_first[row], self.t_id[row], self.t_free[row] = locs[0], task_id, True
        self.tasks[task_id] = ErrandTask(task_id, locs, row=row)
        self.unassigned[task_id] = None
        self.pending.append(task_id)
        self.offer.append(task_id)

    def errand_done(self, agent: int) -> bool:
        """``agent`` reached its task's next errand; True if that finished the task (removed)."""
        task = self.tasks[int(self.agent_task[agent])]
        task.idx += 1
        self.opened[agent] = True
        if task.idx < len(task.locs):
            self.goal[agent] = task.locs[task.idx]
            return False
        del self.tasks[task.task_id]
        self.finished += 1
        self.agent_task[agent] = self.goal[agent] = -1
        self.opened[agent] = False
        return True

    def next_errand(self, agent: int) -> int:
        """The cell ``agent`` goes to next, -1 without a task."""
        return int(self.goal[agent])

    def _assign(self, agent: int, task_id: int, d: int, t: int) -> None:
        task = self.tasks[task_id]
        task.agent = agent
        self.agent_task[agent], self.goal[agent] = task_id, task.locs[task.idx]
        self.assign_d[agent], self.assign_t[agent] = d, t
        self.worked[agent] = True
        self.unassigned.pop(task_id, None)
        self.t_free[task.row] = False

    def _unassign(self, task_id: int) -> None:
        task = self.tasks[task_id]
        task.agent = -1
        self.unassigned[task_id] = None
        self.t_free[task.row] = True

    def _compute_legs(self) -> None:
        """Legs of the pending tasks: ``sum_j dist(e_j, e_j+1)`` from the tables of the ``e_j``
        (BFS distances are symmetric on the kit's grids), at most ``max_tables // 2`` tables at
        a time."""
        pending, self.pending = [t for t in self.pending if t in self.tasks], []
        legs_of = [  # (from, to, task index) of every leg that moves
            (a, b, k)
            for k, tid in enumerate(pending)
            for a, b in pairwise(self.tasks[tid].locs.tolist())
            if a != b
        ]
        legs = np.zeros(len(pending), dtype=np.int64)
        if legs_of:
            s, d, o = (np.array(x, dtype=np.int64) for x in zip(*legs_of, strict=True))
            cells, inverse = np.unique(s, return_inverse=True)
            chunk = max(1, self.tables.max_tables // 2)
            for lo in range(0, len(cells), chunk):
                slots = self.tables.slots(cells[lo : lo + chunk])
                sel = (inverse >= lo) & (inverse < lo + chunk)
                dist = self.tables.distances(slots[inverse[sel] - lo], d[sel])
                np.add.at(legs, o[sel], np.minimum(dist, UNREACHABLE))
        for tid, leg in zip(pending, legs.tolist(), strict=True):
            task = self.tasks[tid]
            task.legs = self.t_legs[task.row] = min(leg, UNREACHABLE)

    def _distances(self, g_cells: np.ndarray, cells: np.ndarray) -> np.ndarray:
        """``int64[G, F]`` BFS distance from each robot cell to each group's first errand."""
        if len(g_cells) <= self.tables.max_tables // 2:
            slots = self.tables.slots(g_cells)
            return self.tables.distances(slots[:, None], cells[None, :])
        out = np.empty((len(g_cells), len(cells)), dtype=np.int64)
        for j, c in enumerate(cells.tolist()):
            out[:, j] = bfs_distance(self.nbr, c)[g_cells]
        return out

    def _match_free(self, cell: np.ndarray, t: int) -> None:
        free_agents = np.flatnonzero(self.agent_task < 0)
        room = len(free_agents)
        if self.max_active is not None:
            room = self.max_active - (len(self.agent_task) - len(free_agents))
            # Robots that held a task before are matched first; the idle ones (parked) only
            # for the places left, so a step scores the few robots just freed, not them all.
            worked = free_agents[self.worked[free_agents]]
            if len(worked) >= room:
                free_agents = worked
        while len(free_agents) and self.unassigned and room > 0:
            rows = np.flatnonzero(self.t_free[: self.rows])
            order = rows[np.lexsort((rows, self.t_legs[rows], self.t_first[rows]))]
            first = self.t_first[order]
            starts = np.flatnonzero(np.r_[True, first[1:] != first[:-1]])
            ends = np.r_[starts[1:], len(order)]
            g_cells, g_legs = first[starts], self.t_legs[order[starts]]
            if self.queue_cost:  # robots already on their way to each group's first errand
                heading = self.goal[(self.agent_task >= 0) & ~self.opened]
                queue = np.bincount(heading[heading >= 0], minlength=len(self.nbr))
                g_legs = g_legs + (self.queue_cost * queue[g_cells]).astype(np.int64)
            k = min(self.candidates, len(starts))
            costs, agents, groups, dists = [], [], [], []
            for lo in range(0, len(free_agents), ROBOT_CHUNK):
                fa = free_agents[lo : lo + ROBOT_CHUNK]
                d = self._distances(g_cells, cell[fa])  # [G, F]
                cost = d + g_legs[:, None]
                best = np.argpartition(cost, k - 1, axis=0)[:k] if k < len(starts) else (
                    np.broadcast_to(np.arange(len(starts))[:, None], cost.shape)
                )  # fmt: skip
                cols = np.broadcast_to(np.arange(len(fa)), best.shape)
                ok = d[best, cols] < UNREACHABLE
                costs.append(cost[best, cols][ok])
                agents.append(fa[cols][ok])
                groups.append(best[ok])
                dists.append(d[best, cols][ok])
            c, a, g, dd = (np.concatenate(x) for x in (costs, agents, groups, dists))
            pick = np.lexsort((g, a, c))
            nxt = starts.copy()  # each group's next task in order of legs
            progress = False
            for a_i, g_i, d_i in zip(a[pick].tolist(), g[pick].tolist(), dd[pick].tolist(),
                                     strict=True):  # fmt: skip
                if self.agent_task[a_i] >= 0 or nxt[g_i] >= ends[g_i]:
                    continue
                self._assign(a_i, int(self.t_id[order[nxt[g_i]]]), d_i, t)
                nxt[g_i] += 1
                progress = True
                room -= 1
                if room <= 0:
                    break
            if not progress:
                break
            free_agents = np.flatnonzero(self.agent_task < 0)

    def _swap(self, cell: np.ndarray, t: int) -> None:
        budget = self.swap_budget
        offer, self.offer = self.offer, []
        while offer and budget > 0:
            tid = offer.pop(0)
            if tid not in self.unassigned:
                continue
            budget -= 1
            travelling = np.flatnonzero((self.agent_task >= 0) & ~self.opened)
            if not len(travelling):
                continue
            task = self.tasks[tid]
            slot = self.tables.slots(task.locs[:1])
            new_d = self.tables.distances(slot, cell[travelling])
            left = np.maximum(self.assign_d[travelling] - (t - self.assign_t[travelling]), 0)
            gain = left - new_d
            b = int(np.argmax(gain))
            if gain[b] <= self.swap_margin or new_d[b] >= UNREACHABLE:
                continue
            a = int(travelling[b])
            old = int(self.agent_task[a])
            self._unassign(old)
            self._assign(a, tid, int(new_d[b]), t)
            self.swaps += 1
            offer.append(old)

    def step(self, cell: np.ndarray, t: int) -> np.ndarray:
        """Assign for this step (``cell``: ``int64[n]`` robot cells, ``t`` the step): legs of the
        new tasks, free robots, then swaps. Returns ``int64[n]`` each robot's task id, -1 = none."""
        cell = np.asarray(cell, dtype=np.int64)
        self._compute_legs()
        self._match_free(cell, t)
        self._swap(cell, t)
        return self.agent_task.copy()
