"""An option the run would not read is refused, naming it and the fix, instead of being silently
ignored: ``train race --lr 0.1`` trained the table at its default step size, ``train race
--learner mappo --alpha 0.01`` the networks at theirs, ``--mix-weight`` without ``--reward mixed``
and ``train gridworld --llm URL`` without ``--reward llm`` changed nothing. Each case is refused
before the run folder is created or a model is asked."""

from __future__ import annotations

import pytest

from cli_run import run_main

RACE = ["train", "race", "--episodes", "1", "--no-plot"]
NETWORK = ["train", "race", "--learner", "mappo", "--steps", "8", "--no-plot"]
GRIDWORLD = ["train", "gridworld", "--episodes", "1", "--no-plot"]

#: (command, option, value, the fix the message gives).
CASES = [
    (RACE, "--steps", "100", "pass a network --learner (a table counts --episodes)"),
    (RACE, "--lr", "0.1", "use --alpha, a table's step size"),
    (RACE, "--envs", "3", "pass a network --learner"),
    (RACE, "--set", "rollout=64", "pass a network --learner (a table's settings are options)"),
    (RACE, "--mix-weight", "0.3", "pass --reward mixed"),
    (RACE, "--counterfactual", "stay", "pass --reward difference"),
    (NETWORK, "--alpha", "0.01", "use --lr, a network learner's step size"),
    (NETWORK, "--epsilon", "0.5", "pass a table --learner"),
    (NETWORK, "--epsilon-decay", "0.9", "pass a table --learner"),
    (NETWORK, "--epsilon-floor", "0.1", "pass a table --learner"),
    (GRIDWORLD, "--llm-samples", "5", "pass --reward llm"),
    (GRIDWORLD, "--llm", "http://127.0.0.1:9/v1", "pass --reward llm"),
    (GRIDWORLD, "--llm-model", "qwen", "pass --reward llm"),
]


@pytest.mark.parametrize(
    "command,option,value,fix", CASES, ids=[f"{c[1]} {o}" for c, o, _, _ in CASES]
)
def test_an_option_the_run_would_ignore_is_refused_naming_it(
    tmp_path, capsys, command, option, value, fix
):
    out = tmp_path / "out"
    code, err = run_main([*command, option, value, "--out", out], capsys)
    assert code == 2, err
    assert err.startswith(f"marlm: error: field '{option}': "), err
    assert f"would ignore it; drop {option} {value}, or {fix}" in err or (
        f"so it would be ignored; drop {option} {value}, or {fix}" in err
    ), err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert list(tmp_path.iterdir()) == []


def test_the_options_a_run_reads_reach_its_config():
    from marlm.experiments.training import check_race_learner
    from marlm.rl.configs import RaceConfig

    table = check_race_learner(
        "iql", "mixed", mix_weight=0.3, alpha=0.1, epsilon=0.5, epsilon_decay=0.9,
        epsilon_floor=None, counterfactual=None, steps=None, lr=None, envs=None,
    )  # fmt: skip
    assert table == {
        "learner": "iql", "reward": "mixed", "mix_weight": 0.3, "counterfactual": "absent",
        "alpha": 0.1, "epsilon_start": 0.5, "epsilon_decay": 0.9, "epsilon_floor": 0.02,
    }  # fmt: skip
    assert RaceConfig(**table).epsilon_floor == RaceConfig().epsilon_floor
