"""A map without ``R`` cells or a ``robots:`` line, and no ``--robots``: the run says in one
``marlm: warning:`` line how many robots it starts and how to choose (it started 2 silently)."""

from __future__ import annotations

import pytest

from cli_run import run_main

DEMO = ["demo", "--planner", "rule", "--executor", "greedy", "--sync", "--no-gif", "--tick-ms",
        "0", "--steps", "5"]  # fmt: skip
COMPARE = ["compare", "--schemes", "rules", "--spread-seeds", "0", "--steps", "5"]


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("marlm: warning:")]


@pytest.mark.parametrize("command", [DEMO, COMPARE], ids=["demo", "compare"])
def test_robots_drawn_for_a_map_without_starts_are_announced(tmp_path, capsys, command):
    code, err = run_main([*command, "--layout", "rware-tiny", "--out", tmp_path / "a"], capsys)
    assert code == 0, err
    (line,) = _warnings(err)
    assert line.startswith("marlm: warning: --layout rware-tiny: the map has no 'R' cells"), line
    assert "2 robots" in line and "--robots N" in line


@pytest.mark.parametrize(
    "extra", [["--layout", "rware-tiny", "--robots", "2"], ["--layout", "small"]]
)
def test_no_warning_when_the_robot_count_was_given(tmp_path, capsys, extra):
    code, err = run_main([*DEMO, *extra, "--out", tmp_path / "b"], capsys)
    assert code == 0 and _warnings(err) == [], err
