"""Which orders to defer when the robots are short (weighted Moore-Hodgson over the robots),
and the instructions scenario with three of four robots in a breakdown: the arbitration run
against earliest-deadline-first with the readings and against the rule, the real embedded
model reading the notes inside the step (reproducible)."""

from __future__ import annotations

from marlm.envs.warehouse.breakdowns import Breakdown
from marlm.experiments.instructions_scenario import run_instructions_scenario
from marlm.hybrid.planning.arbitration import Job, defer, late_jobs


def test_earliest_deadline_first_on_time_defers_nothing():
    jobs = [Job("a", 10, 6, 1.0), Job("b", 12, 6, 3.0), Job("c", 100, 5, 1.0)]
    assert late_jobs(jobs, [0]) == [] and defer(jobs, [0]) == []


def test_the_least_valuable_order_before_a_late_one_waits():
    jobs = [Job("c", 100, 5, 1.0), Job("b", 11, 6, 3.0), Job("a", 10, 6, 1.0)]
    assert late_jobs(sorted(jobs, key=lambda j: j.deadline), [0]) == [1]
    assert defer(jobs, [0]) == ["a"]  # b (urgent) on time at 6, c at 11
    assert defer(jobs, [0, 0]) == []  # two robots: all on time
    assert defer(jobs, []) == []  # no robot in service: nothing to arbitrate
    # among equal values the longest waits: one long order late instead of two short ones
    jobs = [Job("x", 8, 4, 1.0), Job("y", 8, 4, 1.0), Job("z", 9, 8, 1.0)]
    assert defer(jobs, [0]) == ["z"]


def test_with_three_robots_down_arbitration_meets_more_worded_deadlines(tmp_path, embedded_model):
    from marlm.experiments.instructions_scenario import scenario_reader

    reader = scenario_reader(embedded_model)
    down = [Breakdown(breakdown=f"robot_{i}", at=0, steps=200) for i in range(3)]
    r = run_instructions_scenario(tmp_path / "run", reader=reader, breakdowns=down,
                                  arbitrate=True, sync=True)  # fmt: skip
    met = {k: (v["worded_deadlines_met"], v["worded_deadlines"]) for k, v in r.items()}
    assert met == {"rule": (0, 5), "instructions": (2, 5), "arbitration": (3, 5)}
    assert r["arbitration"]["deferred"] == ["o22", "o9"]
    late = [r[k]["worded_late_steps"] for k in ("rule", "instructions", "arbitration")]
    assert late == [614, 38, 34]  # the deferred two go before the orders with slack
    assert r["arbitration"]["last_delivery_step"] == r["instructions"]["last_delivery_step"] == 239
    assert [r[k]["delivered_kept"] for k in ("rule", "instructions", "arbitration")] == [20] * 3
    assert r["instructions"]["deferred"] == [] and r["rule"]["cancelled_delivered"] == 4
    assert (tmp_path / "run" / "orders.jsonl").read_text().count('"breakdown"') == 3
