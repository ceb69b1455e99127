"""Which robot serves which task, for tasks that are sequences of errands (cells visited in order):
token passing with task swaps over BFS distances, incremental, for thousands of robots.

The rule is Ma, Li, Kumar and Koenig's TPTS ("Lifelong multi-agent path finding for online pickup
and delivery tasks", AAMAS 2017, Alg. 2: a robot takes the task whose first errand it reaches
soonest, and may take a task held by another robot that has not started it if it gets there
sooner), with the cost of a task the time to do all of it (as the League of Robot Runners' default
scheduler counts it): BFS distance to the first errand + the BFS legs between the errands. Each
step:

1. Free robots (no task) are matched to unassigned tasks: one BFS from each free robot scores every
   unassigned task at once; the pairs (robot, one of its ``candidates`` cheapest tasks) are taken
   cheapest first, a robot or a task once; the robots whose candidates all went are scored again
   on what is left.
2. Swaps: each task that arrived this step (or was given up by a swap) and is still unassigned is
   offered to the robots travelling to a first errand they have not reached (a task not *opened*):
   one BFS from its first errand; the robot that would gain most takes it if it gains more than
   ``swap_margin`` steps, and its old task is offered in turn (at most ``swap_budget`` BFS a step).
   A robot's remaining distance to its first errand is estimated as the distance when assigned
   less the steps since (optimistic: no waiting).

A task whose first errand was reached (opened) stays with its robot until done. Costs: one BFS
(``O(V)``) per free robot and per offered task; ``O(free tasks)`` per free robot to score.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from marlm.hybrid.core.graph import UNREACHABLE, bfs_distance, neighbour_table


@dataclass
class ErrandTask:
    """One task: ``locs`` the errand cells in order (``int64[k]``), ``idx`` the next errand,
    ``legs`` the BFS steps from the first errand through the last, ``agent`` its robot or -1."""

    task_id: int
    locs: np.ndarray
    legs: int
    idx: int = 0
    agent: int = -1


class ErrandScheduler:
    """Incremental assignment of robots to multi-errand tasks (module docstring).

    Args:
        free: ``bool[H, W]`` the free cells (cell id ``row * W + col``); n_agents: robots;
        candidates: cheapest tasks kept per free robot in one round of the matching (>= 1);
        swap_margin: steps a swap must save (>= 0); swap_budget: BFS for swaps per step (>= 0).

    Raises:
        ValueError: a setting out of its range.
    """

    def __init__(
        self,
        free: np.ndarray,
        n_agents: int,
        candidates: int = 8,
        swap_margin: int = 2,
        swap_budget: int = 64,
    ) -> None:
        if candidates < 1 or swap_margin < 0 or swap_budget < 0:
            raise ValueError(
                f"candidates >= 1, swap_margin >= 0, swap_budget >= 0 needed, got "
                f"{candidates}, {swap_margin}, {swap_budget}"
            )
        self.nbr = neighbour_table(free)
        self.candidates, self.swap_margin, self.swap_budget = candidates, swap_margin, swap_budget
        self.tasks: dict[int, ErrandTask] = {}
        self.unassigned: dict[int, None] = {}  # insertion-ordered set of task ids
        self.offer: list[int] = []  # tasks to offer to travelling robots this step
        self.agent_task = np.full(n_agents, -1, dtype=np.int64)
        self.assign_d = np.zeros(n_agents, dtype=np.int64)  # distance to first errand when assigned
        self.assign_t = np.zeros(n_agents, dtype=np.int64)
        self.opened = np.zeros(n_agents, dtype=bool)  # the robot's task has an errand done
        self.swaps = 0

    def add_task(self, task_id: int, locs) -> None:
        """A new task, its errand cells in order (at least one)."""
        locs = np.asarray(locs, dtype=np.int64)
        if len(locs) == 0:
            raise ValueError(f"task {task_id} has no errand")
        legs = 0
        for a, b in zip(locs[:-1].tolist(), locs[1:].tolist(), strict=True):
            legs += int(bfs_distance(self.nbr, b)[a]) if a != b else 0
        self.tasks[task_id] = ErrandTask(task_id, locs, legs)
        self.unassigned[task_id] = None
        self.offer.append(task_id)

    def errand_done(self, agent: int) -> bool:
        """``agent`` reached its task's next errand; True if that finished the task (removed)."""
        task = self.tasks[int(self.agent_task[agent])]
        task.idx += 1
        self.opened[agent] = True
        if task.idx < len(task.locs):
            return False
        del self.tasks[task.task_id]
        self.agent_task[agent] = -1
        self.opened[agent] = False
        return True

    def next_errand(self, agent: int) -> int:
        """The cell ``agent`` goes to next, -1 without a task."""
        tid = int(self.agent_task[agent])
        return -1 if tid < 0 else int(self.tasks[tid].locs[self.tasks[tid].idx])

    def _assign(self, agent: int, task_id: int, d: int, t: int) -> None:
        task = self.tasks[task_id]
        task.agent = agent
        self.agent_task[agent] = task_id
        self.assign_d[agent], self.assign_t[agent] = d, t
        self.unassigned.pop(task_id, None)

    def _match_free(self, cell: np.ndarray, t: int) -> None:
        free_agents = np.flatnonzero(self.agent_task < 0)
        while len(free_agents) and self.unassigned:
            tids = np.fromiter(self.unassigned, dtype=np.int64, count=len(self.unassigned))
            e1 = np.array([self.tasks[x].locs[0] for x in tids.tolist()], dtype=np.int64)
            legs = np.array([self.tasks[x].legs for x in tids.tolist()], dtype=np.int64)
            k = min(self.candidates, len(tids))
            pairs: list[tuple[int, int, int, int]] = []  # (cost, agent, task index, distance)
            for a in free_agents.tolist():
                d = bfs_distance(self.nbr, int(cell[a]))[e1].astype(np.int64)
                cost = d + legs
                best = np.argpartition(cost, k - 1)[:k] if k < len(cost) else np.arange(len(cost))
                pairs.extend(
                    (int(cost[j]), a, int(j), int(d[j]))
                    for j in best.tolist()
                    if d[j] < UNREACHABLE
                )
            pairs.sort()
            taken = np.zeros(len(tids), dtype=bool)
            progress = False
            for _, a, j, d in pairs:
                if self.agent_task[a] >= 0 or taken[j]:
                    continue
                taken[j] = True
                self._assign(a, int(tids[j]), d, t)
                progress = True
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
            d1 = bfs_distance(self.nbr, int(self.tasks[tid].locs[0]))
            travelling = np.flatnonzero((self.agent_task >= 0) & ~self.opened)
            if not len(travelling):
                continue
            left = np.maximum(self.assign_d[travelling] - (t - self.assign_t[travelling]), 0)
            new_d = d1[cell[travelling]].astype(np.int64)
            gain = left - new_d
            b = int(np.argmax(gain))
            if gain[b] <= self.swap_margin:
                continue
            a = int(travelling[b])
            old = int(self.agent_task[a])
            self.tasks[old].agent = -1
            self.unassigned[old] = None
            self._assign(a, tid, int(new_d[b]), t)
            self.swaps += 1
            offer.append(old)

    def step(self, cell: np.ndarray, t: int) -> np.ndarray:
        """Assign for this step (``cell``: ``int64[n]`` robot cells, ``t`` the step): free robots
        first, then swaps. Returns ``int64[n]`` each robot's task id, -1 = none."""
        cell = np.asarray(cell, dtype=np.int64)
        self._match_free(cell, t)
        self._swap(cell, t)
        return self.agent_task.copy()
