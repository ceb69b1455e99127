"""``marlm train race --learner mappo|...`` and ``marlm train env MODULE:FACTORY``: the run folder
that ``marlm report`` and ``marlm diagnose`` read, resume, and bad input (exit 2, one line)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cli_run import run_main
from marlm.cli.train import DEEP_LEARNERS
from marlm.rl.deep import common
from marlm.rl.deep.policy import NumpyPolicy

RUN_FILES = {"metrics.json", "tables.npz", "episodes.npz", "findings.json"}


def test_the_cli_names_the_learners_of_the_package():
    assert set(DEEP_LEARNERS) == set(common.DEEP_LEARNERS)


def test_train_race_mappo_writes_a_run_folder_that_report_and_diagnose_read(tmp_path, capsys):
    out = tmp_path / "run"
    code, err = run_main(
        ["train", "race", "--learner", "mappo", "--steps", "1024", "--envs", "2", "--out", out,
         "--no-plot"], capsys,
    )  # fmt: skip
    assert code == 0, err
    assert {f.name for f in out.iterdir()} >= RUN_FILES
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["env"] == "gridrace_v0" and metrics["learner"] == "mappo"
    assert metrics["steps"] == 1024 and metrics["team_curve"] == "sum"
    # The seed note's habit: a shared reward halves the step size.
    assert metrics["learning_rate"] == pytest.approx(common.DeepConfig.lr / 2)
    for agent in ("agent_0", "agent_1"):
        assert f"charts/{agent}/return" in metrics
        assert f"charts/{agent}/reached_goal_rate" in metrics
    policy = NumpyPolicy.load(out / "tables.npz")
    assert policy.kind == "categorical" and policy.n_agents == 2
    code, err = run_main(["diagnose", out], capsys)
    assert code == 0, err
    code, err = run_main(["report", out], capsys)
    assert code == 0, err
    assert "agent_0" in (out / "report.html").read_text()


def test_train_env_takes_a_users_module_and_resumes(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my_race.py").write_text(
        "from marlm.envs.grid import GridRace\n\ndef make(size=4):\n    return GridRace(size=size)\n"
    )
    args = ["train", "env", "my_race:make", "--env-kwargs", '{"size": 3}', "--learner", "qmix",
            "--steps", "1280", "--envs", "2", "--checkpoint-every", "640"]  # fmt: skip
    code, err = run_main([*args, "--out", "a", "--checkpoint", "ck.npz", "--plot"], capsys)
    assert code == 0, err
    assert (tmp_path / "a" / "curves.png").read_bytes()[:4] == b"\x89PNG"
    code, err = run_main([*args, "--out", "b", "--resume", "ck.npz", "--no-plot"], capsys)
    assert code == 0, err
    with np.load(tmp_path / "a" / "tables.npz") as a, np.load(tmp_path / "b" / "tables.npz") as b:
        np.testing.assert_array_equal(a["policy/w0"], b["policy/w0"])


@pytest.mark.parametrize(
    "args,needle",
    [(["train", "env", "nocolon"], "MODULE:NAME"),
     (["train", "env", "no_such_module_xyz:make"], "does not import"),
     (["train", "env", "marlm.envs.grid:nothing"], "no callable 'nothing'"),
     (["train", "env", "marlm.envs.grid:GridWorld"], "not a PettingZoo ParallelEnv"),
     # An AEC env wrapped as PettingZoo's modules wrap theirs (agent_selection unreadable before
     # reset) was let through and ended in a TypeError from its state().
     (["train", "env", "api_cases:turn_taking"], "an AEC env (agent_iter)"),
     # An environment that breaks the API at its third step, after the folder was claimed: the
     # folder was left holding only the claim file (.marlm-run).
     (["train", "env", "api_cases:NoneReward", "--steps", "64", "--envs", "1"], "not a number"),
     # A module that does not parse ended in a SyntaxError traceback.
     (["train", "env", "syntax_error_env:make"], "raised SyntaxError on import"),
     (["train", "env", "marlm.envs.grid:GridRace", "--env-kwargs", "{size"], "--env-kwargs"),
     (["train", "env", "marlm.envs.grid:GridRace", "--learner", "sac"], "allowed: mappo"),
     (["train", "env", "marlm.envs.grid:GridRace", "--workers", "0"], "'--workers'"),
     (["train", "race", "--learner", "mappo", "--reward", "difference"], "shared or individual"),
     (["train", "race", "--learner", "qmix", "--episodes", "10"], "--steps"),
     (["train", "race", "--learner", "iql", "--workers", "2"], "--workers"),
     (["train", "race", "--learner", "mappo", "--gamma", "1.5"], "gamma")],
)  # fmt: skip
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, monkeypatch, args, needle):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "syntax_error_env.py").write_text("def make(:\n    pass\n")
    code, err = run_main([*args, "--out", tmp_path / "runs" / "new" / "run"], capsys)
    assert code == 2, err
    assert needle in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()  # nor the parents made for it


def test_a_run_without_diagnostics_is_not_reported_as_free_of_failure_modes(tmp_path, capsys):
    # --no-diagnose wrote findings.json as [], and the report read it as "No known failure mode
    # detected" of a run whose lazy agent marlm diagnose then named.
    out = tmp_path / "run"
    argv = ["train", "race", "--learner", "mappo", "--steps", "512", "--envs", "2", "--out", out,
            "--no-plot", "--no-diagnose"]  # fmt: skip
    code, err = run_main(argv, capsys)
    assert code == 0, err
    assert not (out / "findings.json").exists()
    code, err = run_main(["report", out], capsys)
    assert code == 0, err
    page = (out / "report.html").read_text()
    assert "No known failure mode detected" not in page
    assert "the detectors were not run" in page


def test_overwrite_with_an_environment_refused_at_its_first_reset_keeps_the_old_run(
    tmp_path, capsys, monkeypatch
):
    # The old run was deleted when the folder was claimed, then the environment was refused:
    # the folder was left empty.
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "run"
    base = ["train", "env", "marlm.envs.grid:GridRace", "--learner", "mappo", "--steps", "512",
            "--envs", "2", "--no-plot", "--out", out]  # fmt: skip
    code, err = run_main(base, capsys)
    assert code == 0, err
    before = sorted(p.name for p in out.iterdir())
    for bad in ("api_cases:ObsOnlyReset", "api_cases:NoAgentsAtReset"):
        argv = ["train", "env", bad, "--steps", "512", "--envs", "2", "--out", out, "--overwrite"]
        code, err = run_main(argv, capsys)
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert sorted(p.name for p in out.iterdir()) == before


def test_the_report_names_a_network_runs_files_for_what_they_hold(tmp_path, capsys):
    # tables.npz of a MAPPO run was "the learned Q-tables", and a checkpoint in the run folder
    # under a name not ending .npz was listed with nothing in its "holds" column.
    out = tmp_path / "run"
    argv = ["train", "race", "--learner", "mappo", "--steps", "512", "--envs", "2", "--out", out,
            "--no-plot", "--checkpoint", out / "my.ckpt", "--checkpoint-every", "256"]  # fmt: skip
    code, err = run_main(argv, capsys)
    assert code == 0, err
    code, err = run_main(["report", out], capsys)
    assert code == 0, err
    page = (out / "report.html").read_text()
    assert "the learned Q-tables" not in page
    assert "the trained network&#x27;s weights" in page or "the trained network's weights" in page
    assert "checkpoint (deep, 512 of 512 joint steps)" in page
