"""``marlm demo --planner triage --plan-deadline S`` says the deadline is not used: the triage
planner's answers are classes, applied whenever they arrive (only ``llm`` and ``team`` drop a
late answer)."""

from __future__ import annotations

from cli_run import run_main
from marlm.llm.breaker import SystemClock

FAST = ["demo", "--planner", "triage", "--executor", "greedy", "--steps", "1", "--tick-ms", "0"]


def test_a_plan_deadline_given_to_the_triage_planner_is_said_to_be_unused(
    tmp_path, capsys, refused_url, monkeypatch
):
    # `--planner triage --plan-deadline 5` ran without a word that the deadline was never read.
    # A server that refuses (the planner falls back to the rule) keeps the test cheap: the note
    # is the same for any model, and the embedded one would embed the triage pool first.
    argv = [*FAST, "--sync", "--no-gif", "--no-counterfactual", "--llm", refused_url]
    argv += ["--out", tmp_path / "run"]
    monkeypatch.setattr(SystemClock, "sleep", lambda self, seconds: None)  # no retry waits
    code, err = run_main([*argv, "--plan-deadline", "5"], capsys)
    assert code == 0, err
    note = (
        "note: --planner triage applies every answer, however late: --plan-deadline 5 is not used."
    )
    assert note in " ".join(err.split()), err  # the console wraps the line at its width
    assert err.count("note: --planner triage") == 1, err
