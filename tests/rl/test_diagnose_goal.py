"""A policy that never reaches the goal is named, with a hint that depends on the reward's source."""

from __future__ import annotations

from marlm.eval.diagnose import detect_goal_not_reached


def test_no_finding_when_the_greedy_path_arrives():
    assert detect_goal_not_reached(6, 100) == []


def test_llm_reward_that_is_exploited_is_named_as_such():
    (finding,) = detect_goal_not_reached(100, 100, reward_source="llm")
    assert finding.kind == "goal_not_reached"
    assert "LLM reward" in finding.suggestion and finding.evidence["greedy_path_length"] == 100


def test_diagnose_of_a_gridworld_run_names_the_finding_the_run_saved(tmp_path, capsys):
    # The run printed and saved goal_not_reached; `marlm diagnose` on its folder said "no findings".
    import json

    from cli_run import run_main

    out = tmp_path / "gw"
    argv = ["train", "gridworld", "--episodes", "1", "--engine", "reference", "--no-plot"]
    code, err = run_main([*argv, "--out", out], capsys)
    assert code == 0, err
    (saved,) = json.loads((out / "findings.json").read_text())
    assert saved["kind"] == "goal_not_reached"
    assert saved["evidence"] == {"greedy_path_length": 100.0, "max_steps": 100.0}
    from marlm.eval.diagnose import diagnose_run

    code, err = run_main(["diagnose", out], capsys)
    assert code == 0, err

    (finding,) = diagnose_run(out)
    assert finding.to_dict() == saved
