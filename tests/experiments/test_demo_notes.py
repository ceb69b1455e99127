"""What ``marlm demo`` (and ``marlm compare``) say before the run about the options given."""

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


def test_every_model_option_given_to_the_rule_planner_is_named_in_one_note(tmp_path, capsys):
    # `--planner rule --plan-deadline 5 --llm-timeout 9` ran without a word that neither was used.
    argv = [*FAST, "--sync", "--no-gif", "--no-counterfactual", "--out", tmp_path / "run"]
    given = ["--plan-deadline", "5", "--llm-timeout", "9", "--llm-model", "qwen"]
    code, err = run_main([*argv, *given], capsys)
    assert code == 0, err
    note = (
        "note: --planner rule asks no model: --llm-model qwen, --llm-timeout 9 and "
        "--plan-deadline 5 are not used."
    )
    assert note in " ".join(err.split()), err  # the console wraps the line at its width
    assert err.count("note: --planner rule") == 1, err


def test_the_notes_know_the_commands_defaults():
    # A default compared with another number would name an option the user never set.
    import typer.main

    from marlm.cli import app
    from marlm.experiments.demo import PLAN_DEADLINE_S
    from marlm.experiments.settings import LLM_DEFAULT, LLM_MODEL_DEFAULT, LLM_TIMEOUT_S

    commands = typer.main.get_command(app).commands
    for name in ("demo", "compare"):
        params = {p.name: p.default for p in commands[name].params}
        given = (params["llm"], params["llm_model"], params["llm_timeout"])
        assert given == (LLM_DEFAULT, LLM_MODEL_DEFAULT, LLM_TIMEOUT_S), name
    assert {p.name: p.default for p in commands["demo"].params}["plan_deadline"] == PLAN_DEADLINE_S


def test_compare_without_a_model_scheme_names_the_model_options_the_user_set():
    from marlm.experiments.compare import CompareConfig

    config = CompareConfig.of(schemes=["rules"], spread_seeds=0, llm_timeout_s=5.0)
    assert config.unused_options_note() == (
        "note: --schemes rules ask no model: --llm-timeout 5 is not used."
    )
    assert CompareConfig.of(schemes=["rules"], spread_seeds=0).unused_options_note() is None
    assert CompareConfig.of(schemes=["llm_only"], llm_timeout_s=5.0).unused_options_note() is None


def _demo_config(tmp_path, **options):
    from marlm.experiments.demo import DemoConfig

    settings = dict(layout="small", orders=None, robots=None, shield="pibt", scenario="none",
                    executor="greedy", sync=True, plan_deadline=2.0, steps=3, out=tmp_path / "r")  # fmt: skip
    return DemoConfig.from_options(**{**settings, **options})


def test_a_model_name_given_to_the_embedded_model_is_said_to_be_unused(tmp_path):
    # `marlm demo --llm-model qwen` ran the embedded model without a word that the name was unread.
    config = _demo_config(tmp_path, planner="llm", llm_model="qwen")
    assert config.unused_options_note() == (
        "note: --llm embedded runs its model in process, without a server: --llm-model qwen is "
        "not used."
    )
    assert _demo_config(tmp_path, planner="llm").unused_options_note() is None
    served = _demo_config(tmp_path, planner="team", llm="http://127.0.0.1:9/v1", llm_model="qwen")
    assert served.unused_options_note() is None


def test_compare_names_a_model_name_the_embedded_model_does_not_read():
    from marlm.experiments.compare import CompareConfig

    config = CompareConfig.of(schemes=["llm_only"], llm_model="qwen")
    assert config.unused_options_note() == (
        "note: --llm embedded runs its model in process, without a server: --llm-model qwen is "
        "not used."
    )
    served = CompareConfig.of(schemes=["llm_only"], llm="http://127.0.0.1:9/v1", llm_model="qwen")
    assert served.unused_options_note() is None
