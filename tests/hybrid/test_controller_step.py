"""The control step acts on the plan applied in the same step (real env, rule planner)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from marlm.eval.trace import read_trace
from marlm.hybrid.build import build_planner
from marlm.hybrid.controller import run, run_config


@pytest.mark.parametrize("shield", ["pibt", "local", "none"])
def test_a_robot_assigned_at_step_0_moves_towards_its_shelf_at_step_0(tmp_path: Path, shield):
    # One robot at (8, 1) of `small`, one order (shelf S3-2) arriving at step 0. The rule plan
    # assigns it at step 0; the executor must see that task in the same step. It used to act on
    # the observation taken before the plan ("no task": stay), so every robot lost its first step.
    orders = tmp_path / "o.jsonl"
    order = {"id": "o1", "shelf": "S3-2", "priority": "normal", "arrival": 0, "deadline": 40}
    orders.write_text(json.dumps(order) + "\n")
    config = run_config(
        layout="small", orders=str(orders), n_robots=1, steps=40, planner="rule",
        executor="greedy", shield=shield != "none",
        shield_rule="local" if shield == "local" else "pibt", sync_planner=True, gif=False,
        tick_ms=0,
    )  # fmt: skip
    result = run(config, tmp_path / "run", planner=build_planner("rule"))
    events = read_trace(result.out_dir).events
    start = next(e for e in events if e["type"] == "run_start")
    assigned = next(e for e in events if e["type"] == "order" and e["event"] == "assigned")
    step0 = next(e for e in events if e["type"] == "step" and e["step"] == 0)
    assert assigned["step"] == 0 and start["positions"] == [[8, 1]]
    # The rule layer that ran: under no shield the config said "pibt", its unused default.
    assert start["config"]["shield_rule"] == result.metrics["shield_rule"] == shield
    assert step0["proposed"] != [0] and step0["positions"] != [[8, 1]]
    # Then straight to the shelf and the station: 9 moves, delivered at step 8 (was 9).
    delivered = next(e for e in events if e["type"] == "order" and e["event"] == "delivered")
    assert delivered["step"] == 8


def test_the_step_latency_counts_the_planning_done_on_the_control_thread(tmp_path: Path):
    # A clock that reads 0, 1, 2, ... seconds, one more at each call. The rule planner plans on
    # the control thread at step 0 (two clock reads inside: the request and the plan's record),
    # not at step 1 (nothing changed). The step latency used to count the executor and the rule
    # layer only (1000 ms here), leaving the planning out of the control-step figures.
    ticks = iter(range(10**6))
    orders = tmp_path / "o.jsonl"
    order = {"id": "o1", "shelf": "S3-2", "priority": "normal", "arrival": 0, "deadline": 40}
    orders.write_text(json.dumps(order) + "\n")
    config = run_config(
        layout="small", orders=str(orders), n_robots=1, steps=3, planner="rule",
        executor="greedy", sync_planner=True, gif=False, tick_ms=0,
    )  # fmt: skip
    result = run(
        config, tmp_path / "run", planner=build_planner("rule"), clock=lambda: float(next(ticks))
    )
    steps = [e for e in read_trace(result.out_dir).events if e["type"] == "step"]
    assert [(e["planning_ms"], e["latency_ms"]) for e in steps] == [
        (3000.0, 4000.0),
        (1000.0, 2000.0),
        (1000.0, 2000.0),
    ]
    assert result.metrics["planning_latency_p50_ms"] == 1000.0
    assert result.metrics["step_latency_p50_ms"] == 2000.0
