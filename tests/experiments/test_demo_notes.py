"""What ``marlm demo`` says before the run about the options it was given."""

from __future__ import annotations

from cli_run import run_main

FAST = ["demo", "--planner", "rule", "--executor", "greedy", "--steps", "3", "--tick-ms", "0"]


def test_a_model_given_to_the_rule_planner_is_said_to_be_unused(tmp_path, capsys):
    # `--planner rule --llm URL` ran without a word that the URL was never asked.
    url = "http://127.0.0.1:9/v1"
    argv = [*FAST, "--sync", "--no-gif", "--no-counterfactual", "--llm", url]
    code, err = run_main([*argv, "--out", tmp_path / "run"], capsys)
    assert code == 0, err
    assert f"note: --planner rule asks no model: --llm {url} is not used." in err
    code, err = run_main([*argv[:-2], "--out", tmp_path / "run2"], capsys)
    assert code == 0 and "asks no model" not in err, err
