"""``marlm compare --llm-only-steps N`` without the llm_only scheme capped nothing and said
nothing; it is refused in one line naming the schemes the comparison runs, before the run folder
is made."""

from __future__ import annotations

import pytest

from cli_run import run_main


@pytest.mark.parametrize(
    "extra,fix",
    [
        (["--schemes", "rules,rl_shield"], "(rules, rl_shield); drop --llm-only-steps 5, or add "
         "llm_only to --schemes"),
        (["--scenario", "notes-only", "--schemes", "rule"], "(rule); drop --llm-only-steps 5"),
    ],
    ids=["standard", "notes-only"],
)  # fmt: skip
def test_llm_only_steps_without_the_llm_only_scheme_is_refused(tmp_path, capsys, extra, fix):
    out = tmp_path / "cmp"
    code, err = run_main(["compare", *extra, "--llm-only-steps", "5", "--out", out], capsys)
    assert code == 2, err
    assert err.strip() == (
        "marlm: error: field '--llm-only-steps': caps the llm_only scheme's steps, and this "
        f"comparison runs no llm_only {fix}"
    )
    assert not out.exists()


def test_llm_only_steps_left_out_is_the_documented_cap():
    from marlm.experiments.compare import CompareConfig

    config = CompareConfig.from_options(
        scenario="standard", schemes="llm_only", orders=None, robots=None, steps=None,
        shield="pibt", llm_only_steps=None,
    )  # fmt: skip
    assert config.llm_only_steps == 30


NOTES = "the notes-only scenario runs every planner on one seed, with no spread"
NO_SPREAD = "the Ray tasks run the spread's seeds, and --spread-seeds 0 runs none"


@pytest.mark.parametrize(
    "extra,option,value,said",
    [
        (["--scenario", "notes-only"], "--spread-seeds", "3", NOTES),
        (["--scenario", "notes-only"], "--workers", "2", NOTES),
        (["--scenario", "notes-only"], "--address", "127.0.0.1:1", NOTES),
        (["--spread-seeds", "0"], "--workers", "2", NO_SPREAD),
        (["--spread-seeds", "0"], "--address", "127.0.0.1:1", NO_SPREAD),
    ],
)
def test_the_spread_options_where_no_spread_runs_are_refused(
    tmp_path, capsys, extra, option, value, said
):
    # They ran nothing as Ray tasks and said nothing (the notes-only scenario has no spread).
    out = tmp_path / "cmp"
    code, err = run_main(["compare", *extra, option, value, "--out", out], capsys)
    fix = "" if "notes-only" in extra else ", or pass --spread-seeds 2 or more"
    assert code == 2, err
    assert err.strip() == f"marlm: error: field '{option}': {said}; drop {option} {value}{fix}"
    assert not out.exists()


def test_the_spread_left_out_is_5_and_none_in_the_notes_only_scenario():
    from marlm.experiments.compare import CompareConfig

    def spread(scenario: str) -> int:
        return CompareConfig.from_options(
            scenario=scenario, schemes=None, orders=None, robots=None, steps=None, shield="pibt",
            spread_seeds=None,
        ).spread_seeds  # fmt: skip

    assert (spread("standard"), spread("notes-only")) == (5, 0)
