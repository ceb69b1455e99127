"""Movement case 1 through `marlm demo`, as a user runs it: a station at the end of a lane.

`marlm demo --planner rule --executor greedy --sync --tick-ms 0 --steps 300` on the lane and the
alcove maps: the robot that delivers first stands idle on the only station; with the local shield
the carrier behind it waited to the end (1 of 2 delivered). The PIBT rule layer (the default)
pushes the idle robot out: both orders delivered, no deadlock breaks, no random actions.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

MAPS = {
    "lane": "############\n#PR.R.....S#\n#######.#S##\n############\n",
    "alcove": "#########\n##P######\n#......S#\n#RR....S#\n#########\n",
}
ORDERS = {"lane": ["S1-10", "S2-9"], "alcove": ["S2-7", "S3-7"]}
#: Measured under the PIBT layer: (steps to deliver both orders, the longest a robot with a task
#: stood still).
FIGURES = {"lane": (27, 1), "alcove": (13, 0)}


@pytest.mark.parametrize("case", ["lane", "alcove"])
def test_case1_dead_end_station_delivers_both_orders(tmp_path: Path, case: str):
    (tmp_path / "map.txt").write_text(MAPS[case])
    (tmp_path / "orders.jsonl").write_text(
        "".join(
            json.dumps({"id": f"o{k}", "shelf": s, "priority": "normal", "arrival": 0,
                        "deadline": 400}) + "\n"
            for k, s in enumerate(ORDERS[case])
        )
    )  # fmt: skip
    out = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable, "-m", "marlm.cli", "demo", "--planner", "rule", "--executor",
            "greedy", "--sync", "--tick-ms", "0", "--steps", "300", "--no-gif",
            "--layout", str(tmp_path / "map.txt"), "--orders", str(tmp_path / "orders.jsonl"),
            "--out", str(out),
        ],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert (metrics["delivered"], metrics["collisions"], metrics["deadlock_breaks"]) == (2, 0, 0)
    # No robot with a task stands still for more than a step.
    assert (metrics["steps"], metrics["still_with_task_max_steps"]) == FIGURES[case]


@pytest.mark.parametrize("option", ["--shield", "--shield-rule"])
def test_case1_with_the_local_shield_the_carrier_waits_behind_the_idle_robot(
    tmp_path: Path, option: str
):
    # The same lane under `--shield local` (and its deprecated spelling `--shield-rule local`):
    # the earlier shield treats the idle robot on the station as a wall; 1 of 2 delivered.
    (tmp_path / "map.txt").write_text(MAPS["lane"])
    (tmp_path / "orders.jsonl").write_text(
        "".join(
            json.dumps({"id": f"o{k}", "shelf": s, "priority": "normal", "arrival": 0,
                        "deadline": 400}) + "\n"
            for k, s in enumerate(ORDERS["lane"])
        )
    )  # fmt: skip
    out = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable, "-m", "marlm.cli", "demo", "--planner", "rule", "--executor",
            "greedy", "--sync", "--tick-ms", "0", "--steps", "300", "--no-gif", option, "local",
            "--layout", str(tmp_path / "map.txt"), "--orders", str(tmp_path / "orders.jsonl"),
            "--out", str(out),
        ],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    start = json.loads((out / "trace.jsonl").read_text().splitlines()[0])
    assert start["config"]["shield"] is True and start["config"]["shield_rule"] == "local"
    metrics = json.loads((out / "metrics.json").read_text())
    assert (metrics["delivered"], metrics["steps"]) == (1, 300)  # the carrier waits to the end


@pytest.mark.parametrize(
    "argv",
    [
        ["demo", "--shield", "pibbt"],
        ["compare", "--shield", "none"],
        ["train", "warehouse", "--shield", "fast"],
    ],
)
def test_a_bad_shield_value_exits_2_naming_the_option_and_the_choices(
    tmp_path: Path, argv: list[str]
):
    proc = subprocess.run(
        [sys.executable, "-m", "marlm.cli", *argv, "--out", str(tmp_path / "x")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "--shield" in proc.stderr and "pibt, local" in proc.stderr
    assert not (tmp_path / "x").exists()
