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
