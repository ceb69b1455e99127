"""A policy that never reaches the goal is named, with a hint that depends on the reward's source."""

from __future__ import annotations

from marlm.eval.diagnose import detect_goal_not_reached


def test_no_finding_when_the_greedy_path_arrives():
    assert detect_goal_not_reached(6, 100) == []


def test_llm_reward_that_is_exploited_is_named_as_such():
    (finding,) = detect_goal_not_reached(100, 100, reward_source="llm")
    assert finding.kind == "goal_not_reached"
    assert "LLM reward" in finding.suggestion and finding.evidence["greedy_path_length"] == 100
