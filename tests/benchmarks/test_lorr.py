"""benchmarks/lorr: the report's lines and table, and marlm's kit entry (scheduler and planner)
driven by a stand-in for the start-kit's SharedEnvironment that applies the kit's rules (task
reveal, errand completion after each move, schedule validation, conflicts), on a tiny map."""

from __future__ import annotations

import json
import sys
import types

import numpy as np
import pytest

from marlm.hybrid.rules.rotation import apply_actions, conflicts
from script_module import ROOT, load_script


@pytest.fixture(scope="module")
def report():
    return load_script("benchmarks/lorr/report.py")


def test_published_scores_are_the_leaderboard_s(report):
    best = report.PUBLISHED["best known"]
    scores = {
        k: round(sum(v / b for v, b in zip(vals, best, strict=True)), 2)
        for k, vals in report.PUBLISHED.items()
    }
    assert scores == {
        "default entry (start-kit)": 5.06,
        "best scheduler, default planner": 6.88,
        "best planner, default scheduler": 8.78,
        "winner, combined": 9.84,
        "best known": 10.0,
    }


def test_line_and_table(report, tmp_path):
    kit = tmp_path / "out.json"
    kit.write_text(
        json.dumps(
            {
                "numTaskFinished": 348,
                "plannerTimes": [0.01, 0.03],
                "numEntryTimeouts": 0,
                "numPlannerErrors": 0,
                "numScheduleErrors": 0,
                "teamSize": 100,
            }
        )
    )
    args = types.SimpleNamespace(
        kit_output=str(kit),
        instance="RANDOM-01",
        track="combined",
        steps=600,
        wall=12.0,
        load="1.0 1.0 1.0",
        load_end="2.0 2.0 2.0",
    )
    line = report.line(args)
    assert (line["tasks_finished"], line["ms_per_step"], line["ms_per_step_max"]) == (
        348,
        20.0,
        30.0,
    )
    assert line["fraction_of_best"] == round(348 / 696, 4)
    assert line["machine"]["load_avg_start"] == "1.0 1.0 1.0"
    results = tmp_path / "r.jsonl"
    results.write_text(json.dumps(line) + "\n")
    table = report.table(str(results))
    assert "| marlm combined | 348 (20.0 ms) | - |" in table
    assert table.rstrip().endswith(f"| {348 / 696:.2f} (1 of 10) |")


class FakeKit:
    """The kit's rules around marlm's entry: reveal to ``1.5 n`` tasks, validate the schedule (a
    task once, an opened task kept), move (all wait on a conflict, as the kit does), then mark
    errands done with the new cells. Counts what the kit would count."""

    def __init__(self, rows, starts, tasks):
        S = types.SimpleNamespace
        self.grid = np.array([[c == "." for c in r] for r in rows])
        n = len(starts)
        self.env = S(
            num_of_agents=n,
            rows=len(rows),
            cols=len(rows[0]),
            map=[0 if c else 1 for c in self.grid.ravel()],
            curr_timestep=0,
            task_pool={},
            new_tasks=[],
            new_freeagents=list(range(n)),
            goal_locations=[[] for _ in range(n)],
            curr_states=[],
        )
        self.cell = np.array(starts, dtype=np.int64)
        self.head = np.zeros(n, dtype=np.int64)
        self.tasks, self.next_id, self.assign = tasks, 0, [-1] * n
        self.finished = self.conflicts = self.schedule_errors = 0
        self._reveal(int(1.5 * n))

    def _reveal(self, pool):
        S = types.SimpleNamespace
        self.env.new_tasks = []
        while len(self.env.task_pool) < pool:
            locs = self.tasks[self.next_id % len(self.tasks)]
            self.env.task_pool[self.next_id] = S(locations=list(locs), idx_next_loc=0)
            self.env.new_tasks.append(self.next_id)
            self.next_id += 1

    def run(self, entry_module, steps):
        S = types.SimpleNamespace
        entry = entry_module.Entry(self.env)
        pool, n = self.env.task_pool, self.env.num_of_agents
        for t in range(steps):
            self.env.curr_timestep = t
            self.env.curr_states = [
                S(location=int(c), orientation=int(h))
                for c, h in zip(self.cell, self.head, strict=True)
            ]
            sched = entry.schedule()
            ok = len({x for x in sched if x >= 0}) == sum(x >= 0 for x in sched) and all(
                self.assign[a] < 0
                or pool[self.assign[a]].idx_next_loc == 0
                or sched[a] == self.assign[a]
                for a in range(n)
            )
            if ok:
                self.assign = list(sched)
            else:
                self.schedule_errors += 1
            self.env.goal_locations = [
                [(pool[x].locations[pool[x].idx_next_loc], 0)] if x >= 0 else []
                for x in self.assign
            ]
            act = np.array(entry.plan())
            cell, head = apply_actions(entry.front, self.cell, self.head, act)
            if conflicts(self.cell, cell):
                self.conflicts += 1
            else:
                self.cell, self.head = cell, head
            self.env.new_freeagents = []
            for a in range(n):
                x = self.assign[a]
                if x >= 0 and self.cell[a] == pool[x].locations[pool[x].idx_next_loc]:
                    pool[x].idx_next_loc += 1
                    if pool[x].idx_next_loc == len(pool[x].locations):
                        del pool[x]
                        self.assign[a] = -1
                        self.finished += 1
                        self.env.new_freeagents.append(a)
            self._reveal(int(1.5 * n))
        return entry


def test_entry_under_the_kit_s_rules():
    sys.path.insert(0, str(ROOT / "benchmarks" / "lorr" / "python"))
    try:
        entry_module = load_script("benchmarks/lorr/python/marlm_entry.py")
    finally:
        sys.path.pop(0)
    rows = ["........", ".#..#...", "........", "..##..#.", "........", ".#....#."]
    free = np.flatnonzero(np.array([[c == "." for c in r] for r in rows]).ravel())
    rng = np.random.default_rng(3)
    tasks = [rng.choice(free, 2).tolist() for _ in range(200)]
    kit = FakeKit(rows, rng.choice(free, 8, replace=False).tolist(), tasks)
    entry = kit.run(entry_module, 150)
    assert (kit.conflicts, kit.schedule_errors, entry.mismatches) == (0, 0, 0)
    assert kit.finished >= 20
