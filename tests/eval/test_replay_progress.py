"""`marlm replay` shows progress: a model can take seconds per decision, minutes per trace."""

from __future__ import annotations

import sys

from marlm.cli import main
from marlm.experiments.replay import replay_trace
from marlm.hybrid.controller import run, run_config
from marlm.hybrid.planning.planner import RulePlanner


def test_replay_reports_progress_over_every_decision(tmp_path, monkeypatch, capsys):
    config = run_config(steps=60, seed=3, planner="rule", executor="greedy", gif=False, tick_ms=0)
    run(config, tmp_path / "run", planner=RulePlanner())
    calls: list[tuple[int, int]] = []
    said: list[str] = []
    result, _ = replay_trace(
        tmp_path / "run", scheme="rule", progress=lambda d, n: calls.append((d, n)),
        say=said.append,
    )  # fmt: skip
    n = result["decisions"]
    assert n >= 2 and calls == [(k, n) for k in range(n + 1)]
    assert said == []  # the rule planner loads nothing
    monkeypatch.setattr(sys, "argv", ["marlm", "replay", str(tmp_path / "run"), "--scheme", "rule"])
    try:
        main()
    except SystemExit as e:
        assert not e.code
    captured = capsys.readouterr()
    assert "replaying decisions" in captured.err and f"{n}/{n}" in captured.err
