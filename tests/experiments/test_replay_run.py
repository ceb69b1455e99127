"""Replay of a real recorded run: the rule replayed on its own trace agrees everywhere; the
embedded model and batch Q-learning run on the same trace; the CLI reads it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from marlm.eval.trace import read_trace
from marlm.experiments.replay import replay_trace
from marlm.hybrid.controller import run, run_config
from marlm.hybrid.planning.planner import LLMPlanner, RulePlanner

MARLM = str(Path(sys.executable).parent / "marlm")


@pytest.fixture(scope="module")
def rule_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rule_run")
    config = run_config(
        layout="small", steps=120, seed=5, planner="rule", executor="greedy", gif=False, tick_ms=0
    )
    run(config, out, planner=RulePlanner())
    return out


def test_rule_replayed_on_its_own_trace_agrees_at_every_decision(rule_run: Path) -> None:
    report, warnings = replay_trace(rule_run, scheme="rule")
    assert warnings == []
    assert report["decisions"] >= 3
    assert report["exact_agreement"] == 1.0 and report["pair_agreement"] == 1.0
    assert report["valid_rate"] == 1.0 and report["fallback_rate"] == 0.0
    assert report["tokens"]["mean"] == 0


def test_rl_replay_on_a_real_trace(rule_run: Path) -> None:
    report, _ = replay_trace(rule_run, scheme="rl", sweeps=5)
    agents = report["agents"]
    n_steps = sum(1 for e in read_trace(rule_run).events if e["type"] == "step")
    # all 24 orders delivered at step 101 (PIBT, idle robots at dwell points; 105 without them)
    assert n_steps == 102
    assert [a["agent"] for a in agents] == [f"robot_{i}" for i in range(len(agents))]
    # run_start holds the start cells, so every recorded step is one transition.
    assert all(a["transitions"] == n_steps for a in agents)
    assert report["return_sum"] == pytest.approx(sum(a["return"] for a in agents))


def test_embedded_model_replays_two_recorded_decisions(rule_run: Path, embedded_model) -> None:
    report, _ = replay_trace(rule_run, scheme="llm", limit=2, planner=LLMPlanner(embedded_model))
    assert report["decisions"] == 2
    for row in report["rows"]:
        assert row["calls"] >= 1 and row["tokens"] > 0 and row["latency_ms"] > 0
        assert row["replayed_source"] in ("llm", "fallback")
        assert row["valid"] == (row["replayed_source"] == "llm")
    assert 0.0 <= report["pair_agreement"] <= 1.0


def test_cli_replay_and_report_exit_codes(rule_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "replay.json"
    proc = subprocess.run(
        [MARLM, "replay", str(rule_run), "--scheme", "rule", "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "exact agreement" in proc.stdout
    assert json.loads(out.read_text(encoding="utf-8"))["exact_agreement"] == 1.0

    empty = tmp_path / "empty_run"
    empty.mkdir()
    proc = subprocess.run(
        [MARLM, "report", str(empty)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("marlm: error: ")
    assert "holds none of the files of a marlm run" in proc.stderr
    assert "trace.jsonl" in proc.stderr and "Traceback" not in proc.stderr

    newer = tmp_path / "newer"
    newer.mkdir()
    (newer / "trace.jsonl").write_text('{"v": 99, "type": "run_start", "config": {}}\n')
    proc = subprocess.run(
        [MARLM, "replay", str(newer), "--scheme", "rl"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2 and "schema version 99 is newer" in proc.stderr


def test_embedded_model_replayed_on_its_own_trace_gives_the_same_answers(
    tmp_path: Path, embedded_model
) -> None:
    """Record a run whose planner is the embedded model (temperature 0, in-step planner), then
    replay the same model on the trace: the rebuilt situation must give the same prompt (same
    token count) and the same assignments at every replayed decision."""
    config = run_config(
        layout="small",
        steps=12,
        seed=2,
        planner="llm",
        executor="greedy",
        sync_planner=True,
        tick_ms=0,
        gif=False,
    )
    run(config, tmp_path, planner=LLMPlanner(embedded_model))
    report, _ = replay_trace(tmp_path, scheme="llm", limit=2, planner=LLMPlanner(embedded_model))
    assert report["decisions"] >= 1
    for row in report["rows"]:
        assert row["recorded_source"] in ("llm", "fallback") and row["recorded_calls"] >= 1
        assert row["tokens"] == row["recorded_tokens"] > 0
        assert row["exact"], row
    assert report["exact_agreement"] == 1.0
