"""``marlm bench``: option checking and the printed figure format (timings run in benchmarks/)."""

from __future__ import annotations

import subprocess
import sys

from marlm.scale.benchmarks import Figure, ScriptedModel


def test_unknown_benchmark_is_an_input_error_with_exit_code_2():
    proc = subprocess.run(
        [sys.executable, "-m", "marlm", "bench", "--only", "env,warp"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "field '--only'" in proc.stderr and "warp" in proc.stderr
    assert proc.stdout == ""  # nothing ran


def test_a_figure_prints_value_baseline_ratio_and_target():
    fig = Figure("env", 1e6, 1e4, "robot-steps/s", 100.0, "x RWARE", ">= 50x", True, {"a": "b"})
    lines = fig.lines()
    assert lines[0] == (
        "env: 1,000,000 robot-steps/s vs baseline 10,000 robot-steps/s -> 100 x RWARE "
        "(target >= 50x: met)"
    )
    assert lines[1] == "    a: b"


def test_scripted_model_answers_the_planner_schema():
    from marlm.hybrid.planning.planner import answer_schema

    model = ScriptedModel(0.0)
    schema = answer_schema(["robot_1", "robot_2"], ["o1"], 1)
    res = model.chat([], schema=schema)
    assert res.text == '{"assignments": [{"robot": "robot_1", "order": "o1"}]}'
