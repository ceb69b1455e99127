"""``--resume`` from a checkpoint past ``--episodes`` says how to go on: it said only "checkpoint
already has 6 episodes, more than --episodes 3"."""

from __future__ import annotations

from cli_run import run_main

RUN = ["train", "gridworld", "--engine", "reference", "--no-plot", "--checkpoint-every", "3"]


def test_resuming_past_the_episodes_asked_names_the_fix(tmp_path, capsys):
    ck = tmp_path / "ck.npz"
    code, err = run_main(
        [*RUN, "--episodes", "6", "--checkpoint", ck, "--out", tmp_path / "a"], capsys
    )
    assert code == 0, err
    argv = [*RUN, "--episodes", "3", "--resume", ck, "--out", tmp_path / "b"]
    code, err = run_main(argv, capsys)
    assert code == 2, err
    assert err.strip() == (
        f"marlm: error: {ck}: field '--episodes': checkpoint already has 6 episodes, more than "
        "--episodes 3; pass --episodes above 6 (the total to reach), or start a new run without "
        "--resume"
    )
    # The refusal leaves no folder b behind (it kept a claim, b/.marlm-run, made before the check).
    assert not (tmp_path / "b").exists()
