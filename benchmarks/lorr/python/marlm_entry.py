"""marlm inside the League of Robot Runners start-kit: one object shared by the kit's Python
scheduler (``pyTaskScheduler``) and planner (``pyMAPFPlanner``), which the kit builds with the same
``SharedEnvironment``. The scheduler is called first each step, then the planner.

- Scheduler: :class:`marlm.hybrid.planning.errands.ErrandScheduler` (token passing with task swaps
  over BFS distances, multi-errand costs). The errands done are mirrored from the robots' cells
  with the kit's own rule (a robot on its task's next errand after a move has done it), checked
  against the kit's ``new_freeagents`` (``mismatches`` counts disagreements, 0 expected).
- Planner: :func:`marlm.hybrid.rules.rotation.rotation_step` (PIBT over cells, turning robots),
  distances from :class:`marlm.hybrid.core.graph.DistanceTables`; priority = steps since the robot
  was last on its goal + a fixed random tie-break in [0, 1).
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from marlm.hybrid.core.graph import DistanceTables, bfs_filler, neighbour_table
from marlm.hybrid.planning.errands import ErrandScheduler
from marlm.hybrid.rules.rotation import heading_table, rotation_step

_ENTRY = None


def entry(env):
    """The one :class:`Entry` of this process, made on first use."""
    global _ENTRY
    if _ENTRY is None:
        _ENTRY = Entry(env)
    return _ENTRY


class Entry:
    def __init__(self, env) -> None:
        self.env = env
        self.n = int(env.num_of_agents)
        self.rows, self.cols = int(env.rows), int(env.cols)
        self.free = (np.asarray(list(env.map), dtype=np.int64) == 0).reshape(self.rows, self.cols)
        self.front = heading_table(self.free)
        max_tables = int(os.environ.get("MARLM_LORR_MAX_TABLES", "12000"))
        self.tables = DistanceTables(
            self.free.size, bfs_filler(neighbour_table(self.free)), max_tables=max_tables
        )
        self.sched = ErrandScheduler(
            self.free,
            self.n,
            swap_budget=int(os.environ.get("SWAPB", "64")),
            queue_cost=float(os.environ.get("MARLM_LORR_QUEUE", "0")),
            max_active=(
                int(float(os.environ["MARLM_LORR_ACTIVE"]) * self.n)
                if "MARLM_LORR_ACTIVE" in os.environ
                else None
            ),
        )
        self.rng = np.random.default_rng(0)
        self.tie = self.rng.random(self.n)
        self.since = np.zeros(self.n)
        self.goal = np.full(self.n, -1, dtype=np.int64)
        self.commit = np.full(self.n, -1, dtype=np.int64)
        self.scheduled_at = -1  # the step the scheduler last ran (the combined track)
        self.mismatches = 0
        self.times = {"sync": 0.0, "schedule": 0.0, "plan": 0.0}
        self._warm_up()

    def _warm_up(self) -> None:
        """Compile (or load from numba's cache) the kernels during the kit's preprocessing, not
        in the first step: one robot, one goal, one step, nothing kept."""
        c = int(np.flatnonzero(self.free.ravel())[0])
        slots = self.tables.slots(np.array([c], dtype=np.int64))
        rotation_step(
            self.front,
            np.array([c]),
            np.array([0]),
            slots,
            self.tables.pool,
            np.zeros(1),
            np.random.default_rng(0),
            np.full(1, -1, dtype=np.int64),
        )
        self.tables.clear()

    def states(self):
        st = self.env.curr_states
        cell = np.fromiter((s.location for s in st), dtype=np.int64, count=self.n)
        head = np.fromiter((s.orientation for s in st), dtype=np.int64, count=self.n)
        return cell, head

    # --- the scheduler's step ---
    def schedule(self) -> list[int]:
        t0 = time.perf_counter()
        env, s = self.env, self.sched
        t = int(env.curr_timestep)
        cell, _ = self.states()
        pool = env.task_pool
        for tid in list(env.new_tasks):
            s.add_task(int(tid), list(pool[tid].locations))
        # errands done by the last move: the kit's rule, mirrored
        freed = set()
        for a in np.flatnonzero((s.goal >= 0) & (s.goal == cell)).tolist():
            if s.errand_done(a):
                freed.add(a)
        kit_freed = set(int(a) for a in env.new_freeagents) if t > 0 else set()
        self.mismatches += len(freed ^ kit_freed)
        t1 = time.perf_counter()
        out = s.step(cell, t)
        self.goal = s.goal.copy()
        self.scheduled_at = t
        self.times["sync"] += t1 - t0
        self.times["schedule"] += time.perf_counter() - t1
        if t % 100 == 0:
            print(
                f"marlm t={t} sync={self.times['sync']:.1f}s schedule={self.times['schedule']:.1f}s "
                f"finished={s.finished} swaps={s.swaps} mismatches={self.mismatches}",
                file=sys.stderr,
                flush=True,
            )
        return out.tolist()

    # --- the planner's step ---
    def plan(self) -> list[int]:
        t0 = time.perf_counter()
        env = self.env
        if self.scheduled_at != int(env.curr_timestep):  # the kit's scheduler ran: its goals
            gl = env.goal_locations
            self.goal = np.array([g[0][0] if len(g) else -1 for g in gl], dtype=np.int64)
        cell, head = self.states()
        self.since += 1
        self.since[cell == self.goal] = 0
        slots = self.tables.slots(self.goal)
        act = rotation_step(
            self.front,
            cell,
            head,
            slots,
            self.tables.pool,
            self.since + self.tie,
            self.rng,
            self.commit,
        )
        self.times["plan"] += time.perf_counter() - t0
        t = int(env.curr_timestep)
        if t % 100 == 0:
            print(
                f"marlm t={t} sync={self.times['sync']:.1f}s schedule="
                f"{self.times['schedule']:.1f}s plan={self.times['plan']:.1f}s swaps="
                f"{self.sched.swaps} mismatches={self.mismatches} tables={self.tables.builds}",
                file=sys.stderr,
                flush=True,
            )
        return act.tolist()
