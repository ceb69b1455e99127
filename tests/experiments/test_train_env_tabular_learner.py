"""``marlm train env ENV --learner iql`` names the command of the tabular learners: it said only
"unknown learner 'iql'; allowed: mappo, ippo, qmix, dqn-vdn, dqn", though ``iql`` is marlm's own
learner of ``marlm train race``."""

from __future__ import annotations

from cli_run import run_main


def test_a_tabular_learner_given_to_train_env_names_its_command(tmp_path, capsys):
    for learner, env, command in (("iql", "GridRace", "race"), ("q", "GridWorld", "gridworld")):
        out = tmp_path / learner
        argv = ["train", "env", "marlm.envs.grid:GridRace", "--learner", learner, "--out", out]
        code, err = run_main(argv, capsys)
        assert code == 2, err
        assert " ".join(err.split()) == (
            f"marlm: error: field '--learner': '{learner}' is a tabular learner of {env}: run it "
            f"with marlm train {command} --learner {learner}; this command takes a network "
            "learner: mappo, ippo, qmix, dqn-vdn or dqn"
        )
        assert not out.exists()
