"""``--set FIELD=VALUE`` reaches every deep learner setting that has no option of its own, on
``marlm train env`` and ``marlm train race``; a bad pair is one line naming ``--set`` and the fix,
before any run folder is made."""

from __future__ import annotations

import json

import pytest

from cli_run import run_main

ENV = ["train", "env", "marlm.envs.grid:GridRace", "--steps", "512", "--envs", "2", "--no-plot"]


def test_set_values_reach_the_runs_config(tmp_path, capsys):
    out = tmp_path / "run"
    code, err = run_main([*ENV, "--set", "rollout=32", "--set", "hidden=16", "--out", out], capsys)
    assert code == 0, err
    config = json.loads((out / "metrics.json").read_text())["config"]
    assert (config["rollout"], config["hidden"], config["steps"], config["num_envs"]) == (
        32, 16, 512, 2,
    )  # fmt: skip


@pytest.mark.parametrize(
    "pair,said",
    [
        ("rollout=0", "field '--set rollout': must be a whole number >= 1, got 0; pass e.g. --set rollout=64"),
        ("gae_lambda=2", "field '--set gae_lambda': must lie in [0.0, 1.0], got 2.0"),
        ("lr=0.1", "field '--set': lr has its own option: pass --lr instead of --set lr"),
        ("rollout", "field '--set': got 'rollout'; pass FIELD=VALUE, e.g. --set rollout=64"),
    ],
)  # fmt: skip
def test_a_bad_pair_is_one_line_before_any_folder(tmp_path, capsys, pair, said):
    code, err = run_main([*ENV, "--set", pair, "--out", tmp_path / "out"], capsys)
    assert code == 2 and err.strip() == f"marlm: error: {said}", err
    assert list(tmp_path.iterdir()) == []


def test_the_default_steps_are_the_configs():
    from marlm.rl.deep import DEFAULT_STEPS, RACE_STEPS
    from marlm.rl.deep.common import DeepConfig

    assert DeepConfig().steps == DEFAULT_STEPS == 200_000 and RACE_STEPS == 100_000
    from marlm.cli.train import DEEP_STEPS

    help_text = " ".join(DEEP_STEPS.help.split())
    assert f"(default {RACE_STEPS} on race, {DEFAULT_STEPS} on env)" in help_text


def test_an_empty_set_with_a_table_learner_is_refused_not_ignored(tmp_path, capsys):
    # train race --learner iql --set "" ran and exited 0: the empty pair read as not given.
    race = ["train", "race", "--learner", "iql", "--episodes", "5", "--no-plot"]
    code, err = run_main([*race, "--set", "", "--out", tmp_path / "out"], capsys)
    assert code == 2 and "would ignore it; drop --set ''," in err, err
    assert list(tmp_path.iterdir()) == []
