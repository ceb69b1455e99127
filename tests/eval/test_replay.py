"""Offline replay on known traces: agreement with the recorded plans, batch Q-learning by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from marlm.errors import InputError
from marlm.eval.replay import Decision, DecisionPoint, decision_points, replay_llm, replay_rl
from marlm.eval.trace import TraceWriter, read_trace


def _known_trace(path: Path) -> list[dict]:
    with TraceWriter(path) as t:
        t.write("run_start", config={}, agents=["robot_0", "robot_1"])
        # Decision 1: LLM, valid at the first attempt.
        t.write(
            "llm_call",
            call_id=1,
            step_requested=0,
            step_applied=2,
            latency_ms=100.0,
            valid=True,
            attempt=0,
            prompt_tokens=50,
            completion_tokens=10,
            messages=[{"role": "user", "content": "d1"}],
            raw="{}",
        )
        t.write(
            "plan",
            step=2,
            step_requested=0,
            source="llm",
            pending=["O1", "O2"],
            idle=["robot_0", "robot_1"],
            assignments=[{"robot": "robot_0", "order": "O1"}, {"robot": "robot_1", "order": "O2"}],
        )
        # Nothing to decide: left out.
        t.write(
            "plan", step=3, step_requested=3, source="rule", pending=[], idle=[], assignments=[]
        )
        # Decision 2: invalid twice, then the rule.
        for attempt in (0, 1):
            t.write(
                "llm_call",
                call_id=2 + attempt,
                step_requested=10,
                step_applied=12,
                latency_ms=80.0,
                valid=False,
                attempt=attempt,
                prompt_tokens=60,
                completion_tokens=5,
                messages=[{"role": "user", "content": f"d2-{attempt}"}],
            )
        t.write(
            "plan",
            step=12,
            step_requested=10,
            source="fallback",
            pending=["O3"],
            idle=["robot_0"],
            assignments=[{"robot": "robot_0", "order": "O3"}],
        )
        # Decision 3: the rule planner.
        t.write(
            "plan",
            step=20,
            step_requested=20,
            source="rule",
            pending=["O4", "O5"],
            idle=["robot_1", "robot_0"],
            assignments=[{"robot": "robot_1", "order": "O4"}, {"robot": "robot_0", "order": "O5"}],
        )
    return read_trace(path).events


def test_decision_points_group_calls_with_their_plan(tmp_path: Path) -> None:
    points = decision_points(_known_trace(tmp_path / "t.jsonl"))
    assert [p.step for p in points] == [0, 10, 20]
    assert [p.recorded_source for p in points] == ["llm", "fallback", "rule"]
    assert [len(p.calls) for p in points] == [1, 2, 0]
    assert points[1].messages == [{"role": "user", "content": "d2-0"}]  # first attempt's prompt
    assert points[2].situation["idle"] == ["robot_1", "robot_0"]
    assert points[0].recorded == [("robot_0", "O1"), ("robot_1", "O2")]


def test_replay_agreement_on_a_known_trace(tmp_path: Path) -> None:
    events = _known_trace(tmp_path / "t.jsonl")

    def decide(p: DecisionPoint) -> Decision:
        # Agrees at decisions 0 and 1 (order of pairs does not matter), half-agrees at 2.
        pairs = list(reversed(p.recorded))
        if p.index == 2:
            pairs = [("robot_1", "O4"), ("robot_0", "O9")]
        return Decision(
            pairs,
            "llm",
            calls=1,
            latency_ms=10.0,
            prompt_tokens=30,
            completion_tokens=3,
            valid=True,
        )

    seen = []
    report = replay_llm(events, decide, on_decision=lambda p, d: seen.append(p.index))
    assert seen == [0, 1, 2]
    assert report["decisions"] == 3
    assert report["exact_agreement"] == pytest.approx(2 / 3)
    assert report["pair_agreement"] == pytest.approx((1 + 1 + 1 / 3) / 3)
    assert report["valid_rate"] == 1.0 and report["fallback_rate"] == 0.0
    assert report["tokens"]["mean"] == 33
    assert report["recorded"]["tokens"]["mean"] == pytest.approx((60 + 130 + 0) / 3)
    assert report["recorded"]["latency_ms"]["p50"] == pytest.approx(100.0)
    assert report["recorded"]["fallback_rate"] == pytest.approx(1 / 3)
    assert [r["exact"] for r in report["rows"]] == [True, True, False]
    assert "estimated" in report and "measured" in report

    only_llm = replay_llm(events, decide, only_sources=["llm", "fallback"], limit=1)
    assert only_llm["decisions"] == 1


def test_replay_of_a_trace_without_plans_is_an_input_error(tmp_path: Path) -> None:
    with TraceWriter(tmp_path / "t.jsonl") as t:
        t.write("run_start", config={})
    with pytest.raises(InputError, match="no planner decision to replay"):
        replay_llm(read_trace(tmp_path / "t.jsonl").events, lambda p: Decision([], "rule"))


def test_batch_q_learning_known_answer(tmp_path: Path) -> None:
    # One robot in a corridor: cells (0,0) -> (0,1) -> (0,2), action 4 (right) twice.
    with TraceWriter(tmp_path / "t.jsonl") as t:
        t.write("run_start", config={}, agents=["robot_0"], positions=[[0, 0]])
        t.write("step", step=0, actions=[4], rewards=[1.0], positions=[[0, 1]])
        t.write("step", step=1, actions=[4], rewards=[0.0], positions=[[0, 2]])
    report = replay_rl(read_trace(tmp_path / "t.jsonl").events, alpha=0.5, gamma=0.9, sweeps=1)
    (row,) = report["agents"]
    assert row["transitions"] == 2
    assert row["return"] == 1.0 and row["reward_mean"] == 0.5 and row["reward_var"] == 0.25
    # Q(s0, right) = 0 + 0.5 * (1 + 0.9 * 0 - 0) = 0.5; Q(s1, right) = 0.5 * (0 + 0.9 * 0) = 0.
    assert row["v_start"] == pytest.approx(0.5)
    assert row["greedy_agreement"] == pytest.approx(0.5)  # argmax at s1 is a tie -> action 0
    q = report["_q_tables"]["robot_0"]
    assert q.shape == (3, 5) and q[0, 4] == pytest.approx(0.5)
    assert report["state_source"].startswith("robot cell")

    # Two sweeps: the second bootstraps nothing new at s1, Q(s0, right) = 0.5 + 0.5 * (1 - 0.5).
    report2 = replay_rl(read_trace(tmp_path / "t.jsonl").events, alpha=0.5, gamma=0.9, sweeps=2)
    assert report2["_q_tables"]["robot_0"][0, 4] == pytest.approx(0.75)


def test_rl_replay_uses_recorded_executor_states_and_team_spread(tmp_path: Path) -> None:
    with TraceWriter(tmp_path / "t.jsonl") as t:
        t.write("run_start", config={}, agents=["a", "b"], n_states=8)
        for step in range(4):
            t.write(
                "step",
                step=step,
                actions=[1, 2],
                rewards=[-1.0, -1.0 if step < 2 else 1.0],
                states=[step, 7 - step],
            )
    report = replay_rl(read_trace(tmp_path / "t.jsonl").events, sweeps=3)
    assert report["n_states"] == 8 and report["state_source"].startswith("executor states")
    returns = [r["return"] for r in report["agents"]]
    assert returns == [-4.0, 0.0]
    assert report["return_sum"] == -4.0 and report["return_var_across_agents"] == 4.0
    assert [r["transitions"] for r in report["agents"]] == [3, 3]  # the last step has no s'
    assert np.isfinite([r["td_error_mean_abs"] for r in report["agents"]]).all()
