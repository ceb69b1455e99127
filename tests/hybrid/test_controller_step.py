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
    )  # fmt: skip
    result = run(config, tmp_path / "run", planner=build_planner("rule"))
    events = read_trace(result.out_dir).events
    start = next(e for e in events if e["type"] == "run_start")
    assigned = next(e for e in events if e["type"] == "order" and e["event"] == "assigned")
    step0 = next(e for e in events if e["type"] == "step" and e["step"] == 0)
    assert assigned["step"] == 0 and start["positions"] == [[8, 1]]
    assert step0["proposed"] != [0] and step0["positions"] != [[8, 1]]
    # Then straight to the shelf and the station: 9 moves, delivered at step 8 (was 9).
    delivered = next(e for e in events if e["type"] == "order" and e["event"] == "delivered")
    assert delivered["step"] == 8
